//! `operator agent`: the recovery agent, a native sidecar of the Spark driver.
//!
//! Start: connect to the state store, read the latest committed marker (retrying backend errors
//! with bounded backoff) and remember it as restored, then report ready on `GET /v1/ready`, the
//! startup probe that holds the driver container back until the restore finished. Then heartbeat
//! under the agent's epoch; a `FENCED` answer (to a heartbeat or a commit) fences the agent, and a
//! fenced agent refuses every write without touching the store while it keeps serving reads.
//! SIGTERM or SIGINT stop it gracefully with exit code 0, so it never holds the pod.
//!
//! The marker API listens on 127.0.0.1 only: it is for the driver in the same pod. The kubelet's
//! startup probe reaches it the same way, from inside the pod: `operator agent probe` ([`probe`]).
//!
//! Layout: [`config`] and [`state`] are pure (flags, validation, the answers and their rules);
//! [`api`] (axum) and `heartbeat` are the shells; this module wires them to a store and a listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use submission::error_chain::ErrorChain;

use tokio::net::TcpListener;
use tracing::{error, info, warn};

use crate::progress_store::kube::KubeStore;
use crate::progress_store::redis::{ConnectError, RedisStore};
use crate::progress_store::{AppKey, Marker, ProgressStore, StoreError};

/// The marker API's routes and handlers.
pub mod api;
/// Flags and `SPARK_RECOVERY_*` variables, validated.
pub mod config;
mod heartbeat;
/// `operator agent probe`: the startup probe, run inside the agent's container.
pub mod probe;
/// The agent's state and the rules its answers follow (pure).
pub mod state;

pub use config::{AgentAction, AgentArgs, AgentCommand, Config, ProbeArgs, StoreConfig};

/// How long one store call may take before the agent answers `STORE_UNAVAILABLE` (a commit) or
/// tries again (a heartbeat, the restore).
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long in-flight requests get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the agent serves, for [`serve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The application.
    pub app: AppKey,
    /// The epoch the driver runs under.
    pub epoch: u64,
    /// Time between heartbeats.
    pub heartbeat_interval: Duration,
    /// Bound on each store call.
    pub store_timeout: Duration,
}

impl Settings {
    /// Settings with the default heartbeat interval and store timeout.
    pub fn new(app: AppKey, epoch: u64) -> Self {
        Self {
            app,
            epoch,
            heartbeat_interval: Duration::from_millis(config::DEFAULT_HEARTBEAT_MILLIS),
            store_timeout: DEFAULT_STORE_TIMEOUT,
        }
    }
}

impl From<&Config> for Settings {
    fn from(c: &Config) -> Self {
        Self {
            heartbeat_interval: c.heartbeat_interval,
            ..Self::new(c.app.clone(), c.epoch)
        }
    }
}

/// The agent failed (its HTTP answers have their own errors in [`state`]).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The flags or environment are not usable.
    #[error("invalid agent configuration")]
    Configure {
        /// What is wrong.
        #[source]
        source: config::ConfigError,
    },
    /// The loopback port could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// No Kubernetes client configuration.
    #[error("cannot make the Kubernetes client")]
    KubeClient {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The Redis URL is invalid.
    #[error("cannot use the redis url")]
    RedisUrl {
        /// The connect error.
        #[source]
        source: ConnectError,
    },
    /// The latest marker cannot be restored, and retrying cannot help.
    #[error("cannot restore the latest marker of {app}")]
    Restore {
        /// The application.
        app: AppKey,
        /// The store error.
        #[source]
        source: StoreError,
    },
    /// The HTTP server stopped.
    #[error("the marker API server failed")]
    Serve {
        /// The server error.
        #[source]
        source: std::io::Error,
    },
}

impl AgentError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Configure { .. } => "configure",
            Self::Bind { .. } => "bind",
            Self::KubeClient { .. } => "kube_client",
            Self::RedisUrl { .. } => "redis_url",
            Self::Restore { .. } => "restore",
            Self::Serve { .. } => "serve",
        }
    }
}

/// State shared by the handlers and the heartbeat loop.
pub(crate) struct Shared<S> {
    app: AppKey,
    epoch: u64,
    store_timeout: Duration,
    /// Set once connected; the handlers answer `NOT_READY` until the restore finished anyway.
    store: OnceLock<S>,
    state: Mutex<AgentState>,
}

use state::AgentState;

impl<S> Shared<S> {
    fn new(settings: &Settings) -> Self {
        Self {
            app: settings.app.clone(),
            epoch: settings.epoch,
            store_timeout: settings.store_timeout,
            store: OnceLock::new(),
            state: Mutex::new(AgentState::new(settings.epoch)),
        }
    }

    /// The state; never held across an await.
    fn state(&self) -> MutexGuard<'_, AgentState> {
        // Every state method leaves the state consistent before it could panic (assignments come
        // last), so a poisoned lock still guards consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Milliseconds since the Unix epoch: the clock, read only by the shells.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Binds the marker API on 127.0.0.1:`port` (0 picks a free port); never on another interface.
pub async fn bind(port: u16) -> Result<TcpListener, AgentError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpListener::bind(addr)
        .await
        .map_err(|source| AgentError::Bind { addr, source })
}

/// Runs the agent on `listener` with `store` until `shutdown` completes: restore, ready, heartbeat,
/// marker API. Returns `Ok` after a graceful shutdown.
pub async fn serve<S, F>(
    listener: TcpListener,
    settings: Settings,
    store: S,
    shutdown: F,
) -> Result<(), AgentError>
where
    S: ProgressStore + 'static,
    F: Future<Output = ()>,
{
    serve_connecting(listener, settings, async { Ok(store) }, shutdown).await
}

/// [`serve`], connecting to the store while the API already answers (`NOT_READY`).
async fn serve_connecting<S, C, F>(
    listener: TcpListener,
    settings: Settings,
    connect: C,
    shutdown: F,
) -> Result<(), AgentError>
where
    S: ProgressStore + 'static,
    C: Future<Output = Result<S, AgentError>>,
    F: Future<Output = ()>,
{
    let shared = Arc::new(Shared::new(&settings));
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let router = api::router(shared.clone());
    let mut server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                // An error means the sender is gone, which is a stop too.
                let _ = stop_rx.wait_for(|stop| *stop).await;
            })
            .await
    });
    let outcome = tokio::select! {
        () = shutdown => {
            info!(app = %settings.app, epoch = settings.epoch, "shutting down");
            Ok(())
        }
        r = lifecycle(&shared, connect, settings.heartbeat_interval) => r.map(|never| match never {}),
        r = &mut server => {
            return match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(source)) => Err(AgentError::Serve { source }),
                Err(join) => Err(AgentError::Serve { source: std::io::Error::other(join) }),
            };
        }
    };
    // A send error means the server is already gone.
    let _ = stop_tx.send(true);
    match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(source))) => {
            warn!(error = %ErrorChain(&source), "marker API server failed at shutdown")
        }
        Ok(Err(join)) => warn!(error = %join, "marker API server task failed at shutdown"),
        Err(_elapsed) => {
            warn!("requests still in flight after the shutdown grace; dropping them");
            server.abort();
        }
    }
    outcome
}

/// Connect, restore, become ready, heartbeat until fenced, then keep serving reads.
async fn lifecycle<S, C>(
    shared: &Shared<S>,
    connect: C,
    heartbeat_interval: Duration,
) -> Result<Infallible, AgentError>
where
    S: ProgressStore + 'static,
    C: Future<Output = Result<S, AgentError>>,
{
    let store = connect.await?;
    let store = shared.store.get_or_init(|| store);
    let restored = restore(shared, store).await?;
    match &restored {
        Some(m) => info!(
            app = %shared.app,
            epoch = shared.epoch,
            seq = m.seq,
            from_epoch = m.epoch,
            "restored marker seq={} from epoch={}", m.seq, m.epoch
        ),
        None => info!(app = %shared.app, epoch = shared.epoch, "no marker committed yet"),
    }
    shared.state().restored(restored);
    info!(app = %shared.app, epoch = shared.epoch, "ready");
    heartbeat::run(shared, store, heartbeat_interval).await;
    Ok(std::future::pending::<Infallible>().await)
}

/// Reads the latest marker, retrying backend errors and timeouts with bounded backoff.
async fn restore<S: ProgressStore>(
    shared: &Shared<S>,
    store: &S,
) -> Result<Option<Marker>, AgentError> {
    let mut attempt: u32 = 0;
    loop {
        match tokio::time::timeout(shared.store_timeout, store.latest(&shared.app)).await {
            Ok(Ok(marker)) => return Ok(marker),
            Ok(Err(source)) if !state::restore_retryable(&source) => {
                error!(app = %shared.app, kind = source.kind(), error = %ErrorChain(&source), "cannot restore the latest marker");
                return Err(AgentError::Restore {
                    app: shared.app.clone(),
                    source,
                });
            }
            Ok(Err(e)) => {
                warn!(app = %shared.app, attempt, kind = e.kind(), error = %ErrorChain(&e), "reading the latest marker failed; retrying");
            }
            Err(_elapsed) => {
                warn!(app = %shared.app, attempt, "reading the latest marker timed out; retrying");
            }
        }
        tokio::time::sleep(state::backoff(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

/// Connects to Redis, retrying an unreachable server with bounded backoff.
async fn connect_redis(url: String, timeout: Duration) -> Result<RedisStore, AgentError> {
    let mut attempt: u32 = 0;
    loop {
        match tokio::time::timeout(timeout, RedisStore::connect(&url)).await {
            Ok(Ok(store)) => return Ok(store),
            Ok(Err(source @ ConnectError::Url(_))) => return Err(AgentError::RedisUrl { source }),
            Ok(Err(e)) => {
                warn!(attempt, kind = e.kind(), error = %ErrorChain(&e), "connecting to redis failed; retrying");
            }
            Err(_elapsed) => warn!(attempt, "connecting to redis timed out; retrying"),
        }
        tokio::time::sleep(state::backoff(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

/// Completes on SIGTERM (how Kubernetes stops a native sidecar once the driver is done) or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot handle SIGTERM; only SIGINT stops the agent gracefully");
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// `operator agent probe`: exit 0 when the agent on this pod's loopback is ready, else 1 with the
/// reason on standard error (the kubelet puts it in the `Unhealthy` event).
pub fn probe_main(args: &ProbeArgs) -> std::process::ExitCode {
    let timeout = Duration::from_millis(args.timeout_millis.max(1));
    match probe::probe(args.port, timeout) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", ErrorChain(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `operator agent`: validates `args`, binds 127.0.0.1, connects to the configured store and serves
/// until SIGTERM or SIGINT.
pub async fn run(args: AgentArgs) -> Result<(), AgentError> {
    let config = Config::try_from(args).map_err(|source| AgentError::Configure { source })?;
    let settings = Settings::from(&config);
    let listener = bind(config.port).await?;
    let addr = listener.local_addr().map_err(|source| AgentError::Bind {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, config.port)),
        source,
    })?;
    info!(app = %config.app, epoch = config.epoch, %addr, store = ?config.store_kind(), "recovery agent listening");
    match config.store {
        StoreConfig::Kubernetes => {
            let connect = async {
                kube::Client::try_default()
                    .await
                    .map(KubeStore::new)
                    .map_err(|source| AgentError::KubeClient { source })
            };
            serve_connecting(listener, settings, connect, shutdown_signal()).await
        }
        StoreConfig::Redis { url } => {
            let connect = connect_redis(url, settings.store_timeout);
            serve_connecting(listener, settings, connect, shutdown_signal()).await
        }
    }
}
