//! The reconciler: observe → decide → execute → write status, for one SparkApplication.
//!
//! Observe reads the app and its driver pod from the watch caches (the live API only when
//! `decide` asks to confirm a missing driver), `decide` is the pure state machine, and the
//! actions run in a fixed order ([`rank`]). After every status write, `decide` runs again on the
//! object the write returned, so a multi-step transition (persist the submission id, then
//! submit, then record the answer) completes in one reconcile without trusting a stale cache.

pub mod observe;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use submission::error_chain::error_chain;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::controller::Action as ControllerAction;
use kube_runtime::events::{Event, EventType as KubeEventType, Recorder};
use kube_runtime::reflector::Store;
use submitter_client::SubmitterClient;
use thiserror::Error;
use tracing::{debug, info, instrument, warn};

use crate::argv::build_submission;
use crate::crd::{ApplicationStateType as State, SparkApplication, SparkApplicationStatus};
use crate::labels;
use crate::metrics::{Metrics, outcome};
use crate::progress_store::{AnyStore, AppKey, ProgressStore, StoreError};
use crate::recovery;
use crate::state_machine::{
    Action, AppView, EventType, FenceOutcome, Observed, ObservedDriver, Settings,
    SubmissionOutcome, decide,
};

/// Most decide → execute rounds in one reconcile; a transition needs at most four (persist the
/// id, submit, record the answer, follow the driver), the rest is a guard against a loop.
const MAX_ROUNDS: usize = 8;

/// How soon to look again after a status write lost a race (409): the cache brings the newer
/// object meanwhile.
const CONFLICT_REQUEUE: Duration = Duration::from_millis(200);

/// Safety net when nothing is scheduled: watch events normally trigger the next reconcile.
const IDLE_REQUEUE: Duration = Duration::from_secs(300);

/// Error backoff: first delay, doubled per consecutive failure of the same object, capped.
const ERROR_BACKOFF: Duration = Duration::from_millis(500);
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(60);

/// Whether one watch is connected and has listed once.
#[derive(Debug, Default)]
pub struct WatchHealth {
    synced: AtomicBool,
    up: AtomicBool,
    restarts: AtomicU64,
}

impl WatchHealth {
    /// A watch event arrived: the watch is up; `InitDone` means its cache is complete.
    pub fn on_event(&self, init_done: bool) {
        self.up.store(true, Ordering::Relaxed);
        if init_done {
            self.synced.store(true, Ordering::Relaxed);
        }
    }

    /// The watch failed; the watcher retries with backoff. True when it was up until now.
    pub fn on_error(&self) -> bool {
        let was_up = self.up.swap(false, Ordering::Relaxed);
        if was_up {
            self.restarts.fetch_add(1, Ordering::Relaxed);
        }
        was_up
    }

    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    pub fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Times the watch went down after being up.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// The health of both watches, for `/readyz` and for `Observed::cache_synced`.
#[derive(Debug, Default)]
pub struct Health {
    pub apps: WatchHealth,
    pub pods: WatchHealth,
}

impl Health {
    /// Both caches have listed once: decisions may trust them.
    pub fn synced(&self) -> bool {
        self.apps.synced() && self.pods.synced()
    }

    /// Ready to serve: both watches synced and connected.
    pub fn ready(&self) -> bool {
        self.synced() && self.apps.up() && self.pods.up()
    }
}

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    pub submitter: SubmitterClient,
    /// The driver pod cache (the controller's pod watch feeds it).
    pub pods: Store<Pod>,
    pub health: Arc<Health>,
    pub recorder: Recorder,
    pub settings: Settings,
    /// `--master` given to the submitter in the argv.
    pub master: String,
    pub metrics: Arc<Metrics>,
    /// The state store of fenced restarts (when `settings.recovery` is set).
    pub store: Option<AnyStore>,
    /// Consecutive failures per object (`ns/name`), for the error backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Per object, the resourceVersion of the status this operator last wrote, until the cache
    /// shows it: a reconcile started from an older cached copy would act on a stale status (submit
    /// again, then lose its write to a 409), so it reads the live object instead.
    written: Mutex<HashMap<String, String>>,
}

impl Context {
    pub fn new(
        client: Client,
        submitter: SubmitterClient,
        pods: Store<Pod>,
        health: Arc<Health>,
        recorder: Recorder,
        (settings, master): (Settings, String),
        metrics: Arc<Metrics>,
    ) -> Context {
        Context {
            client,
            submitter,
            pods,
            health,
            recorder,
            settings,
            master,
            metrics,
            store: None,
            failures: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// With the state store of fenced restarts.
    pub fn with_store(mut self, store: AnyStore) -> Context {
        self.store = Some(store);
        self
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // A panic while holding this lock only costs a live read; keep going.
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        // A panic while holding this lock only loses backoff counts; keep going.
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A reconcile failed; the controller retries it with backoff.
#[derive(Debug, Error)]
pub enum ReconcileError {
    #[error("the application has no name, namespace or uid")]
    ReadApplication,
    #[error("cannot read the application's current version")]
    ReadLatest(#[source] kube::Error),
    #[error("cannot write the status of the application")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot read driver pod {name}")]
    VerifyDriverAbsent {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete driver pod {name}")]
    DeleteDriver {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete the application")]
    DeleteApplication(#[source] kube::Error),
    #[error("cannot fence the application's drivers in the state store")]
    Fence(#[source] StoreError),
    #[error("fenced restarts are requested but the operator has no state store")]
    NoStore,
}

impl ReconcileError {
    /// A stable name for logs, metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ReconcileError::ReadApplication => "read_application",
            ReconcileError::ReadLatest(_) => "read_latest",
            ReconcileError::WriteStatus(_) => "write_status",
            ReconcileError::VerifyDriverAbsent { .. } => "verify_driver_absent",
            ReconcileError::DeleteDriver { .. } => "delete_driver",
            ReconcileError::DeleteApplication(_) => "delete_application",
            ReconcileError::Fence(_) => "fence",
            ReconcileError::NoStore => "no_store",
        }
    }
}

/// The order actions of one decision run in, whatever order they came in: the status first (it
/// persists what a submission needs, and a lost race stops everything after it), then the fence
/// and reads, deletions (older epochs' drivers go before their successor is submitted), the
/// submission, events, the app's own deletion, and the requeue.
pub fn rank(action: &Action) -> u8 {
    match action {
        Action::WriteStatus => 0,
        Action::AdvanceEpoch { .. } => 1,
        Action::VerifyDriverAbsent { .. } => 2,
        Action::DeleteDriver { .. } => 3,
        Action::Submit { .. } => 4,
        Action::RecordEvent { .. } => 5,
        Action::DeleteApplication => 6,
        Action::Requeue(_) => 7,
    }
}

fn key(app: &SparkApplication) -> String {
    format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any())
}

/// The controller's reconcile function.
pub async fn reconcile(
    app: Arc<SparkApplication>,
    ctx: Arc<Context>,
) -> Result<ControllerAction, ReconcileError> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let started = std::time::Instant::now();
    let result = reconcile_app(&ctx, (*app).clone(), &name, &namespace).await;
    ctx.metrics.reconciled(started.elapsed());
    if result.is_ok() {
        ctx.failures().remove(&key(&app));
    }
    result
}

/// The controller's error policy: log, then retry with a backoff that grows per object.
pub fn error_policy(
    app: Arc<SparkApplication>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> ControllerAction {
    let failures = {
        let mut map = ctx.failures();
        let n = map.entry(key(&app)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    };
    ctx.metrics.reconcile_error(error.kind());
    let delay = ERROR_BACKOFF
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MAX_ERROR_BACKOFF);
    warn!(
        app = %app.name_any(),
        ns = %app.namespace().unwrap_or_default(),
        kind = error.kind(),
        error = %error_chain(error),
        failures,
        retry_in_ms = delay.as_millis() as u64,
        "reconcile failed"
    );
    ControllerAction::requeue(delay)
}

#[instrument(skip_all, fields(app = %name, ns = %namespace))]
async fn reconcile_app(
    ctx: &Context,
    mut app: SparkApplication,
    name: &str,
    namespace: &str,
) -> Result<ControllerAction, ReconcileError> {
    if app.metadata.uid.is_none() || namespace.is_empty() {
        return Err(ReconcileError::ReadApplication);
    }
    let apps: Api<SparkApplication> = Api::namespaced(ctx.client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(latest) = latest_version(ctx, &apps, app).await? else {
        // Deleted since the cache saw it: the deletion's own event ends this object's work.
        return Ok(ControllerAction::await_change());
    };
    app = latest;
    let (driver, other_drivers) = observe_cached_drivers(ctx, &app, namespace);
    let mut observed = Observed {
        cache_synced: ctx.health.synced(),
        driver,
        other_drivers,
        heartbeat: read_heartbeat(ctx, &app, namespace).await,
        ..Observed::default()
    };
    for _ in 0..MAX_ROUNDS {
        let Some(view) = AppView::of(&app, &ctx.settings) else {
            return Err(ReconcileError::ReadApplication);
        };
        let decision = decide(&view, &observed, Timestamp::now());
        let mut actions = decision.actions;
        actions.sort_by_key(rank);
        let mut again = false;
        let mut requeue: Option<Duration> = None;
        for action in actions {
            match action {
                Action::WriteStatus => {
                    match write_status(&apps, &app, decision.status.clone()).await {
                        Ok(written) => {
                            let before = state_of(&app);
                            app = written;
                            if let Some(version) = app.metadata.resource_version.clone() {
                                ctx.written().insert(key(&app), version);
                            }
                            if before != State::PendingRerun
                                && state_of(&app) == State::PendingRerun
                            {
                                ctx.metrics.retry("run");
                            }
                            // The answers were about the status just replaced; they are in it now.
                            observed.submission = None;
                            observed.driver_absent_verified = false;
                            observed.fence = None;
                            again = true;
                        }
                        Err(error) if is_conflict(&error) => {
                            debug!("status write lost a race; looking again");
                            return Ok(ControllerAction::requeue(CONFLICT_REQUEUE));
                        }
                        Err(error) => return Err(ReconcileError::WriteStatus(error)),
                    }
                }
                Action::VerifyDriverAbsent { name: pod } => {
                    let current = app
                        .status
                        .as_ref()
                        .map(|s| s.submission_id.clone())
                        .unwrap_or_default();
                    observed.driver_absent_verified =
                        verify_driver_absent(&pods, &pod, &current).await?;
                    info!(
                        pod = %pod,
                        absent = observed.driver_absent_verified,
                        "verified a driver missing from the cache"
                    );
                    again = true;
                }
                Action::Submit { submission_id } => {
                    if app
                        .status
                        .as_ref()
                        .is_some_and(|s| s.submission_attempts > 1)
                    {
                        ctx.metrics.retry("submission");
                    }
                    observed.submission = Some(submit(ctx, &app, submission_id).await);
                    again = true;
                }
                Action::AdvanceEpoch {
                    observed: observed_epoch,
                } => {
                    let store = ctx.store.as_ref().ok_or(ReconcileError::NoStore)?;
                    let fence = fence(store, &app, observed_epoch)
                        .await
                        .map_err(ReconcileError::Fence)?;
                    info!(
                        observed = observed_epoch,
                        epoch = fence.epoch,
                        restores = ?fence.latest,
                        "fenced"
                    );
                    observed.fence = Some(fence);
                    again = true;
                }
                Action::DeleteDriver { name: pod, uid } => {
                    delete_driver(&pods, &pod, &uid).await?;
                    // The cache still shows the pod; deciding again now would delete it again.
                    requeue = min_delay(requeue, ctx.settings.deletion_requeue);
                }
                Action::RecordEvent {
                    event_type,
                    reason,
                    message,
                } => record_event(ctx, &app, event_type, reason, message).await,
                Action::DeleteApplication => {
                    delete_application(&apps, &app).await?;
                    ctx.written().remove(&key(&app));
                    return Ok(ControllerAction::await_change());
                }
                Action::Requeue(after) if after.is_zero() => again = true,
                Action::Requeue(after) => requeue = min_delay(requeue, after),
            }
        }
        // An answer (a submission's, a live read's) must reach the status before we stop, or
        // the next reconcile would ask again.
        let unrecorded = observed.submission.is_some()
            || observed.driver_absent_verified
            || observed.fence.is_some();
        if !unrecorded && (!again || requeue.is_some()) {
            return Ok(ControllerAction::requeue(requeue.unwrap_or(IDLE_REQUEUE)));
        }
        // The driver may have changed while the actions ran.
        observed.cache_synced = ctx.health.synced();
        (observed.driver, observed.other_drivers) = observe_cached_drivers(ctx, &app, namespace);
    }
    debug!("decision rounds exhausted; continuing in the next reconcile");
    Ok(ControllerAction::requeue(Duration::from_millis(100)))
}

fn state_of(app: &SparkApplication) -> State {
    app.status
        .as_ref()
        .map(|s| s.app_state.state)
        .unwrap_or_default()
}

fn min_delay(current: Option<Duration>, next: Duration) -> Option<Duration> {
    Some(current.map_or(next, |c| c.min(next)))
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// The app's driver from the pod cache (owned by the app, or named in its status), and its other
/// owned driver pods (previous runs', older epochs').
fn observe_cached_drivers(
    ctx: &Context,
    app: &SparkApplication,
    namespace: &str,
) -> (Option<ObservedDriver>, Vec<ObservedDriver>) {
    let Some(uid) = app.metadata.uid.as_deref() else {
        return (None, Vec::new());
    };
    let cached = ctx
        .pods
        .state_filter(|pod| pod.metadata.namespace.as_deref() == Some(namespace));
    let pods: Vec<&Pod> = cached.iter().map(Arc::as_ref).collect();
    let driver = observe::find_driver(app, &pods);
    let others = observe::other_drivers(uid, &pods, driver)
        .map(|pod| observe::observe_driver(pod, uid))
        .collect();
    (driver.map(|pod| observe::observe_driver(pod, uid)), others)
}

/// The last heartbeat of a recovery-enabled app whose driver should be alive; `None` when not
/// needed or when the store cannot answer (then staleness is judged at the next look).
async fn read_heartbeat(
    ctx: &Context,
    app: &SparkApplication,
    namespace: &str,
) -> Option<Option<crate::fence::Heartbeat>> {
    let store = ctx.store.as_ref()?;
    ctx.settings.recovery.as_ref()?;
    if !recovery::requested(&app.spec) || !matches!(state_of(app), State::Running | State::Unknown)
    {
        return None;
    }
    match store
        .last_heartbeat(&AppKey::new(namespace, app.name_any()))
        .await
    {
        Ok(heartbeat) => Some(heartbeat),
        Err(error) => {
            warn!(kind = error.kind(), error = %error_chain(&error), "cannot read the heartbeat");
            None
        }
    }
}

/// Fences every driver under `observed` and reads the marker the next driver will restore.
/// The application as of this operator's last status write: the cached copy when the cache has
/// caught up with that write (or there was none), else a live read. `None`: it is gone.
async fn latest_version(
    ctx: &Context,
    apps: &Api<SparkApplication>,
    cached: SparkApplication,
) -> Result<Option<SparkApplication>, ReconcileError> {
    let key = key(&cached);
    let pending = ctx.written().get(&key).cloned();
    match pending {
        None => Ok(Some(cached)),
        Some(version) if cached.metadata.resource_version.as_ref() == Some(&version) => {
            ctx.written().remove(&key);
            Ok(Some(cached))
        }
        Some(_) => {
            let live = apps
                .get_opt(&cached.name_any())
                .await
                .map_err(ReconcileError::ReadLatest)?;
            match &live {
                // Once the cache shows this version, the cached copy is good again.
                Some(app) => match app.metadata.resource_version.clone() {
                    Some(version) => ctx.written().insert(key, version),
                    None => ctx.written().remove(&key),
                },
                None => ctx.written().remove(&key),
            };
            Ok(live)
        }
    }
}

/// Advances the epoch and reads the marker the next driver restores. On the Kubernetes store the
/// application also becomes the owner of its progress ConfigMap, so deleting the application
/// leaves nothing behind.
async fn fence(
    store: &AnyStore,
    app: &SparkApplication,
    observed: u64,
) -> Result<FenceOutcome, StoreError> {
    let key = AppKey::new(app.namespace().unwrap_or_default(), app.name_any());
    let epoch = store.advance_epoch(&key, observed).await?;
    if let (AnyStore::Kube(kube), Some(owner)) = (store, app.controller_owner_ref(&())) {
        kube.adopt(&key, &owner).await?;
    }
    let latest = store.latest(&key).await?;
    Ok(FenceOutcome {
        epoch,
        latest: latest.map(|m| (m.epoch, m.seq)),
    })
}

/// Replaces the status, carrying the resourceVersion read: a concurrent writer makes this 409.
async fn write_status(
    apps: &Api<SparkApplication>,
    app: &SparkApplication,
    status: SparkApplicationStatus,
) -> Result<SparkApplication, kube::Error> {
    let mut body = app.clone();
    body.status = Some(status);
    body.metadata.managed_fields = None;
    apps.replace_status(&app.name_any(), &PostParams::default(), &body)
        .await
}

/// A live read: true when no pod of that name carries the current submission id.
async fn verify_driver_absent(
    pods: &Api<Pod>,
    name: &str,
    submission_id: &str,
) -> Result<bool, ReconcileError> {
    let pod = pods
        .get_opt(name)
        .await
        .map_err(|source| ReconcileError::VerifyDriverAbsent {
            name: name.to_owned(),
            source,
        })?;
    Ok(pod.is_none_or(|pod| {
        pod.labels().get(labels::SUBMISSION_ID).map(String::as_str) != Some(submission_id)
    }))
}

/// Sends the submission whose id the status already holds; every failure becomes an outcome
/// for `decide` (retry or SUBMISSION_FAILED), never a reconcile error.
async fn submit(ctx: &Context, app: &SparkApplication, submission_id: String) -> SubmissionOutcome {
    send_submission(
        &ctx.submitter,
        &ctx.metrics,
        (&ctx.master, ctx.settings.recovery.as_ref()),
        app,
        submission_id,
    )
    .await
}

/// Builds the app's submission (for `master`, with its recovery settings) and sends it, counting
/// the outcome; shared with the scale benchmark's polling operator.
pub async fn send_submission(
    submitter: &SubmitterClient,
    metrics: &Metrics,
    (master, recovery): (&str, Option<&recovery::RecoverySettings>),
    app: &SparkApplication,
    submission_id: String,
) -> SubmissionOutcome {
    let plan = match build_submission(app, master, recovery) {
        Ok(plan) => plan,
        Err(error) => {
            metrics.submission(outcome::REJECTED);
            warn!(kind = error.kind(), error = %error_chain(&error), "cannot build the submission");
            return SubmissionOutcome::Rejected {
                submission_id,
                message: error_chain(&error),
                retryable: false,
            };
        }
    };
    let request = plan.into_request();
    match submitter.submit(&request).await {
        Ok(response) => {
            metrics.submission(if response.duplicate_submission {
                outcome::DUPLICATE
            } else {
                outcome::CREATED
            });
            info!(
                submission_id = %response.submission_id,
                driver = %response.driver_pod_name,
                duplicate = response.duplicate_submission,
                "submitted"
            );
            SubmissionOutcome::Accepted {
                submission_id: response.submission_id,
                driver_pod_name: response.driver_pod_name,
                spark_app_id: response.spark_app_id,
            }
        }
        Err(error) => {
            metrics.submission(if error.retryable() {
                outcome::UNAVAILABLE
            } else {
                outcome::REJECTED
            });
            warn!(
                submission_id = %submission_id,
                kind = error.kind(),
                retryable = error.retryable(),
                error = %error_chain(&error),
                "submission failed"
            );
            SubmissionOutcome::Rejected {
                submission_id,
                message: error_chain(&error),
                retryable: error.retryable(),
            }
        }
    }
}

/// Deletes the driver only if it is still the pod with that uid; gone already is done.
async fn delete_driver(pods: &Api<Pod>, name: &str, uid: &str) -> Result<(), ReconcileError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => {
            info!(pod = %name, "deleted driver pod");
            Ok(())
        }
        // 409: another pod now holds the name; it is not ours to delete.
        Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(()),
        Err(source) => Err(ReconcileError::DeleteDriver {
            name: name.to_owned(),
            source,
        }),
    }
}

async fn delete_application(
    apps: &Api<SparkApplication>,
    app: &SparkApplication,
) -> Result<(), ReconcileError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: app.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match apps.delete(&app.name_any(), &params).await {
        Ok(_) => {
            info!("deleted the application: its time to live expired");
            Ok(())
        }
        Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(()),
        Err(source) => Err(ReconcileError::DeleteApplication(source)),
    }
}

/// The event's `action`. The recorder folds events with the same action and reason into one
/// series that keeps the first note, so a different message (a new epoch, another driver) must be
/// a different action, while the same message repeated stays one series.
pub fn event_action(reason: &str, note: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(note.as_bytes());
    let short: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{reason}-{short}")
}

/// Events are best effort: a lost event must not block the state machine.
async fn record_event(
    ctx: &Context,
    app: &SparkApplication,
    event_type: EventType,
    reason: &'static str,
    message: String,
) {
    publish_event(&ctx.recorder, app, event_type, reason, message).await;
}

/// Publishes one of the state machine's events about `app`, logging a failure; shared with the
/// scale benchmark's polling operator.
pub async fn publish_event(
    recorder: &Recorder,
    app: &SparkApplication,
    event_type: EventType,
    reason: &'static str,
    message: String,
) {
    let event = Event {
        type_: match event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: reason.to_owned(),
        action: event_action(reason, &message),
        note: Some(message),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &app.object_ref(&())).await {
        warn!(reason, error = %error_chain(&error), "cannot record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_machine::EventType;

    #[test]
    fn events_with_other_messages_are_other_actions_and_repeats_are_one() {
        let first = event_action("EpochAdvanced", "epoch 1");
        assert_eq!(first, event_action("EpochAdvanced", "epoch 1"));
        assert_ne!(first, event_action("EpochAdvanced", "epoch 2"));
        assert!(first.starts_with("EpochAdvanced-"), "{first}");
        // The Events API caps `action` at 128 characters.
        assert!(event_action(&"R".repeat(100), "x").len() <= 128);
    }

    #[test]
    fn actions_run_status_first_and_requeue_last() {
        let mut actions = [
            Action::Requeue(Duration::ZERO),
            Action::RecordEvent {
                event_type: EventType::Normal,
                reason: "R",
                message: String::new(),
            },
            Action::DeleteApplication,
            Action::Submit {
                submission_id: "s".into(),
            },
            Action::DeleteDriver {
                name: "d".into(),
                uid: "u".into(),
            },
            Action::WriteStatus,
        ];
        actions.sort_by_key(rank);
        let order: Vec<u8> = actions.iter().map(rank).collect();
        assert_eq!(order, vec![0, 3, 4, 5, 6, 7]);
        assert_eq!(actions[0], Action::WriteStatus);
    }

    #[test]
    fn health_is_ready_only_with_both_watches_synced_and_up() {
        let health = Health::default();
        assert!(!health.ready());
        health.apps.on_event(true);
        health.pods.on_event(false);
        assert!(!health.ready());
        health.pods.on_event(true);
        assert!(health.ready());
        health.pods.on_error();
        assert!(!health.ready());
        assert!(health.synced());
        assert_eq!(health.pods.restarts(), 1);
    }
}
