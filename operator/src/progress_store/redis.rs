//! Redis backend: every write is one Lua script that checks the scope and the epoch and writes in
//! one atomic step (Redis runs a script without interleaving other commands), mirroring the rules
//! of [`crate::fence`]. Keys are `spark:{<namespace>/<app>}:epoch|markers|heartbeat|meta`: the
//! `{…}` hash tag puts all keys of one application in one Redis Cluster slot, which a multi-key
//! script requires.
//!
//! Layout: `epoch` a decimal string (absent = epoch 0); `markers` a list of [`Marker`] JSON, oldest
//! first; `heartbeat` one [`Heartbeat`] JSON; `meta` a hash with `scope` (`<uid>/<run>`, set by
//! the operator's fence) and `ttlMs`. Nothing is kept forever: every write gives all four keys the
//! expiry the operator's fence recorded in `ttlMs` ([`DEFAULT_TTL`] unless configured), so an
//! application's progress disappears that long after its last fence, commit or heartbeat. Scripts
//! compare numbers as Lua doubles, so epochs and sequence numbers above 2^53 are refused before
//! they reach Redis.
//!
//! One server or a Redis Cluster, as the [`url`] says. Replication in Redis is asynchronous, so a
//! write the master answered can be lost when it fails before a replica has it, and a lost fence
//! would let the fenced driver write again. A fence and a commit are therefore followed, on the
//! same connection and in the same round trip, by `WAIT` for [`url::Durability::replicas`]
//! replicas; a write fewer replicas acknowledged in time fails (a backend error the caller
//! retries: every write is idempotent), so nothing unconfirmed is ever reported done.
//! Heartbeats and prunes are not confirmed: losing one is harmless.

use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::ClusterClientBuilder;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Cmd, FromRedisValue, Pipeline, RedisError, Script, ServerError, Value};

use super::{AppKey, Heartbeat, Marker, ProgressStore, StoreError};
use crate::fence::INITIAL_EPOCH;

/// The store's URL: one server or a cluster, and the replicas a write waits for.
pub mod url;

use url::{Durability, ParseRedisUrlError, RedisUrl, Topology};

/// The largest integer a Lua double holds exactly.
const MAX_EXACT: u64 = 1 << 53;

/// How long an application's keys outlive its last write, unless configured: long enough for any
/// retry interval, short enough that deleted applications leave nothing behind for long.
pub const DEFAULT_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Advance: a new scope starts from nothing above every epoch seen; else bump only from the
/// observed epoch, jump past an epoch the store lost, or keep. KEYS: epoch, markers, heartbeat,
/// meta. ARGV: scope, observed, ttl ms.
const ADVANCE: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local observed = tonumber(ARGV[2])
local moved = 1
if redis.call('HGET', KEYS[4], 'scope') ~= ARGV[1] then
  if observed > current then current = observed end
  current = current + 1
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[4], 'scope', ARGV[1])
elseif current == observed then
  current = current + 1
elseif current < observed then
  current = observed + 1
else
  moved = 0
end
redis.call('SET', KEYS[1], current)
redis.call('HSET', KEYS[4], 'ttlMs', ARGV[3])
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
return {current, moved}
";

/// Commit: fenced unless the scope and epoch are current; the exact repeat of the latest marker is
/// a no-op; progress only moves forward. KEYS: epoch, markers, heartbeat, meta. ARGV: scope, epoch,
/// seq, payload, marker JSON (built by Rust, never re-encoded here).
const COMMIT: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local meta = redis.call('HMGET', KEYS[4], 'scope', 'ttlMs')
if meta[1] ~= ARGV[1] or tonumber(ARGV[2]) ~= current then return {'FENCED', current} end
local seq = tonumber(ARGV[3])
local last = redis.call('LINDEX', KEYS[2], -1)
if last then
  local m = cjson.decode(last)
  if m.epoch == current and m.seq == seq and m.payload == ARGV[4] then
    -- Renewing the expiry is a write: the WAIT after a retry then also covers the first attempt.
    if meta[2] then for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], meta[2]) end end
    return {'DUPLICATE', seq}
  end
  if seq <= m.seq then return {'STALE', m.seq} end
end
redis.call('RPUSH', KEYS[2], ARGV[5])
if meta[2] then for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], meta[2]) end end
return {'OK', seq}
";

/// Heartbeat: fenced unless the scope and epoch are current. KEYS: epoch, markers, heartbeat,
/// meta. ARGV: scope, epoch, heartbeat JSON.
const HEARTBEAT: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local meta = redis.call('HMGET', KEYS[4], 'scope', 'ttlMs')
if meta[1] ~= ARGV[1] or tonumber(ARGV[2]) ~= current then return {'FENCED', current} end
redis.call('SET', KEYS[3], ARGV[3])
if meta[2] then for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], meta[2]) end end
return {'OK', current}
";

/// Prune: one script so a concurrent commit cannot slip between the length read and the trim.
/// KEYS: markers, meta. ARGV: scope, keep.
const PRUNE: &str = r"
if redis.call('HGET', KEYS[2], 'scope') ~= ARGV[1] then return 0 end
local len = redis.call('LLEN', KEYS[1])
local keep = tonumber(ARGV[2])
if len <= keep then return 0 end
redis.call('LTRIM', KEYS[1], len - keep, -1)
return len - keep
";

/// A read of one key, nothing unless the scope is current. KEYS: meta, the key. ARGV: scope, what
/// (`epoch`, `latest` or `heartbeat`).
const READ: &str = r"
if redis.call('HGET', KEYS[1], 'scope') ~= ARGV[1] then return false end
if ARGV[2] == 'latest' then return redis.call('LINDEX', KEYS[2], -1) end
return redis.call('GET', KEYS[2])
";

/// Connecting to Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL is not a usable store URL.
    #[error("invalid redis url")]
    Url(#[source] UrlError),
    /// The server (or no seed of the cluster) did not answer.
    #[error("connecting to redis failed")]
    Connect(#[source] RedisError),
}

impl ConnectError {
    /// A stable label for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Url(_) => "url",
            Self::Connect(_) => "connect",
        }
    }
}

/// Why a store URL is unusable: its own grammar, or the Redis client's.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The scheme, the hosts or a store parameter.
    #[error(transparent)]
    Store(#[from] ParseRedisUrlError),
    /// What the Redis client refuses in a server or seed URL.
    #[error(transparent)]
    Client(#[from] RedisError),
}

/// A confirmed write (a fence or a commit) reached fewer replicas than required in time: the
/// master applied it, but a failover may still lose it, so it does not count as done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the write reached {acknowledged} of {required} replicas within {timeout:?}")]
pub struct Unreplicated {
    /// Replicas that acknowledged it.
    pub acknowledged: u64,
    /// Replicas required (`wait_replicas`).
    pub required: u32,
    /// How long the store waited (`wait_timeout_ms`).
    pub timeout: Duration,
}

/// The keys of one application, all in one cluster slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The current epoch.
    pub epoch: String,
    /// The marker list.
    pub markers: String,
    /// The latest heartbeat.
    pub heartbeat: String,
    /// The scope and the expiry of all four.
    pub meta: String,
}

impl Keys {
    /// `spark:{<namespace>/<app>}:…`; Kubernetes names cannot hold braces, so the tag is the whole
    /// `namespace/app`.
    pub fn of(app: &AppKey) -> Self {
        let tag = format!("spark:{{{}/{}}}", app.namespace, app.name);
        Self {
            epoch: format!("{tag}:epoch"),
            markers: format!("{tag}:markers"),
            heartbeat: format!("{tag}:heartbeat"),
            meta: format!("{tag}:meta"),
        }
    }

    fn all(&self) -> [&str; 4] {
        [&self.epoch, &self.markers, &self.heartbeat, &self.meta]
    }
}

/// A Redis-backed store, on one server or a Redis Cluster. Cheap to clone. Either connection
/// reconnects after a drop (the call that saw it fails with a backend error and is retried by its
/// caller); the cluster's also follows `MOVED` and `ASK` redirections and retries `TRYAGAIN` and
/// `CLUSTERDOWN` a few times within [`CLUSTER_CALL_BOUND`].
#[derive(Clone)]
pub struct RedisStore {
    conn: Connection,
    scripts: std::sync::Arc<Scripts>,
    ttl: Duration,
    durability: Durability,
}

/// The one connection of a store.
#[derive(Clone)]
enum Connection {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    /// Sends `pipe` as one batch on one connection (the cluster's: to the master of its first
    /// key's slot, retried whole after a redirection), with every command's own answer.
    async fn query(&self, pipe: &Pipeline) -> Result<Vec<Value>, RedisError> {
        match self {
            Connection::Server(conn) => pipe.query_async(&mut conn.clone()).await,
            Connection::Cluster(conn) => pipe.query_async(&mut conn.clone()).await,
        }
    }
}

/// The bound on one cluster call, its retries included: a failover takes the cluster's
/// `cluster-node-timeout` and more, and the caller (the agent's answer to its driver, the
/// operator's requeue) is better told early than held.
pub const CLUSTER_CALL_BOUND: Duration = Duration::from_secs(5);

/// A script with the source `EVAL` sends when the node has not cached it yet (a new node, a
/// promoted replica, `SCRIPT FLUSH`).
struct LuaScript {
    source: &'static str,
    sha: String,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        Self {
            source,
            sha: Script::new(source).get_hash().to_owned(),
        }
    }
}

struct Scripts {
    advance: LuaScript,
    commit: LuaScript,
    heartbeat: LuaScript,
    prune: LuaScript,
    read: LuaScript,
}

/// Whether a script's write must be on the required replicas before it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    /// Fences and commits: their loss would let a fenced driver write, or forget progress a
    /// driver was told is recorded.
    Replicated,
    /// Reads, heartbeats and prunes.
    No,
}

/// One script call: which script, on which keys, with which arguments.
struct Call<'a> {
    op: &'static str,
    app: &'a AppKey,
    script: &'a LuaScript,
    keys: Vec<&'a str>,
    args: Vec<String>,
    confirm: Confirm,
}

impl RedisStore {
    /// Connects to `url`: `redis://host:port/db` for one server, `redis+cluster://host:port,…` for
    /// a Redis Cluster, with the store's parameters (see [`url`]).
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let url: RedisUrl = url
            .parse()
            .map_err(|e: ParseRedisUrlError| ConnectError::Url(e.into()))?;
        // An answer is awaited as long as a whole call may take. While no replica acknowledges,
        // every confirmed write's WAIT holds the shared connection for its whole timeout, so
        // concurrent writes queue behind each other on the node: a shorter bound times out the
        // queued ones, and the client's retry of each only lengthens the queue (every call then
        // timed out until the writers stopped).
        let response_timeout = CLUSTER_CALL_BOUND + url.durability.timeout;
        let conn = match url.topology {
            Topology::Server { url: server } => {
                let client =
                    ::redis::Client::open(server).map_err(|e| ConnectError::Url(e.into()))?;
                let mut config = ConnectionManagerConfig::new();
                if url.durability.replicas > 0 {
                    config = config.set_response_timeout(Some(response_timeout));
                }
                let conn = ConnectionManager::new_with_config(client, config)
                    .await
                    .map_err(ConnectError::Connect)?;
                Connection::Server(conn)
            }
            Topology::Cluster { seeds } => {
                let client = ClusterClientBuilder::new(seeds)
                    .retries(8)
                    .min_retry_wait(10)
                    .max_retry_wait(500)
                    .response_timeout(response_timeout)
                    .overall_response_timeout(Some(response_timeout))
                    .build()
                    .map_err(|e| ConnectError::Url(e.into()))?;
                let conn = client
                    .get_async_connection()
                    .await
                    .map_err(ConnectError::Connect)?;
                Connection::Cluster(conn)
            }
        };
        Ok(Self {
            conn,
            scripts: std::sync::Arc::new(Scripts {
                advance: LuaScript::new(ADVANCE),
                commit: LuaScript::new(COMMIT),
                heartbeat: LuaScript::new(HEARTBEAT),
                prune: LuaScript::new(PRUNE),
                read: LuaScript::new(READ),
            }),
            ttl: DEFAULT_TTL,
            durability: url.durability,
        })
    }

    /// How long an application's keys outlive its last write; the fence records it, so the
    /// agents' writes keep it too (at least a millisecond).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// How many replicas a fence or a commit waits for, as the URL said.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    fn scripts(&self) -> &Scripts {
        &self.scripts
    }

    /// Runs one script; a [`Confirm::Replicated`] write that succeeded must then be acknowledged
    /// by the required replicas. The `WAIT` travels in the same batch on the same connection, so
    /// it covers this write even when the cluster client has moved to another node since.
    async fn run<T: FromRedisValue>(&self, call: Call<'_>) -> Result<T, StoreError> {
        let mut values = self.run_batch(&call, false).await?;
        if matches!(values.first(), Some(Value::ServerError(e)) if e.code() == "NOSCRIPT") {
            values = self.run_batch(&call, true).await?;
        }
        let mut values = values.into_iter();
        let answer = match values.next() {
            Some(Value::ServerError(e)) => return Err(server_error(&call, &e)),
            Some(answer) => answer,
            None => return Err(unexpected(&call, "no answer to the script")),
        };
        T::from_redis_value(answer).map_err(|e| backend(call.op, call.app)(e.into()))
    }

    /// The script, and `WAIT` after a write that must be confirmed; their raw answers.
    async fn run_batch(&self, call: &Call<'_>, by_source: bool) -> Result<Vec<Value>, StoreError> {
        let mut eval = Cmd::new();
        if by_source {
            eval.arg("EVAL").arg(call.script.source);
        } else {
            eval.arg("EVALSHA").arg(&call.script.sha);
        }
        eval.arg(call.keys.len()).arg(&call.keys).arg(&call.args);
        let mut pipe = ::redis::pipe();
        pipe.ignore_errors().add_command(eval);
        let waits = call.confirm == Confirm::Replicated && self.durability.replicas > 0;
        if waits {
            pipe.cmd("WAIT")
                .arg(self.durability.replicas)
                .arg(u64::try_from(self.durability.timeout.as_millis()).unwrap_or(u64::MAX));
        }
        let values = self
            .conn
            .query(&pipe)
            .await
            .map_err(backend(call.op, call.app))?;
        if waits {
            self.check_replicated(call, &values)?;
        }
        Ok(values)
    }

    /// A write counts once the required replicas acknowledged it; a refusal (`FENCED`, `STALE`)
    /// wrote nothing and stands whatever `WAIT` answered.
    fn check_replicated(&self, call: &Call<'_>, values: &[Value]) -> Result<(), StoreError> {
        let wrote = match values.first() {
            Some(Value::Array(answer)) => !matches!(
                answer.first(),
                Some(Value::BulkString(status)) if status == b"FENCED" || status == b"STALE"
            ),
            // An error (NOSCRIPT among them) wrote nothing.
            _ => false,
        };
        if !wrote {
            return Ok(());
        }
        match values.get(1) {
            Some(Value::Int(n)) if *n >= i64::from(self.durability.replicas) => Ok(()),
            Some(Value::Int(n)) => Err(StoreError::Backend {
                op: call.op,
                app: call.app.clone(),
                source: Box::new(Unreplicated {
                    acknowledged: u64::try_from(*n).unwrap_or(0),
                    required: self.durability.replicas,
                    timeout: self.durability.timeout,
                }),
            }),
            Some(Value::ServerError(e)) => Err(server_error(call, e)),
            _ => Err(unexpected(call, "no answer to WAIT")),
        }
    }

    /// One key read under the app's scope (`what`: `epoch`, `latest` or `heartbeat`).
    async fn read(
        &self,
        op: &'static str,
        app: &AppKey,
        key: &str,
        what: &str,
    ) -> Result<Option<String>, StoreError> {
        let keys = Keys::of(app);
        self.run(Call {
            op,
            app,
            script: &self.scripts().read,
            keys: vec![&keys.meta, key],
            args: vec![app.scope_text(), what.to_owned()],
            confirm: Confirm::No,
        })
        .await
    }
}

fn backend(op: &'static str, app: &AppKey) -> impl FnOnce(RedisError) -> StoreError {
    let app = app.clone();
    move |e| StoreError::Backend {
        op,
        app,
        source: Box::new(e),
    }
}

fn server_error(call: &Call<'_>, e: &ServerError) -> StoreError {
    backend(call.op, call.app)(RedisError::from(e.clone()))
}

fn unexpected(call: &Call<'_>, what: &'static str) -> StoreError {
    backend(call.op, call.app)(RedisError::from((
        ::redis::ErrorKind::UnexpectedReturnType,
        what,
    )))
}

fn exact(app: &AppKey, what: &'static str, value: u64) -> Result<(), StoreError> {
    if value < MAX_EXACT {
        Ok(())
    } else {
        Err(StoreError::OutOfRange {
            app: app.clone(),
            what,
            value,
        })
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    app: &AppKey,
    what: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        app: app.clone(),
        reason: format!("{what}: {e}"),
    })
}

fn encode<T: serde::Serialize>(app: &AppKey, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt {
        app: app.clone(),
        reason: format!("encoding: {e}"),
    })
}

/// Maps a script's `{status, number}` answer.
fn answer(app: &AppKey, attempted: u64, seq: u64, status: &str, n: u64) -> Result<(), StoreError> {
    match status {
        "OK" | "DUPLICATE" => Ok(()),
        "FENCED" => Err(StoreError::Fenced {
            app: app.clone(),
            attempted,
            current: n,
        }),
        "STALE" => Err(StoreError::StaleMarker {
            app: app.clone(),
            seq,
            latest: n,
        }),
        other => Err(StoreError::Corrupt {
            app: app.clone(),
            reason: format!("unexpected script answer {other:?}"),
        }),
    }
}

impl ProgressStore for RedisStore {
    async fn advance_epoch(&self, app: &AppKey, observed: u64) -> Result<u64, StoreError> {
        exact(app, "epoch", observed.saturating_add(1))?;
        let keys = Keys::of(app);
        let (epoch, moved): (u64, u8) = self
            .run(Call {
                op: "advance_epoch",
                app,
                script: &self.scripts().advance,
                keys: keys.all().to_vec(),
                args: vec![
                    app.scope_text(),
                    observed.to_string(),
                    u64::try_from(self.ttl.as_millis())
                        .unwrap_or(u64::MAX)
                        .to_string(),
                ],
                confirm: Confirm::Replicated,
            })
            .await?;
        tracing::debug!(app = %app, observed, epoch, moved = moved == 1, "advance epoch");
        Ok(epoch)
    }

    async fn epoch(&self, app: &AppKey) -> Result<u64, StoreError> {
        let text = self
            .read("epoch", app, &Keys::of(app).epoch, "epoch")
            .await?;
        match text {
            None => Ok(INITIAL_EPOCH),
            Some(t) => t.parse().map_err(|_| StoreError::Corrupt {
                app: app.clone(),
                reason: format!("epoch {t:?} is not a number"),
            }),
        }
    }

    async fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        exact(app, "epoch", epoch)?;
        exact(app, "seq", seq)?;
        let marker = encode(
            app,
            &Marker {
                epoch,
                seq,
                payload: payload.to_owned(),
                committed_at_ms: now_ms,
            },
        )?;
        let keys = Keys::of(app);
        let (status, n): (String, u64) = self
            .run(Call {
                op: "commit",
                app,
                script: &self.scripts().commit,
                keys: keys.all().to_vec(),
                args: vec![
                    app.scope_text(),
                    epoch.to_string(),
                    seq.to_string(),
                    payload.to_owned(),
                    marker,
                ],
                confirm: Confirm::Replicated,
            })
            .await?;
        answer(app, epoch, seq, &status, n)
    }

    async fn latest(&self, app: &AppKey) -> Result<Option<Marker>, StoreError> {
        let text = self
            .read("latest", app, &Keys::of(app).markers, "latest")
            .await?;
        text.map(|t| decode(app, "marker", &t)).transpose()
    }

    async fn heartbeat(&self, app: &AppKey, epoch: u64, now_ms: u64) -> Result<(), StoreError> {
        exact(app, "epoch", epoch)?;
        let hb = encode(
            app,
            &Heartbeat {
                epoch,
                at_ms: now_ms,
            },
        )?;
        let keys = Keys::of(app);
        let (status, n): (String, u64) = self
            .run(Call {
                op: "heartbeat",
                app,
                script: &self.scripts().heartbeat,
                keys: keys.all().to_vec(),
                args: vec![app.scope_text(), epoch.to_string(), hb],
                confirm: Confirm::No,
            })
            .await?;
        answer(app, epoch, 0, &status, n)
    }

    async fn last_heartbeat(&self, app: &AppKey) -> Result<Option<Heartbeat>, StoreError> {
        let text = self
            .read("last_heartbeat", app, &Keys::of(app).heartbeat, "heartbeat")
            .await?;
        text.map(|t| decode(app, "heartbeat", &t)).transpose()
    }

    async fn prune(&self, app: &AppKey, keep: usize) -> Result<usize, StoreError> {
        let keys = Keys::of(app);
        let dropped: u64 = self
            .run(Call {
                op: "prune",
                app,
                script: &self.scripts().prune,
                keys: vec![&keys.markers, &keys.meta],
                args: vec![app.scope_text(), keep.max(1).to_string()],
                confirm: Confirm::No,
            })
            .await?;
        Ok(usize::try_from(dropped).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let k = Keys::of(&AppKey::new("ns", "pi", super::super::Scope::new("u", 1)));
        assert_eq!(k.epoch, "spark:{ns/pi}:epoch");
        assert_eq!(k.markers, "spark:{ns/pi}:markers");
        assert_eq!(k.heartbeat, "spark:{ns/pi}:heartbeat");
        assert_eq!(k.meta, "spark:{ns/pi}:meta");
    }
}
