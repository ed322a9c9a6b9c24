//! The recovery agent over HTTP on loopback, against real stores: a `redis-server` started per test,
//! kubesim in-process, and the `operator agent` binary itself. The requests are what a driver sends
//! (plain HTTP/1.1 with `Connection: close`), and every wait is bounded by a deadline.

use crate::store_support;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use operator::agent::state::MAX_PAYLOAD_BYTES;
use operator::agent::{self, AgentError, Settings};
use operator::progress_store::kube::KubeStore;
use operator::progress_store::redis::RedisStore;
use operator::progress_store::{AppKey, Heartbeat, Marker, ProgressStore, Scope, StoreError};
use sandbox::memory_store::MemoryStore;
use serde_json::{Value, json};
use store_support::{RedisServer, app, bounded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How long any single wait in these tests may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// A heartbeat interval long enough that only the immediate first beat happens during a test, so
/// a commit (not a heartbeat) is what discovers a fence.
const NO_MORE_HEARTBEATS: Duration = Duration::from_secs(3600);

// ---------------------------------------------------------------------------------------------
// A minimal HTTP/1.1 client: one request per connection, which is all a driver needs.

/// An answer: status code and JSON body.
#[derive(Debug)]
struct Reply {
    status: u16,
    body: Value,
}

async fn request(port: u16, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(DEADLINE, exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path} answered within {DEADLINE:?}"))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let text = String::from_utf8(raw.to_vec()).expect("the answer is UTF-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "every answer is JSON: {head}"
    );
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    Reply { status, body }
}

async fn get(port: u16, path: &str) -> Reply {
    request(port, "GET", path, None).await
}

async fn commit(port: u16, seq: u64, payload: &str) -> Reply {
    let body = json!({"seq": seq, "payload": payload}).to_string();
    request(port, "POST", "/v1/marker", Some(body.as_bytes())).await
}

/// Asserts a successful commit of `seq` under `epoch`.
async fn commit_ok(port: u16, epoch: u64, seq: u64, payload: &str) {
    let r = commit(port, seq, payload).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body,
        json!({"committed": true, "epoch": epoch, "seq": seq})
    );
}

/// Polls `check` until it holds or [`DEADLINE`] passes.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `probe` until it answers something, bounded by [`DEADLINE`].
async fn eventually_some<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_ready(port: u16) {
    eventually("the agent is ready", || async {
        get(port, "/v1/ready").await.status == 200
    })
    .await;
}

/// Waits for the first heartbeat to land. The loop starts right after the restore, so without this
/// a fence set up by the test could be discovered by that first beat instead of by a commit.
async fn wait_first_heartbeat(port: u16) {
    eventually("a heartbeat lands", || async {
        get(port, "/v1/status").await.body["heartbeats"]
            .as_u64()
            .is_some_and(|n| n > 0)
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// An agent inside the test process (`agent::serve`), stopped like SIGTERM stops the binary.

struct InProcessAgent {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), AgentError>>,
}

impl InProcessAgent {
    /// Starts an agent for `app` under `epoch` on a free loopback port; does not wait for ready.
    async fn start<S: ProgressStore + 'static>(
        store: S,
        app: &AppKey,
        epoch: u64,
        heartbeat_interval: Duration,
    ) -> Self {
        let listener = agent::bind(0).await.expect("binds a free loopback port");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        assert!(addr.ip().is_loopback(), "listens on loopback only: {addr}");
        let settings = Settings {
            heartbeat_interval,
            store_timeout: Duration::from_secs(2),
            ..Settings::new(app.clone(), epoch)
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(agent::serve(listener, settings, store, async {
            // A dropped sender stops the agent too.
            let _ = stopped.await;
        }));
        Self {
            port: addr.port(),
            stop: Some(stop),
            task,
        }
    }

    /// [`Self::start`], then waits for `/v1/ready`.
    async fn ready<S: ProgressStore + 'static>(
        store: S,
        app: &AppKey,
        epoch: u64,
        heartbeat_interval: Duration,
    ) -> Self {
        let agent = Self::start(store, app, epoch, heartbeat_interval).await;
        wait_ready(agent.port).await;
        agent
    }

    /// Stops the agent gracefully and asserts it ended without error.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(DEADLINE, &mut self.task)
            .await
            .expect("the agent stops within the deadline")
            .expect("the agent task did not panic");
        assert!(result.is_ok(), "graceful stop: {result:?}");
    }
}

impl Drop for InProcessAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// A real store with a gate on the restore and counters of the writes that reach it.

#[derive(Clone)]
struct Observed<S> {
    inner: S,
    /// `latest` waits until this is true.
    restore_gate: watch::Receiver<bool>,
    commits: Arc<AtomicU64>,
    heartbeats: Arc<AtomicU64>,
}

impl<S> Observed<S> {
    /// Counts writes; the restore is not held back.
    fn new(inner: S) -> Self {
        let (_, open) = watch::channel(true);
        Self::gated(inner, open)
    }

    fn gated(inner: S, restore_gate: watch::Receiver<bool>) -> Self {
        Self {
            inner,
            restore_gate,
            commits: Arc::default(),
            heartbeats: Arc::default(),
        }
    }

    fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    fn heartbeats(&self) -> u64 {
        self.heartbeats.load(Ordering::SeqCst)
    }
}

impl<S: ProgressStore + Clone> ProgressStore for Observed<S> {
    async fn advance_epoch(&self, app: &AppKey, observed: u64) -> Result<u64, StoreError> {
        self.inner.advance_epoch(app, observed).await
    }
    async fn epoch(&self, app: &AppKey) -> Result<u64, StoreError> {
        self.inner.epoch(app).await
    }
    async fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.commit(app, epoch, seq, payload, now_ms).await
    }
    async fn latest(&self, app: &AppKey) -> Result<Option<Marker>, StoreError> {
        let mut gate = self.restore_gate.clone();
        // A closed gate sender means nobody will open it: let the restore through.
        let _ = gate.wait_for(|open| *open).await;
        self.inner.latest(app).await
    }
    async fn heartbeat(&self, app: &AppKey, epoch: u64, now_ms: u64) -> Result<(), StoreError> {
        self.heartbeats.fetch_add(1, Ordering::SeqCst);
        self.inner.heartbeat(app, epoch, now_ms).await
    }
    async fn last_heartbeat(&self, app: &AppKey) -> Result<Option<Heartbeat>, StoreError> {
        self.inner.last_heartbeat(app).await
    }
    async fn prune(&self, app: &AppKey, keep: usize) -> Result<usize, StoreError> {
        self.inner.prune(app, keep).await
    }
}

/// The operator's first fence of `a`, which every driver's agent starts after: epoch 1.
async fn fence_first<S: ProgressStore>(store: &S, a: &AppKey) {
    assert_eq!(store.advance_epoch(a, 0).await.unwrap(), 1);
}

async fn redis() -> (RedisServer, RedisStore) {
    let server = RedisServer::start().expect("redis-server starts");
    let store = RedisStore::connect(&server.url())
        .await
        .expect("connects to redis");
    (server, store)
}

fn payload(seq: u64) -> String {
    json!({"stage": seq, "output": format!("s3://bucket/stage-{seq}")}).to_string()
}

// ---------------------------------------------------------------------------------------------
// Start, restore, commit.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_marker_answer_not_ready_until_the_restore_finishes() {
    bounded(async {
        let a = app("not-ready");
        let (open, gate) = watch::channel(false);
        let store = Observed::gated(Arc::new(MemoryStore::new()), gate);
        fence_first(&store, &a).await;
        let agent = InProcessAgent::start(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;

        let r = get(agent.port, "/v1/ready").await;
        assert_eq!((r.status, &r.body["error"]), (503, &json!("NOT_READY")));
        assert_eq!(r.body["ready"], false);
        let r = get(agent.port, "/v1/marker").await;
        assert_eq!((r.status, &r.body["error"]), (503, &json!("NOT_READY")));
        let r = commit(agent.port, 1, "early").await;
        assert_eq!((r.status, &r.body["error"]), (503, &json!("NOT_READY")));
        assert_eq!(store.commits(), 0, "nothing is written before the restore");

        open.send(true).expect("the agent holds the gate");
        wait_ready(agent.port).await;
        assert_eq!(
            get(agent.port, "/v1/ready").await.body,
            json!({"ready": true})
        );
        agent.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_app_has_no_marker_and_serves_each_commit_as_the_latest() {
    bounded(async {
        let (_server, store) = redis().await;
        let a = app("fresh");
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store.clone(), &a, 1, Duration::from_millis(50)).await;

        let r = get(agent.port, "/v1/marker").await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.body,
            json!({"epoch": 1, "restoredFromEpoch": null, "marker": null})
        );

        commit_ok(agent.port, 1, 1, &payload(1)).await;
        commit_ok(agent.port, 1, 2, &payload(2)).await;
        let r = get(agent.port, "/v1/marker").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["epoch"], 1);
        assert_eq!(r.body["restoredFromEpoch"], Value::Null);
        let served: Marker = serde_json::from_value(r.body["marker"].clone()).unwrap();
        let stored = store.latest(&a).await.unwrap().expect("a marker is stored");
        assert_eq!(served, stored, "the agent serves what the store holds");
        assert_eq!((stored.epoch, stored.seq), (1, 2));
        assert_eq!(stored.payload, payload(2));

        wait_first_heartbeat(agent.port).await;
        let status = get(agent.port, "/v1/status").await;
        assert_eq!(status.status, 200);
        assert_eq!(status.body["epoch"], 1);
        assert_eq!(status.body["fenced"], false);
        assert!(status.body["lastHeartbeatMs"].is_u64(), "{status:?}");
        assert_eq!(
            store.last_heartbeat(&a).await.unwrap().map(|h| h.epoch),
            Some(1)
        );
        agent.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_under_the_next_epoch_restores_the_previous_epochs_marker() {
    bounded(async {
        let (_server, store) = redis().await;
        let a = app("restart");
        fence_first(&store, &a).await;
        let first = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        commit_ok(first.port, 1, 1, &payload(1)).await;
        commit_ok(first.port, 1, 2, &payload(2)).await;
        first.stop().await;

        // What the operator does before it resubmits the driver.
        assert_eq!(store.advance_epoch(&a, 1).await.unwrap(), 2);
        let second = InProcessAgent::ready(store.clone(), &a, 2, NO_MORE_HEARTBEATS).await;
        let r = get(second.port, "/v1/marker").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["epoch"], 2);
        assert_eq!(r.body["restoredFromEpoch"], 1);
        let m: Marker = serde_json::from_value(r.body["marker"].clone()).unwrap();
        assert_eq!((m.epoch, m.seq, m.payload), (1, 2, payload(2)));
        assert_eq!(
            get(second.port, "/v1/status").await.body["restoredFromEpoch"],
            1
        );

        // Progress continues from the restored marker, under the new epoch.
        commit_ok(second.port, 2, 3, &payload(3)).await;
        let r = get(second.port, "/v1/marker").await;
        assert_eq!(
            r.body["restoredFromEpoch"], 1,
            "still where it restored from"
        );
        assert_eq!(r.body["marker"]["epoch"], 2);
        assert_eq!(r.body["marker"]["seq"], 3);
        second.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Fencing.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_agent_gets_fenced_and_then_refuses_every_write_without_the_store() {
    bounded(async {
        let (_server, redis) = redis().await;
        let a = app("fenced-commit");
        let store = Observed::new(redis.clone());
        fence_first(&store, &a).await;
        let zombie = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        commit_ok(zombie.port, 1, 1, &payload(1)).await;
        wait_first_heartbeat(zombie.port).await;

        // The operator fences epoch 1 and starts the successor, which commits.
        assert_eq!(redis.advance_epoch(&a, 1).await.unwrap(), 2);
        let successor = InProcessAgent::ready(redis.clone(), &a, 2, NO_MORE_HEARTBEATS).await;
        commit_ok(successor.port, 2, 2, &payload(2)).await;

        let commits_before = store.commits();
        let r = commit(zombie.port, 3, "zombie").await;
        assert_eq!(r.status, 409, "{r:?}");
        assert_eq!(r.body["error"], "FENCED");
        assert_eq!(r.body["epoch"], 1);
        assert_eq!(r.body["currentEpoch"], 2);
        assert_eq!(
            store.commits(),
            commits_before + 1,
            "the store answered the first fenced commit"
        );

        // From now on the zombie refuses by itself, whatever it is sent.
        for (seq, body) in [(4, "zombie"), (3, "zombie"), (100, "")] {
            let r = commit(zombie.port, seq, body).await;
            assert_eq!((r.status, &r.body["error"]), (409, &json!("FENCED")));
            assert_eq!(r.body["currentEpoch"], 2);
        }
        assert_eq!(
            store.commits(),
            commits_before + 1,
            "a fenced agent does not touch the store"
        );
        let latest = redis.latest(&a).await.unwrap().expect("a marker");
        assert_eq!(
            (latest.epoch, latest.seq, latest.payload.as_str()),
            (2, 2, payload(2).as_str()),
            "the successor's marker is still the latest"
        );

        // It keeps serving reads and says it is fenced.
        let status = get(zombie.port, "/v1/status").await.body;
        assert_eq!(status["fenced"], true);
        assert_eq!(get(zombie.port, "/v1/ready").await.status, 200);
        let r = get(zombie.port, "/v1/marker").await;
        assert_eq!((r.status, &r.body["marker"]["seq"]), (200, &json!(1)));
        zombie.stop().await;
        successor.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_fences_an_idle_superseded_agent() {
    bounded(async {
        let (_server, redis) = redis().await;
        let a = app("fenced-heartbeat");
        let store = Observed::new(redis.clone());
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store.clone(), &a, 1, Duration::from_millis(50)).await;
        commit_ok(agent.port, 1, 1, &payload(1)).await;
        wait_first_heartbeat(agent.port).await;

        assert_eq!(redis.advance_epoch(&a, 1).await.unwrap(), 2);
        eventually("the heartbeat loop marks the agent fenced", || async {
            get(agent.port, "/v1/status").await.body["fenced"] == json!(true)
        })
        .await;

        let commits = store.commits();
        let r = commit(agent.port, 2, &payload(2)).await;
        assert_eq!((r.status, &r.body["error"]), (409, &json!("FENCED")));
        assert_eq!(r.body["currentEpoch"], 2);
        assert_eq!(store.commits(), commits, "refused without the store");
        let latest = redis.latest(&a).await.unwrap().expect("a marker");
        assert_eq!((latest.epoch, latest.seq), (1, 1), "nothing written");

        // Heartbeats are writes too: the fenced loop has stopped writing. The clock that shows
        // it is the successor's own loop, on the same interval: once it has beaten five times,
        // a live loop of the fenced agent would have beaten again too.
        let beats = store.heartbeats();
        let later = get(agent.port, "/v1/status").await.body["heartbeats"].clone();
        let successor_store = Observed::new(redis.clone());
        let successor =
            InProcessAgent::ready(successor_store.clone(), &a, 2, Duration::from_millis(50)).await;
        eventually("the successor to beat five times", || async {
            successor_store.heartbeats() >= 5
        })
        .await;
        assert_eq!(store.heartbeats(), beats, "no heartbeat after the fence");
        assert_eq!(
            get(agent.port, "/v1/status").await.body["heartbeats"],
            later
        );
        successor.stop().await;
        agent.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Refused requests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seq_that_does_not_grow_is_a_stale_marker_and_an_exact_repeat_is_accepted() {
    bounded(async {
        let (_server, redis) = redis().await;
        let a = app("stale");
        fence_first(&redis, &a).await;
        let agent = InProcessAgent::ready(redis.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        commit_ok(agent.port, 1, 5, &payload(5)).await;

        for (seq, body) in [(5, "different"), (4, "older"), (0, "")] {
            let r = commit(agent.port, seq, body).await;
            assert_eq!(r.status, 409, "{r:?}");
            assert_eq!(r.body["error"], "STALE_MARKER");
            assert_eq!(r.body["latestSeq"], 5);
        }
        // A retry after a lost answer is the same marker again: it succeeds and writes nothing.
        let before = redis.latest(&a).await.unwrap();
        commit_ok(agent.port, 1, 5, &payload(5)).await;
        assert_eq!(redis.latest(&a).await.unwrap(), before);
        assert_eq!(get(agent.port, "/v1/status").await.body["fenced"], false);
        agent.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_commits_are_bad_requests_that_write_nothing() {
    bounded(async {
        let (_server, redis) = redis().await;
        let a = app("bad-request");
        let store = Observed::new(redis.clone());
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;

        let oversized = json!({"seq": 1, "payload": "x".repeat(MAX_PAYLOAD_BYTES + 1)}).to_string();
        let bodies: [&[u8]; 7] = [
            b"{not json",
            b"",
            br#"{"seq": 1}"#,
            br#"{"payload": "p"}"#,
            br#"{"seq": -1, "payload": "p"}"#,
            br#"{"seq": 1, "payload": {"stage": 1}}"#,
            oversized.as_bytes(),
        ];
        for body in bodies {
            let r = request(agent.port, "POST", "/v1/marker", Some(body)).await;
            assert_eq!(r.status, 400, "{r:?}");
            assert_eq!(r.body["error"], "BAD_REQUEST");
            assert!(r.body["message"].is_string());
        }
        assert_eq!(store.commits(), 0, "no bad request reaches the store");
        assert_eq!(redis.latest(&a).await.unwrap(), None);

        // Redis scripts compare numbers as doubles: a seq from 2^53 up is refused, not rounded.
        let r = commit(agent.port, 1 << 53, "p").await;
        assert_eq!((r.status, &r.body["error"]), (400, &json!("BAD_REQUEST")));
        assert_eq!(redis.latest(&a).await.unwrap(), None);

        // The limit itself is allowed.
        commit_ok(agent.port, 1, 1, &"x".repeat(MAX_PAYLOAD_BYTES)).await;
        agent.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_answer_with_the_json_error_envelope() {
    bounded(async {
        let a = app("routes");
        let store = Arc::new(MemoryStore::new());
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store, &a, 1, NO_MORE_HEARTBEATS).await;

        for path in ["/", "/v1/markers", "/v2/marker", "/v1/marker/1"] {
            let r = get(agent.port, path).await;
            assert_eq!(r.status, 404, "{path}: {r:?}");
            assert_eq!(r.body["error"], "NOT_FOUND");
            assert!(r.body["message"].is_string());
        }
        for (method, path) in [
            ("DELETE", "/v1/marker"),
            ("PUT", "/v1/marker"),
            ("POST", "/v1/ready"),
        ] {
            let r = request(agent.port, method, path, None).await;
            assert_eq!(r.status, 405, "{method} {path}: {r:?}");
            assert_eq!(r.body["error"], "METHOD_NOT_ALLOWED");
        }
        agent.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The store's own failures.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_are_store_unavailable_while_redis_is_down() {
    bounded(async {
        let (server, store) = redis().await;
        let a = app("redis-down");
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        commit_ok(agent.port, 1, 1, &payload(1)).await;

        drop(server);
        for _ in 0..2 {
            let r = commit(agent.port, 2, &payload(2)).await;
            assert_eq!(r.status, 503, "{r:?}");
            assert_eq!(r.body["error"], "STORE_UNAVAILABLE");
            assert!(
                !r.body["message"].as_str().unwrap_or("").contains("redis"),
                "a 5xx body is generic: {r:?}"
            );
        }
        let r = get(agent.port, "/v1/marker").await;
        assert_eq!((r.status, &r.body["marker"]["seq"]), (200, &json!(1)));
        assert_eq!(get(agent.port, "/v1/status").await.body["fenced"], false);
        assert_eq!(get(agent.port, "/v1/ready").await.status, 200);
        agent.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_commit_reaches_redis_once_it_is_back_and_a_store_that_lost_its_state_fences() {
    bounded(async {
        let (mut server, store) = redis().await;
        let a = app("redis-back");
        fence_first(&store, &a).await;
        let agent = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        commit_ok(agent.port, 1, 1, &payload(1)).await;

        server.kill();
        assert_eq!(commit(agent.port, 2, &payload(2)).await.status, 503);
        // The same address comes back, empty: the retry reaches it, and a store that lost the
        // application's state refuses every driver's write (the operator fences anew).
        server.restart().expect("redis-server restarts on its port");
        let answer = eventually_some("a retried commit reaches redis again", || async {
            let r = commit(agent.port, 2, &payload(2)).await;
            (r.status != 503).then_some(r)
        })
        .await;
        assert_eq!(
            (answer.status, &answer.body["error"]),
            (409, &json!("FENCED"))
        );
        agent.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The Kubernetes store.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_store_carries_the_marker_across_epochs_and_fences_the_old_agent() {
    bounded(async {
        let cluster = kubesim::Cluster::start(kubesim::ClusterConfig::default())
            .await
            .expect("kubesim starts");
        // No SparkApplication owns this app's progress here (the collector would take it).
        let store = KubeStore::without_owners(cluster.client().expect("a client"));
        let a = app("kube-restart");
        fence_first(&store, &a).await;

        let old = InProcessAgent::ready(store.clone(), &a, 1, NO_MORE_HEARTBEATS).await;
        wait_first_heartbeat(old.port).await;
        assert_eq!(
            get(old.port, "/v1/marker").await.body["marker"],
            Value::Null
        );
        commit_ok(old.port, 1, 1, &payload(1)).await;
        commit_ok(old.port, 1, 2, &payload(2)).await;

        assert_eq!(store.advance_epoch(&a, 1).await.unwrap(), 2);
        let new = InProcessAgent::ready(store.clone(), &a, 2, NO_MORE_HEARTBEATS).await;
        let r = get(new.port, "/v1/marker").await;
        assert_eq!(r.body["epoch"], 2);
        assert_eq!(r.body["restoredFromEpoch"], 1);
        assert_eq!(r.body["marker"]["seq"], 2);
        assert_eq!(r.body["marker"]["payload"], payload(2));
        commit_ok(new.port, 2, 3, &payload(3)).await;

        let r = commit(old.port, 3, "zombie").await;
        assert_eq!((r.status, &r.body["error"]), (409, &json!("FENCED")));
        assert_eq!(r.body["currentEpoch"], 2);
        let latest = store.latest(&a).await.unwrap().expect("a marker");
        assert_eq!((latest.epoch, latest.seq), (2, 3));
        old.stop().await;
        new.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The binary: `operator agent` configured by its environment, stopped by SIGTERM.

/// An `operator agent` child process, killed when dropped (a failed test leaves no process).
struct AgentProcess(Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl AgentProcess {
    /// Waits (bounded) for the process to exit; returns its code and its stdout + stderr.
    fn wait_exit(&mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the agent exits within {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut output = String::new();
        if let Some(mut out) = self.0.stdout.take() {
            std::io::Read::read_to_string(&mut out, &mut output).expect("stdout");
        }
        if let Some(mut err) = self.0.stderr.take() {
            std::io::Read::read_to_string(&mut err, &mut output).expect("stderr");
        }
        (status.code(), output)
    }
}

/// `operator agent` with only `vars` of the `SPARK_RECOVERY_*` contract set.
fn agent_command(vars: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_operator"));
    cmd.arg("agent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "info");
    for (key, _) in std::env::vars() {
        if key.starts_with("SPARK_RECOVERY_") {
            cmd.env_remove(key);
        }
    }
    for (key, value) in vars {
        cmd.env(key, value);
    }
    cmd
}

/// A loopback port that was free a moment ago (the agent must be told its port up front).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_binary_serves_its_environment_and_exits_zero_on_sigterm() {
    bounded(async {
        let (server, store) = redis().await;
        let a = AppKey::new("team-a", "etl", Scope::new("uid-etl", 1));
        fence_first(&store, &a).await;
        store.commit(&a, 1, 7, &payload(7), 1).await.unwrap();
        assert_eq!(store.advance_epoch(&a, 1).await.unwrap(), 2);

        let port = free_port();
        let mut agent = AgentProcess(
            agent_command(&[
                ("SPARK_RECOVERY_APP", "team-a/etl".into()),
                ("SPARK_RECOVERY_EPOCH", "2".into()),
                ("SPARK_RECOVERY_SCOPE", "uid-etl/1".into()),
                ("SPARK_RECOVERY_STORE", "redis".into()),
                ("SPARK_RECOVERY_REDIS_URL", server.url()),
                ("SPARK_RECOVERY_PORT", port.to_string()),
                ("SPARK_RECOVERY_HEARTBEAT_MILLIS", "50".into()),
            ])
            .spawn()
            .expect("the operator binary starts"),
        );
        eventually("the agent binary is ready", || {
            let exited = agent.0.try_wait().expect("try_wait");
            async move {
                if let Some(status) = exited {
                    panic!("the agent exited early with {status}");
                }
                // Connection refused until it listens: not ready yet.
                match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    Ok(_) => get(port, "/v1/ready").await.status == 200,
                    Err(_) => false,
                }
            }
        })
        .await;

        let r = get(port, "/v1/marker").await;
        assert_eq!(r.body["epoch"], 2);
        assert_eq!(r.body["restoredFromEpoch"], 1);
        assert_eq!(r.body["marker"]["seq"], 7);
        commit_ok(port, 2, 8, &payload(8)).await;
        assert_eq!(store.latest(&a).await.unwrap().map(|m| m.seq), Some(8));
        eventually("the binary heartbeats under its epoch", || async {
            store.last_heartbeat(&a).await.unwrap().map(|h| h.epoch) == Some(2)
        })
        .await;

        let kill = Command::new("kill")
            .args(["-TERM", &agent.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success());
        let (code, output) = agent.wait_exit();
        assert_eq!(code, Some(0), "SIGTERM is a clean exit: {output}");
        assert!(output.contains("shutting down"), "{output}");
    })
    .await;
}

#[test]
fn the_agent_binary_refuses_an_incomplete_configuration_with_a_clear_message() {
    let cases: [(&[(&str, String)], &str); 3] = [
        (
            &[
                ("SPARK_RECOVERY_EPOCH", "0".into()),
                ("SPARK_RECOVERY_STORE", "redis".into()),
                ("SPARK_RECOVERY_REDIS_URL", "redis://127.0.0.1:1/".into()),
            ],
            "SPARK_RECOVERY_APP",
        ),
        (
            &[
                ("SPARK_RECOVERY_APP", "team-a/etl".into()),
                ("SPARK_RECOVERY_EPOCH", "1".into()),
                ("SPARK_RECOVERY_SCOPE", "uid-etl/1".into()),
                ("SPARK_RECOVERY_STORE", "redis".into()),
            ],
            "SPARK_RECOVERY_REDIS_URL",
        ),
        (
            &[
                ("SPARK_RECOVERY_APP", "not-a-reference".into()),
                ("SPARK_RECOVERY_EPOCH", "0".into()),
            ],
            "SPARK_RECOVERY_APP",
        ),
    ];
    for (vars, named) in cases {
        let mut agent = AgentProcess(agent_command(vars).spawn().expect("the binary starts"));
        let (code, output) = agent.wait_exit();
        assert!(
            code.is_some_and(|c| c != 0),
            "{vars:?} exits non-zero, got {code:?}: {output}"
        );
        assert!(
            output.contains(named),
            "the message names {named} for {vars:?}: {output}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The startup probe, as the kubelet runs it: `operator agent probe` inside the agent's container.

/// Runs `operator agent probe` with the container's `SPARK_RECOVERY_PORT`; its exit code and
/// standard error.
async fn run_probe(port: u16) -> (Option<i32>, String) {
    let mut cmd = agent_command(&[("SPARK_RECOVERY_PORT", port.to_string())]);
    cmd.arg("probe");
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("the probe runs")
        .expect("the operator binary starts");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_command_passes_only_once_the_agent_has_restored() {
    bounded(async {
        // Nothing listens yet: the agent is still starting.
        let (code, stderr) = run_probe(free_port()).await;
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("cannot connect"), "{stderr}");

        let a = app("probe");
        let (open, gate) = watch::channel(false);
        let store = Observed::gated(Arc::new(MemoryStore::new()), gate);
        fence_first(&store, &a).await;
        let agent = InProcessAgent::start(store, &a, 1, NO_MORE_HEARTBEATS).await;
        let (code, stderr) = run_probe(agent.port).await;
        assert_eq!(code, Some(1), "the restore has not finished: {stderr}");
        assert!(stderr.contains("not ready"), "{stderr}");

        open.send(true).expect("the agent holds the gate");
        wait_ready(agent.port).await;
        let (code, stderr) = run_probe(agent.port).await;
        assert_eq!(code, Some(0), "{stderr}");
        agent.stop().await;
    })
    .await;
}
