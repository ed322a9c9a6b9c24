//! The Redis backend against a real `redis-server` (started per test on a free loopback port).

use crate::store_support;

use operator::progress_store::redis::{Keys, RedisStore};
use std::time::Duration;

use operator::progress_store::{AppKey, ProgressStore, Scope, StoreError};
use store_support::*;

async fn store() -> (RedisServer, RedisStore) {
    let server = RedisServer::start().expect("redis-server starts");
    let store = RedisStore::connect(&server.url()).await.expect("connects");
    (server, store)
}

store_support::conformance_cases!(store());

/// Redis Cluster hashes only the part between the first `{` and the next `}` when it is not
/// empty: the same tag means the same slot, which a multi-key script requires.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')? + open + 1;
    (close > open + 1).then(|| &key[open + 1..close])
}

async fn connection(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test]
async fn all_keys_of_an_app_hash_to_one_cluster_slot() {
    let (server, s) = store().await;
    let a = AppKey::new("team-a", "etl", Scope::new("uid-etl", 1));
    let e = s.advance_epoch(&a, 0).await.unwrap();
    s.commit(&a, e, 1, "p", 1).await.unwrap();
    s.heartbeat(&a, e, 1).await.unwrap();
    let k = Keys::of(&a);
    for key in [&k.epoch, &k.markers, &k.heartbeat, &k.meta] {
        assert_eq!(hash_tag(key), Some("team-a/etl"), "{key}");
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut connection(&server).await)
        .await
        .unwrap();
    let mut keys = keys;
    keys.sort();
    let mut expected = vec![
        k.epoch.clone(),
        k.heartbeat.clone(),
        k.markers.clone(),
        k.meta.clone(),
    ];
    expected.sort();
    assert_eq!(
        keys, expected,
        "the store writes exactly the documented keys"
    );
}

#[tokio::test]
async fn nothing_is_kept_forever_every_write_renews_the_expiry_the_fence_set() {
    let (server, s) = store().await;
    let s = s.with_ttl(Duration::from_secs(3600));
    let a = app("expiring");
    let e = s.advance_epoch(&a, 0).await.unwrap();
    s.commit(&a, e, 1, "p", 1).await.unwrap();
    s.heartbeat(&a, e, 2).await.unwrap();
    let mut conn = connection(&server).await;
    let k = Keys::of(&a);
    for key in [&k.epoch, &k.markers, &k.heartbeat, &k.meta] {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            (3_500_000..=3_600_000).contains(&ttl),
            "{key} expires in {ttl} ms"
        );
    }
    // An agent's store knows no TTL of its own: its writes renew the one the fence recorded.
    let agent = RedisStore::connect(&server.url()).await.unwrap();
    redis::cmd("PEXPIRE")
        .arg(&k.markers)
        .arg(1000)
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    agent.commit(&a, e, 2, "p", 3).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&k.markers)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 3_500_000, "the commit renewed the expiry: {ttl} ms");
}

#[tokio::test]
async fn values_past_two_to_the_53_are_refused_before_reaching_redis() {
    let (_server, s) = store().await;
    let a = app("big");
    let e = s.advance_epoch(&a, 0).await.unwrap();
    let err = s.commit(&a, e, 1 << 53, "p", 1).await.unwrap_err();
    assert_eq!(err.kind(), "out_of_range");
}

#[tokio::test]
async fn a_dead_server_is_a_backend_error() {
    let (server, s) = store().await;
    drop(server);
    let err = s.commit(&app("dead"), 1, 1, "p", 1).await.unwrap_err();
    assert_eq!(err.kind(), "backend");
}

#[tokio::test]
async fn one_server_asked_to_wait_for_a_replica_it_lacks_counts_no_fence_and_no_commit() {
    let server = RedisServer::start().expect("redis-server starts");
    let plain = RedisStore::connect(&server.url()).await.unwrap();
    let waiting = RedisStore::connect(&format!(
        "{}?wait_replicas=1&wait_timeout_ms=50",
        server.url()
    ))
    .await
    .unwrap();
    let a = app("waits");
    let e = plain.advance_epoch(&a, 0).await.unwrap();
    for err in [
        waiting.advance_epoch(&a, e).await.unwrap_err(),
        waiting.commit(&a, e + 1, 1, "p", 1).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), "backend");
        let StoreError::Backend { source, .. } = &err else {
            unreachable!()
        };
        assert_eq!(
            source.to_string(),
            "the write reached 0 of 1 replicas within 50ms"
        );
    }
    // The master applied both: a retry through a store that waits for nothing finds them.
    assert_eq!(plain.epoch(&a).await.unwrap(), e + 1);
    assert_eq!(plain.latest(&a).await.unwrap().unwrap().seq, 1);
    waiting.heartbeat(&a, e + 1, 2).await.unwrap();
    let err = waiting.commit(&a, e, 2, "zombie", 3).await.unwrap_err();
    assert_eq!(err.kind(), "fenced", "a refusal stands without any replica");
}
