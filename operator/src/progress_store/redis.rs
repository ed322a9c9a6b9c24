//! Redis backend: every write is one Lua script that checks the epoch and writes in one atomic
//! step (Redis runs a script without interleaving other commands), mirroring the rules of
//! [`crate::fence`]. Keys are `spark:{<namespace>/<app>}:epoch|markers|heartbeat`: the `{…}` hash tag
//! puts all keys of one application in one Redis Cluster slot, which a multi-key script requires.
//!
//! Layout: `epoch` a decimal string (absent = epoch 0); `markers` a list of [`Marker`] JSON, oldest
//! first; `heartbeat` one [`Heartbeat`] JSON. Scripts compare numbers as Lua doubles, so epochs and
//! sequence numbers above 2^53 are refused before they reach Redis.

use ::redis::aio::ConnectionManager;
use ::redis::{RedisError, Script};

use super::{AppKey, Heartbeat, Marker, ProgressStore, StoreError};
use crate::fence::INITIAL_EPOCH;

/// The largest integer a Lua double holds exactly.
const MAX_EXACT: u64 = 1 << 53;

/// Advance: bump only from the observed epoch, jump past an epoch the store lost, else keep.
const ADVANCE: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local observed = tonumber(ARGV[1])
if current == observed then
  current = current + 1
elseif current < observed then
  current = observed + 1
else
  return {current, 0}
end
redis.call('SET', KEYS[1], current)
return {current, 1}
";

/// Commit: fenced unless current; the exact repeat of the latest marker is a no-op; progress only
/// moves forward. ARGV: epoch, seq, payload, marker JSON (built by Rust, never re-encoded here).
const COMMIT: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) ~= current then return {'FENCED', current} end
local seq = tonumber(ARGV[2])
local last = redis.call('LINDEX', KEYS[2], -1)
if last then
  local m = cjson.decode(last)
  if m.epoch == current and m.seq == seq and m.payload == ARGV[3] then return {'DUPLICATE', seq} end
  if seq <= m.seq then return {'STALE', m.seq} end
end
redis.call('RPUSH', KEYS[2], ARGV[4])
return {'OK', seq}
";

/// Heartbeat: fenced unless current. ARGV: epoch, heartbeat JSON.
const HEARTBEAT: &str = r"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) ~= current then return {'FENCED', current} end
redis.call('SET', KEYS[2], ARGV[2])
return {'OK', current}
";

/// Prune: one script so a concurrent commit cannot slip between the length read and the trim.
const PRUNE: &str = r"
local len = redis.call('LLEN', KEYS[1])
local keep = tonumber(ARGV[1])
if len <= keep then return 0 end
redis.call('LTRIM', KEYS[1], len - keep, -1)
return len - keep
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
        }
    }
}

/// A Redis-backed store. Its connection manager reconnects after the connection drops (the call
/// that saw the drop fails and is retried by its caller) and is cheap to clone.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    scripts: std::sync::Arc<Scripts>,
}

struct Scripts {
    advance: Script,
    commit: Script,
    heartbeat: Script,
    prune: Script,
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
            }),
        }
    }

    fn scripts(&self) -> &Scripts {
        &self.scripts
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
        let (epoch, moved): (u64, u8) = self
            .scripts()
            .advance
            .key(&keys.epoch)
            .arg(observed)
            .invoke_async(&mut conn)
            .await
            .map_err(backend("advance_epoch", app))?;
        tracing::debug!(app = %app, observed, epoch, moved = moved == 1, "advance epoch");
        Ok(epoch)
    }

    async fn epoch(&self, app: &AppKey) -> Result<u64, StoreError> {
        let mut conn = self.conn.clone();
        let text: Option<String> = ::redis::cmd("GET")
            .arg(Keys::of(app).epoch)
            .query_async(&mut conn)
            .await
            .map_err(backend("epoch", app))?;
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
        inv.key(&keys.epoch)
            .key(&keys.markers)
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
        let mut conn = self.conn.clone();
        let text: Option<String> = ::redis::cmd("LINDEX")
            .arg(Keys::of(app).markers)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .map_err(backend("latest", app))?;
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
        inv.key(&keys.epoch).key(&keys.heartbeat).arg(epoch).arg(hb);
        let (status, n): (String, u64) = inv
            .invoke_async(&mut conn)
            .await
            .map_err(backend("heartbeat", app))?;
        answer(app, epoch, 0, &status, n)
    }

    async fn last_heartbeat(&self, app: &AppKey) -> Result<Option<Heartbeat>, StoreError> {
        let mut conn = self.conn.clone();
        let text: Option<String> = ::redis::cmd("GET")
            .arg(Keys::of(app).heartbeat)
            .query_async(&mut conn)
            .await
            .map_err(backend("last_heartbeat", app))?;
        text.map(|t| decode(app, "heartbeat", &t)).transpose()
    }

    async fn prune(&self, app: &AppKey, keep: usize) -> Result<usize, StoreError> {
        let mut conn = self.conn.clone();
        let dropped: u64 = self
            .scripts()
            .prune
            .key(Keys::of(app).markers)
            .arg(keep.max(1))
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
        let k = Keys::of(&AppKey::new("ns", "pi"));
        assert_eq!(k.epoch, "spark:{ns/pi}:epoch");
        assert_eq!(k.markers, "spark:{ns/pi}:markers");
        assert_eq!(k.heartbeat, "spark:{ns/pi}:heartbeat");
    }
}
