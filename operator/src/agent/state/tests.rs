use super::*;
use crate::progress_store::{AppKey, Scope};

fn app() -> AppKey {
    AppKey::new("default", "pi", Scope::new("uid-1", 1))
}

fn marker(epoch: u64, seq: u64) -> Marker {
    Marker {
        epoch,
        seq,
        payload: format!("{{\"stage\":{seq}}}"),
        committed_at_ms: 10 * seq,
    }
}

fn request(seq: u64) -> CommitRequest {
    CommitRequest {
        seq,
        payload: format!("{{\"stage\":{seq}}}"),
    }
}

fn fenced(current: u64) -> StoreError {
    StoreError::Fenced {
        app: app(),
        attempted: 1,
        current,
    }
}

fn backend() -> StoreError {
    StoreError::Backend {
        op: "commit",
        app: app(),
        source: "connection refused".into(),
    }
}

fn ready(epoch: u64, restored: Option<Marker>) -> AgentState {
    let mut s = AgentState::new(epoch);
    s.restored(restored);
    s
}

#[test]
fn nothing_is_served_before_the_restore_finishes() {
    let s = AgentState::new(1);
    assert!(!s.is_ready());
    assert_eq!(s.marker_view().unwrap_err().kind(), "not_ready");
    assert_eq!(s.admit_commit(&request(1)).unwrap_err().kind(), "not_ready");
}

#[test]
fn the_restored_marker_is_served_with_its_epoch() {
    let s = ready(2, Some(marker(1, 4)));
    assert_eq!(
        s.marker_view().unwrap(),
        MarkerView {
            epoch: 2,
            restored_from_epoch: Some(1),
            marker: Some(marker(1, 4)),
        }
    );
    assert_eq!(s.status_view().restored_from_epoch, Some(1));
}

#[test]
fn nothing_restored_is_null() {
    let s = ready(0, None);
    let json = serde_json::to_value(s.marker_view().unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"epoch": 0, "restoredFromEpoch": null, "marker": null})
    );
}

#[test]
fn a_landed_commit_becomes_the_latest_marker() {
    let mut s = ready(2, Some(marker(1, 4)));
    s.admit_commit(&request(5)).unwrap();
    let view = s.commit_landed(request(5), 99);
    assert_eq!(
        serde_json::to_value(view).unwrap(),
        serde_json::json!({"committed": true, "epoch": 2, "seq": 5})
    );
    let m = s.marker_view().unwrap();
    assert_eq!(m.restored_from_epoch, Some(1), "the restore is history");
    let latest = m.marker.unwrap();
    assert_eq!(
        (latest.epoch, latest.seq, latest.committed_at_ms),
        (2, 5, 99)
    );
    let json = serde_json::to_value(&latest).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"epoch": 2, "seq": 5, "payload": "{\"stage\":5}", "committedAtMs": 99})
    );
}

#[test]
fn out_of_order_landings_keep_the_highest_marker() {
    let mut s = ready(0, None);
    s.commit_landed(request(3), 30);
    s.commit_landed(request(2), 31);
    assert_eq!(s.marker_view().unwrap().marker.unwrap().seq, 3);
    s.commit_landed(request(3), 40);
    assert_eq!(
        s.marker_view().unwrap().marker.unwrap().committed_at_ms,
        30,
        "an idempotent repeat keeps the first commit time, as the store does"
    );
}

#[test]
fn a_fenced_commit_fences_the_agent_and_every_later_write_is_refused_locally() {
    let mut s = ready(1, None);
    let err = s.commit_failed(3, Some(fenced(2)));
    assert_eq!(err.kind(), "fenced");
    let body = err.body();
    assert_eq!(
        (body.error.as_str(), body.epoch, body.current_epoch),
        ("FENCED", Some(1), Some(2))
    );
    assert_eq!(s.fenced_by(), Some(2));
    assert!(s.status_view().fenced);
    let err = s.admit_commit(&request(100)).unwrap_err();
    assert_eq!(err.kind(), "fenced", "a fresh seq is refused too");
    assert!(!s.admit_heartbeat());
    assert!(s.marker_view().is_ok(), "reads keep being served");
}

#[test]
fn a_fenced_heartbeat_fences_the_agent() {
    let mut s = ready(1, None);
    assert!(s.admit_heartbeat());
    s.heartbeat_landed(5);
    assert_eq!(
        s.heartbeat_failed(Some(&fenced(4))),
        HeartbeatOutcome::NewlyFenced { current: 4 }
    );
    assert!(!s.admit_heartbeat());
    match s.admit_commit(&request(1)).unwrap_err() {
        CommitError::Fenced { epoch, current } => assert_eq!((epoch, current), (1, 4)),
        other => panic!("expected fenced, got {other:?}"),
    }
    let status = s.status_view();
    assert_eq!(
        serde_json::to_value(status).unwrap(),
        serde_json::json!({
            "epoch": 1, "fenced": true, "restoredFromEpoch": null,
            "lastHeartbeatMs": 5, "heartbeats": 1
        })
    );
}

#[test]
fn heartbeat_backend_errors_and_timeouts_are_retried() {
    let mut s = ready(1, None);
    assert_eq!(
        s.heartbeat_failed(Some(&backend())),
        HeartbeatOutcome::Retry
    );
    assert_eq!(s.heartbeat_failed(None), HeartbeatOutcome::Retry);
    assert!(s.admit_heartbeat());
    assert_eq!(s.status_view().heartbeats, 0);
}

#[test]
fn store_errors_map_to_codes() {
    let cases: Vec<(Option<StoreError>, &str, ErrorCode)> = vec![
        (
            Some(StoreError::StaleMarker {
                app: app(),
                seq: 2,
                latest: 4,
            }),
            "stale_marker",
            ErrorCode::StaleMarker,
        ),
        (
            Some(backend()),
            "store_unavailable",
            ErrorCode::StoreUnavailable,
        ),
        (
            Some(StoreError::ConflictRetriesExhausted {
                op: "commit",
                app: app(),
                attempts: 8,
            }),
            "store_unavailable",
            ErrorCode::StoreUnavailable,
        ),
        (None, "store_unavailable", ErrorCode::StoreUnavailable),
        (
            Some(StoreError::OutOfRange {
                app: app(),
                what: "seq",
                value: u64::MAX,
            }),
            "out_of_range",
            ErrorCode::BadRequest,
        ),
        (
            Some(StoreError::Corrupt {
                app: app(),
                reason: "bad json".into(),
            }),
            "corrupt",
            ErrorCode::Internal,
        ),
    ];
    for (error, kind, code) in cases {
        let mut s = ready(1, None);
        let err = s.commit_failed(2, error);
        assert_eq!((err.kind(), err.code()), (kind, code));
        assert!(s.admit_heartbeat(), "{kind} does not fence");
    }
}

#[test]
fn server_side_error_bodies_do_not_leak_the_cause() {
    let mut s = ready(1, None);
    let body = s.commit_failed(2, Some(backend())).body();
    assert_eq!(body.error, "STORE_UNAVAILABLE");
    assert!(!body.message.contains("connection refused"), "{body:?}");
    let stale = s
        .commit_failed(
            2,
            Some(StoreError::StaleMarker {
                app: app(),
                seq: 2,
                latest: 4,
            }),
        )
        .body();
    assert_eq!(stale.latest_seq, Some(4));
}

#[test]
fn oversized_payloads_are_bad_requests() {
    let s = ready(0, None);
    let big = CommitRequest {
        seq: 1,
        payload: "x".repeat(MAX_PAYLOAD_BYTES + 1),
    };
    assert_eq!(
        s.admit_commit(&big).unwrap_err().code(),
        ErrorCode::BadRequest
    );
}

#[test]
fn only_unreadable_progress_stops_the_restore() {
    assert!(restore_retryable(&backend()));
    assert!(!restore_retryable(&StoreError::Corrupt {
        app: app(),
        reason: "x".into()
    }));
}

#[test]
fn backoff_doubles_and_is_bounded() {
    let ms: Vec<u128> = (0..8).map(|a| backoff(a).as_millis()).collect();
    assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
}
