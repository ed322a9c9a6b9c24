//! The memory backend passes the same conformance suite as the real ones.

mod store_support;

use std::sync::Arc;

use operator::progress_store::memory::MemoryStore;
use store_support::*;

store_support::conformance_cases!(async { ((), Arc::new(MemoryStore::new())) });

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
