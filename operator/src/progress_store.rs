//! The state store of fenced restarts: one small trait, two backends.
//!
//! - [`kube::KubeStore`] (the default, needs nothing extra): one ConfigMap `<app>-progress` per
//!   application, every write a read → [`crate::fence`] rule → compare-and-swap on resourceVersion.
//! - [`redis::RedisStore`]: one Lua script per write operation doing check-and-write atomically,
//!   keys hash-tagged `spark:{<namespace>/<app>}:…` so all keys of an application share one Redis
//!   Cluster slot (a script may only touch keys of one slot).
//!
//! (Tests of callers use the same rules under a lock: the sandbox package's `MemoryStore`.)
//!
//! Every operation names the application's [`Scope`] (its uid and run) in its [`AppKey`]: a fence
//! for a new scope starts from nothing, and reads of another scope see nothing. Every write made
//! on behalf of a driver (`commit`, `heartbeat`) names the epoch the driver runs under and is
//! refused with [`StoreError::Fenced`] unless scope and epoch are the current ones; a refused write
//! leaves the store unchanged, and no driver write ever creates state. Times are passed in
//! (`now_ms`): the store never reads a clock.

use std::future::Future;

pub use crate::fence::{Heartbeat, Marker};

/// Kubernetes-native backend: compare-and-swap on one ConfigMap per application.
pub mod kube;
/// Redis backend: Lua check-and-write, hash-tagged keys.
pub mod redis;

/// Which application object, and which run of it, progress belongs to: the SparkApplication's
/// uid (an application deleted and created again under its name is another object) and its run
/// (`status.recoveryStatus.run`: a spec change and the next run of an `Always` application start
/// a new one). Written `<uid>/<run>`, as the agent reads it from `SPARK_RECOVERY_SCOPE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    /// The SparkApplication's uid.
    pub uid: String,
    /// The run of that object.
    pub run: u64,
}

impl Scope {
    /// The scope of run `run` of the object `uid`.
    pub fn new(uid: impl Into<String>, run: u64) -> Self {
        Self {
            uid: uid.into(),
            run,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.uid, self.run)
    }
}

/// A scope is not `<uid>/<run>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not <uid>/<run>")]
pub struct ParseScopeError {
    pub value: String,
}

impl std::str::FromStr for Scope {
    type Err = ParseScopeError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let bad = || ParseScopeError {
            value: value.to_owned(),
        };
        let (uid, run) = value.rsplit_once('/').ok_or_else(bad)?;
        let run = run.parse().map_err(|_| bad())?;
        let valid_uid = !uid.is_empty()
            && uid
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid_uid {
            return Err(bad());
        }
        Ok(Self::new(uid, run))
    }
}

/// The application a store entry belongs to: where it lives (namespace and name) and the scope
/// every operation is judged under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppKey {
    /// The SparkApplication's namespace.
    pub namespace: String,
    /// The SparkApplication's name.
    pub name: String,
    /// The object and run the progress belongs to.
    pub scope: Scope,
}

impl AppKey {
    /// The key of `namespace/name` under `scope`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, scope: Scope) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            scope,
        }
    }

    /// The scope as the store keeps it.
    pub fn scope_text(&self) -> String {
        self.scope.to_string()
    }
}

impl std::fmt::Display for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The write's epoch is not the current one; nothing was written.
    #[error("write for {app} under epoch {attempted} fenced, current epoch is {current}")]
    Fenced {
        /// The application.
        app: AppKey,
        /// The epoch the writer claimed.
        attempted: u64,
        /// The store's current epoch.
        current: u64,
    },
    /// The marker does not move progress forward; nothing was written.
    #[error("marker {seq} for {app} is not after the latest committed marker {latest}")]
    StaleMarker {
        /// The application.
        app: AppKey,
        /// The sequence number offered.
        seq: u64,
        /// The latest committed sequence number.
        latest: u64,
    },
    /// Compare-and-swap kept losing to concurrent writers (or the backend kept failing).
    #[error("{op} for {app} gave up after {attempts} conflicting attempts")]
    ConflictRetriesExhausted {
        /// The operation.
        op: &'static str,
        /// The application.
        app: AppKey,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The backend failed (connection, API error, script error).
    #[error("{op} for {app} failed in the store backend")]
    Backend {
        /// The operation.
        op: &'static str,
        /// The application.
        app: AppKey,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The stored data could not be decoded (edited by hand, or another program's format).
    #[error("stored progress for {app} is unreadable: {reason}")]
    Corrupt {
        /// The application.
        app: AppKey,
        /// What is wrong with it.
        reason: String,
    },
    /// A value the backend cannot represent exactly (Redis scripts compare numbers as doubles).
    #[error("{what} {value} for {app} exceeds the store's limit of 2^53")]
    OutOfRange {
        /// The application.
        app: AppKey,
        /// Which value.
        what: &'static str,
        /// The value.
        value: u64,
    },
}

impl StoreError {
    /// A stable label for metrics, events and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Fenced { .. } => "fenced",
            Self::StaleMarker { .. } => "stale_marker",
            Self::ConflictRetriesExhausted { .. } => "conflict_retries_exhausted",
            Self::Backend { .. } => "backend",
            Self::Corrupt { .. } => "corrupt",
            Self::OutOfRange { .. } => "out_of_range",
        }
    }

    /// Whether this is the answer a fenced driver gets.
    pub fn is_fenced(&self) -> bool {
        matches!(self, Self::Fenced { .. })
    }

    /// The store error for a refusal by the pure rules.
    pub fn rejected(app: &AppKey, r: crate::fence::Rejected) -> Self {
        match r {
            crate::fence::Rejected::Fenced { attempted, current } => Self::Fenced {
                app: app.clone(),
                attempted,
                current,
            },
            crate::fence::Rejected::StaleMarker { seq, latest } => Self::StaleMarker {
                app: app.clone(),
                seq,
                latest,
            },
        }
    }
}

/// The operations of the state store. Callers are generic (`S: ProgressStore`), the backend chosen
/// once at start (`operator run`, `operator agent`).
pub trait ProgressStore: Send + Sync {
    /// Fences the driver that ran under `observed` and returns the epoch for its successor (see
    /// [`crate::fence::advance_from`]: a retry after a crash returns the same epoch, and a new
    /// scope starts from nothing). The store keeps the application's progress tied to the
    /// application (the Kubernetes store: an ownerReference to its uid; Redis: an expiry).
    fn advance_epoch(
        &self,
        app: &AppKey,
        observed: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The current epoch ([`crate::fence::INITIAL_EPOCH`] for a scope never fenced).
    fn epoch(&self, app: &AppKey) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Commits a progress marker under `epoch`; [`StoreError::Fenced`] unless it is current.
    fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The latest committed marker, the one a restarted driver restores.
    fn latest(
        &self,
        app: &AppKey,
    ) -> impl Future<Output = Result<Option<Marker>, StoreError>> + Send;

    /// Records a heartbeat under `epoch`; [`StoreError::Fenced`] unless it is current.
    fn heartbeat(
        &self,
        app: &AppKey,
        epoch: u64,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The latest heartbeat.
    fn last_heartbeat(
        &self,
        app: &AppKey,
    ) -> impl Future<Output = Result<Option<Heartbeat>, StoreError>> + Send;

    /// Keeps the newest `keep` markers (at least one); returns how many were dropped.
    fn prune(
        &self,
        app: &AppKey,
        keep: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

/// Shared handles (an `Arc` held by the agent's HTTP handlers and its heartbeat task) are stores.
impl<S: ProgressStore> ProgressStore for std::sync::Arc<S> {
    fn advance_epoch(
        &self,
        app: &AppKey,
        observed: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).advance_epoch(app, observed)
    }
    fn epoch(&self, app: &AppKey) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).epoch(app)
    }
    fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).commit(app, epoch, seq, payload, now_ms)
    }
    fn latest(
        &self,
        app: &AppKey,
    ) -> impl Future<Output = Result<Option<Marker>, StoreError>> + Send {
        (**self).latest(app)
    }
    fn heartbeat(
        &self,
        app: &AppKey,
        epoch: u64,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).heartbeat(app, epoch, now_ms)
    }
    fn last_heartbeat(
        &self,
        app: &AppKey,
    ) -> impl Future<Output = Result<Option<Heartbeat>, StoreError>> + Send {
        (**self).last_heartbeat(app)
    }
    fn prune(
        &self,
        app: &AppKey,
        keep: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        (**self).prune(app, keep)
    }
}
