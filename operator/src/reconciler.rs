//! The reconciler: observe → decide → execute → write status, for one SparkApplication.
//!
//! [`Reconciler::reconcile`] is the loop: take the application (the cached copy, or a live read
//! when the cache predates this operator's last status write), observe its driver from the pod
//! cache, call the pure [`decide`], run the actions in the order the decision lists them
//! ([`Action::order`], the one place that rule lives), and decide again on what the actions
//! answered. After every status write, `decide` runs again on the object the write returned, so a
//! multi-step transition (persist the submission id, then submit, then record the answer)
//! completes in one reconcile without trusting a stale cache.
//!
//! Every effect goes through the [`Effects`] trait: [`kube::KubeEffects`] talks to the API
//! server, the submitter and the state store; tests drive the same loop with a fake that records
//! the calls and answers from a script.

pub mod kube;
pub mod last_write;
pub mod observe;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use submission::error_chain::error_chain;

use ::kube::ResourceExt;
use k8s_openapi::jiff::Timestamp;
use kube_runtime::controller::Action as ControllerAction;
use thiserror::Error;
use tracing::{debug, info, instrument, warn};

use crate::crd::{ApplicationStateType as State, SparkApplication, SparkApplicationStatus};
use crate::fence::Heartbeat;
use crate::metrics::Metrics;
use crate::progress_store::StoreError;
use crate::recovery;
use crate::state_machine::{
    Action, AppView, EventType, FenceOutcome, Observed, ObservedDriver, ObservedExecutor,
    PendingReason, RefusedObject, Settings, SubmissionOutcome, UiMade, decide, submission_attempt,
};
use crate::ui::UiSettings;
use last_write::{CACHE_CATCH_UP, LastWrite, Start, start_from};

/// Most decide → execute rounds in one reconcile; a transition needs at most four (persist the
/// id, submit, record the answer, follow the driver), the rest is a guard against a loop.
pub const MAX_ROUNDS: usize = 8;

/// How soon to look again after a status write lost a race (409): the cache brings the newer
/// object meanwhile.
pub const CONFLICT_REQUEUE: Duration = Duration::from_millis(200);

/// How soon to continue after the decision rounds of one reconcile ran out.
pub const ROUNDS_EXHAUSTED_REQUEUE: Duration = Duration::from_millis(100);

/// Safety net when nothing is scheduled: watch events normally trigger the next reconcile.
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

/// Error backoff: first delay, doubled per consecutive failure of the same object, capped.
const ERROR_BACKOFF: Duration = Duration::from_millis(500);
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(60);

/// Whether one watch stream is connected and has listed once.
#[derive(Debug, Default)]
pub struct StreamHealth {
    synced: AtomicBool,
    up: AtomicBool,
    restarts: AtomicU64,
}

impl StreamHealth {
    /// A watch event arrived: the stream is up; `InitDone` means its cache is complete.
    pub fn on_event(&self, init_done: bool) {
        self.up.store(true, Ordering::Relaxed);
        if init_done {
            self.synced.store(true, Ordering::Relaxed);
        }
    }

    /// The stream failed; the watcher retries with backoff. True when it was up until now.
    pub fn on_error(&self) -> bool {
        let was_up = self.up.swap(false, Ordering::Relaxed);
        if was_up {
            self.restarts.fetch_add(1, Ordering::Relaxed);
        }
        was_up
    }
}

/// The watches of one resource type: one stream per namespace watched, or one for all.
#[derive(Debug, Default)]
pub struct WatchHealth {
    streams: Mutex<Vec<Arc<StreamHealth>>>,
}

impl WatchHealth {
    /// A new stream of this resource, down and unsynced until its events say otherwise.
    pub fn stream(&self) -> Arc<StreamHealth> {
        let stream = Arc::new(StreamHealth::default());
        self.lock().push(stream.clone());
        stream
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<StreamHealth>>> {
        // The list is only ever pushed to; a poisoned lock still holds whole entries.
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every stream (at least one) has listed once.
    pub fn synced(&self) -> bool {
        let streams = self.lock();
        !streams.is_empty() && streams.iter().all(|s| s.synced.load(Ordering::Relaxed))
    }

    /// Every stream (at least one) is connected.
    pub fn up(&self) -> bool {
        let streams = self.lock();
        !streams.is_empty() && streams.iter().all(|s| s.up.load(Ordering::Relaxed))
    }

    /// Listed once, or no stream at all (a controller that is not running). For the schedule
    /// and Spark Connect controllers' watches: they may see no event for hours, and a watch that
    /// reconnected shows it only with its next event, so "connected" would hold readiness down
    /// after a blip until then (the watcher retries on its own).
    pub fn synced_or_unused(&self) -> bool {
        self.lock().iter().all(|s| s.synced.load(Ordering::Relaxed))
    }

    /// Times a stream went down after being up.
    pub fn restarts(&self) -> u64 {
        self.lock()
            .iter()
            .map(|s| s.restarts.load(Ordering::Relaxed))
            .sum()
    }
}

/// The health of both watches, for `/readyz` and for `Observed::cache_synced`.
#[derive(Debug, Default)]
pub struct Health {
    pub apps: WatchHealth,
    pub pods: WatchHealth,
    /// The ScheduledSparkApplication controller's watches: schedules and their runs.
    pub schedules: WatchHealth,
    pub runs: WatchHealth,
    /// The SparkConnect controller's watches: SparkConnects and their pods.
    pub connects: WatchHealth,
    pub connect_pods: WatchHealth,
    /// The pods' Warning events (stuck drivers): logged and counted, not a readiness condition.
    pub warnings: WatchHealth,
    /// The ResourceQuotas (executors a quota keeps out): logged and counted, not a readiness
    /// condition.
    pub quotas: WatchHealth,
}

impl Health {
    /// Both caches have listed once: decisions may trust them.
    pub fn synced(&self) -> bool {
        self.apps.synced() && self.pods.synced()
    }

    /// Ready to serve: the applications' and drivers' watches synced and connected, the other
    /// controllers' watches synced.
    pub fn ready(&self) -> bool {
        self.synced()
            && self.apps.up()
            && self.pods.up()
            && self.schedules.synced_or_unused()
            && self.runs.synced_or_unused()
            && self.connects.synced_or_unused()
            && self.connect_pods.synced_or_unused()
    }
}

/// The answer to a status write.
#[derive(Debug, Clone)]
pub enum StatusWrite {
    /// Written; the object as the API server returned it (its new resourceVersion included).
    Written(Box<SparkApplication>),
    /// Another writer changed the object since it was read (409): nothing was written.
    Conflict,
}

/// Everything a reconcile does outside its own memory: the caches it reads and the calls it makes.
/// [`kube::KubeEffects`] is the real one; tests use a fake that records the calls.
///
/// Every mutation fences itself: a status write carries the resourceVersion it read, deletes
/// carry a uid precondition, and a submission carries the persisted submission id.
pub trait Effects: Send + Sync {
    /// Both watch caches have listed once: decisions may trust them.
    fn cache_synced(&self) -> bool;

    /// The app's driver from the pod cache (owned by the app and carrying its current submission
    /// id, or named in its status), and its other owned driver pods.
    fn cached_drivers(
        &self,
        app: &SparkApplication,
    ) -> (Option<ObservedDriver>, Vec<ObservedDriver>);

    /// The app's executor pods from the executor index.
    fn cached_executors(&self, app: &SparkApplication) -> Vec<ObservedExecutor>;

    /// The ResourceQuotas of the app's namespace, from the quota cache (none without one).
    fn cached_quotas(&self, app: &SparkApplication) -> Vec<crate::executor_quota::QuotaRoom> {
        let _ = app;
        Vec::new()
    }

    /// The application read from the API server, not the cache; `None`: it is gone.
    fn read_live(
        &self,
        app: &SparkApplication,
    ) -> impl Future<Output = Result<Option<SparkApplication>, ReconcileError>> + Send;

    /// Replaces the status, carrying the resourceVersion of `app`.
    fn write_status(
        &self,
        app: &SparkApplication,
        status: SparkApplicationStatus,
    ) -> impl Future<Output = Result<StatusWrite, ReconcileError>> + Send;

    /// A live read of the pod `pod`: true when no pod of that name carries `submission_id`.
    fn driver_absent(
        &self,
        app: &SparkApplication,
        pod: &str,
        submission_id: &str,
    ) -> impl Future<Output = Result<bool, ReconcileError>> + Send;

    /// The latest Warning event about the driver pod `pod` (with `uid`): what holds it pending
    /// when the pod does not say (`FailedMount`). `None`: there is none. From a cache.
    fn driver_warning(&self, pod: &str, uid: &str) -> Option<PendingReason>;

    /// Creates what the app's driver depends on (`crate::dependencies`), in order; those that
    /// exist are taken as they are. `Ok(Err)`: the API server refused one (the rest are not
    /// tried); an error: one could not be made for now (a retry may make it).
    fn ensure_dependencies(
        &self,
        app: &SparkApplication,
    ) -> impl Future<Output = Result<Result<(), RefusedObject>, ReconcileError>> + Send;

    /// Creates the app's UI Service and Ingresses under `settings` (existing ones are taken as
    /// they are); what the API server refuses is in the answer's `refused`.
    fn ensure_ui_objects(
        &self,
        app: &SparkApplication,
        settings: &UiSettings,
    ) -> impl Future<Output = Result<UiMade, ReconcileError>> + Send;

    /// Reads the driver pod `pod` live and, when it carries `submission_id` and is not being
    /// deleted yet, deletes it with its uid as the precondition; absent, or another pod, is
    /// done.
    fn stop_driver(
        &self,
        app: &SparkApplication,
        pod: &str,
        submission_id: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;

    /// Sends the app's submission under the persisted `submission_id`; every failure is an
    /// outcome for `decide`, never an error.
    fn submit(
        &self,
        app: &SparkApplication,
        submission_id: String,
    ) -> impl Future<Output = SubmissionOutcome> + Send;

    /// Fences every driver of the app under epoch `observed` in the state store, for run `run`
    /// of the application object (a new run starts from nothing), and reads the marker the next
    /// driver restores.
    fn fence(
        &self,
        app: &SparkApplication,
        observed: u64,
        run: u64,
    ) -> impl Future<Output = Result<FenceOutcome, ReconcileError>> + Send;

    /// The app's last heartbeat in the state store, in its current run: `Some(None)` read and
    /// never written, `None` when it cannot be read now (staleness is then judged at the next
    /// look).
    fn last_heartbeat(
        &self,
        app: &SparkApplication,
    ) -> impl Future<Output = Option<Option<Heartbeat>>> + Send;

    /// Deletes the driver pod `pod` if it is still the pod with `uid`; gone already is done.
    fn delete_driver(
        &self,
        app: &SparkApplication,
        pod: &str,
        uid: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;

    /// Deletes the application if it is still the object with its uid (its TTL expired).
    fn delete_application(
        &self,
        app: &SparkApplication,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;

    /// Records an event on the application; best effort, a lost event blocks nothing.
    fn record_event(
        &self,
        app: &SparkApplication,
        event_type: EventType,
        reason: &'static str,
        message: String,
    ) -> impl Future<Output = ()> + Send;
}

/// A reconcile failed; the controller retries it with backoff.
#[derive(Debug, Error)]
pub enum ReconcileError {
    #[error("the application has no name, namespace or uid")]
    ReadApplication,
    #[error("cannot read the application's current version")]
    ReadLatest(#[source] ::kube::Error),
    #[error("cannot write the status of the application")]
    WriteStatus(#[source] ::kube::Error),
    #[error("cannot read driver pod {name}")]
    VerifyDriverAbsent {
        name: String,
        #[source]
        source: ::kube::Error,
    },
    #[error("cannot create {object}, which the driver depends on")]
    EnsureDependencies {
        object: String,
        #[source]
        source: ::kube::Error,
    },
    #[error("cannot create the UI object {object}")]
    EnsureUiObjects {
        object: String,
        #[source]
        source: ::kube::Error,
    },
    #[error("cannot read driver pod {name} to stop it")]
    StopDriver {
        name: String,
        #[source]
        source: ::kube::Error,
    },
    #[error("cannot delete driver pod {name}")]
    DeleteDriver {
        name: String,
        #[source]
        source: ::kube::Error,
    },
    #[error("cannot delete the application")]
    DeleteApplication(#[source] ::kube::Error),
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
            ReconcileError::EnsureDependencies { .. } => "ensure_dependencies",
            ReconcileError::EnsureUiObjects { .. } => "ensure_ui_objects",
            ReconcileError::StopDriver { .. } => "stop_driver",
            ReconcileError::DeleteDriver { .. } => "delete_driver",
            ReconcileError::DeleteApplication(_) => "delete_application",
            ReconcileError::Fence(_) => "fence",
            ReconcileError::NoStore => "no_store",
        }
    }
}

/// What every reconcile shares: the effects, the settings `decide` reads, and two small memories
/// per object.
pub struct Reconciler<E> {
    effects: E,
    settings: Settings,
    metrics: Arc<Metrics>,
    /// Consecutive failures per object (`ns/name`), for the error backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Per object, the status this operator last wrote and when, until the cache shows it: a
    /// reconcile started from an older cached copy would act on a stale status (submit again,
    /// then lose its write to a 409), so it waits for the cache, then reads the live object
    /// ([`last_write::start_from`]).
    written: Mutex<HashMap<String, (LastWrite, Instant)>>,
    /// How long to wait for the cache to show a write before reading the live object.
    catch_up: Duration,
}

/// The copy of an application a reconcile acts on.
enum Latest {
    App(Box<SparkApplication>),
    /// Deleted since the cache saw it.
    Gone,
    /// The cache has not caught up with this operator's last write yet: look again after this
    /// long, unless its watch event wakes the application first.
    Wait(Duration),
}

fn key(app: &SparkApplication) -> String {
    format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any())
}

/// The controller's reconcile function (kube-runtime's signature).
pub async fn reconcile<E: Effects>(
    app: Arc<SparkApplication>,
    ctx: Arc<Reconciler<E>>,
) -> Result<ControllerAction, ReconcileError> {
    ctx.reconcile(&app).await
}

/// The controller's error policy (kube-runtime's signature).
pub fn error_policy<E: Effects>(
    app: Arc<SparkApplication>,
    error: &ReconcileError,
    ctx: Arc<Reconciler<E>>,
) -> ControllerAction {
    ctx.error_policy(&app, error)
}

impl<E: Effects> Reconciler<E> {
    pub fn new(effects: E, settings: Settings, metrics: Arc<Metrics>) -> Reconciler<E> {
        Reconciler {
            effects,
            settings,
            metrics,
            failures: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            catch_up: CACHE_CATCH_UP,
        }
    }

    /// The same reconciler waiting `catch_up` (instead of [`CACHE_CATCH_UP`]) for the cache to
    /// show its last write before reading the live object.
    pub fn with_cache_catch_up(mut self, catch_up: Duration) -> Reconciler<E> {
        self.catch_up = catch_up;
        self
    }

    pub fn effects(&self) -> &E {
        &self.effects
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, (LastWrite, Instant)>> {
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

    /// One reconcile of `app` (the cached copy): at most [`MAX_ROUNDS`] decide → execute rounds.
    pub async fn reconcile(
        &self,
        app: &SparkApplication,
    ) -> Result<ControllerAction, ReconcileError> {
        let started = std::time::Instant::now();
        let result = self.reconcile_app(app.clone()).await;
        self.metrics.reconciled(started.elapsed());
        if result.is_ok() {
            self.failures().remove(&key(app));
        }
        result
    }

    /// Logs the failure and retries with a backoff that grows per object.
    pub fn error_policy(&self, app: &SparkApplication, error: &ReconcileError) -> ControllerAction {
        let failures = {
            let mut map = self.failures();
            let n = map.entry(key(app)).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        self.metrics.reconcile_error(error.kind());
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

    #[instrument(skip_all, fields(app = %app.name_any(), ns = %app.namespace().unwrap_or_default()))]
    async fn reconcile_app(
        &self,
        app: SparkApplication,
    ) -> Result<ControllerAction, ReconcileError> {
        if app.metadata.uid.is_none() || app.namespace().is_none_or(|ns| ns.is_empty()) {
            return Err(ReconcileError::ReadApplication);
        }
        let mut app = match self.latest_version(app).await? {
            Latest::App(app) => *app,
            // Deleted since the cache saw it: the deletion's own event ends this object's work.
            Latest::Gone => return Ok(ControllerAction::await_change()),
            Latest::Wait(after) => {
                debug!("the cache predates this operator's last write; waiting for it");
                return Ok(ControllerAction::requeue(after));
            }
        };
        let (driver, other_drivers) = self.effects.cached_drivers(&app);
        let mut observed = Observed {
            cache_synced: self.effects.cache_synced(),
            driver,
            other_drivers,
            heartbeat: self.read_heartbeat(&app).await,
            executors: self.effects.cached_executors(&app),
            quotas: self.effects.cached_quotas(&app),
            ..Observed::default()
        };
        for _ in 0..MAX_ROUNDS {
            let Some(view) = AppView::of(&app, &self.settings) else {
                return Err(ReconcileError::ReadApplication);
            };
            let decision = decide(&view, &observed, Timestamp::now());
            let mut again = false;
            // Owned objects made in this round: their answer reaches the status in the next one.
            let mut made_objects = false;
            let mut requeue: Option<Duration> = None;
            // In the order listed: `decide` lists them in execution order (`Action::order`).
            for action in decision.actions {
                match action {
                    Action::WriteStatus => {
                        match self
                            .effects
                            .write_status(&app, decision.status.clone())
                            .await?
                        {
                            StatusWrite::Written(written) => {
                                let before = state_of(&app);
                                app = *written;
                                if let Some(last) = LastWrite::of(&app.metadata) {
                                    self.written().insert(key(&app), (last, Instant::now()));
                                }
                                if before != State::PendingRerun
                                    && state_of(&app) == State::PendingRerun
                                {
                                    self.metrics.retry("run");
                                }
                                // The answers were about the status just replaced; they are in
                                // it now.
                                observed.submission = None;
                                observed.driver_absent_verified = false;
                                observed.fence = None;
                                // Answers about the run's objects and its driver are recorded by
                                // this write or were about a run this status has left.
                                observed.dependencies = None;
                                observed.ui = None;
                                observed.driver_stopped = false;
                                again = true;
                            }
                            StatusWrite::Conflict => {
                                debug!("status write lost a race; looking again");
                                return Ok(ControllerAction::requeue(CONFLICT_REQUEUE));
                            }
                        }
                    }
                    Action::VerifyDriverAbsent { name: pod } => {
                        let current = app
                            .status
                            .as_ref()
                            .map(|s| s.submission_id.clone())
                            .unwrap_or_default();
                        observed.driver_absent_verified =
                            self.effects.driver_absent(&app, &pod, &current).await?;
                        info!(
                            pod = %pod,
                            absent = observed.driver_absent_verified,
                            "verified a driver missing from the cache"
                        );
                        again = true;
                    }
                    Action::InspectPendingDriver { name: pod, uid } => {
                        let warning = self.effects.driver_warning(&pod, &uid);
                        debug!(pod = %pod, warning = ?warning, "read a pending driver's events");
                        observed.driver_warning = Some(warning);
                        again = true;
                    }
                    Action::EnsureDependencies => {
                        let made = self.effects.ensure_dependencies(&app).await?;
                        if let Err(refused) = &made {
                            info!(object = %refused.object, "the driver's dependency was refused");
                        }
                        observed.dependencies = Some(made);
                        again = true;
                    }
                    Action::EnsureUiObjects => {
                        // For the status as decided: a new run's objects are made before its
                        // SUBMITTED is written, and its Spark application id (which an ingress
                        // URL may name) is in the decision only.
                        let mut decided = app.clone();
                        decided.status = Some(decision.status.clone());
                        observed.ui = Some(
                            self.effects
                                .ensure_ui_objects(&decided, &self.settings.ui)
                                .await?,
                        );
                        made_objects = true;
                        again = true;
                    }
                    Action::StopDriver {
                        name: pod,
                        submission_id,
                    } => {
                        self.effects.stop_driver(&app, &pod, &submission_id).await?;
                        info!(pod = %pod, "stopped the driver of a failed run");
                        observed.driver_stopped = true;
                        again = true;
                    }
                    Action::Submit { submission_id } => {
                        let stored = app.status.clone().unwrap_or_default();
                        if submission_attempt(&stored) > 1 {
                            self.metrics.retry("submission");
                        }
                        observed.submission = Some(self.effects.submit(&app, submission_id).await);
                        again = true;
                    }
                    Action::AdvanceEpoch {
                        observed: observed_epoch,
                        run,
                    } => {
                        let fence = self.effects.fence(&app, observed_epoch, run).await?;
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
                        self.effects.delete_driver(&app, &pod, &uid).await?;
                        // The cache still shows the pod; deciding again now would delete it again.
                        requeue = min_delay(requeue, self.settings.deletion_requeue);
                    }
                    Action::RecordEvent {
                        event_type,
                        reason,
                        message,
                    } => {
                        self.effects
                            .record_event(&app, event_type, reason, message)
                            .await
                    }
                    Action::DeleteApplication => {
                        self.effects.delete_application(&app).await?;
                        self.written().remove(&key(&app));
                        return Ok(ControllerAction::await_change());
                    }
                    Action::Requeue(after) if after.is_zero() => again = true,
                    Action::Requeue(after) => requeue = min_delay(requeue, after),
                }
            }
            // An answer (a submission's, a live read's, a fence's, the UI objects') must reach
            // the status before we stop, or the next reconcile would ask again (and create the
            // objects again, to be told they exist).
            let unrecorded = observed.submission.is_some()
                || observed.driver_absent_verified
                || observed.fence.is_some()
                || made_objects;
            if !unrecorded && (!again || requeue.is_some()) {
                return Ok(ControllerAction::requeue(requeue.unwrap_or(IDLE_REQUEUE)));
            }
            // The driver may have changed while the actions ran.
            observed.cache_synced = self.effects.cache_synced();
            (observed.driver, observed.other_drivers) = self.effects.cached_drivers(&app);
            observed.executors = self.effects.cached_executors(&app);
            observed.quotas = self.effects.cached_quotas(&app);
        }
        debug!("decision rounds exhausted; continuing in the next reconcile");
        Ok(ControllerAction::requeue(ROUNDS_EXHAUSTED_REQUEUE))
    }

    /// The application as of this operator's last status write: the cached copy when the cache
    /// has caught up with that write (or there was none); else nothing until it has, for at most
    /// `catch_up` after the write; then a live read.
    async fn latest_version(&self, cached: SparkApplication) -> Result<Latest, ReconcileError> {
        let key = key(&cached);
        let last = self.written().get(&key).cloned();
        let since_write = last.as_ref().map_or(Duration::ZERO, |(_, at)| at.elapsed());
        match start_from(
            &cached.metadata,
            last.as_ref().map(|(last, _)| last),
            since_write,
            self.catch_up,
        ) {
            Start::Cached => {
                if last.is_some() {
                    self.written().remove(&key);
                }
                Ok(Latest::App(Box::new(cached)))
            }
            Start::WaitForCache(after) => Ok(Latest::Wait(after)),
            Start::ReadLive => {
                let live = self.effects.read_live(&cached).await?;
                // Once the cache shows the version read, the cached copy is good again.
                match live.as_ref().and_then(|app| LastWrite::of(&app.metadata)) {
                    Some(read) => self.written().insert(key, (read, Instant::now())),
                    None => self.written().remove(&key),
                };
                Ok(live.map_or(Latest::Gone, |app| Latest::App(Box::new(app))))
            }
        }
    }

    /// The last heartbeat of a recovery-enabled app whose driver should be alive; `None` when not
    /// needed or when the store cannot answer now.
    async fn read_heartbeat(&self, app: &SparkApplication) -> Option<Option<Heartbeat>> {
        self.settings.recovery.as_ref()?;
        if !recovery::requested(&app.spec)
            || !matches!(state_of(app), State::Running | State::Unknown)
        {
            return None;
        }
        self.effects.last_heartbeat(app).await
    }
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

#[cfg(test)]
mod tests;
