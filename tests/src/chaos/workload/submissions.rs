//! Direct REST submissions through the balancer, as CI pipelines and orchestrators send them:
//! new ids (sometimes sent two or three times at once, sometimes into two namespaces at once),
//! repeats of earlier bodies, status look-ups, logs followed to their end; drivers that
//! succeeded are deleted after a while, as their users clean up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use serde_json::json;
use submission::api::{DriverPhase, SubmitRequest, SubmitResponse, Target};
use submitter_client::{ClientConfig, SubmitterClient};
use tokio::sync::watch;

use super::retries::with_retries;
use super::{JOB_NAMESPACES, RETIRE_AFTER};
use crate::Sandbox;
use crate::chaos::invariants::{self, Tally};
use crate::chaos::ledger::Ledger;
use crate::chaos::log_follow::{self, Expected, Follow};

/// A REST client of the sandbox's submitters through `port` (the balancer), one attempt per call
/// so that the workload sees, and checks, every answer.
pub fn rest_client(
    sandbox: &Sandbox,
    port: u16,
) -> Result<SubmitterClient, submitter_client::NewClientError> {
    let mut config = ClientConfig::new(format!("https://localhost:{port}/api/v1/spark-submit"));
    config.ca = Some(sandbox.dir().join("ca.crt"));
    config.cert = Some(sandbox.dir().join("operator.crt"));
    config.key = Some(sandbox.dir().join("operator.key"));
    config.max_retries = 1;
    config.request_timeout = Duration::from_secs(10);
    config.cert_check_interval = Duration::from_millis(500);
    SubmitterClient::new(config)
}

/// A submission of `id` into `namespace` whose driver runs `run_seconds`. The driver container
/// is named after the id (a template container and `podTemplateContainerName`, as Spark
/// allows), so its scripted log names it: a followed log shows whose lines it holds.
fn request(id: &str, namespace: &str, run_seconds: u64) -> SubmitRequest {
    let args = [
        "--master",
        "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode",
        "cluster",
        "--name",
        "chaos-rest",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "--conf",
        "spark.kubernetes.container.image=spark:4.0.0",
        "--conf",
        "spark.executor.instances=1",
        "local:///opt/spark/examples/jars/spark-examples.jar",
    ];
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let confs = [
        format!(
            "--conf=spark.kubernetes.authenticate.driver.serviceAccountName={}",
            crate::driver_account::NAME
        ),
        format!("--conf=spark.kubernetes.namespace={namespace}"),
        format!("--conf=spark.kubernetes.driver.podTemplateContainerName={id}"),
    ];
    for conf in confs {
        args.insert(args.len() - 1, conf);
    }
    SubmitRequest {
        submission_id: id.to_owned(),
        spark_submit_args: args,
        driver_pod_template: Some(json!({
            "metadata": {"annotations": {"kubesim.io/run-seconds": run_seconds.to_string()}},
            "spec": {"containers": [{"name": id}]},
        })),
        executor_pod_template: None,
    }
}

/// What the REST traffic shares with its tasks.
#[derive(Clone)]
pub struct Users {
    pub client: Arc<SubmitterClient>,
    /// The cluster as a user's kubectl sees it (looked at when a followed log is silent, and
    /// to delete finished drivers).
    pub kube: kube::Client,
    pub tally: Arc<Tally>,
    pub ledger: Arc<Ledger>,
}

/// Submits `request` with retries, checking every answer; returns the answer.
async fn submit(users: &Users, request: &SubmitRequest) -> Option<SubmitResponse> {
    let (tally, id) = (&users.tally, &request.submission_id);
    let (killed_before, answer) =
        with_retries(users, "submit", &format!("submit {id}"), || async {
            // Read before each attempt: a kill between two attempts is what the repeat meets.
            let killed_before = users.ledger.killed_driver(id);
            let answer = users.client.submit(request).await?;
            Ok((killed_before, answer))
        })
        .await?;
    tally.operation(if answer.duplicate_submission {
        "submit_duplicate"
    } else {
        "submit_created"
    });
    users.ledger.answered(id, &answer.driver_pod_uid);
    if killed_before.is_some() {
        tally.check(
            invariants::KILLED_STAYS_KILLED,
            (!answer.duplicate_submission)
                .then(|| format!("submission {id} was killed and a repeat created a driver")),
        );
    }
    Some(answer)
}

/// Looks `id` up with retries; a killed submission must read killed.
async fn look_up(users: &Users, id: &str) {
    let tally = &users.tally;
    let Some((killed_before, status)) =
        with_retries(users, "status", &format!("status {id}"), || async {
            let killed_before = users.ledger.killed_driver(id);
            let status = users.client.submission_status(id).await?;
            Ok((killed_before, status))
        })
        .await
    else {
        return;
    };
    tally.operation("status_lookup");
    if let Some(uid) = killed_before {
        let killed = status.phase == DriverPhase::Failed
            && status.reason.as_deref() == Some(submitter::record::KILLED_REASON)
            && status.driver_pod_uid == uid;
        tally.check(
            invariants::KILLED_STAYS_KILLED,
            (!killed).then(|| {
                format!(
                    "submission {id} was killed (driver uid {uid}) and reads {:?} {:?} uid {}",
                    status.phase, status.reason, status.driver_pod_uid
                )
            }),
        );
    }
}

/// Submits a new id and, when `follow` and the answer created a driver, follows that driver's
/// log to its end.
async fn submit_new(users: Users, request: Arc<SubmitRequest>, follow: bool) {
    let Some(answer) = submit(&users, &request).await else {
        return;
    };
    if !follow || answer.duplicate_submission {
        return;
    }
    let reader = Follow {
        what: "to_end",
        target: Target::Submission(answer.submission_id.clone()),
        namespace: answer.namespace.clone(),
        pod: answer.driver_pod_name.clone(),
        expected: Expected::Scripted {
            container: answer.submission_id.clone(),
        },
        hang_up_after: None,
    };
    log_follow::follow_and_check(
        &users.client,
        &users.kube,
        &users.tally,
        &users.ledger,
        &reader,
    )
    .await;
}

/// Runs REST traffic until `stop` turns true, then waits for its calls and readers.
pub async fn run(users: Users, seed: u64, mut stop: watch::Receiver<bool>) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x0005_e57e);
    let mut sent: Vec<Arc<SubmitRequest>> = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut cleaner = Cleaner::default();
    for index in 0.. {
        let pause = Duration::from_millis(rng.u64(500..2000));
        if tokio::time::timeout(pause, stop.wait_for(|s| *s))
            .await
            .is_ok()
        {
            break;
        }
        let choice = rng.u32(0..10);
        if choice < 5 || sent.is_empty() {
            let id = format!("chaos-{seed}-{index}");
            let run_seconds = rng.u64(1..8);
            let follow = rng.u32(0..3) == 0;
            // Now and then one new id goes into both namespaces at once: one must lose.
            let requests: Vec<Arc<SubmitRequest>> = if rng.u32(0..7) == 0 {
                users.tally.operation("submit_raced_across_namespaces");
                JOB_NAMESPACES
                    .iter()
                    .map(|ns| Arc::new(request(&id, ns, run_seconds)))
                    .collect()
            } else {
                let one = Arc::new(request(&id, JOB_NAMESPACES[0], run_seconds));
                vec![one; rng.usize(1..4)]
            };
            for (copy, request) in requests.iter().enumerate() {
                tasks.spawn(submit_new(
                    users.clone(),
                    request.clone(),
                    follow && copy == 0,
                ));
            }
            sent.extend(requests);
        } else if choice < 7 {
            // The same body again, later: an idempotent repeat.
            let request = sent[rng.usize(0..sent.len())].clone();
            let users = users.clone();
            tasks.spawn(async move {
                submit(&users, &request).await;
            });
        } else {
            let id = sent[rng.usize(0..sent.len())].submission_id.clone();
            let users = users.clone();
            tasks.spawn(async move { look_up(&users, &id).await });
        }
        cleaner.pass(&users).await;
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// Deletes REST drivers that succeeded [`RETIRE_AFTER`] ago, as their users do; the
/// submission stays answered by its retention record. Failed drivers are kept: a failed id
/// whose driver is deleted is free again (no record of failures), which a repeat would take
/// for a second driver.
#[derive(Default)]
struct Cleaner {
    last: Option<Instant>,
    /// Pods seen Succeeded, by uid: when first seen so.
    succeeded: BTreeMap<String, Instant>,
}

/// How often the cleaner looks.
const CLEAN_EVERY: Duration = Duration::from_secs(10);

impl Cleaner {
    async fn pass(&mut self, users: &Users) {
        if self.last.is_some_and(|at| at.elapsed() < CLEAN_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let role = format!(
            "{}={}",
            submission::meta::labels::SPARK_ROLE,
            submission::meta::labels::DRIVER_ROLE
        );
        let Ok(pods) = Api::<Pod>::all(users.kube.clone())
            .list(&ListParams::default().labels(&role))
            .await
        else {
            return;
        };
        let mut seen = BTreeMap::new();
        for pod in pods.items {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let succeeded =
                pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
            if labels.contains_key(operator::labels::APP_NAME) || !succeeded {
                continue;
            }
            let (Some(uid), Some(name), Some(namespace)) = (
                pod.metadata.uid.clone(),
                pod.metadata.name.clone(),
                pod.metadata.namespace.clone(),
            ) else {
                continue;
            };
            let since = self
                .succeeded
                .get(&uid)
                .copied()
                .unwrap_or_else(Instant::now);
            if since.elapsed() < RETIRE_AFTER {
                seen.insert(uid, since);
                continue;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match Api::<Pod>::namespaced(users.kube.clone(), &namespace)
                .delete(&name, &params)
                .await
            {
                Ok(_) => users.tally.operation("delete_succeeded_rest_driver"),
                Err(_) => {
                    seen.insert(uid, since);
                }
            }
        }
        self.succeeded = seen;
    }
}
