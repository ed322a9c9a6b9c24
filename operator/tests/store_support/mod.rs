//! Shared by the store tests: one conformance suite every backend must pass, and a real
//! `redis-server` on a free loopback port that is killed when dropped (the sandbox's launcher).

#![allow(dead_code, unused_macros, unused_imports)] // each test crate uses a different part of this module

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use operator::fence::INITIAL_EPOCH;
use operator::progress_store::{AppKey, ProgressStore, Scope};

/// Every test gets its own application so suites can share a server; its first run.
pub fn app(name: &str) -> AppKey {
    AppKey::new("default", name, Scope::new(format!("uid-{name}"), 1))
}

/// The same application name under another scope: `uid` another object, or `run` another run.
pub fn rescoped(a: &AppKey, uid: &str, run: u64) -> AppKey {
    AppKey::new(a.namespace.clone(), a.name.clone(), Scope::new(uid, run))
}

/// The operator's first fence of `a`: the epoch its first driver runs under.
pub async fn first_fence<S: ProgressStore>(s: &S, a: &AppKey) -> u64 {
    let epoch = s.advance_epoch(a, INITIAL_EPOCH).await.unwrap();
    assert_eq!(epoch, 1, "the first driver runs under epoch 1");
    epoch
}

/// Bounds every async test body: a hang is a failure, not a stuck CI job.
pub async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test body finished within 60s")
}

pub use sandbox::redis::RedisServer;

/// The latest marker's sequence number (backends expose only the latest marker, so the suites
/// check histories through `latest` and the counts `prune` reports).
pub async fn latest_seq<S: ProgressStore>(s: &S, a: &AppKey) -> Option<u64> {
    s.latest(a).await.unwrap().map(|m| m.seq)
}

pub async fn advance_is_monotonic_and_idempotent<S: ProgressStore>(s: &S) {
    let a = app("advance");
    assert_eq!(
        s.epoch(&a).await.unwrap(),
        INITIAL_EPOCH,
        "an unknown application starts at epoch 0"
    );
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap(), 1);
    assert_eq!(
        s.advance_epoch(&a, 0).await.unwrap(),
        1,
        "a retry does not burn an epoch"
    );
    assert_eq!(s.advance_epoch(&a, 1).await.unwrap(), 2);
    assert_eq!(s.epoch(&a).await.unwrap(), 2);
    assert_eq!(
        s.advance_epoch(&a, 7).await.unwrap(),
        8,
        "jumps past an epoch the store lost"
    );
    assert_eq!(s.advance_epoch(&a, 3).await.unwrap(), 8);
}

pub async fn no_driver_write_lands_before_the_first_fence<S: ProgressStore>(s: &S) {
    let a = app("unfenced");
    for epoch in [INITIAL_EPOCH, 1] {
        let err = s.commit(&a, epoch, 1, "early", 1).await.unwrap_err();
        assert_eq!(err.kind(), "fenced", "commit under {epoch}");
        let err = s.heartbeat(&a, epoch, 1).await.unwrap_err();
        assert_eq!(err.kind(), "fenced", "heartbeat under {epoch}");
    }
    assert_eq!(s.latest(&a).await.unwrap(), None);
    assert_eq!(s.last_heartbeat(&a).await.unwrap(), None);
    assert_eq!(s.epoch(&a).await.unwrap(), INITIAL_EPOCH);
    let epoch = first_fence(s, &a).await;
    s.commit(&a, epoch, 1, "first", 2).await.unwrap();
}

pub async fn a_new_scope_starts_from_nothing_and_fences_the_old_one<S: ProgressStore>(s: &S) {
    let old = app("recreated");
    let epoch = first_fence(s, &old).await;
    s.commit(&old, epoch, 5, "old", 1).await.unwrap();
    s.heartbeat(&old, epoch, 2).await.unwrap();
    assert_eq!(s.advance_epoch(&old, epoch).await.unwrap(), epoch + 1);
    let old_epoch = epoch + 1;
    // The same name, another object (deleted and created again), or the next run of this one.
    for new in [
        rescoped(&old, "uid-recreated-again", 1),
        rescoped(&old, "uid-recreated", 2),
    ] {
        let current = s.epoch(&old).await.unwrap();
        assert_eq!(
            s.latest(&new).await.unwrap(),
            None,
            "another scope's marker"
        );
        assert_eq!(s.epoch(&new).await.unwrap(), INITIAL_EPOCH);
        let epoch = s.advance_epoch(&new, INITIAL_EPOCH).await.unwrap();
        assert!(
            epoch > current,
            "{epoch} reuses an epoch at or below {current}"
        );
        assert_eq!(s.latest(&new).await.unwrap(), None, "nothing restored");
        assert_eq!(s.last_heartbeat(&new).await.unwrap(), None);
        assert_eq!(
            s.advance_epoch(&new, INITIAL_EPOCH).await.unwrap(),
            epoch,
            "a retry does not burn an epoch"
        );
        // The old scope's drivers are fenced, whatever epoch they name, and see nothing.
        for stale in [old_epoch, epoch] {
            let err = s.commit(&old, stale, 6, "zombie", 3).await.unwrap_err();
            assert_eq!(err.kind(), "fenced");
            assert_eq!(
                s.heartbeat(&old, stale, 3).await.unwrap_err().kind(),
                "fenced"
            );
        }
        assert_eq!(s.latest(&old).await.unwrap(), None);
        s.commit(&new, epoch, 1, "new", 4).await.unwrap();
        assert_eq!(latest_seq(s, &new).await, Some(1), "seq starts over");
        s.heartbeat(&new, epoch, 5).await.unwrap();
        assert_eq!(s.last_heartbeat(&new).await.unwrap().unwrap().epoch, epoch);
    }
}

pub async fn commit_under_current_epoch_lands<S: ProgressStore>(s: &S) {
    let a = app("commit-current");
    let e = first_fence(s, &a).await;
    s.commit(&a, e, 1, r#"{"stage":1}"#, 100).await.unwrap();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!(
        (m.epoch, m.seq, m.payload.as_str(), m.committed_at_ms),
        (e, 1, r#"{"stage":1}"#, 100)
    );
    s.commit(&a, e, 1, r#"{"stage":1}"#, 200).await.unwrap();
    assert_eq!(
        s.latest(&a).await.unwrap().unwrap().committed_at_ms,
        100,
        "a repeat is a no-op"
    );
    let err = s.commit(&a, e, 1, "other", 300).await.unwrap_err();
    assert_eq!(err.kind(), "stale_marker");
}

pub async fn commit_under_old_epoch_is_fenced_and_writes_nothing<S: ProgressStore>(s: &S) {
    let a = app("commit-fenced");
    let e = first_fence(s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();
    assert_eq!(s.advance_epoch(&a, e).await.unwrap(), e + 1);
    let err = s.commit(&a, e, 2, "zombie", 2).await.unwrap_err();
    assert_eq!(err.kind(), "fenced");
    assert!(err.is_fenced());
    let err = s.commit(&a, 5, 2, "future", 2).await.unwrap_err();
    assert_eq!(
        err.kind(),
        "fenced",
        "an epoch never handed out is fenced too"
    );
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (e, 1, "one"));
    s.commit(&a, e + 1, 2, "two", 3).await.unwrap();
    assert_eq!(latest_seq(s, &a).await, Some(2));
}

pub async fn heartbeat_is_fenced_likewise<S: ProgressStore>(s: &S) {
    let a = app("heartbeat");
    let e = first_fence(s, &a).await;
    assert_eq!(s.last_heartbeat(&a).await.unwrap(), None);
    s.heartbeat(&a, e, 10).await.unwrap();
    assert_eq!(s.advance_epoch(&a, e).await.unwrap(), e + 1);
    assert_eq!(s.heartbeat(&a, e, 20).await.unwrap_err().kind(), "fenced");
    let hb = s.last_heartbeat(&a).await.unwrap().unwrap();
    assert_eq!(
        (hb.epoch, hb.at_ms),
        (e, 10),
        "the fenced heartbeat wrote nothing"
    );
    s.heartbeat(&a, e + 1, 30).await.unwrap();
    let hb = s.last_heartbeat(&a).await.unwrap().unwrap();
    assert_eq!((hb.epoch, hb.at_ms), (e + 1, 30));
}

pub async fn prune_keeps_the_latest_n<S: ProgressStore>(s: &S) {
    let a = app("prune");
    assert_eq!(s.prune(&a, 3).await.unwrap(), 0, "pruning nothing is fine");
    let e = first_fence(s, &a).await;
    for seq in 1..=6 {
        s.commit(&a, e, seq, &format!("s{seq}"), seq).await.unwrap();
    }
    assert_eq!(
        s.prune(&rescoped(&a, "uid-other", 1), 1).await.unwrap(),
        0,
        "another scope prunes nothing"
    );
    assert_eq!(s.prune(&a, 2).await.unwrap(), 4);
    assert_eq!(s.prune(&a, 2).await.unwrap(), 0);
    assert_eq!(
        s.prune(&a, 0).await.unwrap(),
        1,
        "the latest marker always stays"
    );
    assert_eq!(latest_seq(s, &a).await, Some(6));
    s.commit(&a, e, 7, "s7", 7).await.unwrap();
    assert_eq!(s.prune(&a, 1).await.unwrap(), 1);
}

/// After the fence, zombies under the old epoch race the new driver: every zombie write is fenced
/// and exactly the new driver's markers land, in order.
pub async fn racing_zombies_after_the_fence_never_land<S: ProgressStore + Clone + 'static>(s: &S) {
    let a = app("race-after-fence");
    let old = first_fence(s, &a).await;
    s.commit(&a, old, 1, "old", 1).await.unwrap();
    let new_epoch = s.advance_epoch(&a, old).await.unwrap();
    let mut zombies = Vec::new();
    for z in 0..4u64 {
        let (s, a) = (s.clone(), a.clone());
        zombies.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..10u64 {
                outcomes.push(
                    s.commit(&a, old, 1000 + z * 100 + i, "zombie", i)
                        .await
                        .map_err(|e| e.kind()),
                );
                outcomes.push(s.heartbeat(&a, old, i).await.map_err(|e| e.kind()));
            }
            outcomes
        }));
    }
    let driver = {
        let (s, a) = (s.clone(), a.clone());
        tokio::spawn(async move {
            for seq in 2..=11u64 {
                s.commit(&a, new_epoch, seq, "new", seq).await.unwrap();
                s.heartbeat(&a, new_epoch, seq).await.unwrap();
            }
        })
    };
    for z in zombies {
        for outcome in z.await.unwrap() {
            assert_eq!(outcome, Err("fenced"));
        }
    }
    driver.await.unwrap();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (new_epoch, 11, "new"));
    assert_eq!(
        s.last_heartbeat(&a).await.unwrap().unwrap().epoch,
        new_epoch
    );
    // Ten markers of the new driver plus the old one: prune reports what it drops.
    assert_eq!(s.prune(&a, 1).await.unwrap(), 10);
}

/// The fence lands in the middle of the zombie's writes: a zombie write that started after the
/// advance returned is always fenced, and no old-epoch marker follows a new-epoch one.
pub async fn racing_the_fence_itself<S: ProgressStore + Clone + 'static>(s: &S) {
    let a = app("race-fence");
    let old = first_fence(s, &a).await;
    let fenced = Arc::new(AtomicBool::new(false));
    let (first_landed, writing) = tokio::sync::oneshot::channel();
    let zombie = {
        let (s, a, fenced) = (s.clone(), a.clone(), fenced.clone());
        tokio::spawn(async move {
            let mut first_landed = Some(first_landed);
            let mut late_accepted = 0;
            for seq in 1..=40u64 {
                let after_fence = fenced.load(Ordering::SeqCst);
                let r = s.commit(&a, old, seq, "zombie", seq).await;
                if after_fence && r.is_ok() {
                    late_accepted += 1;
                }
                if let Err(e) = r {
                    assert_eq!(e.kind(), "fenced");
                }
                if let Some(tx) = first_landed.take() {
                    // The test may be gone already; nothing to tell then.
                    let _ = tx.send(());
                }
            }
            late_accepted
        })
    };
    // The fence lands while the zombie is writing: after its first commit, before its last.
    writing.await.expect("the zombie made its first commit");
    let new_epoch = s.advance_epoch(&a, old).await.unwrap();
    fenced.store(true, Ordering::SeqCst);
    let last_old = latest_seq(s, &a).await.unwrap_or(0);
    assert_eq!(
        zombie.await.unwrap(),
        0,
        "no zombie write accepted after the fence"
    );
    let m = s.latest(&a).await.unwrap();
    assert_eq!(
        m.as_ref().map(|m| m.seq).unwrap_or(0),
        last_old,
        "nothing landed after the fence"
    );
    s.commit(&a, new_epoch, last_old + 1, "new", 1)
        .await
        .unwrap();
    assert_eq!(s.latest(&a).await.unwrap().unwrap().epoch, new_epoch);
}

/// One `#[tokio::test]` per conformance case above, for the backend `$store` makes: an async
/// expression giving `(guard, store)`, the guard keeping the backend's server alive.
macro_rules! conformance_cases {
    ($store:expr) => {
        $crate::store_support::conformance_cases!(@each $store;
            advance_is_monotonic_and_idempotent,
            no_driver_write_lands_before_the_first_fence,
            a_new_scope_starts_from_nothing_and_fences_the_old_one,
            commit_under_current_epoch_lands,
            commit_under_old_epoch_is_fenced_and_writes_nothing,
            heartbeat_is_fenced_likewise,
            prune_keeps_the_latest_n,
            racing_zombies_after_the_fence_never_land,
            racing_the_fence_itself);
    };
    (@each $store:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_guard, s) = $store.await;
                $crate::store_support::bounded($crate::store_support::$name(&s)).await;
            }
        )*
    };
}
pub(crate) use conformance_cases;
