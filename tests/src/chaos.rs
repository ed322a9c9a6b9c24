//! The chaos soak: the whole stack (several submitter instances behind a balancer, operator
//! replicas behind leader election, kubesim, the agents, optionally Redis) under a random
//! workload and a random fault schedule drawn from one seed, with invariants checked while it
//! runs and at the end. See docs/chaos.md.
//!
//! The parts, bottom up: `schedule` (the faults, drawn from the seed), `memory` (the process's
//! resident memory), `invariants` (their tally and the pure checks), `ledger` (what the
//! workload was answered), `stack` (the replicas and the balancer), `log_follow` (a driver's
//! log followed through the submitter), `workload` (applications and REST submissions),
//! `faults` (what each fault does and undoes), `monitor` (the checks while it runs),
//! `end_checks`, `report`; `run` here ties them together.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use operator::recovery::StoreKind;
use serde_json::json;
use tokio::sync::watch;

use crate::redis::RedisServer;
use crate::{Sandbox, SandboxConfig};

pub mod end_checks;
pub mod faults;
pub mod invariants;
pub mod ledger;
pub mod log_follow;
pub mod memory;
pub mod monitor;
pub mod report;
pub mod schedule;
pub mod stack;
pub mod workload;

use faults::Stack;
use invariants::Tally;
use ledger::Ledger;
pub use report::Report;
use schedule::Fault;
use stack::Balancer;
use workload::JOB_NAMESPACES;
use workload::submissions::Users;

/// What to run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    /// How long faults are injected and the workload runs.
    pub duration: Duration,
    /// How long, after that, the applications get to end before the terminal check.
    pub drain: Duration,
    /// The Redis store (and its restarts) instead of the Kubernetes store.
    pub redis: bool,
    pub submitters: usize,
    pub operators: usize,
    /// Mean pause between two faults.
    pub mean_gap: Duration,
    /// At most this many applications not yet terminal at once (two shared cores).
    pub max_live_apps: usize,
    pub stage_millis: u64,
    /// The `sandbox` binary (kubesim runs it for the agent and the staged driver).
    pub sandbox_bin: PathBuf,
}

impl ChaosConfig {
    pub fn new(sandbox_bin: PathBuf, seed: u64, duration: Duration) -> ChaosConfig {
        ChaosConfig {
            seed,
            duration,
            drain: Duration::from_secs(60),
            redis: false,
            submitters: 3,
            operators: 2,
            mean_gap: Duration::from_secs(3),
            max_live_apps: 4,
            stage_millis: 500,
            sandbox_bin,
        }
    }

    /// What the schedule draws from on a cluster of `nodes` nodes.
    pub fn shape(&self, nodes: usize) -> schedule::Shape {
        schedule::Shape {
            operators: self.operators,
            submitters: self.submitters,
            nodes,
            namespaces: JOB_NAMESPACES.len(),
            redis: self.redis,
            mean_gap: self.mean_gap,
        }
    }

    /// The fault schedule this configuration replays.
    pub fn schedule(&self, nodes: usize) -> Vec<(Duration, Fault)> {
        schedule::generate(self.seed, self.duration, self.shape(nodes))
    }
}

/// The soak could not run (a violation is not an error: it is in the report).
#[derive(Debug, thiserror::Error)]
pub enum RunChaosError {
    #[error("cannot start the sandbox")]
    Sandbox(#[source] crate::StartSandboxError),
    #[error("cannot start a part of the stack")]
    Part(#[source] stack::StartPartError),
    #[error("cannot start redis")]
    Redis(#[source] crate::redis::StartRedisError),
    #[error("cannot make the REST client")]
    Client(#[source] submitter_client::NewClientError),
    #[error("cannot list the cluster's nodes")]
    Nodes(#[source] kube::Error),
    #[error("cannot make the job namespace {namespace}")]
    Namespace {
        namespace: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    DriverAccount(crate::driver_account::GrantDriverAccountError),
}

impl RunChaosError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sandbox(_) => "sandbox",
            Self::Part(_) => "part",
            Self::Redis(_) => "redis",
            Self::Client(_) => "client",
            Self::Nodes(_) => "nodes",
            Self::Namespace { .. } => "namespace",
            Self::DriverAccount(_) => "driver_account",
        }
    }
}

/// Where the soak's progress lines go, stamped with the time since it started.
pub struct Progress<'a> {
    started: Instant,
    log: &'a (dyn Fn(String) + Sync),
}

impl Progress<'_> {
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn line(&self, text: &str) {
        (self.log)(format!("[{:>6.0}s] {text}", self.elapsed().as_secs_f64()));
    }
}

/// Every driver pod in every namespace.
async fn list_drivers(sandbox: &Sandbox) -> Result<Vec<Pod>, kube::Error> {
    let role = format!(
        "{}={}",
        submission::meta::labels::SPARK_ROLE,
        submission::meta::labels::DRIVER_ROLE
    );
    Api::<Pod>::all(sandbox.client.clone())
        .list(&ListParams::default().labels(&role))
        .await
        .map(|list| list.items)
}

/// The job namespaces beside the sandbox's, with the drivers' service account in each.
async fn make_job_namespaces(sandbox: &Sandbox) -> Result<(), RunChaosError> {
    for namespace in JOB_NAMESPACES
        .into_iter()
        .filter(|n| *n != crate::NAMESPACE)
    {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))
            .map_err(|e| RunChaosError::Namespace {
                namespace,
                source: kube::Error::SerdeError(e),
            })?;
        Api::<Namespace>::all(sandbox.client.clone())
            .create(&PostParams::default(), &object)
            .await
            .map_err(|source| RunChaosError::Namespace { namespace, source })?;
        crate::driver_account::grant(&sandbox.client, namespace)
            .await
            .map_err(RunChaosError::DriverAccount)?;
    }
    Ok(())
}

/// Runs a soak; `log` gets the schedule and the progress lines (one a minute at least).
pub async fn run(
    config: ChaosConfig,
    log: &(dyn Fn(String) + Sync),
) -> Result<Report, RunChaosError> {
    let started = Instant::now();
    let progress = Progress { started, log };
    let redis = if config.redis {
        Some(RedisServer::start().map_err(RunChaosError::Redis)?)
    } else {
        None
    };
    let mut sandbox_config = SandboxConfig::new(config.sandbox_bin.clone());
    sandbox_config.store = match &redis {
        Some(redis) => StoreKind::Redis { url: redis.url() },
        None => StoreKind::Kubernetes,
    };
    sandbox_config.heartbeat_timeout_seconds = 5;
    sandbox_config.agent_heartbeat_millis = 500;
    let sandbox = Sandbox::start(sandbox_config)
        .await
        .map_err(RunChaosError::Sandbox)?;
    make_job_namespaces(&sandbox).await?;
    let nodes: Vec<String> = Api::<Node>::all(sandbox.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(RunChaosError::Nodes)?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let schedule = config.schedule(nodes.len());
    log(format!(
        "chaos seed {} for {:?}: {} faults, nodes {nodes:?}",
        config.seed,
        config.duration,
        schedule.len()
    ));
    for (at, fault) in &schedule {
        log(format!("  {:>8.3}s {fault}", at.as_secs_f64()));
    }
    let balancer = Balancer::start(config.submitters)
        .await
        .map_err(RunChaosError::Part)?;
    let tally = Arc::new(Tally::default());
    let ledger = Arc::new(Ledger::default());
    let client = workload::submissions::rest_client(&sandbox, balancer.port)
        .map_err(RunChaosError::Client)?;
    let users = Users {
        client: Arc::new(client),
        kube: sandbox.client.clone(),
        tally: tally.clone(),
        ledger: ledger.clone(),
    };
    let mut stack = Stack::new(&sandbox, &config, balancer, nodes, redis, users.clone());
    for index in 0..config.submitters {
        stack
            .start_submitter(index)
            .await
            .map_err(RunChaosError::Part)?;
    }
    for index in 0..config.operators {
        stack.start_operator(index).map_err(RunChaosError::Part)?;
    }
    let memory_start = memory::Memory::now().unwrap_or_default();
    progress.line(&format!(
        "stack up; memory {}",
        memory::mib(memory_start.rss_kib)
    ));

    let (stop, stopped) = watch::channel(false);
    let (done, finished) = watch::channel(false);
    let soak_start = Instant::now();

    let faults = async {
        for (at, fault) in &schedule {
            let due = soak_start + *at;
            while Instant::now() < due {
                let wake = stack.next_undo().map_or(due, |u| u.min(due));
                tokio::time::sleep_until(wake.into()).await;
                stack.undo_due(Instant::now()).await;
            }
            stack.apply(fault).await;
        }
        let end = soak_start + config.duration;
        while Instant::now() < end {
            let wake = stack.next_undo().map_or(end, |u| u.min(end));
            tokio::time::sleep_until(wake.into()).await;
            stack.undo_due(Instant::now()).await;
        }
        let _ = stop.send(true);
        stack.calm().await;
        progress.line(&format!(
            "fault window over after {:?}",
            soak_start.elapsed()
        ));
    };

    let applications =
        workload::applications::run(&sandbox, &config, &tally, &ledger, stopped.clone());
    let rest_traffic = workload::submissions::run(users.clone(), config.seed, stopped.clone());
    let monitor = monitor::run(
        &sandbox,
        &tally,
        &ledger,
        &progress,
        stopped.clone(),
        finished.clone(),
    );

    let drained = async {
        let ((), created, ()) = tokio::join!(faults, applications, rest_traffic);
        progress.line(&format!("{} applications created; draining", created.len()));
        let drain_start = Instant::now();
        let deadline = drain_start + config.drain;
        loop {
            let list = workload::applications::apps_api(&sandbox)
                .list(&ListParams::default())
                .await;
            let open = list.map(|l| {
                l.items
                    .iter()
                    .filter(|a| {
                        let always = a.spec.restart_policy.as_ref().is_some_and(|p| {
                            p.policy_type == Some(operator::crd::RestartPolicyType::Always)
                        });
                        !always
                            && !a
                                .status
                                .as_ref()
                                .is_some_and(|s| s.app_state.state.is_terminal())
                    })
                    .count()
            });
            if open.as_ref().is_ok_and(|n| *n == 0) || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        progress.line(&format!("drained in {:?}", drain_start.elapsed()));
        let _ = done.send(true);
        created
    };
    let (created, ()) = tokio::join!(drained, monitor);

    end_checks::applications(&sandbox, &created, &tally, &ledger).await;
    end_checks::answers(&tally, &ledger);
    end_checks::driver_objects(&sandbox, &tally).await;
    end_checks::progress(&tally);
    end_checks::log_streams(&stack, &tally).await;
    progress.line("applications checked; deleting them and waiting out the sweep");
    end_checks::orphans(&sandbox, &tally, &progress).await;
    drop(stack);
    let report = Report {
        seed: config.seed,
        duration: config.duration,
        mean_gap: config.mean_gap,
        redis: config.redis,
        submitters: config.submitters,
        operators: config.operators,
        schedule,
        apps: ledger.states(),
        tally,
        elapsed: started.elapsed(),
        memory_start,
        memory_end: memory::Memory::now().unwrap_or_default(),
    };
    Ok(report)
}
