//! The memory backend passes the same conformance suite as the real ones.

mod store_support;

use std::sync::Arc;

use operator::progress_store::memory::MemoryStore;
use store_support::*;

macro_rules! case {
    ($name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let s = Arc::new(MemoryStore::new());
            bounded(store_support::$name(&s)).await;
        }
    };
}

case!(advance_is_monotonic_and_idempotent);
case!(commit_under_current_epoch_lands);
case!(commit_under_old_epoch_is_fenced_and_writes_nothing);
case!(heartbeat_is_fenced_likewise);
case!(prune_keeps_the_latest_n);
case!(racing_zombies_after_the_fence_never_land);
case!(racing_the_fence_itself);

#[tokio::test]
async fn any_store_forwards_to_its_backend() {
    use operator::progress_store::{AnyStore, ProgressStore};
    let s = AnyStore::Memory(MemoryStore::new());
    let a = app("any");
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap(), 1);
    assert_eq!(
        s.commit(&a, 0, 1, "p", 1).await.unwrap_err().kind(),
        "fenced"
    );
    s.commit(&a, 1, 1, "p", 1).await.unwrap();
    s.heartbeat(&a, 1, 2).await.unwrap();
    assert_eq!(s.epoch(&a).await.unwrap(), 1);
    assert_eq!(s.latest(&a).await.unwrap().unwrap().seq, 1);
    assert_eq!(s.last_heartbeat(&a).await.unwrap().unwrap().at_ms, 2);
    assert_eq!(s.prune(&a, 1).await.unwrap(), 0);
}
