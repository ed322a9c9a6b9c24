//! The stack under chaos: submitter instances and operator replicas, each on its own tokio
//! runtime so that killing one stops all of its tasks at once (its watches, its in-flight
//! requests, its leader-election loop), as kill -9 stops a process; and a TCP balancer in front
//! of the submitters, as a Service spreads connections over the ready replicas.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use operator::leader::{LeaderConfig, run_elected};
use operator::reconciler::Health;
use submitter::caches::WatchCaches;
use submitter::policy::{Access, Policy};
use submitter::service::ServiceConfig;
use submitter::state::AppState;
use submitter::tls::{ClientAuth, ReloadingTlsConfig, ServeOptions, TlsFiles, Transport};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use crate::Sandbox;

/// The operator replicas' Lease.
pub const LEASE: &str = "spark-operator-leader";

/// How long a new submitter instance may take to sync its caches before it is counted as failed.
const READY_WAIT: Duration = Duration::from_secs(30);

/// A part of the stack could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartPartError {
    #[error("cannot build a runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot make a Kubernetes client")]
    Client(#[source] kubesim::cluster::StartError),
    #[error("cannot load the submitter's TLS material")]
    Tls(#[source] submitter::tls::LoadTlsError),
    #[error("cannot parse the submitter's policy")]
    Policy(#[source] submitter::policy::LoadPolicyError),
    #[error("cannot listen on loopback")]
    Listen(#[source] std::io::Error),
    #[error("the submitter instance did not become ready")]
    NotReady,
}

impl StartPartError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Runtime(_) => "runtime",
            Self::Client(_) => "client",
            Self::Tls(_) => "tls",
            Self::Policy(_) => "policy",
            Self::Listen(_) => "listen",
            Self::NotReady => "not_ready",
        }
    }
}

/// A runtime of its own, shut down without waiting when dropped.
struct Process(Option<Runtime>);

impl Process {
    fn new(name: &str) -> Result<Process, StartPartError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()
            .map(|runtime| Process(Some(runtime)))
            .map_err(StartPartError::Runtime)
    }

    fn runtime(&self) -> Option<&Runtime> {
        self.0.as_ref()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A submitter instance, as `submitter serve` wires one (caches, recorder, sweeper, mTLS).
pub struct SubmitterInstance {
    pub port: u16,
    /// What its `/metrics` shows (open log streams, say).
    pub metrics: Arc<submitter::metrics::Metrics>,
    _process: Process,
}

/// The orphan sweep's grace in the chaos stack: short, so the end check can wait it out.
pub const SWEEP_GRACE: Duration = Duration::from_secs(10);
/// The sweep's pause between passes.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

impl SubmitterInstance {
    /// Starts an instance and waits until its caches synced and it listens.
    pub async fn start(sandbox: &Sandbox, name: &str) -> Result<SubmitterInstance, StartPartError> {
        let process = Process::new(name)?;
        let Some(runtime) = process.runtime() else {
            return Err(StartPartError::NotReady);
        };
        let client = {
            let _inside = runtime.enter();
            sandbox.cluster.client().map_err(StartPartError::Client)?
        };
        let policy = Arc::new(Policy::parse(crate::POLICY).map_err(StartPartError::Policy)?);
        let files = TlsFiles {
            cert: sandbox.dir().join("server.crt"),
            key: sandbox.dir().join("server.key"),
            client_ca: sandbox.dir().join("ca.crt"),
        };
        let tls =
            ReloadingTlsConfig::new(files, ClientAuth::Required).map_err(StartPartError::Tls)?;
        let (ready, port) = oneshot::channel::<Result<u16, StartPartError>>();
        let (metrics_out, metrics_in) = oneshot::channel();
        runtime.spawn(async move {
            let caches = WatchCaches::start(&client);
            let state =
                AppState::new(client.clone(), Access::Policy(policy)).with_caches(caches.clone());
            let _ = metrics_out.send(state.metrics.clone());
            tokio::spawn(submitter::status::run_recorder(
                client.clone(),
                caches.clone(),
                submitter::status::RecordConfig {
                    namespace: state.record_namespace.to_string(),
                    retention: Duration::from_secs(3600),
                },
            ));
            tokio::spawn(submitter::sweep::run(
                client,
                caches.clone(),
                state.in_flight.clone(),
                state.metrics.clone(),
                submitter::sweep::SweepConfig {
                    grace: SWEEP_GRACE,
                    interval: SWEEP_INTERVAL,
                    ..Default::default()
                },
            ));
            if !matches!(
                tokio::time::timeout(READY_WAIT, caches.ready()).await,
                Ok(Ok(()))
            ) {
                let _ = ready.send(Err(StartPartError::NotReady));
                return;
            }
            let listener = match TcpListener::bind("127.0.0.1:0").await {
                Ok(listener) => listener,
                Err(e) => {
                    let _ = ready.send(Err(StartPartError::Listen(e)));
                    return;
                }
            };
            match listener.local_addr() {
                Ok(addr) => {
                    let _ = ready.send(Ok(addr.port()));
                }
                Err(e) => {
                    let _ = ready.send(Err(StartPartError::Listen(e)));
                    return;
                }
            }
            let router = submitter::service::app(state, &ServiceConfig::default());
            submitter::tls::serve(
                listener,
                Transport::Tls(Arc::new(tls)),
                router,
                ServeOptions::default(),
                std::future::pending(),
            )
            .await;
        });
        let port = port.await.map_err(|_| StartPartError::NotReady)??;
        let metrics = metrics_in.await.map_err(|_| StartPartError::NotReady)?;
        Ok(SubmitterInstance {
            port,
            metrics,
            _process: process,
        })
    }
}

/// An operator replica behind leader election.
pub struct OperatorReplica {
    pub health: Arc<Health>,
    _process: Process,
}

impl OperatorReplica {
    /// Starts a replica named `identity` with `config`; it does not wait to lead.
    pub fn start(
        sandbox: &Sandbox,
        identity: &str,
        mut config: operator::controller::RunConfig,
    ) -> Result<OperatorReplica, StartPartError> {
        let process = Process::new(identity)?;
        let Some(runtime) = process.runtime() else {
            return Err(StartPartError::NotReady);
        };
        let client = {
            let _inside = runtime.enter();
            sandbox.cluster.client().map_err(StartPartError::Client)?
        };
        let health = Arc::new(Health::default());
        config.instance = Some(identity.into());
        let leader = LeaderConfig {
            namespace: crate::NAMESPACE.into(),
            lease_name: LEASE.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
        };
        runtime.spawn({
            let health = health.clone();
            async move {
                if let Err(error) =
                    run_elected(client, config, leader, health, std::future::pending()).await
                {
                    tracing::warn!(%error, "operator replica stopped");
                }
            }
        });
        Ok(OperatorReplica {
            health,
            _process: process,
        })
    }
}

/// The submitters' backends by instance: `None` while an instance is down.
pub type Backends = Arc<Mutex<Vec<Option<u16>>>>;

/// A TCP balancer on loopback: each connection goes to the next live backend, round robin.
pub struct Balancer {
    pub port: u16,
    pub backends: Backends,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Balancer {
    pub async fn start(instances: usize) -> Result<Balancer, StartPartError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(StartPartError::Listen)?;
        let port = listener
            .local_addr()
            .map_err(StartPartError::Listen)?
            .port();
        let backends: Backends = Arc::new(Mutex::new(vec![None; instances]));
        let task = tokio::spawn({
            let backends = backends.clone();
            async move {
                let mut next = 0usize;
                loop {
                    let Ok((inbound, _)) = listener.accept().await else {
                        // Out of descriptors, say: pause rather than spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let live: Vec<u16> = backends
                        .lock()
                        .map(|b| b.iter().flatten().copied().collect())
                        .unwrap_or_default();
                    if live.is_empty() {
                        // No ready replica: the connection is refused, as a Service without
                        // endpoints refuses it.
                        continue;
                    }
                    next = next.wrapping_add(1);
                    let backend = live[next % live.len()];
                    tokio::spawn(forward(inbound, backend));
                }
            }
        });
        Ok(Balancer {
            port,
            backends,
            task,
        })
    }

    /// Marks instance `index` up on `port` or down (`None`).
    pub fn set(&self, index: usize, port: Option<u16>) {
        if let Ok(mut backends) = self.backends.lock()
            && let Some(slot) = backends.get_mut(index)
        {
            *slot = port;
        }
    }
}

async fn forward(mut inbound: TcpStream, backend: u16) {
    let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", backend)).await else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
}
