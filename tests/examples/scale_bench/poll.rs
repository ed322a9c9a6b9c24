//! The polling variant of the scale benchmark: a minimal operator that, every interval, LISTs all
//! SparkApplications and all driver pods (the real operator's label selector) and drives every
//! app with the same pure core as `operator run` (`observe::find_driver`, `state_machine::decide`,
//! `Action::order`) and the same effects (fenced status write, submission through
//! `SubmitterClient`, uid-preconditioned deletes, events). Only the source of observations
//! differs: a LIST per interval instead of watches and caches.
//!
//! It runs as its own process (`scale_bench poll-operator ...`) so its peak memory is its own,
//! and serves the same `/readyz` and `/metrics` as `operator run`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::events::Reporter;
use kube::{Client, ResourceExt};
use operator::controller::serve_probes;
use operator::crd::SparkApplication;
use operator::events::EventRecorder;
use operator::labels;
use operator::metrics::Metrics;
use operator::reconciler::kube::{publish_event, send_submission};
use operator::reconciler::{Health, observe};
use operator::state_machine::{Action, AppView, Observed, Settings, SubmissionOutcome, decide};
use submission::error_chain::error_chain;
use submitter_client::{ClientConfig, SubmitterClient};
use tracing::warn;

/// Same bound on decide → execute rounds per app per tick as the real reconciler.
const MAX_ROUNDS: usize = 8;

#[derive(Debug, clap::Args)]
pub struct PollArgs {
    #[arg(long)]
    pub kubeconfig: PathBuf,
    #[arg(long)]
    pub submitter_url: String,
    #[arg(long)]
    pub tls_cert: PathBuf,
    #[arg(long)]
    pub tls_key: PathBuf,
    #[arg(long)]
    pub ca: PathBuf,
    #[arg(long, default_value = "k8s://https://kubernetes.default.svc:443")]
    pub master: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    pub probe_listen: SocketAddr,
    /// Time between the starts of two LIST rounds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Apps reconciled concurrently within one round.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// The process exits after this long (the bench kills it sooner; this bounds an orphan).
    #[arg(long, default_value_t = 3600)]
    pub max_seconds: u64,
}

/// Bound on one round's two LISTs.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

struct Ctx {
    client: Client,
    submitter: SubmitterClient,
    recorder: EventRecorder,
    settings: Settings,
    master: String,
    metrics: Arc<Metrics>,
}

pub fn main(args: PollArgs) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .json()
        .try_init();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: PollArgs) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let mut submitter = ClientConfig::new(args.submitter_url);
    submitter.ca = Some(args.ca);
    submitter.cert = Some(args.tls_cert);
    submitter.key = Some(args.tls_key);
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let (_, probes) = serve_probes(args.probe_listen, health.clone(), metrics.clone()).await?;
    tokio::spawn(probes);
    let ctx = Arc::new(Ctx {
        submitter: SubmitterClient::new(submitter)?,
        recorder: EventRecorder::new(
            client.clone(),
            Reporter {
                controller: "spark-operator".into(),
                instance: Some("poll".into()),
            },
        ),
        client: client.clone(),
        settings: Settings::default(),
        master: args.master,
        metrics,
    });
    let apps_api: Api<SparkApplication> = Api::all(client.clone());
    let pods_api: Api<Pod> = Api::all(client);
    let pod_selector = ListParams::default().labels(&observe::driver_pod_selector());
    let all_apps = ListParams::default();
    let interval = Duration::from_millis(args.interval_ms.max(10));
    // The poller's "watches": one stream each, fed by its LISTs.
    let (apps_stream, pods_stream) = (health.apps.stream(), health.pods.stream());
    let stop_at = Instant::now() + Duration::from_secs(args.max_seconds);
    while Instant::now() < stop_at {
        let round = Instant::now();
        let listed = tokio::time::timeout(
            LIST_TIMEOUT,
            futures::future::try_join(apps_api.list(&all_apps), pods_api.list(&pod_selector)),
        )
        .await;
        match listed {
            Err(_) => warn!(timeout_secs = LIST_TIMEOUT.as_secs(), "list timed out"),
            Ok(Err(error)) => warn!(error = %error_chain(&error), "list failed"),
            Ok(Ok((apps, pods))) => {
                // Both "caches" are the lists just read: ready from the first round on.
                apps_stream.on_event(true);
                pods_stream.on_event(true);
                let index = Arc::new(PodIndex::new(pods.items));
                futures::stream::iter(apps.items)
                    .map(|app| reconcile(ctx.clone(), index.clone(), app))
                    .buffer_unordered(args.concurrency.max(1))
                    .collect::<()>()
                    .await;
            }
        }
        tokio::time::sleep(interval.saturating_sub(round.elapsed())).await;
    }
    warn!(
        max_seconds = args.max_seconds,
        "stopping: lifetime bound reached"
    );
    Ok(())
}

/// Driver pods of one LIST, indexed so that finding an app's driver does not scan them all:
/// candidates are the pods the app owns plus the pod its status names, and
/// `observe::find_driver` picks among them exactly as among the whole cache.
struct PodIndex {
    by_owner: HashMap<String, Vec<Arc<Pod>>>,
    by_name: HashMap<(String, String), Arc<Pod>>,
}

impl PodIndex {
    fn new(pods: Vec<Pod>) -> PodIndex {
        let mut by_owner: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        let mut by_name = HashMap::new();
        for pod in pods {
            let pod = Arc::new(pod);
            for owner in pod.metadata.owner_references.as_deref().unwrap_or_default() {
                by_owner
                    .entry(owner.uid.clone())
                    .or_default()
                    .push(pod.clone());
            }
            by_name.insert((pod.namespace().unwrap_or_default(), pod.name_any()), pod);
        }
        PodIndex { by_owner, by_name }
    }

    fn driver(&self, app: &SparkApplication) -> Option<operator::state_machine::ObservedDriver> {
        let uid = app.metadata.uid.as_deref()?;
        let namespace = app.namespace().unwrap_or_default();
        let mut candidates: Vec<&Pod> = self
            .by_owner
            .get(uid)
            .map(|pods| pods.iter().map(Arc::as_ref).collect())
            .unwrap_or_default();
        let named = app
            .status
            .as_ref()
            .map(|s| s.driver_info.pod_name.clone())
            .unwrap_or_default();
        if let Some(pod) = self.by_name.get(&(namespace.clone(), named)) {
            candidates.push(pod);
        }
        candidates.retain(|pod| pod.metadata.namespace.as_deref() == Some(namespace.as_str()));
        observe::find_driver(app, &candidates).map(|pod| observe::observe_driver(pod, uid))
    }
}

/// One app, one round: decide and execute until nothing is left to do now (what is due later is
/// picked up by a later round's LIST).
async fn reconcile(ctx: Arc<Ctx>, index: Arc<PodIndex>, mut app: SparkApplication) {
    let started = Instant::now();
    let Some(namespace) = app.namespace() else {
        return;
    };
    let apps: Api<SparkApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut observed = Observed {
        cache_synced: true,
        driver: index.driver(&app),
        ..Observed::default()
    };
    let mut acted = false;
    for _ in 0..MAX_ROUNDS {
        let Some(view) = AppView::of(&app, &ctx.settings) else {
            return;
        };
        let decision = decide(&view, &observed, Timestamp::now());
        let mut again = false;
        let mut later = false;
        // In the order listed: `decide` lists them in execution order (`Action::order`).
        for action in decision.actions {
            if !matches!(action, Action::Requeue(_)) {
                acted = true;
            }
            match action {
                Action::WriteStatus => {
                    let mut body = app.clone();
                    body.status = Some(decision.status.clone());
                    body.metadata.managed_fields = None;
                    match apps
                        .replace_status(&app.name_any(), &PostParams::default(), &body)
                        .await
                    {
                        Ok(written) => {
                            app = written;
                            observed.submission = None;
                            observed.driver_absent_verified = false;
                            again = true;
                        }
                        Err(error) => {
                            // A 409 (or any failure) is retried by the next round's LIST.
                            warn!(app = %app.name_any(), error = %error_chain(&error), "status write failed");
                            return;
                        }
                    }
                }
                Action::VerifyDriverAbsent { name } => {
                    let current = app
                        .status
                        .as_ref()
                        .map(|s| s.submission_id.clone())
                        .unwrap_or_default();
                    match pods.get_opt(&name).await {
                        Ok(pod) => {
                            observed.driver_absent_verified = pod.is_none_or(|pod| {
                                pod.labels().get(labels::SUBMISSION_ID) != Some(&current)
                            });
                            again = true;
                        }
                        Err(error) => {
                            warn!(error = %error_chain(&error), "driver read failed");
                            return;
                        }
                    }
                }
                Action::EnsureUiObjects => {
                    // The benchmark's operator makes no UI objects.
                    observed.ui = Some(Default::default());
                    again = true;
                }
                Action::EnsureDependencies | Action::StopDriver { .. } => {
                    // The benchmark's apps have no PodGroup, PDB or monitoring, and no object
                    // of theirs is refused.
                    warn!(app = %app.name_any(), "owned objects are not part of the scale benchmark");
                    return;
                }
                Action::InspectPendingDriver { .. } => {
                    // The polling operator reports no stuck drivers: it reads no events, so it
                    // takes the answer "no Warning event" and looks again in a later round.
                    observed.driver_warning = Some(None);
                    again = true;
                }
                Action::AdvanceEpoch { .. } => {
                    // The benchmark's apps do not ask for fenced restarts.
                    warn!(app = %app.name_any(), "fenced restarts are not part of the scale benchmark");
                    return;
                }
                Action::Submit { submission_id } => {
                    observed.submission = Some(submit(&ctx, &app, submission_id).await);
                    again = true;
                }
                Action::DeleteDriver { name, uid } => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    if let Err(error) = pods.delete(&name, &params).await {
                        warn!(error = %error_chain(&error), "driver delete failed");
                    }
                    later = true;
                }
                Action::RecordEvent {
                    event_type,
                    reason,
                    message,
                } => {
                    publish_event(&ctx.recorder, &app, event_type, reason, message).await;
                }
                Action::DeleteApplication => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: app.metadata.uid.clone(),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    let _ = apps.delete(&app.name_any(), &params).await;
                    return;
                }
                Action::Requeue(after) if after.is_zero() => again = true,
                Action::Requeue(_) => later = true,
            }
        }
        let unrecorded = observed.submission.is_some() || observed.driver_absent_verified;
        if !unrecorded && (!again || later) {
            break;
        }
    }
    // Rounds that only looked (nothing changed) are not reconciles in the watch variant's
    // sense; counting them would fill the histogram with microsecond no-ops.
    if acted {
        ctx.metrics.reconciled(started.elapsed());
    }
}

async fn submit(ctx: &Ctx, app: &SparkApplication, submission_id: String) -> SubmissionOutcome {
    send_submission(
        &ctx.submitter,
        &ctx.metrics,
        (&ctx.master, None),
        app,
        submission_id,
    )
    .await
}
