//! The sandbox: the whole stack on this machine, for the demo, the end-to-end tests and the
//! benchmarks. An in-process kubesim whose kubelet runs the recovery agent and the staged driver
//! as real processes, the submitter served over mTLS on loopback with certificates made at start,
//! and the operator's controller with fenced restarts on. Nothing to install: the agent and the
//! driver are the `sandbox` binary (`sandbox agent`, the operator's own agent code, and
//! `sandbox staged-driver`). Nothing here ships: the operator and submitter binaries link
//! neither kubesim nor the test CA.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use kubesim::kubelet::ImageCommand;
use kubesim::{Cluster, ClusterConfig};
use serde_json::{Value, json};
use submitter::caches::WatchCaches;
use submitter::policy::{Access, Policy};
use submitter::service::ServiceConfig;
use submitter::state::AppState;
use submitter::tls::{ClientAuth, ReloadingTlsConfig, ServeOptions, TlsFiles, Transport};
use submitter_client::ClientConfig;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use operator::controller::{RunConfig, RunError};
use operator::crd::SparkApplication;
use operator::metrics::Metrics;
use operator::reconciler::Health;
use operator::recovery::{RecoverySettings, StoreKind};
use operator::state_machine::Settings;

/// The sandbox's certificate authority.
pub mod certs;

/// `sandbox demo`: a recovery-enabled application whose driver is killed mid-run, narrated.
pub mod demo;

/// `sandbox demo --spark`: the fenced restart with real Spark driver and executor pods.
pub mod spark_demo;

/// `sandbox staged-driver`: the simulated staged Spark driver the demo and the tests run.
pub mod staged_driver;

/// A real `redis-server` on loopback: the one launcher every test and benchmark shares.
pub mod redis;

/// A real Redis Cluster on loopback (three masters, three replicas), beside the one-server launcher.
pub mod redis_cluster;

/// The state store's rules under a lock, for tests of its callers.
pub mod memory_store;

/// The drivers' `spark` service account and its Role, as the chart grants them.
pub mod driver_account;

/// `sandbox chaos`: the stack under a seeded fault schedule, with invariants checked.
pub mod chaos;

/// Agent ports spread by pod name while kubesim's pods share one loopback (sandbox only).
pub mod agent_ports;

/// The image kubesim runs as `sandbox agent` (the args `agent` come from the sidecar spec).
pub const AGENT_IMAGE: &str = "spark-recovery-agent:sandbox";
/// The image kubesim runs as `sandbox staged-driver`, ignoring Spark's driver arguments.
pub const DRIVER_IMAGE: &str = "spark-staged-driver:sandbox";
/// The operator's identity towards the submitter.
pub const OPERATOR_IDENTITY: &str = "spark-operator.spark.svc";
/// Where the sandbox's applications live.
pub const NAMESPACE: &str = "default";

/// The submitter's policy in the sandbox: the operator's identity may submit anywhere.
pub const POLICY: &str = r#"
clients:
  - identity: spark-operator.spark.svc
    namespaces: ["*"]
    serviceAccounts: ["*"]
"#;

/// How long [`Sandbox::start_operator`] waits for the operator's caches.
const READY_WAIT: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The `sandbox` binary, which kubesim runs for the agent (`sandbox agent`, the operator's agent
    /// code) and the driver (`sandbox staged-driver`) images.
    pub sandbox_bin: PathBuf,
    /// The fenced-restart state store.
    pub store: StoreKind,
    /// The operator-wide heartbeat window.
    pub heartbeat_timeout_seconds: i64,
    /// The agents' heartbeat interval.
    pub agent_heartbeat_millis: u64,
    /// How kubesim networks pods: their own network when this process is root (as in a
    /// cluster), else the host's. A Redis store on this machine's loopback keeps them on the
    /// host's network: pods have no route out of the cluster (see [`Sandbox::start`]).
    pub network: kubesim::net::NetworkMode,
    /// kubesim's Spark image mapping (`apache/spark:*`, `spark:*` run from the local pyspark);
    /// `None`: those images are scripted.
    pub spark: Option<kubesim::kubelet::spark_image::SparkImageConfig>,
}

impl SandboxConfig {
    /// The Kubernetes store, a 5 s heartbeat window and 500 ms heartbeats.
    pub fn new(sandbox_bin: PathBuf) -> SandboxConfig {
        SandboxConfig {
            sandbox_bin,
            store: StoreKind::Kubernetes,
            heartbeat_timeout_seconds: 5,
            agent_heartbeat_millis: 500,
            network: if running_as_root() {
                kubesim::net::NetworkMode::Pod
            } else {
                kubesim::net::NetworkMode::Host
            },
            spark: None,
        }
    }

    /// Real Spark: pods on their own network (driver and executors reach each other and the
    /// API server as in a cluster) and the Spark image run from the local pyspark, with this
    /// source tree's `tests/programs` laid at `/opt/spark/work-dir` (so
    /// `local:///opt/spark/work-dir/pi.py` names `tests/programs/pi.py`) and the recovery
    /// client `docs/examples/spark_recovery.py` beside them. Needs root, Java 17 and pyspark.
    pub fn real_spark(sandbox_bin: PathBuf) -> SandboxConfig {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"));
        let work_dir = PathBuf::from(SPARK_WORK_DIR);
        let spark = kubesim::kubelet::spark_image::SparkImageConfig {
            files: BTreeMap::from([
                (work_dir.clone(), source.join("programs")),
                (
                    work_dir.join("spark_recovery.py"),
                    source.join("../docs/examples/spark_recovery.py"),
                ),
            ]),
            ..Default::default()
        };
        SandboxConfig {
            network: kubesim::net::NetworkMode::Pod,
            spark: Some(spark),
            // A JVM pair on two shared cores can starve an agent for seconds: a real run's
            // restarts come from the kills a test makes, not from a late heartbeat.
            heartbeat_timeout_seconds: 30,
            ..SandboxConfig::new(sandbox_bin)
        }
    }
}

/// The Spark image's working directory, where [`SandboxConfig::real_spark`] lays the programs.
pub const SPARK_WORK_DIR: &str = kubesim::kubelet::spark_image::WORK_DIR;

/// Whether this process runs as root (kubesim's pod network needs it).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// A task of the sandbox's submitter, stopped with the sandbox.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The sandbox failed to start.
#[derive(Debug, thiserror::Error)]
pub enum StartSandboxError {
    #[error("cannot make a temporary folder")]
    TempDir(#[source] std::io::Error),
    #[error("cannot start kubesim")]
    Cluster(#[source] kubesim::cluster::StartError),
    #[error(transparent)]
    DriverAccount(driver_account::GrantDriverAccountError),
    #[error("the submitter's watch caches did not sync within {0:?}")]
    CachesNotSynced(Duration),
    #[error("cannot make the mTLS certificates")]
    Certificates(#[source] rcgen::Error),
    #[error("cannot write {path}")]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot load the submitter's TLS material")]
    Tls(#[source] submitter::tls::LoadTlsError),
    #[error("cannot parse the submitter's policy")]
    Policy(#[source] submitter::policy::LoadPolicyError),
    #[error("cannot listen on loopback for the submitter")]
    Listen(#[source] std::io::Error),
}

impl StartSandboxError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TempDir(_) => "temp_dir",
            Self::Cluster(_) => "cluster",
            Self::DriverAccount(_) => "driver_account",
            Self::CachesNotSynced(_) => "caches_not_synced",
            Self::Certificates(_) => "certificates",
            Self::WriteFile { .. } => "write_file",
            Self::Tls(_) => "tls",
            Self::Policy(_) => "policy",
            Self::Listen(_) => "listen",
        }
    }
}

/// The operator could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartOperatorError {
    #[error("the operator stopped while starting")]
    Stopped(#[source] RunError),
    #[error("the operator's task failed while starting")]
    Task(#[source] tokio::task::JoinError),
    #[error("the operator's caches did not sync within {0:?}")]
    NotReady(Duration),
}

impl StartOperatorError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stopped(_) => "stopped",
            Self::Task(_) => "task",
            Self::NotReady(_) => "not_ready",
        }
    }
}

/// A running operator; dropping it aborts it, as a crash would.
pub struct OperatorHandle {
    pub health: Arc<Health>,
    task: JoinHandle<Result<(), RunError>>,
}

impl Drop for OperatorHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A staged application: what the driver does and how often it may be restarted.
#[derive(Debug, Clone)]
pub struct StagedApp {
    pub name: String,
    pub stages: u64,
    pub stage_millis: u64,
    pub retries: i32,
    /// Seconds between a failure and the rerun.
    pub retry_interval_seconds: i64,
    /// `spec.restartPolicy.recovery.enabled`.
    pub recovery: bool,
    /// The name of its journal and output files ([`Sandbox::journal_path`]); another application
    /// object of the same name can keep its own.
    pub files: String,
}

impl StagedApp {
    /// Six stages of 800 ms, three retries one second apart, recovery on.
    pub fn new(name: &str) -> StagedApp {
        StagedApp {
            name: name.to_owned(),
            stages: 6,
            stage_millis: 800,
            retries: 3,
            retry_interval_seconds: 1,
            recovery: true,
            files: name.to_owned(),
        }
    }
}

/// kubesim, a submitter over mTLS and the recovery settings; the operator is started separately
/// so a test can crash and restart it.
pub struct Sandbox {
    pub cluster: Cluster,
    pub client: kube::Client,
    pub recovery: RecoverySettings,
    ca: certs::Ca,
    dir: tempfile::TempDir,
    submitter_port: u16,
    _stop_submitter: oneshot::Sender<()>,
    _recorder: AbortOnDrop,
}

impl Sandbox {
    /// Starts kubesim and the submitter on loopback.
    pub async fn start(config: SandboxConfig) -> Result<Sandbox, StartSandboxError> {
        let dir = tempfile::Builder::new()
            .prefix("spark-sandbox-")
            .tempdir()
            .map_err(StartSandboxError::TempDir)?;
        let bin = config.sandbox_bin.display().to_string();
        let mut env = BTreeMap::from([("RUST_LOG".to_owned(), "info".to_owned())]);
        // Pods have no route out of the cluster, so agents reach a Redis on this machine's
        // loopback only from the host's network.
        let network = match config.store {
            StoreKind::Redis { .. } => kubesim::net::NetworkMode::Host,
            _ => config.network,
        };
        // On the host's network every agent would take the one port: spread them.
        if network == kubesim::net::NetworkMode::Host {
            env.insert(
                agent_ports::ENV_BASE.to_owned(),
                agent_ports::BASE.to_string(),
            );
            env.insert(
                agent_ports::ENV_SPAN.to_owned(),
                agent_ports::SPAN.to_string(),
            );
            // The sandbox's folder is unique among the sandboxes alive at once.
            env.insert(
                agent_ports::ENV_SALT.to_owned(),
                dir.path().display().to_string(),
            );
        }
        let image = |args: &[&str]| ImageCommand {
            command: std::iter::once(bin.clone())
                .chain(args.iter().map(|a| (*a).to_owned()))
                .collect(),
            env: env.clone(),
        };
        // The agent's startup probe runs `operator agent probe` inside its container, as in the
        // operator's image: there, `operator` is this binary, first on the container's PATH.
        let image_bin = dir.path().join("agent-image-bin");
        std::fs::create_dir_all(&image_bin).map_err(|source| StartSandboxError::WriteFile {
            path: image_bin.clone(),
            source,
        })?;
        let operator_link = image_bin.join("operator");
        std::os::unix::fs::symlink(&config.sandbox_bin, &operator_link).map_err(|source| {
            StartSandboxError::WriteFile {
                path: operator_link.clone(),
                source,
            }
        })?;
        let mut agent_image = image(&[]);
        let path = std::env::var("PATH").unwrap_or_default();
        agent_image
            .env
            .insert("PATH".to_owned(), format!("{}:{path}", image_bin.display()));
        let cluster = Cluster::start(ClusterConfig {
            images: BTreeMap::from([
                (AGENT_IMAGE.to_owned(), agent_image),
                (DRIVER_IMAGE.to_owned(), image(&["staged-driver", "--"])),
            ]),
            work_dir: Some(dir.path().join("kubesim")),
            network,
            spark: config.spark.clone(),
            ..ClusterConfig::default()
        })
        .await
        .map_err(StartSandboxError::Cluster)?;
        let client = cluster.client().map_err(StartSandboxError::Cluster)?;
        driver_account::grant(&client, "default")
            .await
            .map_err(StartSandboxError::DriverAccount)?;

        let ca = certs::Ca::new("sandbox ca").map_err(StartSandboxError::Certificates)?;
        let server = ca.server().map_err(StartSandboxError::Certificates)?;
        let operator = ca
            .client(OPERATOR_IDENTITY)
            .map_err(StartSandboxError::Certificates)?;
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text)
                .map(|()| path.clone())
                .map_err(|source| StartSandboxError::WriteFile { path, source })
        };
        let files = TlsFiles {
            cert: write("server.crt", &server.cert)?,
            key: write("server.key", &server.key)?,
            client_ca: write("ca.crt", &ca.pem())?,
        };
        write("operator.crt", &operator.cert)?;
        write("operator.key", &operator.key)?;
        let policy = Arc::new(Policy::parse(POLICY).map_err(StartSandboxError::Policy)?);
        // As `submitter serve` runs: status look-ups and duplicates read the watch caches, and
        // succeeded drivers get their retention records. Synced before the sandbox is handed
        // out, so no test counts the first listing as its own.
        let caches = WatchCaches::start(&client);
        let state =
            AppState::new(client.clone(), Access::Policy(policy)).with_caches(caches.clone());
        let recorder = tokio::spawn(submitter::status::run_recorder(
            client.clone(),
            caches.clone(),
            submitter::status::RecordConfig {
                namespace: state.record_namespace.to_string(),
                retention: Duration::from_secs(3600),
            },
        ));
        let recorder = AbortOnDrop(recorder);
        tokio::time::timeout(READY_WAIT, caches.ready())
            .await
            .map_err(|_| StartSandboxError::CachesNotSynced(READY_WAIT))?
            .map_err(|_| StartSandboxError::CachesNotSynced(READY_WAIT))?;
        let router = submitter::service::app(state, &ServiceConfig::default());
        let tls =
            ReloadingTlsConfig::new(files, ClientAuth::Required).map_err(StartSandboxError::Tls)?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(StartSandboxError::Listen)?;
        let submitter_port = listener
            .local_addr()
            .map_err(StartSandboxError::Listen)?
            .port();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(submitter::tls::serve(
            listener,
            Transport::Tls(Arc::new(tls)),
            router,
            ServeOptions::default(),
            async {
                // A dropped sender stops the server too.
                let _ = stopped.await;
            },
        ));
        let recovery = RecoverySettings {
            store: config.store,
            agent_image: AGENT_IMAGE.to_owned(),
            heartbeat_millis: config.agent_heartbeat_millis,
            heartbeat_timeout_seconds: config.heartbeat_timeout_seconds,
            ..RecoverySettings::default()
        };
        Ok(Sandbox {
            cluster,
            client,
            recovery,
            ca,
            dir,
            submitter_port,
            _stop_submitter: stop,
            _recorder: recorder,
        })
    }

    /// Replaces the operator's client certificate files with a new certificate for `identity`,
    /// as cert-manager rotates a Secret: each file written aside, then renamed over the old one.
    pub fn rotate_operator_certificate(&self, identity: &str) -> Result<(), StartSandboxError> {
        let issued = self
            .ca
            .client(identity)
            .map_err(StartSandboxError::Certificates)?;
        for (name, text) in [
            ("operator.crt", &issued.cert),
            ("operator.key", &issued.key),
        ] {
            let path = self.dir().join(name);
            let aside = self.dir().join(format!("{name}.new"));
            std::fs::write(&aside, text)
                .and_then(|()| std::fs::rename(&aside, &path))
                .map_err(|source| StartSandboxError::WriteFile { path, source })?;
        }
        Ok(())
    }

    /// Replaces the submitter's server certificate files with a newly issued one, as
    /// cert-manager rotates a Secret (each file written aside, then renamed over the old one).
    pub fn rotate_server_certificate(&self) -> Result<(), StartSandboxError> {
        let issued = self.ca.server().map_err(StartSandboxError::Certificates)?;
        for (name, text) in [("server.crt", &issued.cert), ("server.key", &issued.key)] {
            let path = self.dir().join(name);
            let aside = self.dir().join(format!("{name}.new"));
            std::fs::write(&aside, text)
                .and_then(|()| std::fs::rename(&aside, &path))
                .map_err(|source| StartSandboxError::WriteFile { path, source })?;
        }
        Ok(())
    }

    /// The sandbox's folder (certificates, kubesim's pods, the drivers' output files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The file a staged app's drivers append each committed stage to (`app`: its `files`).
    pub fn output_path(&self, app: &str) -> PathBuf {
        self.dir().join(format!("{app}.output"))
    }

    /// The file a staged app's drivers append each of their log lines to (`app`: its `files`).
    pub fn journal_path(&self, app: &str) -> PathBuf {
        self.dir().join(format!("{app}.journal"))
    }

    /// `operator run`'s configuration for this sandbox, fenced restarts on.
    pub fn run_config(&self) -> RunConfig {
        let mut submitter = ClientConfig::new(format!(
            "https://localhost:{}/api/v1/spark-submit",
            self.submitter_port
        ));
        submitter.ca = Some(self.dir().join("ca.crt"));
        submitter.cert = Some(self.dir().join("operator.crt"));
        submitter.key = Some(self.dir().join("operator.key"));
        submitter.max_retries = 2;
        submitter.initial_backoff = Duration::from_millis(100);
        submitter.request_timeout = Duration::from_secs(10);
        RunConfig {
            submitter,
            master: "k8s://https://kubernetes.default.svc:443".into(),
            install_crd: true,
            namespaces: Vec::new(),
            settings: Settings {
                driver_creation_grace: Duration::from_secs(2),
                default_ttl_seconds: None,
                unsynced_requeue: Duration::from_millis(200),
                deletion_requeue: Duration::from_millis(200),
                recovery: Some(self.recovery.clone()),
                ui: operator::ui::UiSettings::default(),
            },
            instance: Some("sandbox".into()),
            metrics: Arc::new(Metrics::new()),
            schedule_clock: operator::scheduled_controller::ScheduleClock::system(),
        }
    }

    /// Starts the operator with [`Sandbox::run_config`] and waits until its caches synced.
    pub async fn start_operator(&self) -> Result<OperatorHandle, StartOperatorError> {
        self.start_operator_with(self.run_config()).await
    }

    /// Starts the operator with `config` and waits until its caches synced.
    pub async fn start_operator_with(
        &self,
        config: RunConfig,
    ) -> Result<OperatorHandle, StartOperatorError> {
        let health = Arc::new(Health::default());
        let task = tokio::spawn(operator::controller::run(
            self.client.clone(),
            config,
            health.clone(),
            std::future::pending(),
        ));
        let mut handle = OperatorHandle { health, task };
        let started = Instant::now();
        while !handle.health.ready() {
            if handle.task.is_finished() {
                return match (&mut handle.task).await {
                    Ok(Ok(())) => Err(StartOperatorError::NotReady(started.elapsed())),
                    Ok(Err(e)) => Err(StartOperatorError::Stopped(e)),
                    Err(e) => Err(StartOperatorError::Task(e)),
                };
            }
            if started.elapsed() > READY_WAIT {
                return Err(StartOperatorError::NotReady(READY_WAIT));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(handle)
    }

    /// The SparkApplication of a staged app in [`NAMESPACE`].
    pub fn staged_app(&self, app: &StagedApp) -> Result<SparkApplication, serde_json::Error> {
        let conf = |name: &str| format!("spark.kubernetes.driverEnv.{name}");
        let manifest = json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": app.name, "namespace": NAMESPACE},
            "spec": {
                "type": "Scala",
                "mode": "cluster",
                "image": DRIVER_IMAGE,
                "sparkVersion": "4.0.0",
                "mainClass": "org.example.StagedJob",
                "mainApplicationFile": "local:///opt/staged-job.jar",
                "sparkConf": {
                    conf("STAGES"): app.stages.to_string(),
                    conf("STAGE_MILLIS"): app.stage_millis.to_string(),
                    conf("OUTPUT"): self.output_path(&app.files).display().to_string(),
                    conf("JOURNAL"): self.journal_path(&app.files).display().to_string(),
                },
                "restartPolicy": {
                    "type": "OnFailure",
                    "onFailureRetries": app.retries,
                    "onFailureRetryInterval": app.retry_interval_seconds,
                    "onSubmissionFailureRetries": app.retries,
                    "onSubmissionFailureRetryInterval": app.retry_interval_seconds,
                    "recovery": {"enabled": app.recovery},
                },
                // The agent beside the driver writes the progress as the driver's account.
                "driver": {"cores": 1, "memory": "512m", "serviceAccount": driver_account::NAME},
                "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            },
        });
        serde_json::from_value(manifest)
    }

    /// Creates a staged app.
    pub async fn create_staged_app(
        &self,
        app: &StagedApp,
    ) -> Result<SparkApplication, kube::Error> {
        let manifest = self.staged_app(app).map_err(kube::Error::SerdeError)?;
        Api::<SparkApplication>::namespaced(self.client.clone(), NAMESPACE)
            .create(&PostParams::default(), &manifest)
            .await
    }
}

/// What a staged app's drivers did, read back from their journal and output files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StagedRun {
    /// `(stage, epoch)` of every stage a driver started, in order.
    pub started: Vec<(u64, u64)>,
    /// `(stage, epoch)` of every stage whose output was published (committed), in order.
    pub committed: Vec<(u64, u64)>,
    /// `(stage, epoch)` of every commit a driver tried and was refused `FENCED`.
    pub fenced: Vec<(u64, u64)>,
    /// `(restored stage, epoch)` of every driver start; `None` when nothing was committed yet.
    pub restored: Vec<(Option<u64>, u64)>,
}

impl StagedRun {
    /// Parses the journal (every driver's log lines) and the output (published stages).
    pub fn parse(journal: &str, output: &str) -> StagedRun {
        let mut run = StagedRun::default();
        for line in journal.lines() {
            let mut words = line.split_whitespace();
            let event = words.next().unwrap_or("");
            let fields: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
            let epoch = fields.get("epoch").and_then(|e| e.parse().ok());
            let stage = fields.get("stage").copied();
            let (Some(epoch), Some(stage)) = (epoch, stage) else {
                continue;
            };
            match event {
                "start" => run.started.extend(stage.parse().ok().map(|s| (s, epoch))),
                "fenced" => run.fenced.extend(stage.parse().ok().map(|s| (s, epoch))),
                "restored" => run.restored.push((stage.parse().ok(), epoch)),
                _ => {}
            }
        }
        for line in output.lines() {
            let fields: BTreeMap<&str, &str> = line
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            let stage = fields.get("stage").and_then(|s| s.parse().ok());
            let epoch = fields.get("epoch").and_then(|e| e.parse().ok());
            if let (Some(stage), Some(epoch)) = (stage, epoch) {
                run.committed.push((stage, epoch));
            }
        }
        run
    }

    /// Reads and parses a staged app's files (missing files read as empty).
    pub fn read(sandbox: &Sandbox, app: &str) -> StagedRun {
        let text = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        StagedRun::parse(
            &text(sandbox.journal_path(app)),
            &text(sandbox.output_path(app)),
        )
    }

    /// The first stage the latest epoch's driver started.
    pub fn resumed_from_stage(&self) -> Option<u64> {
        let last = self.started.iter().map(|(_, e)| *e).max()?;
        self.started
            .iter()
            .find(|(_, e)| *e == last)
            .map(|(stage, _)| *stage)
    }

    /// Stages started under more than one epoch (work done again).
    pub fn stages_redone(&self) -> Vec<u64> {
        let mut epochs: BTreeMap<u64, std::collections::BTreeSet<u64>> = BTreeMap::new();
        for (stage, epoch) in &self.started {
            epochs.entry(*stage).or_default().insert(*epoch);
        }
        epochs
            .into_iter()
            .filter(|(_, e)| e.len() > 1)
            .map(|(stage, _)| stage)
            .collect()
    }
}

/// A JSON value for a staged run summary; the demo prints it last.
pub fn summary(app: &SparkApplication, run: &StagedRun, stages: u64) -> Value {
    let status = app.status.clone().unwrap_or_default();
    let recovery = status.recovery_status.clone().unwrap_or_default();
    json!({
        "app": app.metadata.name,
        "state": status.app_state.state,
        "epoch": recovery.epoch,
        "restoredFromEpoch": recovery.restored_from_epoch,
        "stages": stages,
        "resumedFromStage": run.resumed_from_stage(),
        "stagesRedone": run.stages_redone().len(),
        "stagesCommitted": run.committed.len(),
        "fencedCommits": run.fenced.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOURNAL: &str = "restored stage=none epoch=0
start stage=1 epoch=0
commit stage=1 epoch=0
start stage=2 epoch=0
commit stage=2 epoch=0
start stage=3 epoch=0
restored stage=2 epoch=1
start stage=3 epoch=1
commit stage=3 epoch=1
fenced stage=3 epoch=0
done stages=3 epoch=1
";
    const OUTPUT: &str = "stage=1 epoch=0\nstage=2 epoch=0\nstage=3 epoch=1\n";

    #[test]
    fn a_journal_tells_where_the_rerun_resumed_and_what_was_done_twice() {
        let run = StagedRun::parse(JOURNAL, OUTPUT);
        assert_eq!(run.resumed_from_stage(), Some(3));
        assert_eq!(run.stages_redone(), vec![3]);
        assert_eq!(run.committed, vec![(1, 0), (2, 0), (3, 1)]);
        assert_eq!(run.fenced, vec![(3, 0)]);
        assert_eq!(run.restored, vec![(None, 0), (Some(2), 1)]);
    }

    #[test]
    fn an_empty_journal_resumed_nowhere() {
        let run = StagedRun::parse("", "garbage\n");
        assert_eq!(run.resumed_from_stage(), None);
        assert!(run.stages_redone().is_empty());
        assert!(run.committed.is_empty());
    }
}
