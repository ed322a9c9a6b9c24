//! `submitter serve`: flags, start-up checks, and the running service (mTLS accept loop,
//! sweeper, graceful shutdown on SIGTERM or Ctrl-C: open log streams end first, then open
//! connections drain).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tracing::{info, warn};

use super::{ServiceConfig, app};
use crate::caches::WatchCaches;
use crate::policy::{Access, LoadPolicyError, Policy};
use crate::state::{AppState, DEFAULT_SPARK_USER};
use crate::sweep::{self, SweepConfig};
use crate::tls::{ClientAuth, LoadTlsError, ReloadingTlsConfig, ServeOptions, TlsFiles, Transport};

/// Flags of `submitter serve`; each can also come from the environment.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Kubeconfig to reach the API server; absent: in-cluster (or the usual inference).
    #[arg(long, env = "SUBMITTER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "SUBMITTER_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Server certificate chain, PEM (re-read when it changes).
    #[arg(
        long,
        env = "SUBMITTER_TLS_CERT",
        required_unless_present = "insecure_dev"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Server private key, PEM.
    #[arg(
        long,
        env = "SUBMITTER_TLS_KEY",
        required_unless_present = "insecure_dev"
    )]
    pub tls_key: Option<PathBuf>,
    /// CA bundle client certificates must chain to, PEM.
    #[arg(
        long,
        env = "SUBMITTER_CLIENT_CA",
        required_unless_present = "insecure_dev"
    )]
    pub client_ca: Option<PathBuf>,
    /// Certificate revocation lists of the client CAs, PEM (re-read when it changes): a client
    /// certificate they revoke is refused, on new and on open connections.
    #[arg(long, env = "SUBMITTER_CLIENT_CRL", conflicts_with = "insecure_dev")]
    pub client_crl: Option<PathBuf>,
    /// Policy file (YAML): which client identity may submit where.
    #[arg(
        long,
        env = "SUBMITTER_POLICY",
        required_unless_present = "insecure_dev"
    )]
    pub policy: Option<PathBuf>,
    /// Threads that run the service's tasks. One by default: a submission is short and mostly
    /// waits on the API server, and with more threads most of its steps (a request, an API
    /// answer, a watch event) wake another thread, which costs more CPU than it saves
    /// (docs/submitter-service.md, "Threads"). Raise it for TLS handshakes or cached duplicates
    /// beyond one core's worth (about 10,000/s).
    #[arg(long, env = "SUBMITTER_WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: u16,
    /// Requests served at once; beyond it 503 SUBMITTER_OVERLOADED with Retry-After.
    #[arg(long, env = "SUBMITTER_MAX_CONCURRENCY", default_value_t = super::DEFAULT_MAX_CONCURRENCY)]
    pub max_concurrency: usize,
    /// Requests one client identity may have served at once; beyond it that identity gets 503
    /// SUBMITTER_OVERLOADED with Retry-After. Default: half of --max-concurrency, so one
    /// flooding client never fills the service. 0: no per-identity cap.
    #[arg(long, env = "SUBMITTER_MAX_IN_FLIGHT_PER_IDENTITY")]
    pub max_in_flight_per_identity: Option<usize>,
    /// Requests a second one client identity may make on average (0: no rate limit).
    #[arg(long, env = "SUBMITTER_RATE_PER_IDENTITY", default_value_t = 0.0)]
    pub rate_per_identity: f64,
    /// Requests one client identity may make in a burst when `--rate-per-identity` is set.
    #[arg(long, env = "SUBMITTER_BURST_PER_IDENTITY", default_value_t = 20)]
    pub burst_per_identity: u32,
    /// Seconds a request may take before the client gets a 503 (the creation goes on).
    #[arg(long, env = "SUBMITTER_REQUEST_TIMEOUT", default_value_t = super::DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub request_timeout: u64,
    /// Serve `/metrics` to clients without a certificate (a Prometheus scrape); by default it
    /// needs one, like the API routes. `/healthz` and `/readyz` never do.
    #[arg(long, env = "SUBMITTER_ANONYMOUS_METRICS")]
    pub anonymous_metrics: bool,
    /// Plain HTTP without client certificates, for development only; see docs/submitter.md.
    #[arg(long, env = "SUBMITTER_INSECURE_DEV")]
    pub insecure_dev: bool,
    /// Seconds before an ownerless ConfigMap whose driver pod never came is removed.
    #[arg(long, env = "SUBMITTER_SWEEP_GRACE", default_value_t = sweep::DEFAULT_GRACE.as_secs())]
    pub sweep_grace: u64,
    /// How long a succeeded driver's success is retained after its pod is gone (24h, 90m, 3600s).
    #[arg(long, env = "SUBMITTER_RETENTION", default_value = "24h",
        value_parser = crate::status::parse_duration)]
    pub retention: Duration,
    /// Namespace of the retention records (default: the namespace the service runs in, or the
    /// kubeconfig's); the service needs create/delete on ConfigMaps there.
    #[arg(long, env = "SUBMITTER_RECORD_NAMESPACE")]
    pub record_namespace: Option<String>,
    /// File the audit lines (one per submission attempt and status look-up) are appended to, as
    /// JSON; absent: they go with the other logs, target `submitter::audit`.
    #[arg(long, env = "SUBMITTER_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Driver log streams one client identity may have open at once; beyond it that identity
    /// gets 429 TOO_MANY_LOG_STREAMS with Retry-After.
    #[arg(long, env = "SUBMITTER_MAX_LOG_STREAMS_PER_IDENTITY",
        default_value_t = crate::log_streams::DEFAULT_MAX_PER_IDENTITY)]
    pub max_log_streams_per_identity: usize,
    /// SPARK_USER of drivers whose submission names no --proxy-user.
    #[arg(long, env = "SUBMITTER_SPARK_USER", default_value = DEFAULT_SPARK_USER)]
    pub spark_user: String,
}

/// Why the service could not start.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error("cannot read the kubeconfig {path}")]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot configure the Kubernetes client")]
    ConfigureKube {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot load the policy")]
    LoadPolicy(#[source] LoadPolicyError),
    #[error("cannot load the TLS files")]
    LoadTls(#[source] LoadTlsError),
    #[error("--tls-cert, --tls-key and --client-ca are required without --insecure-dev")]
    MissingTlsFiles,
    #[error("--policy is required without --insecure-dev")]
    MissingPolicy,
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl ServeError {
    pub fn kind(&self) -> &'static str {
        match self {
            ServeError::ReadKubeconfig { .. } => "read_kubeconfig",
            ServeError::ConfigureKube { .. } => "configure_kube",
            ServeError::LoadPolicy(_) => "load_policy",
            ServeError::LoadTls(_) => "load_tls",
            ServeError::MissingTlsFiles => "missing_tls_files",
            ServeError::MissingPolicy => "missing_policy",
            ServeError::Listen { .. } => "listen",
        }
    }
}

async fn kube_client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, ServeError> {
    let configure =
        |source: Box<dyn std::error::Error + Send + Sync>| ServeError::ConfigureKube { source };
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                ServeError::ReadKubeconfig {
                    path: path.clone(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| configure(Box::new(e)))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| configure(Box::new(e)))?,
    };
    submitter_client::kube_connect::client(config).map_err(|e| configure(Box::new(e)))
}

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> Result<(), ServeError> {
    let policy = args
        .policy
        .as_ref()
        .map(|path| Policy::load(path).map(Arc::new))
        .transpose()
        .map_err(ServeError::LoadPolicy)?;
    let (access, transport) = if args.insecure_dev {
        // Decided: no certificates, so every client is the identity "*"; a policy, if given,
        // still applies to it (an entry for "*"), else everything is allowed.
        warn!(
            policy = policy.is_some(),
            "--insecure-dev: plain HTTP, no client identities; clients are \"*\" to the policy, \
             and without a policy every submission is allowed. Development only."
        );
        if args.tls_cert.is_some() || args.tls_key.is_some() || args.client_ca.is_some() {
            warn!("--insecure-dev ignores the TLS files given");
        }
        (Access::InsecureDev(policy), Transport::InsecureDev)
    } else {
        let (Some(cert), Some(key), Some(client_ca)) =
            (args.tls_cert, args.tls_key, args.client_ca)
        else {
            return Err(ServeError::MissingTlsFiles);
        };
        let policy = policy.ok_or(ServeError::MissingPolicy)?;
        let files = TlsFiles {
            cert,
            key,
            client_ca,
        };
        // Asked for, not required: a client without one gets a 401 in the envelope from every
        // API route instead of a handshake failure, and probes work without one.
        let tls = ReloadingTlsConfig::with_client_crl(files, args.client_crl, ClientAuth::Optional)
            .map_err(ServeError::LoadTls)?;
        (Access::Policy(policy), Transport::Tls(Arc::new(tls)))
    };
    let client = kube_client(args.kubeconfig.as_ref()).await?;
    let record_namespace = args
        .record_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let budgets = crate::fairness::Budgets::new(crate::fairness::BudgetConfig {
        max_in_flight: args
            .max_in_flight_per_identity
            .unwrap_or((args.max_concurrency / 2).max(1)),
        rate: args.rate_per_identity.max(0.0),
        burst: args.burst_per_identity,
    });
    let state = AppState::new(client.clone(), access)
        .with_fairness(budgets)
        .with_spark_user(&args.spark_user)
        .with_record_namespace(&record_namespace)
        .with_retention(args.retention)
        .with_log_streams(args.max_log_streams_per_identity);
    let config = ServiceConfig {
        max_concurrency: args.max_concurrency,
        request_timeout: Duration::from_secs(args.request_timeout),
        anonymous_metrics: args.anonymous_metrics,
    };
    let caches = WatchCaches::start(&client);
    let state = state.with_caches(caches.clone());
    let recorder = tokio::spawn(crate::status::run_recorder(
        client.clone(),
        caches.clone(),
        crate::status::RecordConfig {
            namespace: record_namespace,
            retention: args.retention,
        },
    ));
    let sweeper = tokio::spawn(sweep::run(
        client,
        caches,
        state.in_flight.clone(),
        state.metrics.clone(),
        SweepConfig {
            grace: Duration::from_secs(args.sweep_grace),
            retention: args.retention,
            ..SweepConfig::default()
        },
    ));
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    info!(%addr, max_concurrency = config.max_concurrency, request_timeout_secs = args.request_timeout, "submitter serving");
    // Followed logs never end on their own: they end first, so draining waits for none.
    let shutdown = state.log_streams.clone().close_on(shutdown_signal());
    crate::tls::serve(
        listener,
        transport,
        app(state, &config),
        ServeOptions::default(),
        shutdown,
    )
    .await;
    sweeper.abort();
    recorder.abort();
    info!("submitter stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    info!("shutting down: no new connections, open ones drain");
}
