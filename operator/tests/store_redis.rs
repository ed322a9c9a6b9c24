//! The Redis backend against a real `redis-server` (started per test on a free loopback port).

mod store_support;

use operator::progress_store::redis::{Keys, RedisStore};
use operator::progress_store::{AppKey, ProgressStore};
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

#[tokio::test]
async fn all_keys_of_an_app_hash_to_one_cluster_slot() {
    let (server, s) = store().await;
    let a = AppKey::new("team-a", "etl");
    s.commit(&a, 0, 1, "p", 1).await.unwrap();
    s.heartbeat(&a, 0, 1).await.unwrap();
    s.advance_epoch(&a, 0).await.unwrap();
    let k = Keys::of(&a);
    for key in [&k.epoch, &k.markers, &k.heartbeat] {
        assert_eq!(hash_tag(key), Some("team-a/etl"), "{key}");
    }
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut keys = keys;
    keys.sort();
    let mut expected = vec![k.epoch.clone(), k.heartbeat.clone(), k.markers.clone()];
    expected.sort();
    assert_eq!(
        keys, expected,
        "the store writes exactly the documented keys"
    );
}

#[tokio::test]
async fn values_past_two_to_the_53_are_refused_before_reaching_redis() {
    let (_server, s) = store().await;
    let err = s.commit(&app("big"), 0, 1 << 53, "p", 1).await.unwrap_err();
    assert_eq!(err.kind(), "out_of_range");
}

#[tokio::test]
async fn a_dead_server_is_a_backend_error() {
    let (server, s) = store().await;
    drop(server);
    let err = s.commit(&app("dead"), 0, 1, "p", 1).await.unwrap_err();
    assert_eq!(err.kind(), "backend");
}
