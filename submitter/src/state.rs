//! What every request path shares: the timed Kubernetes client, the access rules, the in-flight
//! creations, the metrics, and the watch caches. Plain data; built once by `serve` (or a test)
//! and cloned into each handler.

use std::sync::Arc;
use std::time::Duration;

use crate::caches::WatchCaches;
use crate::fairness::Budgets;
use crate::inflight::InFlight;
use crate::kube_api::KubeApi;
use crate::log_streams::LogStreams;
use crate::metrics::Metrics;
use crate::policy::Access;

/// Default time one API server call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `SPARK_USER` when the submission names no `--proxy-user` (spark-submit uses the client's OS
/// user, which a server does not have).
pub const DEFAULT_SPARK_USER: &str = "root";

/// Everything the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub kube: KubeApi,
    pub access: Access,
    pub in_flight: InFlight,
    pub metrics: Arc<Metrics>,
    pub spark_user: Arc<str>,
    /// The watch caches the status look-ups read; `None`: look-ups answer 503 (not synced).
    pub caches: Option<WatchCaches>,
    /// Where retention records live: the submitter's own namespace.
    pub record_namespace: Arc<str>,
    /// Each client identity's budget (none unless [`AppState::with_fairness`]).
    pub fairness: Budgets,
    /// How long a submission waits for the caches to show an object the API server says
    /// exists, before reading the objects live (only the number of requests depends on it).
    pub cache_catch_up: Duration,
    /// Submissions doing their work (building, talking to the API server) at once; admitted
    /// requests beyond wait their turn, holding only their connection and their body.
    pub work: Arc<tokio::sync::Semaphore>,
    /// The driver log streams open, per identity; closed all at once at shutdown.
    pub log_streams: LogStreams,
    /// How long a log request waits for a driver container that has not started yet, as
    /// `kubectl logs` waits (its `--pod-running-timeout`), before passing the API server's
    /// "waiting to start" on.
    pub log_start_wait: Duration,
    /// How long a kill's record keeps the submission killed (the retention of records).
    pub retention: Duration,
}

/// Default of [`AppState::work`]'s permits: what is built and in flight stays this many
/// submissions' worth of memory, however many clients are connected.
pub const DEFAULT_MAX_WORK: usize = 64;

/// Default of [`AppState::log_start_wait`]: `kubectl logs`' default `--pod-running-timeout`.
pub const DEFAULT_LOG_START_WAIT: Duration = Duration::from_secs(20);

/// Default of [`AppState::cache_catch_up`].
pub const DEFAULT_CACHE_CATCH_UP: Duration = Duration::from_secs(1);

impl AppState {
    /// The state for `client`; records go to the client's default namespace (in a cluster, the
    /// namespace the service runs in).
    pub fn new(client: kube::Client, access: Access) -> AppState {
        AppState {
            record_namespace: Arc::from(client.default_namespace()),
            kube: KubeApi::new(client, DEFAULT_CALL_TIMEOUT),
            access,
            in_flight: InFlight::default(),
            metrics: Arc::new(Metrics::new()),
            spark_user: Arc::from(DEFAULT_SPARK_USER),
            caches: None,
            fairness: Budgets::default(),
            cache_catch_up: DEFAULT_CACHE_CATCH_UP,
            work: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_WORK)),
            log_streams: LogStreams::default(),
            log_start_wait: DEFAULT_LOG_START_WAIT,
            retention: crate::record::DEFAULT_RETENTION,
        }
    }

    /// The same state allowing each identity `per_identity` open log streams.
    pub fn with_log_streams(mut self, per_identity: usize) -> AppState {
        self.log_streams = LogStreams::new(per_identity);
        self
    }

    /// The same state waiting up to `wait` for a driver to start before reading its log.
    pub fn with_log_start_wait(mut self, wait: Duration) -> AppState {
        self.log_start_wait = wait;
        self
    }

    /// The same state keeping kills' records for `retention`.
    pub fn with_retention(mut self, retention: Duration) -> AppState {
        self.retention = retention;
        self
    }

    /// The same state charging each client identity's requests to `budgets`.
    pub fn with_fairness(mut self, budgets: Budgets) -> AppState {
        self.fairness = budgets;
        self
    }

    /// The same state reading `caches` for status look-ups and readiness.
    pub fn with_caches(mut self, caches: WatchCaches) -> AppState {
        self.caches = Some(caches);
        self
    }

    /// The same state with another per-call timeout towards the API server.
    pub fn with_call_timeout(mut self, timeout: Duration) -> AppState {
        self.kube = KubeApi::new(self.kube.client().clone(), timeout);
        self
    }

    /// The same state keeping retention records in `namespace`.
    pub fn with_record_namespace(mut self, namespace: &str) -> AppState {
        self.record_namespace = Arc::from(namespace);
        self
    }

    /// The same state waiting up to `bound` for lagging caches (see [`AppState::cache_catch_up`]).
    pub fn with_cache_catch_up(mut self, bound: Duration) -> AppState {
        self.cache_catch_up = bound;
        self
    }

    pub fn with_spark_user(mut self, spark_user: &str) -> AppState {
        self.spark_user = Arc::from(spark_user);
        self
    }

    /// The caches, once they hold a complete first listing.
    pub fn synced_caches(&self) -> Option<&WatchCaches> {
        self.caches.as_ref().filter(|caches| caches.synced())
    }
}
