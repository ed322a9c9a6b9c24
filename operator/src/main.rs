//! The operator binary: `crd` prints the CRD, `run` runs the controller, `agent` is the recovery
//! agent sidecar. (The demo and the simulated driver are the `sandbox` package's, not shipped.)

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use operator::controller::{self, RunConfig};
use operator::leader::{LeaderConfig, run_elected};
use operator::metrics::Metrics;
use operator::reconciler::Health;
use operator::recovery::{RecoverySettings, RecoveryStore};
use operator::state_machine::Settings;
use submitter_client::ClientConfig;

/// SparkApplication operator.
#[derive(Debug, Parser)]
#[command(name = "operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions (SparkApplication, ScheduledSparkApplication,
    /// SparkConnect) as one YAML stream.
    Crd,
    /// Reconcile SparkApplications, submitting through the submitter over mTLS.
    Run(Box<RunArgs>),
    /// The recovery agent: a native sidecar serving the driver's progress markers on 127.0.0.1;
    /// `agent probe` is its startup probe.
    Agent(operator::agent::AgentCommand),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Kubeconfig file; without it, in-cluster config or `$KUBECONFIG`.
    #[arg(long, env = "OPERATOR_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The submitter, `https://host:port`.
    #[arg(long, env = "OPERATOR_SUBMITTER_URL")]
    submitter_url: String,
    /// Client certificate (PEM) presented to the submitter.
    #[arg(long, env = "OPERATOR_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// Client key (PEM).
    #[arg(long, env = "OPERATOR_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// CA bundle (PEM) that verifies the submitter.
    #[arg(long, env = "OPERATOR_CA")]
    ca: Option<PathBuf>,
    /// `--master` put in every argv: the API server drivers talk to.
    #[arg(
        long,
        env = "OPERATOR_MASTER",
        default_value = "k8s://https://kubernetes.default.svc:443"
    )]
    master: String,
    /// Watch only these namespaces, comma-separated (default: all). A namespace-scoped operator
    /// needs list and watch permission in these namespaces only.
    #[arg(
        long,
        alias = "namespace",
        env = "OPERATOR_NAMESPACES",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Apply the CRD at start (server-side apply, never by force: a CRD another manager owns is
    /// reported, not overwritten); needs RBAC on CRDs. Off by default: install it explicitly
    /// (`operator crd | kubectl apply --server-side -f -`, or the chart).
    #[arg(long, env = "OPERATOR_INSTALL_CRD", default_value_t = false, action = clap::ArgAction::Set)]
    install_crd: bool,
    /// Create each application's `<app>-ui-svc` Service for the Spark UI (as the widely used
    /// operator does by default).
    #[arg(long, env = "OPERATOR_ENABLE_UI_SERVICE", default_value_t = true, action = clap::ArgAction::Set)]
    enable_ui_service: bool,
    /// An Ingress for each UI Service at this URL (`{{$appName}}`, `{{$appNamespace}}` and
    /// `{{$appId}}` are replaced), e.g. `{{$appName}}.spark.example.com`.
    #[arg(long, env = "OPERATOR_INGRESS_URL_FORMAT")]
    ingress_url_format: Option<String>,
    /// The `ingressClassName` of the Ingresses the operator creates.
    #[arg(long, env = "OPERATOR_INGRESS_CLASS_NAME")]
    ingress_class_name: Option<String>,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    #[arg(long, env = "OPERATOR_PROBE_LISTEN", default_value = "0.0.0.0:8081")]
    probe_listen: SocketAddr,
    /// Seconds a driver may be missing from the cache after its submission before a live read.
    #[arg(
        long,
        env = "OPERATOR_DRIVER_CREATION_GRACE_SECONDS",
        default_value_t = 10
    )]
    driver_creation_grace_seconds: u64,
    /// TTL for terminated apps whose spec sets none (default: keep them).
    #[arg(long, env = "OPERATOR_DEFAULT_TTL_SECONDS")]
    default_ttl_seconds: Option<i64>,
    /// Event reporter instance and leader identity, normally the pod name.
    #[arg(long, env = "POD_NAME")]
    instance: Option<String>,
    /// Reconcile only while holding the leader Lease (run several replicas safely).
    #[arg(long, env = "OPERATOR_LEADER_ELECT", default_value_t = false, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, env = "OPERATOR_LEASE_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Name of the leader Lease.
    #[arg(
        long,
        env = "OPERATOR_LEASE_NAME",
        default_value = "spark-operator-leader"
    )]
    lease_name: String,
    /// Seconds a silent leader keeps the lease.
    #[arg(long, env = "OPERATOR_LEASE_DURATION_SECONDS", default_value_t = 15)]
    lease_duration_seconds: u64,
    #[command(flatten)]
    recovery: RecoveryArgs,
}

/// Fenced restarts (`spec.restartPolicy.recovery`).
#[derive(Debug, Args)]
struct RecoveryArgs {
    /// State store of fenced restarts: `kubernetes` (one ConfigMap per app), a `redis://` URL
    /// (one server), a `redis+cluster://host:port,host:port` URL (a Redis Cluster; fences and
    /// commits wait for a replica, `?wait_replicas=N&wait_timeout_ms=T`), or `none` to turn the
    /// feature off (apps asking for it then fail with a message).
    #[arg(long, env = "OPERATOR_RECOVERY_STORE", default_value = "kubernetes")]
    recovery_store: RecoveryStore,
    /// Image of the recovery agent sidecar: the operator's own image (entrypoint `operator`).
    #[arg(
        long,
        env = "OPERATOR_AGENT_IMAGE",
        default_value = concat!("spark-operator:", env!("CARGO_PKG_VERSION"))
    )]
    agent_image: String,
    /// Loopback port of the agent inside the driver pod (free in a Spark driver pod).
    #[arg(long, env = "OPERATOR_AGENT_PORT", default_value_t = operator::agent::config::DEFAULT_PORT)]
    agent_port: u16,
    /// Agent heartbeat interval.
    #[arg(long, env = "OPERATOR_AGENT_HEARTBEAT_MILLIS", default_value_t = 1000)]
    agent_heartbeat_millis: u64,
    /// Seconds without a heartbeat after which a running driver is fenced and replaced.
    #[arg(long, env = "OPERATOR_HEARTBEAT_TIMEOUT_SECONDS", default_value_t = 30)]
    heartbeat_timeout_seconds: i64,
    /// Seconds the Redis store keeps an application's progress after its last write (the
    /// Kubernetes store's ConfigMap goes with its application instead).
    #[arg(
        long,
        env = "OPERATOR_RECOVERY_REDIS_TTL_SECONDS",
        default_value_t = operator::progress_store::redis::DEFAULT_TTL.as_secs()
    )]
    recovery_redis_ttl_seconds: u64,
}

impl RecoveryArgs {
    fn settings(&self) -> Option<RecoverySettings> {
        let RecoveryStore::Store(store) = &self.recovery_store else {
            return None;
        };
        Some(RecoverySettings {
            store: store.clone(),
            agent_image: self.agent_image.clone(),
            agent_port: self.agent_port,
            heartbeat_millis: self.agent_heartbeat_millis.max(1),
            heartbeat_timeout_seconds: self.heartbeat_timeout_seconds.max(1),
            redis_ttl: Duration::from_secs(self.recovery_redis_ttl_seconds.max(1)),
        })
    }
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            let yaml = operator::crd::crds_yaml()?;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(yaml.as_bytes())
                .and_then(|()| stdout.flush())
                .context("cannot write the CRD to stdout")?;
        }
        Command::Run(args) => {
            init_tracing();
            let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
            runtime.block_on(run(*args))?;
        }
        Command::Agent(operator::agent::AgentCommand {
            action: Some(operator::agent::AgentAction::Probe(probe)),
            ..
        }) => return Ok(operator::agent::probe_main(&probe)),
        Command::Agent(operator::agent::AgentCommand { args, .. }) => {
            init_tracing();
            // One thread is plenty for a sidecar that answers one driver.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the runtime")?;
            runtime
                .block_on(operator::agent::run(args))
                .context("recovery agent failed")?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if std::io::stdout().is_terminal() {
        builder.init();
    } else {
        builder.json().init();
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .context("cannot use the kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("cannot find a Kubernetes configuration")?,
    };
    let client = submitter_client::kube_connect::client(config)
        .context("cannot make the Kubernetes client")?;
    let metrics = Arc::new(Metrics::new());
    let mut submitter = ClientConfig::new(args.submitter_url);
    submitter.ca = args.ca;
    submitter.cert = args.tls_cert;
    submitter.key = args.tls_key;
    let run_config = RunConfig {
        submitter,
        master: args.master,
        install_crd: args.install_crd,
        namespaces: args
            .namespaces
            .into_iter()
            .map(|ns| ns.trim().to_owned())
            .filter(|ns| !ns.is_empty())
            .collect(),
        settings: Settings {
            driver_creation_grace: Duration::from_secs(args.driver_creation_grace_seconds),
            default_ttl_seconds: args.default_ttl_seconds,
            recovery: args.recovery.settings(),
            ui: operator::ui::UiSettings {
                ui_service: args.enable_ui_service,
                ingress_url_format: args.ingress_url_format.clone(),
                ingress_class_name: args.ingress_class_name.clone(),
            },
            ..Settings::default()
        },
        instance: args.instance.clone(),
        metrics: metrics.clone(),
        schedule_clock: operator::scheduled_controller::ScheduleClock::system(),
    };
    let health = Arc::new(Health::default());
    let (_, probes) = controller::serve_probes(args.probe_listen, health.clone(), metrics).await?;
    tokio::spawn(probes);
    let shutdown = async {
        use tokio::signal::unix::{SignalKind, signal};
        // Kubernetes stops pods with SIGTERM; a terminal with Ctrl-C. A failed handler means we
        // cannot be stopped gracefully; run until killed.
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    if args.leader_elect {
        let identity = args
            .instance
            .unwrap_or_else(|| format!("operator-{}", std::process::id()));
        let leader = LeaderConfig {
            namespace: args.lease_namespace,
            lease_name: args.lease_name,
            identity,
            lease_duration: Duration::from_secs(args.lease_duration_seconds.max(1)),
            // Renew about three times per lease duration, so one lost renewal is not fatal.
            retry_period: Duration::from_secs(args.lease_duration_seconds.max(3) / 3),
        };
        run_elected(client, run_config, leader, health, shutdown).await?;
    } else {
        controller::run(client, run_config, health, shutdown).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(extra: &[&str]) -> RunArgs {
        let args = [
            "operator",
            "run",
            "--submitter-url",
            "https://submitter:8443",
        ];
        let cli = Cli::try_parse_from(args.iter().chain(extra)).unwrap();
        match cli.command {
            Command::Run(args) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_crd_is_installed_only_when_asked() {
        assert!(!run_args(&[]).install_crd);
        assert!(run_args(&["--install-crd", "true"]).install_crd);
    }

    #[test]
    fn namespaces_are_a_comma_separated_list_and_none_means_all() {
        assert!(run_args(&[]).namespaces.is_empty());
        assert_eq!(
            run_args(&["--namespaces", "team-a,team-b"]).namespaces,
            ["team-a", "team-b"]
        );
        assert_eq!(run_args(&["--namespace", "solo"]).namespaces, ["solo"]);
    }

    #[test]
    fn an_unknown_recovery_store_is_refused_by_the_parser() {
        let args = [
            "operator",
            "run",
            "--submitter-url",
            "https://s:1",
            "--recovery-store",
            "etcd",
        ];
        let err = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    }
}
