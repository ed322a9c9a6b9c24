//! The chaos soak: the whole stack (several submitter instances behind a balancer, operator
//! replicas behind leader election, kubesim, the agents, optionally Redis) under a random
//! workload and a random fault schedule drawn from one seed, with invariants checked while it
//! runs and at the end. See docs/chaos.md.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams};
use kubesim::control::{FaultRule, FaultTiming, LatencyRule};
use operator::crd::{ApplicationStateType, SparkApplication};
use operator::recovery::StoreKind;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::redis::RedisServer;
use crate::{NAMESPACE, OPERATOR_IDENTITY, Sandbox, SandboxConfig, StagedRun};

pub mod invariants;
pub mod schedule;
pub mod stack;
pub mod workload;

use invariants::Tally;
use schedule::Fault;
use stack::{Balancer, OperatorReplica, SubmitterInstance};
use workload::CreatedApp;

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

    /// The fault schedule this configuration replays.
    pub fn schedule(&self, nodes: usize) -> Vec<(Duration, Fault)> {
        schedule::generate(
            self.seed,
            self.duration,
            schedule::Shape {
                operators: self.operators,
                submitters: self.submitters,
                nodes,
                redis: self.redis,
                mean_gap: self.mean_gap,
            },
        )
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
        }
    }
}

/// What a soak did and saw.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    /// The fault window, the mean gap and the store: with the seed, what replays the schedule.
    pub duration: Duration,
    pub mean_gap: Duration,
    pub redis: bool,
    pub schedule: Vec<(Duration, Fault)>,
    /// Faults applied, and those skipped (the replica was already down, no driver ran), by kind.
    pub faults: BTreeMap<String, u64>,
    /// `<restart policy> <recovery|plain>: <final state>` of every application, by name.
    pub apps: BTreeMap<String, String>,
    pub tally: Arc<Tally>,
    pub elapsed: Duration,
}

impl Report {
    pub fn violations(&self) -> Vec<invariants::Violation> {
        self.tally.violations()
    }

    pub fn to_json(&self) -> Value {
        let mut states: BTreeMap<&str, u64> = BTreeMap::new();
        for state in self.apps.values() {
            *states.entry(state).or_default() += 1;
        }
        let mut report = json!({
            "seed": self.seed,
            "replay": format!(
                "sandbox chaos --seed {} --duration {}ms --mean-gap {}ms{}",
                self.seed,
                self.duration.as_millis(),
                self.mean_gap.as_millis(),
                if self.redis { " --redis" } else { "" }
            ),
            "elapsedSeconds": self.elapsed.as_secs_f64(),
            "schedule": self.schedule.iter()
                .map(|(at, fault)| format!("{:>8.3}s {fault}", at.as_secs_f64()))
                .collect::<Vec<_>>(),
            "faults": self.faults,
            "applications": states,
        });
        if let (Some(report), Value::Object(tally)) = (report.as_object_mut(), self.tally.to_json())
        {
            report.extend(tally);
        }
        report
    }
}

/// How long an `Always` application runs before the workload deletes it.
const ALWAYS_LIFETIME: Duration = Duration::from_secs(20);

/// What the fault loop owns: the processes it kills and what it must undo.
struct Stack<'a> {
    sandbox: &'a Sandbox,
    config: &'a ChaosConfig,
    balancer: Balancer,
    submitters: Vec<Option<SubmitterInstance>>,
    operators: Vec<Option<OperatorReplica>>,
    nodes: Vec<String>,
    redis: Option<RedisServer>,
    /// Undo actions due at an instant.
    pending: Vec<(Instant, Undo)>,
    faults: BTreeMap<String, u64>,
    /// Applications alive when Redis restarted empty.
    store_lost: std::collections::BTreeSet<String>,
}

#[derive(Debug, Clone, Copy)]
enum Undo {
    StartOperator(usize),
    StartSubmitter(usize),
    Heal(usize),
    ClearLatency,
}

impl Stack<'_> {
    fn operator_config(&self) -> operator::controller::RunConfig {
        let mut run = self.sandbox.run_config();
        run.submitter.url = format!(
            "https://localhost:{}/api/v1/spark-submit",
            self.balancer.port
        );
        run.submitter.cert_check_interval = Duration::from_millis(500);
        run
    }

    async fn start_submitter(&mut self, index: usize) -> Result<(), stack::StartPartError> {
        let instance =
            SubmitterInstance::start(self.sandbox, &format!("submitter-{index}")).await?;
        self.balancer.set(index, Some(instance.port));
        self.submitters[index] = Some(instance);
        Ok(())
    }

    fn start_operator(&mut self, index: usize) -> Result<(), stack::StartPartError> {
        let replica = OperatorReplica::start(
            self.sandbox,
            &format!("replica-{index}"),
            self.operator_config(),
        )?;
        self.operators[index] = Some(replica);
        Ok(())
    }

    fn count(&mut self, what: String) {
        *self.faults.entry(what).or_default() += 1;
    }

    async fn undo(&mut self, undo: Undo) {
        let result = match undo {
            Undo::StartOperator(i) => self.start_operator(i),
            Undo::StartSubmitter(i) => self.start_submitter(i).await,
            Undo::Heal(node) => {
                self.sandbox.cluster.kubelet.heal(&self.nodes[node]);
                Ok(())
            }
            Undo::ClearLatency => {
                self.sandbox.cluster.control.clear_latency();
                Ok(())
            }
        };
        if let Err(error) = result {
            // A supervisor would try again: so does the next undo pass.
            tracing::warn!(%error, ?undo, "cannot undo a fault; retrying in a second");
            self.pending
                .push((Instant::now() + Duration::from_secs(1), undo));
        }
    }

    /// Runs the undo actions that are due.
    async fn undo_due(&mut self, now: Instant) {
        let (due, later): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, undo) in due {
            self.undo(undo).await;
        }
    }

    async fn apply(&mut self, fault: &Fault) {
        let sandbox = self.sandbox;
        let now = Instant::now();
        let applied = match fault {
            Fault::KillOperator { replica, down } => {
                let killed = self.operators[*replica].take().is_some();
                if killed {
                    self.pending
                        .push((now + *down, Undo::StartOperator(*replica)));
                }
                killed
            }
            Fault::KillSubmitter { instance, down } => {
                self.balancer.set(*instance, None);
                let killed = self.submitters[*instance].take().is_some();
                if killed {
                    self.pending
                        .push((now + *down, Undo::StartSubmitter(*instance)));
                }
                killed
            }
            Fault::KillDriver { pick, exit_code } => {
                let running: Vec<String> = drivers(sandbox)
                    .await
                    .into_iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                            && p.metadata.deletion_timestamp.is_none()
                    })
                    .filter_map(|p| p.metadata.name)
                    .collect();
                match running.get(pick % running.len().max(1)) {
                    Some(pod) => sandbox
                        .cluster
                        .kubelet
                        .kill(
                            NAMESPACE,
                            pod,
                            Some(submission::meta::containers::DRIVER),
                            *exit_code,
                        )
                        .is_ok(),
                    None => false,
                }
            }
            Fault::KillAgent { pick } => {
                let with_agent: Vec<String> = drivers(sandbox)
                    .await
                    .into_iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                            && p.metadata.deletion_timestamp.is_none()
                            && p.spec.as_ref().is_some_and(|s| {
                                s.init_containers
                                    .iter()
                                    .flatten()
                                    .any(|c| c.name == operator::recovery::AGENT_CONTAINER)
                            })
                    })
                    .filter_map(|p| p.metadata.name)
                    .collect();
                match with_agent.get(pick % with_agent.len().max(1)) {
                    Some(pod) => sandbox
                        .cluster
                        .kubelet
                        .kill(
                            NAMESPACE,
                            pod,
                            Some(operator::recovery::AGENT_CONTAINER),
                            137,
                        )
                        .is_ok(),
                    None => false,
                }
            }
            Fault::DropWatches => {
                sandbox.cluster.store.drop_watches();
                true
            }
            Fault::Compact => {
                sandbox.cluster.store.compact();
                true
            }
            Fault::ApiErrors {
                resource,
                code,
                count,
            } => {
                sandbox.cluster.control.add_fault(FaultRule {
                    verb: None,
                    group: None,
                    resource: resource.map(str::to_owned),
                    namespace: None,
                    name: None,
                    count: *count,
                    code: *code,
                    message: None,
                    when: FaultTiming::Before,
                    delay_ms: 0,
                });
                true
            }
            Fault::ApiLatency { millis, lasting } => {
                sandbox.cluster.control.add_latency(LatencyRule {
                    verb: None,
                    resource: None,
                    millis: *millis,
                });
                self.pending.push((now + *lasting, Undo::ClearLatency));
                true
            }
            Fault::Partition { node, lasting } => {
                let cut = self
                    .nodes
                    .get(*node)
                    .is_some_and(|name| sandbox.cluster.kubelet.partition(name));
                if cut {
                    self.pending.push((now + *lasting, Undo::Heal(*node)));
                }
                cut
            }
            Fault::RestartRedis => {
                // Redis restarts empty: the markers of every application alive now are lost,
                // and their next epoch restarts from zero by design (docs/chaos.md).
                if let Ok(list) = apps_api(sandbox).list(&ListParams::default()).await {
                    self.store_lost
                        .extend(list.items.into_iter().filter_map(|a| {
                            let done = a
                                .status
                                .as_ref()
                                .is_some_and(|s| s.app_state.state.is_terminal());
                            if done { None } else { a.metadata.name }
                        }));
                }
                match self.redis.as_mut() {
                    Some(redis) => redis.restart().is_ok(),
                    None => false,
                }
            }
            Fault::RotateCertificates => {
                sandbox.rotate_server_certificate().is_ok()
                    && sandbox
                        .rotate_operator_certificate(OPERATOR_IDENTITY)
                        .is_ok()
            }
        };
        let outcome = if applied { "" } else { "_skipped" };
        self.count(format!("{}{outcome}", fault.kind()));
    }

    /// Undoes everything still pending and every lasting fault: the end of the fault window.
    async fn calm(&mut self) {
        let pending: Vec<_> = self.pending.drain(..).collect();
        for (_, undo) in pending {
            self.undo(undo).await;
        }
        // Whatever failed to come back gets one more try now.
        let pending: Vec<_> = self.pending.drain(..).collect();
        for (_, undo) in pending {
            self.undo(undo).await;
        }
        self.sandbox.cluster.control.clear_faults();
        self.sandbox.cluster.control.clear_latency();
        for node in &self.nodes {
            self.sandbox.cluster.kubelet.heal(node);
        }
    }
}

/// Every driver pod in the namespace.
async fn list_drivers(sandbox: &Sandbox) -> Result<Vec<Pod>, kube::Error> {
    let role = format!(
        "{}={}",
        submission::meta::labels::SPARK_ROLE,
        submission::meta::labels::DRIVER_ROLE
    );
    Api::<Pod>::namespaced(sandbox.client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&role))
        .await
        .map(|list| list.items)
}

/// Every driver pod in the namespace, none when the list fails (the API may fail on purpose).
async fn drivers(sandbox: &Sandbox) -> Vec<Pod> {
    list_drivers(sandbox).await.unwrap_or_default()
}

fn apps_api(sandbox: &Sandbox) -> Api<SparkApplication> {
    Api::namespaced(sandbox.client.clone(), NAMESPACE)
}

/// Runs a soak; `log` gets the schedule and the progress lines.
pub async fn run(
    config: ChaosConfig,
    log: &(dyn Fn(String) + Sync),
) -> Result<Report, RunChaosError> {
    let started = Instant::now();
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
    let mut stack = Stack {
        sandbox: &sandbox,
        config: &config,
        balancer,
        submitters: (0..config.submitters).map(|_| None).collect(),
        operators: (0..config.operators).map(|_| None).collect(),
        nodes,
        redis,
        pending: Vec::new(),
        faults: BTreeMap::new(),
        store_lost: Default::default(),
    };
    for index in 0..config.submitters {
        stack
            .start_submitter(index)
            .await
            .map_err(RunChaosError::Part)?;
    }
    for index in 0..config.operators {
        stack.start_operator(index).map_err(RunChaosError::Part)?;
    }
    let rest =
        workload::rest_client(&sandbox, stack.balancer.port).map_err(RunChaosError::Client)?;

    let tally = Arc::new(Tally::default());
    let answers: workload::Answers = Arc::default();
    let created: Mutex<Vec<CreatedApp>> = Mutex::default();
    let (stop, stopped) = watch::channel(false);
    let (done, finished) = watch::channel(false);
    let soak_start = Instant::now();

    let faults = async {
        for (at, fault) in &schedule {
            let due = soak_start + *at;
            while Instant::now() < due {
                let next_undo = stack.pending.iter().map(|(at, _)| *at).min();
                let wake = next_undo.map_or(due, |u| u.min(due));
                tokio::time::sleep_until(wake.into()).await;
                stack.undo_due(Instant::now()).await;
            }
            stack.apply(fault).await;
        }
        let end = soak_start + stack.config.duration;
        while Instant::now() < end {
            let next_undo = stack.pending.iter().map(|(at, _)| *at).min();
            tokio::time::sleep_until(next_undo.map_or(end, |u| u.min(end)).into()).await;
            stack.undo_due(Instant::now()).await;
        }
        stack.calm().await;
        let _ = stop.send(true);
        log(format!(
            "fault window over after {:?}",
            soak_start.elapsed()
        ));
    };

    let applications = {
        let mut stopped = stopped.clone();
        let (sandbox, config, created, tally) = (&sandbox, &config, &created, tally.clone());
        async move {
            let mut rng = fastrand::Rng::with_seed(config.seed ^ 0x0a99_5eed);
            let mut always: Vec<(String, Instant)> = Vec::new();
            for index in 0.. {
                let pause = Duration::from_millis(rng.u64(1000..3000));
                if tokio::time::timeout(pause, stopped.wait_for(|s| *s))
                    .await
                    .is_ok()
                {
                    break;
                }
                // A user stops an `Always` application, which never ends by itself, after a
                // while: that frees its slot and deletes under faults too.
                let (old, young): (Vec<_>, Vec<_>) = always
                    .drain(..)
                    .partition(|(_, at): &(String, Instant)| at.elapsed() > ALWAYS_LIFETIME);
                always = young;
                for (name, _) in old {
                    let deleted = apps_api(sandbox)
                        .delete(&name, &DeleteParams::default())
                        .await;
                    match deleted {
                        Ok(_) => tally.operation("delete_always_app"),
                        // Failed on purpose, maybe: the next round tries again.
                        Err(_) => always.push((name, Instant::now())),
                    }
                }
                let live = apps_api(sandbox)
                    .list(&ListParams::default())
                    .await
                    .map(|l| {
                        l.items
                            .iter()
                            .filter(|a| {
                                !a.status
                                    .as_ref()
                                    .is_some_and(|s| s.app_state.state.is_terminal())
                            })
                            .count()
                    })
                    .unwrap_or(usize::MAX);
                let app = workload::draw_app(&mut rng, index);
                if live >= config.max_live_apps {
                    continue;
                }
                // The API may be failing on purpose: a client retries a create.
                for _ in 0..10 {
                    match workload::create_app(sandbox, &app, config.stage_millis).await {
                        Ok(()) => {
                            if app.policy == "Always" {
                                always.push((app.name.clone(), Instant::now()));
                            }
                            if let Ok(mut created) = created.lock() {
                                created.push(app.clone());
                            }
                            break;
                        }
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            if app.policy == "Always" {
                                always.push((app.name.clone(), Instant::now()));
                            }
                            // Created by an attempt whose answer was lost.
                            if let Ok(mut created) = created.lock() {
                                created.push(app.clone());
                            }
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                    }
                }
            }
        }
    };

    let monitor = {
        let mut finished = finished.clone();
        let (sandbox, tally) = (&sandbox, tally.clone());
        async move {
            loop {
                // A failed list (the API fails on purpose) checks nothing.
                if let Ok(pods) = list_drivers(sandbox).await {
                    let broken = invariants::two_live_drivers(&pods);
                    if broken.is_empty() {
                        tally.check(invariants::ONE_LIVE_DRIVER, None);
                    }
                    for detail in broken {
                        tally.check(invariants::ONE_LIVE_DRIVER, Some(detail));
                    }
                }
                let pause = Duration::from_millis(500);
                if tokio::time::timeout(pause, finished.wait_for(|s| *s))
                    .await
                    .is_ok()
                {
                    return;
                }
            }
        }
    };

    let rest_traffic = workload::rest_traffic(
        rest,
        config.seed,
        tally.clone(),
        answers.clone(),
        stopped.clone(),
    );

    let drained = async {
        tokio::join!(faults, applications, rest_traffic);
        let created = created.lock().map(|c| c.clone()).unwrap_or_default();
        log(format!("{} applications created; draining", created.len()));
        let drain_start = Instant::now();
        let deadline = drain_start + config.drain;
        loop {
            let list = apps_api(&sandbox).list(&ListParams::default()).await;
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
        log(format!("drained in {:?}", drain_start.elapsed()));
        let _ = done.send(true);
        created
    };
    let (created, ()) = tokio::join!(drained, monitor);

    let apps = final_checks(&sandbox, &created, &answers, &tally, &stack.store_lost).await;
    log("applications checked; deleting them and waiting out the sweep".into());
    orphans(&sandbox, &tally, log).await;
    let faults = std::mem::take(&mut stack.faults);
    drop(stack);
    Ok(Report {
        seed: config.seed,
        duration: config.duration,
        mean_gap: config.mean_gap,
        redis: config.redis,
        schedule,
        faults,
        apps,
        tally,
        elapsed: started.elapsed(),
    })
}

/// At the end: every application terminal (Always excepted) and consistent with its driver's
/// exit, each recovery-enabled staged app's stages published once, each submission id answered
/// with one driver. Returns the final states.
async fn final_checks(
    sandbox: &Sandbox,
    created: &[CreatedApp],
    answers: &workload::Answers,
    tally: &Tally,
    store_lost: &std::collections::BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut states = BTreeMap::new();
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    for app in created {
        let current = apps_api(sandbox).get_opt(&app.name).await;
        if app.policy == "Always" && matches!(current, Ok(None)) {
            states.insert(app.name.clone(), "Always: deleted".into());
            continue;
        }
        let Ok(Some(current)) = current else {
            tally.check(
                invariants::TERMINAL_AND_CONSISTENT,
                Some(format!("{}: cannot be read at the end", app.name)),
            );
            continue;
        };
        let status = current.status.clone().unwrap_or_default();
        let state = status.app_state.state;
        let recovery = if app.recovery { "recovery" } else { "plain" };
        states.insert(
            app.name.clone(),
            format!("{} {recovery}: {state:?}", app.policy),
        );
        let always = app.policy == "Always";
        let mut broken = None;
        if !always && !state.is_terminal() {
            broken = Some(format!(
                "{} ({} recovery={}) still {state:?} after the drain: {:?}",
                app.name, app.policy, app.recovery, status.app_state.error_message
            ));
        }
        let driver = status.driver_info.pod_name.clone();
        if broken.is_none()
            && matches!(
                state,
                ApplicationStateType::Completed | ApplicationStateType::Failed
            )
            && !driver.is_empty()
            && let Ok(Some(pod)) = pods.get_opt(&driver).await
        {
            let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
            let consistent = match state {
                ApplicationStateType::Completed => phase != "Failed",
                _ => phase != "Succeeded",
            };
            if !consistent {
                broken = Some(format!(
                    "{} ended {state:?} but its driver {driver} is {phase}",
                    app.name
                ));
            }
        }
        tally.check(invariants::TERMINAL_AND_CONSISTENT, broken);
        if let Some(recovery) = &status.recovery_status {
            // Evidence that the faults reached the fencing: restarts under a new epoch.
            tally.operations("fenced_restarts", recovery.epoch);
        }
        if app.recovery && !always && store_lost.contains(&app.name) {
            // Its markers were lost with the store: a republish is the documented cost.
            tally.operation("stale_check_skipped_store_restarted");
        } else if app.recovery && !always {
            let run = StagedRun::read(sandbox, &app.name);
            tally.operations("fenced_commits_refused", run.fenced.len() as u64);
            tally.check(
                invariants::NO_STALE_EPOCH_WRITE,
                invariants::stale_epoch_writes(
                    &app.name,
                    &run.committed,
                    app.stages,
                    state == ApplicationStateType::Completed,
                ),
            );
        }
    }
    let answers = answers.lock().map(|a| a.clone()).unwrap_or_default();
    for (id, uids) in answers {
        let mut distinct = uids.clone();
        distinct.sort();
        distinct.dedup();
        tally.check(
            invariants::ONE_DRIVER_PER_SUBMISSION,
            (distinct.len() > 1).then(|| format!("submission {id} answered drivers {distinct:?}")),
        );
    }
    states
}

/// How long after every application is deleted their objects may still be there: the orphan
/// sweep's grace and two of its passes, and the garbage collector.
const SWEEP_WINDOW: Duration =
    Duration::from_secs(stack::SWEEP_GRACE.as_secs() + 3 * stack::SWEEP_INTERVAL.as_secs() + 5);

/// Objects of ours whose owner is gone, or that should have one and do not: executors,
/// ConfigMaps and Services of a submission (driver pods of direct submissions belong to their
/// client, retention records to the submitter).
async fn orphan_list(sandbox: &Sandbox) -> Result<Vec<String>, kube::Error> {
    let lp = ListParams::default();
    let pods = Api::<Pod>::namespaced(sandbox.client.clone(), NAMESPACE)
        .list(&lp)
        .await?
        .items;
    let configmaps = Api::<ConfigMap>::namespaced(sandbox.client.clone(), NAMESPACE)
        .list(&lp)
        .await?
        .items;
    let services = Api::<Service>::namespaced(sandbox.client.clone(), NAMESPACE)
        .list(&lp)
        .await?
        .items;
    let apps = apps_api(sandbox).list(&lp).await?.items;
    let mut uids: std::collections::BTreeSet<String> =
        pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    uids.extend(apps.iter().filter_map(|a| a.metadata.uid.clone()));
    let mut orphans = Vec::new();
    let mut look = |kind: &str, meta: &kube::api::ObjectMeta, driver: bool| {
        let labels = meta.labels.clone().unwrap_or_default();
        let ours = labels.contains_key(submission::meta::labels::SPARK_APP_ID)
            || labels.contains_key(operator::labels::APP_NAME);
        if labels.contains_key(submission::meta::labels::RECORD) {
            return;
        }
        let owners = meta.owner_references.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        if !owners.is_empty() && !owners.iter().any(|o| uids.contains(&o.uid)) {
            orphans.push(format!("{kind} {name}: its owners are gone"));
        } else if owners.is_empty() && ours && !driver {
            orphans.push(format!("{kind} {name}: ours without an owner"));
        }
    };
    for pod in &pods {
        let driver = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(submission::meta::labels::SPARK_ROLE))
            .is_some_and(|r| r == submission::meta::labels::DRIVER_ROLE);
        look("pod", pod.meta(), driver);
    }
    for configmap in &configmaps {
        look("configmap", configmap.meta(), false);
    }
    for service in &services {
        look("service", service.meta(), false);
    }
    Ok(orphans)
}

/// Deletes every application, then waits the sweep window for their objects to go.
async fn orphans(sandbox: &Sandbox, tally: &Tally, log: &(dyn Fn(String) + Sync)) {
    let apps = apps_api(sandbox);
    let _ = apps
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let start = Instant::now();
    let deadline = start + SWEEP_WINDOW;
    loop {
        match orphan_list(sandbox).await {
            // Clean only counts once a submission cut short has had its grace: what it left
            // must be gone by then, not merely not yet made.
            Ok(found) if found.is_empty() && start.elapsed() >= stack::SWEEP_GRACE => {
                log(format!("no orphans after {:?}", start.elapsed()));
                tally.check(invariants::NO_ORPHANS, None);
                return;
            }
            Ok(found) if Instant::now() > deadline => {
                for detail in found {
                    tally.check(invariants::NO_ORPHANS, Some(detail));
                }
                return;
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}
