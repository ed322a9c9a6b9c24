//! Shared by the store tests: one conformance suite every backend must pass, and a real
//! `redis-server` on a free loopback port that is killed when dropped (the sandbox's launcher).

#![allow(dead_code, unused_macros, unused_imports)] // each test crate uses a different part of this module

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use operator::progress_store::{AppKey, ProgressStore};

/// Every test gets its own application so suites can share a server.
pub fn app(name: &str) -> AppKey {
    AppKey::new("default", name)
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
        0,
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

pub async fn commit_under_current_epoch_lands<S: ProgressStore>(s: &S) {
    let a = app("commit-current");
    s.commit(&a, 0, 1, r#"{"stage":1}"#, 100).await.unwrap();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!(
        (m.epoch, m.seq, m.payload.as_str(), m.committed_at_ms),
        (0, 1, r#"{"stage":1}"#, 100)
    );
    s.commit(&a, 0, 1, r#"{"stage":1}"#, 200).await.unwrap();
    assert_eq!(
        s.latest(&a).await.unwrap().unwrap().committed_at_ms,
        100,
        "a repeat is a no-op"
    );
    let err = s.commit(&a, 0, 1, "other", 300).await.unwrap_err();
    assert_eq!(err.kind(), "stale_marker");
}

pub async fn commit_under_old_epoch_is_fenced_and_writes_nothing<S: ProgressStore>(s: &S) {
    let a = app("commit-fenced");
    s.commit(&a, 0, 1, "one", 1).await.unwrap();
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap(), 1);
    let err = s.commit(&a, 0, 2, "zombie", 2).await.unwrap_err();
    assert_eq!(err.kind(), "fenced");
    assert!(err.is_fenced());
    let err = s.commit(&a, 5, 2, "future", 2).await.unwrap_err();
    assert_eq!(
        err.kind(),
        "fenced",
        "an epoch never handed out is fenced too"
    );
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (0, 1, "one"));
    s.commit(&a, 1, 2, "two", 3).await.unwrap();
    assert_eq!(latest_seq(s, &a).await, Some(2));
}

pub async fn heartbeat_is_fenced_likewise<S: ProgressStore>(s: &S) {
    let a = app("heartbeat");
    assert_eq!(s.last_heartbeat(&a).await.unwrap(), None);
    s.heartbeat(&a, 0, 10).await.unwrap();
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap(), 1);
    assert_eq!(s.heartbeat(&a, 0, 20).await.unwrap_err().kind(), "fenced");
    let hb = s.last_heartbeat(&a).await.unwrap().unwrap();
    assert_eq!(
        (hb.epoch, hb.at_ms),
        (0, 10),
        "the fenced heartbeat wrote nothing"
    );
    s.heartbeat(&a, 1, 30).await.unwrap();
    let hb = s.last_heartbeat(&a).await.unwrap().unwrap();
    assert_eq!((hb.epoch, hb.at_ms), (1, 30));
}

pub async fn prune_keeps_the_latest_n<S: ProgressStore>(s: &S) {
    let a = app("prune");
    assert_eq!(s.prune(&a, 3).await.unwrap(), 0, "pruning nothing is fine");
    for seq in 1..=6 {
        s.commit(&a, 0, seq, &format!("s{seq}"), seq).await.unwrap();
    }
    assert_eq!(s.prune(&a, 2).await.unwrap(), 4);
    assert_eq!(s.prune(&a, 2).await.unwrap(), 0);
    assert_eq!(
        s.prune(&a, 0).await.unwrap(),
        1,
        "the latest marker always stays"
    );
    assert_eq!(latest_seq(s, &a).await, Some(6));
    s.commit(&a, 0, 7, "s7", 7).await.unwrap();
    assert_eq!(s.prune(&a, 1).await.unwrap(), 1);
}

/// After the fence, zombies under the old epoch race the new driver: every zombie write is fenced
/// and exactly the new driver's markers land, in order.
pub async fn racing_zombies_after_the_fence_never_land<S: ProgressStore + Clone + 'static>(s: &S) {
    let a = app("race-after-fence");
    s.commit(&a, 0, 1, "old", 1).await.unwrap();
    let new_epoch = s.advance_epoch(&a, 0).await.unwrap();
    let mut zombies = Vec::new();
    for z in 0..4u64 {
        let (s, a) = (s.clone(), a.clone());
        zombies.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..10u64 {
                outcomes.push(
                    s.commit(&a, 0, 1000 + z * 100 + i, "zombie", i)
                        .await
                        .map_err(|e| e.kind()),
                );
                outcomes.push(s.heartbeat(&a, 0, i).await.map_err(|e| e.kind()));
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
    let fenced = Arc::new(AtomicBool::new(false));
    let (first_landed, writing) = tokio::sync::oneshot::channel();
    let zombie = {
        let (s, a, fenced) = (s.clone(), a.clone(), fenced.clone());
        tokio::spawn(async move {
            let mut first_landed = Some(first_landed);
            let mut late_accepted = 0;
            for seq in 1..=40u64 {
                let after_fence = fenced.load(Ordering::SeqCst);
                let r = s.commit(&a, 0, seq, "zombie", seq).await;
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
    let new_epoch = s.advance_epoch(&a, 0).await.unwrap();
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
