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

use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::{RedisError, Script};

use super::{AppKey, Heartbeat, Marker, ProgressStore, StoreError};
use crate::fence::INITIAL_EPOCH;

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
  if m.epoch == current and m.seq == seq and m.payload == ARGV[4] then return {'DUPLICATE', seq} end
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
    /// The URL is not a Redis URL.
    #[error("invalid redis url")]
    Url(#[source] RedisError),
    /// The server did not answer.
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

/// A Redis-backed store. Its connection manager reconnects after the connection drops (the call
/// that saw the drop fails and is retried by its caller) and is cheap to clone.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    scripts: std::sync::Arc<Scripts>,
    ttl: Duration,
}

struct Scripts {
    advance: Script,
    commit: Script,
    heartbeat: Script,
    prune: Script,
    read: Script,
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`).
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let client = ::redis::Client::open(url).map_err(ConnectError::Url)?;
        let conn = ConnectionManager::new(client)
            .await
            .map_err(ConnectError::Connect)?;
        Ok(Self::from_connection(conn))
    }

    /// Uses an existing connection.
    pub fn from_connection(conn: ConnectionManager) -> Self {
        Self {
            conn,
            scripts: std::sync::Arc::new(Scripts {
                advance: Script::new(ADVANCE),
                commit: Script::new(COMMIT),
                heartbeat: Script::new(HEARTBEAT),
                prune: Script::new(PRUNE),
                read: Script::new(READ),
            }),
            ttl: DEFAULT_TTL,
        }
    }

    /// How long an application's keys outlive its last write; the fence records it, so the
    /// agents' writes keep it too (at least a millisecond).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    fn scripts(&self) -> &Scripts {
        &self.scripts
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
        let mut conn = self.conn.clone();
        let mut inv = self.scripts().read.prepare_invoke();
        inv.key(&keys.meta).key(key).arg(app.scope_text()).arg(what);
        inv.invoke_async(&mut conn).await.map_err(backend(op, app))
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
        let mut conn = self.conn.clone();
        let mut inv = self.scripts().advance.prepare_invoke();
        for key in keys.all() {
            inv.key(key);
        }
        inv.arg(app.scope_text())
            .arg(observed)
            .arg(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX));
        let (epoch, moved): (u64, u8) = inv
            .invoke_async(&mut conn)
            .await
            .map_err(backend("advance_epoch", app))?;
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
        let mut conn = self.conn.clone();
        let mut inv = self.scripts().commit.prepare_invoke();
        for key in keys.all() {
            inv.key(key);
        }
        inv.arg(app.scope_text())
            .arg(epoch)
            .arg(seq)
            .arg(payload)
            .arg(marker);
        let (status, n): (String, u64) = inv
            .invoke_async(&mut conn)
            .await
            .map_err(backend("commit", app))?;
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
        let mut conn = self.conn.clone();
        let mut inv = self.scripts().heartbeat.prepare_invoke();
        for key in keys.all() {
            inv.key(key);
        }
        inv.arg(app.scope_text()).arg(epoch).arg(hb);
        let (status, n): (String, u64) = inv
            .invoke_async(&mut conn)
            .await
            .map_err(backend("heartbeat", app))?;
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
        let mut conn = self.conn.clone();
        let mut inv = self.scripts().prune.prepare_invoke();
        inv.key(&keys.markers)
            .key(&keys.meta)
            .arg(app.scope_text())
            .arg(keep.max(1));
        let dropped: u64 = inv
            .invoke_async(&mut conn)
            .await
            .map_err(backend("prune", app))?;
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
