use super::*;
use proptest::prelude::*;

fn at(epoch: u64) -> FenceState {
    FenceState {
        epoch,
        ..FenceState::default()
    }
}

#[test]
fn advance_from_current_bumps_by_one() {
    let (s, a) = advance_from(&at(3), 3);
    assert_eq!(s.epoch, 4);
    assert_eq!(
        a,
        Advanced {
            epoch: 4,
            moved: true
        }
    );
}

#[test]
fn advance_retried_after_crash_returns_the_same_epoch() {
    let (s1, a1) = advance_from(&at(0), 0);
    let (s2, a2) = advance_from(&s1, 0);
    assert_eq!(a1.epoch, 1);
    assert_eq!(
        a2,
        Advanced {
            epoch: 1,
            moved: false
        }
    );
    assert_eq!(s1, s2);
}

#[test]
fn advance_past_a_lost_store_never_reuses_an_epoch() {
    let (s, a) = advance_from(&at(0), 5);
    assert_eq!((s.epoch, a.epoch, a.moved), (6, 6, true));
}

#[test]
fn advance_keeps_markers_and_heartbeat() {
    let (s, _) = commit(&at(0), 0, 1, "p", 10).unwrap();
    let s = heartbeat(&s, 0, 11).unwrap();
    let (n, _) = advance_from(&s, 0);
    assert_eq!(n.markers, s.markers);
    assert_eq!(n.heartbeat, s.heartbeat);
}

#[test]
fn commit_under_current_epoch_appends() {
    let (s, added) = commit(&at(2), 2, 7, "x", 100).unwrap();
    assert!(added);
    assert_eq!(
        latest_marker(&s),
        Some(&Marker {
            epoch: 2,
            seq: 7,
            payload: "x".into(),
            committed_at_ms: 100
        })
    );
}

#[test]
fn commit_under_old_or_future_epoch_is_fenced() {
    for bad in [0, 1, 3, 99] {
        let err = commit(&at(2), bad, 1, "x", 1).unwrap_err();
        assert_eq!(
            err,
            Rejected::Fenced {
                attempted: bad,
                current: 2
            }
        );
        assert_eq!(err.kind(), "fenced");
    }
}

#[test]
fn exact_repeat_of_latest_marker_is_idempotent() {
    let (s, _) = commit(&at(0), 0, 1, "a", 1).unwrap();
    let (s2, added) = commit(&s, 0, 1, "a", 2).unwrap();
    assert!(!added);
    assert_eq!(s, s2);
}

#[test]
fn marker_that_does_not_move_forward_is_stale() {
    let (s, _) = commit(&at(0), 0, 5, "a", 1).unwrap();
    for (seq, payload) in [(5, "b"), (4, "a"), (0, "z")] {
        let err = commit(&s, 0, seq, payload, 2).unwrap_err();
        assert_eq!(err, Rejected::StaleMarker { seq, latest: 5 });
        assert_eq!(err.kind(), "stale_marker");
    }
}

#[test]
fn progress_continues_across_epochs() {
    let (s, _) = commit(&at(0), 0, 3, "a", 1).unwrap();
    let (s, _) = advance_from(&s, 0);
    assert!(
        commit(&s, 1, 3, "a", 2).is_err(),
        "same seq under a new epoch is not a repeat"
    );
    let (s, _) = commit(&s, 1, 4, "b", 2).unwrap();
    assert_eq!(s.markers.len(), 2);
}

#[test]
fn heartbeat_is_fenced_like_commits() {
    let s = heartbeat(&at(1), 1, 5).unwrap();
    assert_eq!(s.heartbeat, Some(Heartbeat { epoch: 1, at_ms: 5 }));
    assert_eq!(heartbeat(&s, 0, 6).unwrap_err().kind(), "fenced");
}

#[test]
fn prune_keeps_newest_and_never_the_last_one() {
    let mut s = at(0);
    for seq in 1..=5 {
        s = commit(&s, 0, seq, "p", seq).unwrap().0;
    }
    let (p, dropped) = prune(&s, 2);
    assert_eq!(dropped, 3);
    assert_eq!(
        p.markers.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![4, 5]
    );
    let (p0, dropped0) = prune(&s, 0);
    assert_eq!(dropped0, 4);
    assert_eq!(latest_marker(&p0).map(|m| m.seq), Some(5));
    assert_eq!(prune(&s, 10).1, 0);
}

#[test]
fn staleness_window() {
    let hb = Heartbeat {
        epoch: 0,
        at_ms: 1_000,
    };
    assert!(is_stale(None, 0, 10));
    assert!(!is_stale(Some(&hb), 1_010, 10));
    assert!(is_stale(Some(&hb), 1_011, 10));
    assert!(
        !is_stale(Some(&hb), 500, 10),
        "a heartbeat from the future is fresh"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Commit(u64, u64, u8),
    Heartbeat(u64, u64),
    Prune(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..6).prop_map(Op::Advance),
        (0u64..6, 0u64..8, 0u8..2).prop_map(|(e, s, p)| Op::Commit(e, s, p)),
        (0u64..6, 0u64..100).prop_map(|(e, t)| Op::Heartbeat(e, t)),
        (0usize..4).prop_map(Op::Prune),
    ]
}

proptest! {
    /// Over any sequence of operations: the epoch never decreases, every write that is accepted
    /// was made under the epoch current at that moment, a rejected write changes nothing, and
    /// marker sequence numbers strictly increase.
    #[test]
    fn rules_hold_over_any_sequence(ops in proptest::collection::vec(op(), 0..40)) {
        let mut s = FenceState::default();
        for (t, op) in ops.into_iter().enumerate() {
            let before = s.clone();
            let now = t as u64;
            match op {
                Op::Advance(obs) => {
                    let (n, a) = advance_from(&s, obs);
                    prop_assert!(n.epoch >= before.epoch);
                    prop_assert!(n.epoch > obs, "the successor's epoch is past the one fenced");
                    prop_assert_eq!(a.moved, n.epoch != before.epoch);
                    s = n;
                }
                Op::Commit(e, seq, p) => match commit(&s, e, seq, &p.to_string(), now) {
                    Ok((n, _)) => {
                        prop_assert_eq!(e, before.epoch);
                        s = n;
                    }
                    Err(r) => {
                        if e != before.epoch { prop_assert_eq!(r.kind(), "fenced"); }
                    }
                },
                Op::Heartbeat(e, at) => match heartbeat(&s, e, at) {
                    Ok(n) => { prop_assert_eq!(e, before.epoch); s = n; }
                    Err(r) => prop_assert_eq!(r.kind(), "fenced"),
                },
                Op::Prune(k) => {
                    let (n, _) = prune(&s, k);
                    prop_assert_eq!(latest_marker(&n), latest_marker(&before));
                    prop_assert_eq!(n.epoch, before.epoch);
                    s = n;
                }
            }
            prop_assert!(s.markers.windows(2).all(|w| w[0].seq < w[1].seq));
            prop_assert!(s.markers.iter().all(|m| m.epoch <= s.epoch));
        }
    }
}
