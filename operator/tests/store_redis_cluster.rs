//! The Redis backend against a real Redis Cluster (three masters, three replicas of
//! `redis-server --cluster-enabled yes` on loopback, formed per test by the sandbox's fixture):
//! the conformance suite every backend passes, the slot of an application's keys, fences and
//! commits confirmed by a replica, failovers during a fenced restart (a killed master, a manual
//! failover under racing writers, a fence the replica never got) and a slot migration (`ASK`,
//! then `MOVED`). Every wait is on the cluster's own answers (`ROLE`, `CLUSTER INFO`, `CLUSTER
//! SLOTS`, `CLIENT LIST`), bounded.

use crate::store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use operator::progress_store::redis::url::Durability;
use operator::progress_store::redis::{Keys, RedisStore, Unreplicated};
use operator::progress_store::{AppKey, ProgressStore, Scope, StoreError};
use sandbox::redis_cluster::{ClusterOptions, MASTERS, RedisCluster};
use store_support::*;

/// Runs a blocking fixture call (a kill, a wait on the cluster's answers) without stalling the
/// runtime's other tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn cluster_with(options: ClusterOptions) -> RedisCluster {
    blocking(|| RedisCluster::start_with(std::path::Path::new("redis-server"), options))
        .expect("the cluster forms")
}

async fn connect(url: &str) -> RedisStore {
    RedisStore::connect(url).await.expect("connects")
}

async fn store() -> (RedisCluster, RedisStore) {
    let cluster = cluster_with(ClusterOptions::default()).await;
    let store = connect(&cluster.url()).await;
    (cluster, store)
}

store_support::conformance_cases!(store());

#[tokio::test]
async fn a_url_the_store_cannot_use_is_refused_and_an_unreachable_cluster_is_a_connect_error() {
    // No TLS is compiled into this build's Redis client: rediss+cluster:// parses, then fails.
    for url in [
        "redis+cluster://127.0.0.1:1/3",
        "redis+cluster://127.0.0.1:1?wait_timeout_ms=0",
        "redis://127.0.0.1:1,127.0.0.1:2",
        "rediss+cluster://127.0.0.1:1",
    ] {
        let err = RedisStore::connect(url).await.err().expect("refused");
        assert_eq!(err.kind(), "url", "{url}");
    }
    let err = RedisStore::connect("redis+cluster://127.0.0.1:1,127.0.0.1:2")
        .await
        .err()
        .expect("no seed answers");
    assert_eq!(err.kind(), "connect");
}

/// The slot, master and replica serving `app`'s keys.
fn placement(cluster: &RedisCluster, app: &AppKey) -> (u16, usize, usize) {
    let slot = cluster.slot_of(&Keys::of(app).epoch).unwrap();
    (
        slot,
        cluster.master_of(slot).unwrap(),
        cluster.replica_of(slot).unwrap(),
    )
}

/// The replicas that acknowledged a write the store refused as not replicated; `None` for any
/// other answer.
fn unreplicated(err: &StoreError) -> Option<u64> {
    let StoreError::Backend { source, .. } = err else {
        return None;
    };
    source
        .downcast_ref::<Unreplicated>()
        .map(|u| u.acknowledged)
}

/// The epoch stored on node `node` for `app`, read there directly, replica or master (`None`: no
/// such key).
fn stored_epoch(cluster: &RedisCluster, node: usize, app: &AppKey) -> Option<u64> {
    let mut conn = cluster.connection(node).unwrap();
    redis::cmd("READONLY").query::<()>(&mut conn).unwrap();
    let value: Option<String> = redis::cmd("GET")
        .arg(Keys::of(app).epoch)
        .query(&mut conn)
        .unwrap();
    value.map(|v| v.parse().unwrap())
}

/// Bounds a failover test's body: a hang is a failure, not a stuck CI job.
async fn bounded_long<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(240), f)
        .await
        .expect("test body finished within 240s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_an_app_lives_in_the_one_slot_of_its_hash_tag() {
    let (cluster, s) = store().await;
    let apps = [
        AppKey::new("team-a", "etl", Scope::new("uid-a", 1)),
        AppKey::new("team-b", "etl", Scope::new("uid-b", 1)),
        app("report"),
    ];
    for a in &apps {
        let e = s.advance_epoch(a, 0).await.unwrap();
        s.commit(a, e, 1, "p", 1).await.unwrap();
        s.heartbeat(a, e, 1).await.unwrap();
        s.prune(a, 1).await.unwrap();
        assert_eq!(s.latest(a).await.unwrap().unwrap().seq, 1);
    }
    for a in &apps {
        let k = Keys::of(a);
        let (slot, master, _) = placement(&cluster, a);
        for key in [&k.epoch, &k.markers, &k.heartbeat, &k.meta] {
            assert_eq!(cluster.slot_of(key).unwrap(), slot, "{key}");
        }
        let in_slot: u64 = cluster
            .command(master, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
            .unwrap();
        assert_eq!(in_slot, 4, "the four documented keys of {a}, on its master");
    }
    let total: u64 = (0..MASTERS)
        .map(|m| cluster.command::<u64>(m, &["DBSIZE"]).unwrap())
        .sum();
    assert_eq!(
        total, 12,
        "three applications, four keys each, nothing else"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_and_a_commit_count_only_once_a_replica_holds_them() {
    let (cluster, s) = store().await;
    assert_eq!(
        s.durability(),
        Durability::replicas(1),
        "the cluster default"
    );
    let a = app("confirmed");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();
    let (_, master, replica) = placement(&cluster, &a);
    cluster.pause(replica).unwrap();

    let err = s.advance_epoch(&a, e).await.unwrap_err();
    assert_eq!(err.kind(), "backend");
    assert_eq!(unreplicated(&err), Some(0), "{err:?}");
    let err = s.commit(&a, e + 1, 2, "two", 2).await.unwrap_err();
    assert_eq!(unreplicated(&err), Some(0), "{err:?}");
    // Refusals wrote nothing and stand; heartbeats and reads need no replica.
    let err = s.commit(&a, e, 3, "zombie", 3).await.unwrap_err();
    assert_eq!(err.kind(), "fenced");
    s.heartbeat(&a, e + 1, 4).await.unwrap();
    assert_eq!(s.epoch(&a).await.unwrap(), e + 1, "the master applied it");

    cluster.resume(replica).unwrap();
    blocking(|| cluster.wait_replica(replica, master)).unwrap();
    assert_eq!(
        s.advance_epoch(&a, e).await.unwrap(),
        e + 1,
        "the retry confirms the same epoch, burning none"
    );
    s.commit(&a, e + 1, 2, "two", 2).await.unwrap();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (e + 1, 2, "two"));
}

/// While no replica acknowledges, every confirmed write's `WAIT` holds the shared connection for
/// its whole timeout, so concurrent writes queue behind each other on the node. Each must still
/// get its own answer (not confirmed), not a client timeout whose retry lengthens the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_no_replica_confirms_each_answer_unreplicated_not_timed_out() {
    let (cluster, s) = store().await;
    let a = app("queued");
    let e = first_fence(&s, &a).await;
    // The node knows the script from then on: no write pays a NOSCRIPT round trip below.
    s.commit(&a, e, 1, "confirmed", 1).await.unwrap();
    let (_, master, replica) = placement(&cluster, &a);
    cluster.pause(replica).unwrap();
    let writes: Vec<_> = (2..=4)
        .map(|seq| {
            let (s, a) = (s.clone(), a.clone());
            tokio::spawn(async move { s.commit(&a, e, seq, "queued", seq).await })
        })
        .collect();
    let mut answers = Vec::new();
    for w in writes {
        answers.push(w.await.unwrap().map_err(|e| (unreplicated(&e), e)));
    }
    cluster.resume(replica).unwrap();
    blocking(|| cluster.wait_replica(replica, master)).unwrap();
    // The three race: a lower seq the node runs after a higher one is stale, an answer too.
    let own_answer = |r: &Result<(), (Option<u64>, StoreError)>| match r {
        Err((Some(0), _)) => true,
        Err((None, e)) => e.kind() == "stale_marker",
        Ok(()) => false,
        Err((Some(_), _)) => false,
    };
    assert!(
        answers.iter().all(own_answer),
        "every write answered as not confirmed by a replica (or stale): {answers:?}"
    );
    assert!(
        answers.iter().any(|r| matches!(r, Err((Some(0), _)))),
        "the highest seq was written and not confirmed: {answers:?}"
    );
}

/// Commits under `epoch` with growing seqs from `first` until `stop`, at most `bound` attempts;
/// every answer's kind (`ok` for an accepted write).
async fn keep_committing(
    s: RedisStore,
    a: AppKey,
    epoch: u64,
    first: u64,
    stop: Arc<AtomicBool>,
    bound: u64,
) -> Vec<&'static str> {
    let mut outcomes = Vec::new();
    for seq in first..first + bound {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let outcome = s.commit(&a, epoch, seq, "zombie", seq).await;
        outcomes.push(outcome.map_or_else(|e| e.kind(), |()| "ok"));
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_after_the_fence_fails_over_and_the_fenced_driver_stays_fenced() {
    bounded_long(killed_master_fails_over()).await;
}

async fn killed_master_fails_over() {
    let mut cluster = cluster_with(ClusterOptions::default()).await;
    let operator = connect(&cluster.url()).await;
    let zombie = connect(&cluster.url()).await;
    let driver = connect(&cluster.url()).await;
    let a = app("failover");
    let old = first_fence(&operator, &a).await;
    zombie.commit(&a, old, 1, "stage 1", 1).await.unwrap();
    let new = operator.advance_epoch(&a, old).await.unwrap();
    assert_eq!(new, old + 1);

    let (_, master, replica) = placement(&cluster, &a);
    blocking(|| cluster.kill(master));
    // The fenced driver keeps writing while the cluster notices and fails over.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = tokio::spawn(keep_committing(
        zombie.clone(),
        a.clone(),
        old,
        2,
        stop.clone(),
        10_000,
    ));
    blocking(|| cluster.wait_master(replica)).unwrap();
    // Once the replica serves the slot, its answer is the fence it was given before the crash.
    let mut after = Vec::new();
    for seq in 100..120 {
        let outcome = zombie.commit(&a, old, seq, "zombie", seq).await;
        let fenced = outcome.as_ref().is_err_and(StoreError::is_fenced);
        after.push(outcome.map_err(|e| format!("{}: {:?}", e.kind(), e)));
        if fenced {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let during = writes.await.unwrap();
    assert!(!during.contains(&"ok"), "a stale write landed: {during:?}");
    assert!(
        after.iter().all(Result::is_err),
        "a stale write landed: {after:?}"
    );
    assert!(
        after
            .last()
            .is_some_and(|r| r.as_ref().is_err_and(|e| e.starts_with("fenced"))),
        "the promoted replica answers with the fence: {after:?}"
    );
    assert_eq!(stored_epoch(&cluster, replica, &a), Some(new));
    assert_eq!(operator.epoch(&a).await.unwrap(), new, "the fence survived");
    let m = operator.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (old, 1, "stage 1"));

    // The promoted replica has no replica of its own yet: nothing can be confirmed.
    let err = driver.commit(&a, new, 2, "stage 2", 10).await.unwrap_err();
    assert_eq!(unreplicated(&err), Some(0), "{err:?}");
    // The old master rejoins as its replica (empty, and synced from it): writes count again.
    blocking(|| cluster.restart(master)).unwrap();
    blocking(|| cluster.wait_replica(master, replica)).unwrap();
    driver.commit(&a, new, 2, "stage 2", 10).await.unwrap();
    let m = driver.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (new, 2, "stage 2"));
    let err = zombie
        .commit(&a, old, 300, "zombie", 300)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "fenced");
    assert_eq!(
        stored_epoch(&cluster, master, &a),
        Some(new),
        "replicated back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_while_zombies_and_the_new_driver_write_accepts_no_stale_write() {
    bounded_long(manual_failover_under_writers()).await;
}

async fn manual_failover_under_writers() {
    let cluster = cluster_with(ClusterOptions::default()).await;
    let operator = connect(&cluster.url()).await;
    let a = app("manual-failover");
    let old = first_fence(&operator, &a).await;
    operator.commit(&a, old, 1, "old", 1).await.unwrap();
    let new = operator.advance_epoch(&a, old).await.unwrap();
    let (_, master, replica) = placement(&cluster, &a);

    let stop = Arc::new(AtomicBool::new(false));
    let mut zombies = Vec::new();
    for z in 0..3u64 {
        let s = connect(&cluster.url()).await;
        zombies.push(tokio::spawn(keep_committing(
            s,
            a.clone(),
            old,
            1000 * (z + 1),
            stop.clone(),
            100_000,
        )));
    }
    let driver = {
        let (s, a, stop) = (connect(&cluster.url()).await, a.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut seq, mut failed) = (2u64, Vec::new());
            // Every marker is retried until it lands; stop only between markers.
            while !stop.load(Ordering::SeqCst) && seq < 100_000 {
                match s.commit(&a, new, seq, "new", seq).await {
                    Ok(()) => seq += 1,
                    Err(e) => failed.push(e.kind()),
                }
            }
            (seq - 1, failed)
        })
    };
    let failover: String = cluster.command(replica, &["CLUSTER", "FAILOVER"]).unwrap();
    assert_eq!(failover, "OK");
    blocking(|| cluster.wait_master(replica)).unwrap();
    blocking(|| cluster.wait_replica(master, replica)).unwrap();
    // A marker lands on the new master, confirmed by its new replica, before everyone stops.
    let landed_before = operator.latest(&a).await.unwrap().unwrap().seq;
    let mut landed_after = landed_before;
    for _ in 0..100_000 {
        landed_after = operator.latest(&a).await.unwrap().unwrap().seq;
        if landed_after > landed_before + 1 {
            break;
        }
    }
    assert!(
        landed_after > landed_before + 1,
        "the new driver's markers land after the failover"
    );
    stop.store(true, Ordering::SeqCst);
    for z in zombies {
        let outcomes = z.await.unwrap();
        assert!(!outcomes.contains(&"ok"), "a stale write landed");
        assert!(outcomes.contains(&"fenced"));
    }
    let (last, failed) = driver.await.unwrap();
    assert!(
        failed.iter().all(|k| *k == "backend"),
        "the new driver is only ever delayed: {failed:?}"
    );
    let m = operator.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (new, last, "new"));
    assert_eq!(stored_epoch(&cluster, replica, &a), Some(new));
}

/// Replication data a master holds for its replica beyond this cannot all be in the kernel's
/// socket buffers (at most `net.ipv4.tcp_rmem` 32 MiB plus `tcp_wmem` 4 MiB on Linux), so what
/// the master writes next stays in its own memory until the replica reads.
const UNSENT_BACKLOG: u64 = 64 << 20;

/// A fence written while the replica was cut off, after its master crashed and the replica took
/// over.
struct LostFence {
    cluster: RedisCluster,
    operator: RedisStore,
    zombie: RedisStore,
    a: AppKey,
    /// The epoch the fenced driver ran under.
    old: u64,
    /// The old master, down.
    master: usize,
    /// The old replica, now the master.
    replica: usize,
    /// The operator's answer to the fence.
    fence: Result<u64, &'static str>,
}

/// The replica stops reading (SIGSTOP) and the master's replication backlog for it grows past
/// what the sockets can hold, so the fence stays in the master's memory: the master applies it
/// but never sends it. Then the master crashes, the replica resumes and is promoted
/// (`cluster-replica-validity-factor 0`), without the fence.
async fn fence_written_while_the_replica_is_cut_off(query: &str) -> LostFence {
    let mut cluster = cluster_with(ClusterOptions {
        replica_validity_factor: 0,
        ..ClusterOptions::default()
    })
    .await;
    let url = format!("{}{query}", cluster.url());
    let operator = connect(&url).await;
    let zombie = connect(&url).await;
    let a = app("lost-fence");
    let old = first_fence(&operator, &a).await;
    zombie.commit(&a, old, 1, "stage 1", 1).await.unwrap();
    let (slot, master, replica) = placement(&cluster, &a);

    cluster.pause(replica).unwrap();
    let mut conn = cluster.connection(master).unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("replica 0 0 0")
        .query::<()>(&mut conn)
        .unwrap();
    let backlog = |conn: &mut redis::Connection| -> u64 {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("replica")
            .query(conn)
            .unwrap();
        clients
            .split_whitespace()
            .find_map(|f| f.strip_prefix("omem="))
            .map_or(0, |n| n.parse().unwrap())
    };
    // Filler in the app's slot (its master's) until the backlog is past the sockets' capacity.
    let filler = "x".repeat(1 << 20);
    let tag = format!("{{{}/{}}}", a.namespace, a.name);
    assert_eq!(cluster.slot_of(&format!("filler:{tag}:0")).unwrap(), slot);
    for i in 0..256 {
        if backlog(&mut conn) > UNSENT_BACKLOG {
            break;
        }
        redis::cmd("SET")
            .arg(format!("filler:{tag}:{i}"))
            .arg(&filler)
            .query::<()>(&mut conn)
            .unwrap();
    }
    let before = backlog(&mut conn);
    assert!(before > UNSENT_BACKLOG, "backlog {before}");
    let offset = |conn: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("replication").query(conn).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .map(|n| n.trim().parse().unwrap())
            .unwrap()
    };
    let offset_before = offset(&mut conn);

    let fence = operator.advance_epoch(&a, old).await.map_err(|e| {
        if unreplicated(&e).is_some() {
            "unreplicated"
        } else {
            e.kind()
        }
    });
    assert_eq!(
        stored_epoch(&cluster, master, &a),
        Some(old + 1),
        "the master applied the fence"
    );
    // The fence joined the replication stream behind a backlog the paused replica never read
    // (`omem` counts whole buffer blocks, so it need not grow by the fence's few bytes).
    assert!(
        offset(&mut conn) > offset_before,
        "the fence was propagated"
    );
    assert!(
        backlog(&mut conn) >= before,
        "nothing of the backlog was sent"
    );

    blocking(|| cluster.kill(master));
    cluster.resume(replica).unwrap();
    blocking(|| cluster.wait_master(replica)).unwrap();
    LostFence {
        cluster,
        operator,
        zombie,
        a,
        old,
        master,
        replica,
        fence,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_no_replica_acknowledged_fails_and_its_retry_fences_once_a_replica_is_back() {
    bounded_long(async {
        let mut lost = fence_written_while_the_replica_is_cut_off("").await;
        let (a, old) = (lost.a.clone(), lost.old);
        assert_eq!(
            lost.fence,
            Err("unreplicated"),
            "the operator is told the fence failed: it records no epoch and starts no driver"
        );
        assert_eq!(
            lost.operator.epoch(&a).await.unwrap(),
            old,
            "the failover lost it"
        );
        // The old master comes back as the new one's replica, so writes can be confirmed again.
        blocking(|| lost.cluster.restart(lost.master)).unwrap();
        blocking(|| lost.cluster.wait_replica(lost.master, lost.replica)).unwrap();
        lost.zombie
            .commit(&a, old, 2, "stage 2", 2)
            .await
            .expect("no fence ever held: the old driver is the current one, its write not stale");
        // The operator's retry of the fence holds now.
        assert_eq!(lost.operator.advance_epoch(&a, old).await.unwrap(), old + 1);
        let err = lost
            .zombie
            .commit(&a, old, 3, "stage 3", 3)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "fenced");
        let m = lost.operator.latest(&a).await.unwrap().unwrap();
        assert_eq!((m.epoch, m.seq), (old, 2));
    })
    .await;
}

/// The hazard the replica check prevents, shown with it turned off (`wait_replicas=0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_replica_check_a_failover_loses_an_acknowledged_fence() {
    bounded_long(async {
        let lost = fence_written_while_the_replica_is_cut_off("?wait_replicas=0").await;
        assert_eq!(
            lost.fence,
            Ok(lost.old + 1),
            "the operator was told the fence held"
        );
        assert_eq!(lost.operator.epoch(&lost.a).await.unwrap(), lost.old);
        lost.zombie
            .commit(&lost.a, lost.old, 2, "stage 2", 2)
            .await
            .expect("the fence is lost, so the driver it fenced writes again");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_slot_migrating_to_another_master_is_followed_through_ask_and_moved() {
    let (cluster, s) = store().await;
    let a = app("migrating");
    let old = first_fence(&s, &a).await;
    s.commit(&a, old, 1, "one", 1).await.unwrap();
    // All four keys exist: a multi-key script on a migrating slot needs all or none of them.
    s.heartbeat(&a, old, 1).await.unwrap();
    let (slot, from, _) = placement(&cluster, &a);
    let to = (0..MASTERS).find(|m| *m != from).unwrap();
    let (slot_text, from_id, to_id) = (slot.to_string(), cluster.id(from), cluster.id(to));
    let setslot = |node: usize, args: &[&str]| {
        let mut command = vec!["CLUSTER", "SETSLOT", &slot_text];
        command.extend_from_slice(args);
        cluster.command::<()>(node, &command).unwrap();
    };
    setslot(to, &["IMPORTING", from_id]);
    setslot(from, &["MIGRATING", to_id]);
    s.commit(&a, old, 2, "two", 2).await.unwrap();

    let k = Keys::of(&a);
    let moved: String = cluster
        .command(
            from,
            &[
                "MIGRATE",
                "127.0.0.1",
                &cluster.port(to).to_string(),
                "",
                "0",
                "5000",
                "KEYS",
                &k.epoch,
                &k.markers,
                &k.heartbeat,
                &k.meta,
            ],
        )
        .unwrap();
    assert_eq!(moved, "OK");
    let count = |node: usize| -> u64 {
        cluster
            .command(node, &["CLUSTER", "COUNTKEYSINSLOT", &slot_text])
            .unwrap()
    };
    assert_eq!((count(from), count(to)), (0, 4));
    // The source answers ASK for keys it no longer has: the client asks the target.
    s.commit(&a, old, 3, "three", 3).await.unwrap();
    let new = s.advance_epoch(&a, old).await.unwrap();
    assert_eq!(new, old + 1);
    let err = s.commit(&a, old, 4, "zombie", 4).await.unwrap_err();
    assert_eq!(err.kind(), "fenced");
    assert_eq!(s.latest(&a).await.unwrap().unwrap().seq, 3);

    for node in [to, from] {
        setslot(node, &["NODE", to_id]);
    }
    for node in (0..MASTERS).filter(|m| *m != to && *m != from) {
        setslot(node, &["NODE", to_id]);
    }
    // Now the source answers MOVED, and the client's slot map follows.
    s.commit(&a, new, 4, "four", 4).await.unwrap();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq, m.payload.as_str()), (new, 4, "four"));
    assert_eq!(stored_epoch(&cluster, to, &a), Some(new));
    assert_eq!(cluster.master_of(slot).unwrap(), to);
    assert_eq!(count(from), 0);
}
