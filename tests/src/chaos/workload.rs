//! The workload: SparkApplications of every restart policy with recovery on and off, and direct
//! REST submissions with retries, concurrent duplicates and status look-ups.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, PostParams};
use operator::crd::SparkApplication;
use serde_json::json;
use submission::api::SubmitRequest;
use submitter_client::{ClientConfig, SubmitterClient};
use tokio::sync::watch;

use super::invariants::{self, Tally};
use crate::{NAMESPACE, Sandbox, StagedApp};

/// The restart policies, each drawn alike.
pub const POLICIES: [&str; 4] = ["Never", "OnFailure", "OnInfrastructureFailure", "Always"];

/// An application the workload created.
#[derive(Debug, Clone)]
pub struct CreatedApp {
    pub name: String,
    pub policy: &'static str,
    pub recovery: bool,
    pub stages: u64,
}

/// Draws the next application from `rng`: recovery on runs the staged driver (with its agent);
/// recovery off runs kubesim's scripted Spark image for a few seconds.
pub fn draw_app(rng: &mut fastrand::Rng, index: usize) -> CreatedApp {
    CreatedApp {
        name: format!("chaos-app-{index}"),
        policy: POLICIES[rng.usize(0..POLICIES.len())],
        recovery: rng.bool(),
        stages: rng.u64(3..7),
    }
}

/// Creates `app` in the sandbox.
pub async fn create_app(
    sandbox: &Sandbox,
    app: &CreatedApp,
    stage_millis: u64,
) -> Result<(), kube::Error> {
    let staged = StagedApp {
        stages: app.stages,
        stage_millis,
        retries: 3,
        recovery: app.recovery,
        ..StagedApp::new(&app.name)
    };
    let manifest = sandbox
        .staged_app(&staged)
        .map_err(kube::Error::SerdeError)?;
    let mut value = serde_json::to_value(manifest).map_err(kube::Error::SerdeError)?;
    value["spec"]["restartPolicy"]["type"] = json!(app.policy);
    if !app.recovery {
        // The staged driver needs its agent; without recovery the scripted image runs instead.
        value["spec"]["image"] = json!("spark:4.0.0");
        value["spec"]["driver"]["annotations"] = json!({"kubesim.io/run-seconds": (app.stages * stage_millis / 1000).max(1).to_string()});
    }
    let manifest: SparkApplication =
        serde_json::from_value(value).map_err(kube::Error::SerdeError)?;
    Api::<SparkApplication>::namespaced(sandbox.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &manifest)
        .await
        .map(|_| ())
}

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

fn request(id: &str, run_seconds: u64) -> SubmitRequest {
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
    args.insert(
        args.len() - 1,
        format!(
            "--conf=spark.kubernetes.authenticate.driver.serviceAccountName={}",
            crate::driver_account::NAME
        ),
    );
    SubmitRequest {
        submission_id: id.to_owned(),
        spark_submit_args: args,
        driver_pod_template: Some(json!({
            "metadata": {"annotations": {"kubesim.io/run-seconds": run_seconds.to_string()}},
            "spec": {"containers": []},
        })),
        executor_pod_template: None,
    }
}

/// How many attempts one submission or look-up makes before the workload gives up on it.
const ATTEMPTS: u32 = 12;
const RETRY_PAUSE: Duration = Duration::from_millis(400);

/// Submits `request` with retries, checking every answer; returns the driver pod uid.
async fn submit(
    client: &SubmitterClient,
    request: &SubmitRequest,
    tally: &Tally,
) -> Option<String> {
    for _ in 0..ATTEMPTS {
        match client.submit(request).await {
            Ok(answer) => {
                tally.check(invariants::REST_CONTRACT, None);
                tally.operation(if answer.duplicate_submission {
                    "submit_duplicate"
                } else {
                    "submit_created"
                });
                return Some(answer.driver_pod_uid);
            }
            Err(error) => {
                tally.check(
                    invariants::REST_CONTRACT,
                    invariants::rest_answer(&error)
                        .map(|d| format!("submit {}: {d}", request.submission_id)),
                );
                tally.operation(&format!("submit_error_{}", error_name(&error)));
                tracing::debug!(%error, id = %request.submission_id, "submission failed");
                if !error.retryable() {
                    return None;
                }
                tokio::time::sleep(
                    error
                        .retry_after()
                        .unwrap_or(RETRY_PAUSE)
                        .min(RETRY_PAUSE * 5),
                )
                .await;
            }
        }
    }
    tally.operation("submit_gave_up");
    None
}

/// Driver pod uids answered per submission id.
pub type Answers = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// Runs REST traffic until `stop` turns true: new submissions (sometimes sent 2-3 times at once),
/// repeats of earlier ones, and status look-ups.
pub async fn rest_traffic(
    client: SubmitterClient,
    seed: u64,
    tally: Arc<Tally>,
    answers: Answers,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x0005_e57e);
    let client = Arc::new(client);
    let mut sent: Vec<Arc<SubmitRequest>> = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
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
            let copies = rng.usize(1..4);
            let request = Arc::new(request(&id, rng.u64(1..5)));
            for _ in 0..copies {
                let (client, tally, answers, request) = (
                    client.clone(),
                    tally.clone(),
                    answers.clone(),
                    request.clone(),
                );
                tasks.spawn(async move {
                    if let Some(uid) = submit(&client, &request, &tally).await
                        && let Ok(mut answers) = answers.lock()
                    {
                        answers
                            .entry(request.submission_id.clone())
                            .or_default()
                            .push(uid);
                    }
                });
            }
            sent.push(request);
        } else if choice < 7 {
            // The same body again, later: an idempotent repeat.
            let request = sent[rng.usize(0..sent.len())].clone();
            let (client, tally, answers) = (client.clone(), tally.clone(), answers.clone());
            tasks.spawn(async move {
                if let Some(uid) = submit(&client, &request, &tally).await
                    && let Ok(mut answers) = answers.lock()
                {
                    answers
                        .entry(request.submission_id.clone())
                        .or_default()
                        .push(uid);
                }
            });
        } else {
            let id = sent[rng.usize(0..sent.len())].submission_id.clone();
            let (client, tally) = (client.clone(), tally.clone());
            tasks.spawn(async move {
                for _ in 0..ATTEMPTS {
                    match client.submission_status(&id).await {
                        Ok(_) => {
                            tally.check(invariants::REST_CONTRACT, None);
                            tally.operation("status_lookup");
                            return;
                        }
                        Err(error) => {
                            tally.check(
                                invariants::REST_CONTRACT,
                                invariants::rest_answer(&error)
                                    .map(|d| format!("status {id}: {d}")),
                            );
                            tally.operation(&format!("status_error_{}", error_name(&error)));
                            if !error.retryable() {
                                return;
                            }
                            tokio::time::sleep(RETRY_PAUSE).await;
                        }
                    }
                }
            });
        }
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// The error's kind, with the envelope's code when the service refused.
fn error_name(error: &submitter_client::SubmitError) -> String {
    match error {
        submitter_client::SubmitError::Rejected { code_text, .. } => {
            format!("rejected_{}", code_text.to_lowercase())
        }
        other => other.kind().to_owned(),
    }
}
