//! The fault loop's side of the stack: what each fault does, and what undoes the lasting ones
//! (a replica started again, a node healed, latency cleared, a quota lifted). Faults a user
//! would cause (a kill through the API, a followed log hung up) run as tasks of their own, so
//! the schedule is not held up by their retries.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubesim::control::{FaultRule, FaultTiming, LatencyRule};
use serde_json::json;
use submission::api::{DriverPhase, ErrorCode, KillQuery, Target};
use tokio::task::JoinSet;

use super::ChaosConfig;
use super::invariants;
use super::log_follow::{self, Expected, Follow};
use super::schedule::{Fault, FaultKind, QuotaResource};
use super::stack::{Balancer, OperatorReplica, SubmitterInstance};
use super::workload::applications::apps_api;
use super::workload::retries::with_retries;
use super::workload::submissions::Users;
use super::workload::{ATTEMPTS, JOB_NAMESPACES, RETRY_PAUSE, error_name};
use crate::redis::RedisServer;
use crate::{NAMESPACE, OPERATOR_IDENTITY, Sandbox};

/// The quota a `quota_flip` sets, and lifts by deleting it.
const QUOTA: &str = "chaos-quota";

/// How long a fault that needs a target (a running driver) waits for one.
const TARGET_WAIT: Duration = Duration::from_secs(5);

/// What the fault loop owns: the processes it kills and what it must undo.
pub struct Stack<'a> {
    pub sandbox: &'a Sandbox,
    pub config: &'a ChaosConfig,
    pub balancer: Balancer,
    pub submitters: Vec<Option<SubmitterInstance>>,
    pub operators: Vec<Option<OperatorReplica>>,
    pub nodes: Vec<String>,
    pub redis: Option<RedisServer>,
    /// Undo actions due at an instant.
    pending: Vec<(Instant, Undo)>,
    /// The users (their REST client through the balancer), for kills and followed logs.
    pub users: Users,
    /// Kills and followed logs under way.
    tasks: JoinSet<()>,
}

#[derive(Debug, Clone, Copy)]
enum Undo {
    StartOperator(usize),
    StartSubmitter(usize),
    Heal(usize),
    ClearLatency,
    LiftQuota(&'static str),
}

/// An undo that did not take; the loop tries it again a second later.
#[derive(Debug, thiserror::Error)]
enum UndoError {
    #[error("cannot start the part again")]
    Start(#[source] super::stack::StartPartError),
    #[error("cannot lift the quota")]
    LiftQuota(#[source] kube::Error),
}

impl<'a> Stack<'a> {
    pub fn new(
        sandbox: &'a Sandbox,
        config: &'a ChaosConfig,
        balancer: Balancer,
        nodes: Vec<String>,
        redis: Option<RedisServer>,
        users: Users,
    ) -> Stack<'a> {
        Stack {
            sandbox,
            config,
            balancer,
            submitters: (0..config.submitters).map(|_| None).collect(),
            operators: (0..config.operators).map(|_| None).collect(),
            nodes,
            redis,
            pending: Vec::new(),
            users,
            tasks: JoinSet::new(),
        }
    }

    fn operator_config(&self) -> operator::controller::RunConfig {
        let mut run = self.sandbox.run_config();
        run.submitter.url = format!(
            "https://localhost:{}/api/v1/spark-submit",
            self.balancer.port
        );
        run.submitter.cert_check_interval = Duration::from_millis(500);
        run
    }

    pub async fn start_submitter(
        &mut self,
        index: usize,
    ) -> Result<(), super::stack::StartPartError> {
        let instance =
            SubmitterInstance::start(self.sandbox, &format!("submitter-{index}")).await?;
        self.balancer.set(index, Some(instance.port));
        self.submitters[index] = Some(instance);
        Ok(())
    }

    pub fn start_operator(&mut self, index: usize) -> Result<(), super::stack::StartPartError> {
        let replica = OperatorReplica::start(
            self.sandbox,
            &format!("replica-{index}"),
            self.operator_config(),
        )?;
        self.operators[index] = Some(replica);
        Ok(())
    }

    /// Log streams open on the live submitter instances.
    pub fn log_streams_open(&self) -> i64 {
        self.submitters
            .iter()
            .flatten()
            .map(|s| s.metrics.log_streams_open())
            .sum()
    }

    /// The next instant an undo is due.
    pub fn next_undo(&self) -> Option<Instant> {
        self.pending.iter().map(|(at, _)| *at).min()
    }

    async fn undo(&mut self, undo: Undo) {
        let result = match undo {
            Undo::StartOperator(i) => self.start_operator(i).map_err(UndoError::Start),
            Undo::StartSubmitter(i) => self.start_submitter(i).await.map_err(UndoError::Start),
            Undo::Heal(node) => {
                self.sandbox.cluster.kubelet.heal(&self.nodes[node]);
                self.users.ledger.healed(&self.nodes[node]);
                Ok(())
            }
            Undo::ClearLatency => {
                self.sandbox.cluster.control.clear_latency();
                Ok(())
            }
            Undo::LiftQuota(namespace) => lift_quota(&self.sandbox.client, namespace)
                .await
                .map_err(UndoError::LiftQuota),
        };
        if let Err(error) = result {
            // A supervisor would try again: so does the next undo pass.
            tracing::warn!(%error, ?undo, "cannot undo a fault; retrying in a second");
            self.pending
                .push((Instant::now() + Duration::from_secs(1), undo));
        }
    }

    /// Runs the undo actions that are due.
    pub async fn undo_due(&mut self, now: Instant) {
        let (due, later): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, undo) in due {
            self.undo(undo).await;
        }
    }

    /// Running drivers (every job namespace, sorted by namespace and name) that `keep` keeps,
    /// waiting up to [`TARGET_WAIT`] for one to show.
    async fn targets(&self, keep: impl Fn(&Pod) -> bool) -> Vec<Pod> {
        let deadline = Instant::now() + TARGET_WAIT;
        loop {
            let mut found: Vec<Pod> = super::list_drivers(self.sandbox)
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|p| {
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                        && p.metadata.deletion_timestamp.is_none()
                        && keep(p)
                })
                .collect();
            if !found.is_empty() || Instant::now() > deadline {
                found.sort_by_key(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()));
                return found;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Applies `fault` and counts it, now or (kills and followed logs) when its task is done.
    pub async fn apply(&mut self, fault: &Fault) {
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
                let running = self.targets(|_| true).await;
                match running.get(pick % running.len().max(1)) {
                    Some(pod) => sandbox
                        .cluster
                        .kubelet
                        .kill(
                            pod.metadata.namespace.as_deref().unwrap_or(NAMESPACE),
                            pod.metadata.name.as_deref().unwrap_or_default(),
                            Some(submission::meta::containers::DRIVER),
                            *exit_code,
                        )
                        .is_ok(),
                    None => false,
                }
            }
            Fault::KillAgent { pick } => {
                let with_agent = self
                    .targets(|p| {
                        p.spec.as_ref().is_some_and(|s| {
                            s.init_containers
                                .iter()
                                .flatten()
                                .any(|c| c.name == operator::recovery::AGENT_CONTAINER)
                        })
                    })
                    .await;
                match with_agent.get(pick % with_agent.len().max(1)) {
                    Some(pod) => sandbox
                        .cluster
                        .kubelet
                        .kill(
                            pod.metadata.namespace.as_deref().unwrap_or(NAMESPACE),
                            pod.metadata.name.as_deref().unwrap_or_default(),
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
                    self.users.ledger.partitioned(&self.nodes[*node]);
                    self.pending.push((now + *lasting, Undo::Heal(*node)));
                }
                cut
            }
            Fault::RestartRedis => {
                // Redis restarts empty: the markers of every application alive now are lost,
                // and their next epoch restarts from zero by design (docs/chaos.md).
                if let Ok(list) = apps_api(sandbox).list(&ListParams::default()).await {
                    self.users
                        .ledger
                        .store_lost(list.items.into_iter().filter_map(|a| {
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
            Fault::QuotaFlip {
                namespace,
                resource,
                lasting,
            } => {
                let namespace = JOB_NAMESPACES[namespace % JOB_NAMESPACES.len()];
                let flipped = flip_quota(&sandbox.client, namespace, *resource).await;
                // Lifted whatever happened: a create whose answer was lost set it too.
                self.pending
                    .push((now + *lasting, Undo::LiftQuota(namespace)));
                match flipped {
                    Ok(used) => {
                        tracing::info!(namespace, resource = resource.key(), %used, "quota flipped");
                        true
                    }
                    Err(error) => {
                        tracing::debug!(%error, namespace, "cannot flip the quota");
                        false
                    }
                }
            }
            Fault::KillApi { pick } => {
                // A user kills what they submitted; the operator's drivers belong to it.
                let running = self.targets(|p| !of_application(p)).await;
                let Some(pod) = running.get(pick % running.len().max(1)).cloned() else {
                    self.users.tally.fault(FaultKind::KillApi, false);
                    return;
                };
                let owned = self.targets(of_application).await;
                let owned = owned.get(pick % owned.len().max(1)).cloned();
                let users = self.users.clone();
                self.tasks.spawn(async move {
                    let killed = kill(&users, &pod).await;
                    users.tally.fault(FaultKind::KillApi, killed);
                    if let Some(owned) = owned {
                        kill_refused(&users, &owned).await;
                    }
                });
                return;
            }
            Fault::CutLogStream {
                pick,
                after_lines,
                by_id,
            } => {
                let running = self.targets(|p| Expected::of(p).is_some()).await;
                let Some(reader) = running
                    .get(pick % running.len().max(1))
                    .and_then(|pod| cut_reader(pod, *after_lines, *by_id))
                else {
                    self.users.tally.fault(FaultKind::CutLogStream, false);
                    return;
                };
                let users = self.users.clone();
                self.tasks.spawn(async move {
                    let cut = log_follow::follow_and_check(
                        &users.client,
                        &users.kube,
                        &users.tally,
                        &users.ledger,
                        &reader,
                    )
                    .await;
                    users.tally.fault(FaultKind::CutLogStream, cut);
                });
                return;
            }
        };
        self.users.tally.fault(fault.kind(), applied);
    }

    /// The end of the fault window: every lasting fault undone, the users' kills and readers
    /// done.
    pub async fn calm(&mut self) {
        self.sandbox.cluster.control.clear_faults();
        self.sandbox.cluster.control.clear_latency();
        for node in &self.nodes {
            self.sandbox.cluster.kubelet.heal(node);
            self.users.ledger.healed(node);
        }
        // Whatever fails to come back gets a few more tries, a second apart.
        for _ in 0..10 {
            let pending: Vec<_> = self.pending.drain(..).collect();
            if pending.is_empty() {
                break;
            }
            for (_, undo) in pending {
                self.undo(undo).await;
            }
            if !self.pending.is_empty() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Whether a driver belongs to a SparkApplication.
fn of_application(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(operator::labels::APP_NAME))
}

fn submission_id(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(submission::meta::annotations::SUBMISSION_ID)
        .cloned()
}

/// A reader of `pod`'s log that hangs up after `after_lines` lines.
fn cut_reader(pod: &Pod, after_lines: usize, by_id: bool) -> Option<Follow> {
    let namespace = pod.metadata.namespace.clone()?;
    let name = pod.metadata.name.clone()?;
    let target = match submission_id(pod) {
        Some(id) if by_id => Target::Submission(id),
        _ => Target::Driver {
            namespace: namespace.clone(),
            pod: name.clone(),
        },
    };
    Some(Follow {
        what: "cut",
        target,
        namespace,
        pod: name,
        expected: Expected::of(pod)?,
        hang_up_after: Some(after_lines),
    })
}

/// Sets a quota on `resource` in `namespace` at what is used now: created far above any use,
/// read back (the API server counts the use at once, as kubesim does at admission), then held
/// at it. Returns the use it was set at.
async fn flip_quota(
    client: &kube::Client,
    namespace: &str,
    resource: QuotaResource,
) -> Result<String, kube::Error> {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), namespace);
    let key = resource.key();
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": QUOTA},
        "spec": {"hard": {key: "100000"}},
    }))
    .map_err(kube::Error::SerdeError)?;
    let created = match quotas.create(&PostParams::default(), &quota).await {
        Ok(created) => created,
        Err(kube::Error::Api(e)) if e.code == 409 => quotas.get(QUOTA).await?,
        Err(e) => return Err(e),
    };
    let used = created
        .status
        .and_then(|s| s.used)
        .and_then(|u| u.get(key).map(|q| q.0.clone()))
        .unwrap_or_else(|| "0".to_owned());
    let patch = json!({"spec": {"hard": {key: used}}});
    quotas
        .patch(QUOTA, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(used)
}

async fn lift_quota(client: &kube::Client, namespace: &str) -> Result<(), kube::Error> {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), namespace);
    match quotas.delete(QUOTA, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Kills `pod`'s submission through the API as `submitter kill ID` does, retrying; true when
/// the answer says the driver was killed (a driver that finished first is answered as it is).
async fn kill(users: &Users, pod: &Pod) -> bool {
    let Some(id) = submission_id(pod) else {
        return false;
    };
    let (tally, ledger) = (&users.tally, &users.ledger);
    let target = Target::Submission(id.clone());
    let query = KillQuery::default();
    let Some(status) = with_retries(users, "kill_api", &format!("kill {id}"), || {
        users.client.kill(&target, &query)
    })
    .await
    else {
        return false;
    };
    // The kill names the id's one driver, as every submit answer does.
    ledger.answered(&id, &status.driver_pod_uid);
    if status.reason.as_deref() == Some(submitter::record::KILLED_REASON) {
        ledger.killed(&id, &status.driver_pod_uid);
        tally.operation("kill_api_killed");
        return true;
    }
    tally.operation("kill_api_found_finished");
    false
}

/// Asks the API to kill `pod`, a SparkApplication's driver: the answer must be 409
/// `DRIVER_OWNED_BY_APPLICATION` (its operator would only start it again), never a kill. A
/// driver that ended between the pick and the request is answered with its final state, as a
/// kill of any finished driver is: fine, as long as it does not read killed.
async fn kill_refused(users: &Users, pod: &Pod) {
    let tally = &users.tally;
    let (Some(namespace), Some(name)) = (pod.metadata.namespace.clone(), pod.metadata.name.clone())
    else {
        return;
    };
    let target = Target::Driver {
        namespace,
        pod: name,
    };
    for _ in 0..ATTEMPTS {
        match users.client.kill(&target, &KillQuery::default()).await {
            Ok(status) => {
                let killed = status.reason.as_deref() == Some(submitter::record::KILLED_REASON)
                    || !matches!(status.phase, DriverPhase::Succeeded | DriverPhase::Failed);
                tally.check(
                    invariants::REST_CONTRACT,
                    killed.then(|| {
                        format!(
                            "kill of {target}, a SparkApplication's driver, answered {:?} {:?}",
                            status.phase, status.reason
                        )
                    }),
                );
                tally.operation("kill_api_owned_found_finished");
                return;
            }
            Err(error) if error.code() == Some(ErrorCode::DriverOwnedByApplication) => {
                tally.check(invariants::REST_CONTRACT, None);
                tally.operation("kill_api_refused_owned");
                return;
            }
            Err(error) => {
                tally.check(
                    invariants::REST_CONTRACT,
                    invariants::rest_answer(&error).map(|d| format!("kill {target}: {d}")),
                );
                if !error.retryable() {
                    tally.operation(&format!("kill_api_owned_error_{}", error_name(&error)));
                    return;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// The count of each fault kind's applications, for the progress lines.
pub fn summary(faults: &BTreeMap<String, u64>) -> String {
    faults
        .iter()
        .filter(|(k, _)| !k.ends_with("_skipped"))
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
