use super::*;
use proptest::prelude::*;

const S: &str = "uid-a/1";

/// The state of scope [`S`] at `epoch`, as a fence leaves it.
fn at(epoch: u64) -> FenceState {
    FenceState {
        scope: Some(S.to_owned()),
        epoch,
        ..FenceState::default()
    }
}

#[test]
fn advance_from_current_bumps_by_one() {
    let (s, a) = advance_from(&at(3), S, 3);
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
    let (s1, a1) = advance_from(&at(1), S, 1);
    let (s2, a2) = advance_from(&s1, S, 1);
    assert_eq!(a1.epoch, 2);
    assert_eq!(
        a2,
        Advanced {
            epoch: 2,
            moved: false
        }
    );
    assert_eq!(s1, s2);
}

#[test]
fn advance_past_a_lost_store_never_reuses_an_epoch() {
    let (s, a) = advance_from(&at(0), S, 5);
    assert_eq!((s.epoch, a.epoch, a.moved), (6, 6, true));
}

#[test]
fn advance_keeps_markers_and_heartbeat() {
    let (s, _) = commit(&at(1), S, 1, 1, "p", 10).unwrap();
    let s = heartbeat(&s, S, 1, 11).unwrap();
    let (n, _) = advance_from(&s, S, 1);
    assert_eq!(n.markers, s.markers);
    assert_eq!(n.heartbeat, s.heartbeat);
}

#[test]
fn the_first_fence_starts_the_scope_and_the_first_driver_runs_under_epoch_1() {
    let (s, a) = advance_from(&FenceState::default(), S, INITIAL_EPOCH);
    assert_eq!((a.epoch, a.moved), (1, true));
    assert_eq!(s.scope.as_deref(), Some(S));
    assert!(commit(&s, S, 1, 1, "p", 1).is_ok());
}

#[test]
fn no_driver_write_is_accepted_before_the_first_fence() {
    let fresh = FenceState::default();
    for epoch in [INITIAL_EPOCH, 1] {
        let err = commit(&fresh, S, epoch, 1, "p", 1).unwrap_err();
        assert_eq!(err.kind(), "fenced");
        assert_eq!(heartbeat(&fresh, S, epoch, 1).unwrap_err().kind(), "fenced");
    }
}

#[test]
fn a_fence_for_another_scope_starts_from_nothing_above_every_epoch_seen() {
    let (s, _) = commit(&at(3), S, 3, 7, "old", 10).unwrap();
    let s = heartbeat(&s, S, 3, 11).unwrap();
    // The application was deleted and created again (another uid), or a new run began.
    let other = "uid-b/1";
    let (n, a) = advance_from(&s, other, INITIAL_EPOCH);
    assert_eq!((a.epoch, a.moved), (4, true));
    assert_eq!(n.scope.as_deref(), Some(other));
    assert!(
        n.markers.is_empty(),
        "nothing is restored from another scope"
    );
    assert_eq!(n.heartbeat, None);
    assert_eq!(latest_marker(&n, other), None);
    // The old scope's drivers are fenced, whatever epoch they name.
    for epoch in [3, 4] {
        assert_eq!(
            commit(&n, S, epoch, 8, "zombie", 12).unwrap_err().kind(),
            "fenced"
        );
    }
    // A retry of the same fence changes nothing.
    let (again, a2) = advance_from(&n, other, INITIAL_EPOCH);
    assert_eq!((again, a2.moved), (n, false));
}

#[test]
fn reads_of_another_scope_see_nothing() {
    let (s, _) = commit(&at(2), S, 2, 5, "p", 1).unwrap();
    let s = heartbeat(&s, S, 2, 3).unwrap();
    assert_eq!(latest_marker(&s, S).map(|m| m.seq), Some(5));
    assert_eq!(latest_marker(&s, "uid-b/1"), None);
    assert_eq!(last_heartbeat(&s, "uid-b/1"), None);
    assert_eq!(current_epoch(&s, S), 2);
    assert_eq!(current_epoch(&s, "uid-b/1"), INITIAL_EPOCH);
    assert_eq!(prune(&s, "uid-b/1", 1), (s.clone(), 0));
}

#[test]
fn commit_under_current_epoch_appends() {
    let (s, added) = commit(&at(2), S, 2, 7, "x", 100).unwrap();
    assert!(added);
    assert_eq!(
        latest_marker(&s, S),
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
        let err = commit(&at(2), S, bad, 1, "x", 1).unwrap_err();
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
    let (s, _) = commit(&at(1), S, 1, 1, "a", 1).unwrap();
    let (s2, added) = commit(&s, S, 1, 1, "a", 2).unwrap();
    assert!(!added);
    assert_eq!(s, s2);
}

#[test]
fn marker_that_does_not_move_forward_is_stale() {
    let (s, _) = commit(&at(1), S, 1, 5, "a", 1).unwrap();
    for (seq, payload) in [(5, "b"), (4, "a"), (0, "z")] {
        let err = commit(&s, S, 1, seq, payload, 2).unwrap_err();
        assert_eq!(err, Rejected::StaleMarker { seq, latest: 5 });
        assert_eq!(err.kind(), "stale_marker");
    }
}

#[test]
fn progress_continues_across_epochs() {
    let (s, _) = commit(&at(1), S, 1, 3, "a", 1).unwrap();
    let (s, _) = advance_from(&s, S, 1);
    assert!(
        commit(&s, S, 2, 3, "a", 2).is_err(),
        "same seq under a new epoch is not a repeat"
    );
    let (s, _) = commit(&s, S, 2, 4, "b", 2).unwrap();
    assert_eq!(s.markers.len(), 2);
}

#[test]
fn heartbeat_is_fenced_like_commits() {
    let s = heartbeat(&at(1), S, 1, 5).unwrap();
    assert_eq!(s.heartbeat, Some(Heartbeat { epoch: 1, at_ms: 5 }));
    assert_eq!(heartbeat(&s, S, 0, 6).unwrap_err().kind(), "fenced");
}

#[test]
fn prune_keeps_newest_and_never_the_last_one() {
    let mut s = at(1);
    for seq in 1..=5 {
        s = commit(&s, S, 1, seq, "p", seq).unwrap().0;
    }
    let (p, dropped) = prune(&s, S, 2);
    assert_eq!(dropped, 3);
    assert_eq!(
        p.markers.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![4, 5]
    );
    let (p0, dropped0) = prune(&s, S, 0);
    assert_eq!(dropped0, 4);
    assert_eq!(latest_marker(&p0, S).map(|m| m.seq), Some(5));
    assert_eq!(prune(&s, S, 10).1, 0);
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

const SCOPES: [&str; 2] = ["uid-a/1", "uid-b/1"];

#[derive(Debug, Clone)]
enum Op {
    Advance(usize, u64),
    Commit(usize, u64, u64, u8),
    Heartbeat(usize, u64, u64),
    Prune(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..2, 0u64..6).prop_map(|(s, o)| Op::Advance(s, o)),
        (0usize..2, 0u64..6, 0u64..8, 0u8..2).prop_map(|(c, e, s, p)| Op::Commit(c, e, s, p)),
        (0usize..2, 0u64..6, 0u64..100).prop_map(|(c, e, t)| Op::Heartbeat(c, e, t)),
        (0usize..2, 0usize..4).prop_map(|(c, k)| Op::Prune(c, k)),
    ]
}

proptest! {
    /// Over any sequence of operations of two scopes: the epoch never decreases, every write that
    /// is accepted was made under the scope and epoch current at that moment, a rejected write
    /// changes nothing, marker sequence numbers strictly increase, and every marker kept belongs
    /// to the current scope.
    #[test]
    fn rules_hold_over_any_sequence(ops in proptest::collection::vec(op(), 0..40)) {
        let mut s = FenceState::default();
        for (t, op) in ops.into_iter().enumerate() {
            let before = s.clone();
            let now = t as u64;
            match op {
                Op::Advance(c, obs) => {
                    let (n, a) = advance_from(&s, SCOPES[c], obs);
                    prop_assert!(n.epoch >= before.epoch);
                    prop_assert!(n.epoch > obs, "the successor's epoch is past the one fenced");
                    prop_assert_eq!(a.moved, n != before);
                    prop_assert_eq!(n.scope.as_deref(), Some(SCOPES[c]));
                    s = n;
                }
                Op::Commit(c, e, seq, p) => match commit(&s, SCOPES[c], e, seq, &p.to_string(), now) {
                    Ok((n, _)) => {
                        prop_assert_eq!(e, before.epoch);
                        prop_assert_eq!(before.scope.as_deref(), Some(SCOPES[c]));
                        s = n;
                    }
                    Err(r) => {
                        if e != before.epoch || before.scope.as_deref() != Some(SCOPES[c]) {
                            prop_assert_eq!(r.kind(), "fenced");
                        }
                    }
                },
                Op::Heartbeat(c, e, at) => match heartbeat(&s, SCOPES[c], e, at) {
                    Ok(n) => {
                        prop_assert_eq!(e, before.epoch);
                        prop_assert_eq!(before.scope.as_deref(), Some(SCOPES[c]));
                        s = n;
                    }
                    Err(r) => prop_assert_eq!(r.kind(), "fenced"),
                },
                Op::Prune(c, k) => {
                    let (n, _) = prune(&s, SCOPES[c], k);
                    prop_assert_eq!(latest_marker(&n, SCOPES[c]), latest_marker(&before, SCOPES[c]));
                    prop_assert_eq!(n.epoch, before.epoch);
                    s = n;
                }
            }
            prop_assert!(s.markers.windows(2).all(|w| w[0].seq < w[1].seq));
            prop_assert!(s.markers.iter().all(|m| m.epoch <= s.epoch));
            prop_assert!(s.markers.is_empty() || s.scope.is_some());
        }
    }
}
