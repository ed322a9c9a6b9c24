//! The SparkApplication state machine, as one pure function:
//! `decide(app, observed, now) -> Decision { status, actions }`.
//!
//! The reconciler observes (the app from the API, the driver pod from the watch cache, the answer
//! of a submission it just made), calls [`decide`], then executes the actions in the order they
//! are listed ([`Action::order`]) and calls `decide` again on what changed. Nothing here reads a
//! clock, a cache or the network.
//!
//! States and transitions are the widely used operator's (table in `docs/operator.md`), with
//! these differences:
//! - **The submission id is persisted before the submission.** The first decision for a NEW (or
//!   PENDING_RERUN, or due SUBMISSION_FAILED) app assigns `status.submissionID` and sets
//!   `status.submissionPending`, and only writes the status. Only a later decision, on a status
//!   that already holds both, produces [`Action::Submit`]. Ids are `<app uid>-<n>` with `n` one
//!   more than the last id's, so a retry after a crash reuses the id and the submitter answers
//!   with the driver it already made.
//! - **A missing driver is not failed at once**: first a grace period after the submission, then a
//!   live read ([`Action::VerifyDriverAbsent`]); only its confirmation fails the run.
//! - **Per-stage timeouts** (`spec.applicationTimeoutConfig`, from the official Apache Spark
//!   operator) and the **`OnInfrastructureFailure`** restart policy.
//! - Spec changes are detected by a digest in `status.specHash`, not by comparing update events,
//!   so a change made while the operator was down is still seen.
//! - Nothing is decided before the pod cache has synced.

mod policy;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::crd::{
    ApplicationStateType as State, DriverInfo, ExecutorCounts, ExecutorState, FailureReason,
    RecoveryStatus, RestartPolicyType, SparkApplication, SparkApplicationSpec,
    SparkApplicationStatus,
};
use crate::defaults::with_defaults;
use crate::fence::{Heartbeat, INITIAL_EPOCH};
use crate::names::driver_pod_name;

/// The run of an application's progress before any spec change or `Always` rerun.
pub const FIRST_RUN: u64 = 1;
use crate::recovery::{self, RecoverySettings};
use crate::sparkconf::{self, RefusedKey, refused_keys};
use crate::ui::UiSettings;
use crate::unsupported::{self, UnsupportedField, unsupported_fields};

pub use policy::{retry_delay, should_retry_run, should_retry_submission};

/// Event reasons, the widely used operator's where it has one.
pub mod reasons {
    pub const SUBMITTED: &str = "SparkApplicationSubmitted";
    pub const SUBMISSION_FAILED: &str = "SparkApplicationSubmissionFailed";
    pub const COMPLETED: &str = "SparkApplicationCompleted";
    pub const FAILED: &str = "SparkApplicationFailed";
    pub const PENDING_RERUN: &str = "SparkApplicationPendingRerun";
    /// Ours: the spec changed and the current run is being invalidated.
    pub const SPEC_CHANGED: &str = "SparkApplicationSpecChanged";
    pub const DRIVER_PENDING: &str = "SparkDriverPending";
    pub const DRIVER_RUNNING: &str = "SparkDriverRunning";
    pub const DRIVER_COMPLETED: &str = "SparkDriverCompleted";
    pub const DRIVER_FAILED: &str = "SparkDriverFailed";
    pub const DRIVER_UNKNOWN: &str = "SparkDriverUnknown";
    pub const DRIVER_NOT_FOUND: &str = "SparkDriverNotFound";
    pub const SUSPENDING: &str = "SparkApplicationSuspending";
    pub const SUSPENDED: &str = "SparkApplicationSuspended";
    pub const RESUMING: &str = "SparkApplicationResuming";
    /// Ours (Warning): an object the spec asks for (the UI Service, an Ingress, a PodGroup)
    /// cannot be made; the run fails.
    pub const OWNED_OBJECTS_FAILED: &str = "SparkApplicationObjectsFailed";
    pub const EXECUTOR_PENDING: &str = "SparkExecutorPending";
    pub const EXECUTOR_RUNNING: &str = "SparkExecutorRunning";
    pub const EXECUTOR_COMPLETED: &str = "SparkExecutorCompleted";
    pub const EXECUTOR_FAILED: &str = "SparkExecutorFailed";
    pub const EXECUTOR_UNKNOWN: &str = "SparkExecutorUnknown";
    /// Ours: `driverStartTimeoutMillis` passed.
    pub const DRIVER_START_TIMED_OUT: &str = "SparkDriverStartTimedOut";
    /// Ours: `driverReadyTimeoutMillis` passed.
    pub const DRIVER_READY_TIMED_OUT: &str = "SparkDriverReadyTimedOut";
    /// Ours: the store's epoch moved; every driver under an older epoch is fenced.
    pub const EPOCH_ADVANCED: &str = "SparkApplicationEpochAdvanced";
    /// Ours (Warning): a recovery-enabled app restarts without a committed progress marker.
    pub const RESTART_FROM_ZERO: &str = "SparkApplicationRestartFromZero";
    /// Ours (Warning): the driver's recovery agent stopped heartbeating.
    pub const HEARTBEAT_LOST: &str = "SparkDriverHeartbeatLost";
}

/// Operator-wide settings that shape decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// How long a driver may be missing from the cache right after its submission before a
    /// live read is made: caches lag the API server.
    pub driver_creation_grace: Duration,
    /// TTL for terminated apps whose spec sets none; `None`: keep them.
    pub default_ttl_seconds: Option<i64>,
    /// Wait before looking again while the pod cache has not synced.
    pub unsynced_requeue: Duration,
    /// Wait before looking again while a driver is being deleted.
    pub deletion_requeue: Duration,
    /// Fenced restarts (`spec.restartPolicy.recovery`); `None`: the feature is off and apps
    /// asking for it fail with a message saying so.
    pub recovery: Option<RecoverySettings>,
    /// The UI Service and Ingresses (`operator run` turns the UI Service on; the default here,
    /// for tests and tools, makes none).
    pub ui: UiSettings,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            driver_creation_grace: Duration::from_secs(10),
            default_ttl_seconds: None,
            unsynced_requeue: Duration::from_secs(1),
            deletion_requeue: Duration::from_secs(2),
            recovery: None,
            ui: UiSettings {
                ui_service: false,
                ..UiSettings::default()
            },
        }
    }
}

/// The application as persisted: what `decide` starts from.
#[derive(Debug, Clone, Copy)]
pub struct AppView<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub spec: &'a SparkApplicationSpec,
    /// `None` for an app whose status was never written.
    pub status: Option<&'a SparkApplicationStatus>,
    pub settings: &'a Settings,
}

impl<'a> AppView<'a> {
    /// The view of a SparkApplication read from the API; `None` without a name, namespace or uid
    /// (an object the API server returned always has them).
    pub fn of(app: &'a SparkApplication, settings: &'a Settings) -> Option<AppView<'a>> {
        Some(AppView {
            name: app.metadata.name.as_deref()?,
            namespace: app.metadata.namespace.as_deref()?,
            uid: app.metadata.uid.as_deref()?,
            spec: &app.spec,
            status: app.status.as_ref(),
            settings,
        })
    }
}

/// What the driver container is doing, as the reconciler read it from the pod (the driver
/// container's state, not the pod phase: a sidecar keeps a pod Running after the driver exits).
#[derive(Debug, Clone, PartialEq)]
pub enum DriverPhase {
    /// Not running yet; `waiting_reason` is the driver container's (e.g. `ImagePullBackOff`);
    /// `blocked` is what the pod itself says holds it (unschedulable, an image pull error).
    Pending {
        waiting_reason: Option<String>,
        blocked: Option<PendingReason>,
    },
    /// The driver container runs; `ready` is the pod's Ready condition.
    Running {
        ready: bool,
        started_at: Option<Timestamp>,
    },
    /// The driver container exited 0.
    Succeeded,
    /// The driver container exited non-zero, or the pod failed.
    Failed {
        exit_code: Option<i32>,
        reason: FailureReason,
        message: String,
    },
    /// The node stopped reporting.
    Unknown,
}

/// An executor pod of the application, from the executor index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedExecutor {
    pub name: String,
    /// Its `sparkoperator.k8s.io/submission-id` label: only the current run's are counted.
    pub submission_id: Option<String>,
    pub state: ExecutorState,
    /// The executor container's exit code and reason, once terminated.
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    /// The pod's status message (an eviction's, say).
    pub message: Option<String>,
}

/// At most this many executors of one application are tracked in its status, as in the widely
/// used operator (`maxTrackedExecutorPerApp`): a status is one object, with a size limit.
pub const MAX_TRACKED_EXECUTORS: usize = 1000;

/// Why a driver pod stays pending, as Kubernetes reports it: on the pod (`Unschedulable`,
/// `ErrImagePull`, ...) or in a Warning event about it (`FailedMount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingReason {
    pub reason: String,
    pub message: String,
}

/// The condition type a held driver shows, with the pod's reason and message.
pub const DRIVER_PENDING_CONDITION: &str = "DriverPending";

/// How long after its submission a pending driver's Warning events are first read, and how often
/// again while it stays pending without a reason on the pod.
pub const DRIVER_STUCK_AFTER: Duration = Duration::from_secs(5);
pub const DRIVER_STUCK_RECHECK: Duration = Duration::from_secs(15);

/// The pod named `status.driverInfo.podName`, as found in the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedDriver {
    pub name: String,
    pub uid: String,
    /// Its `sparkoperator.k8s.io/submission-id` label.
    pub submission_id: Option<String>,
    /// It has an ownerReference to this SparkApplication's uid. Only such pods are deleted.
    pub owned: bool,
    /// Its deletion has begun.
    pub terminating: bool,
    /// Its `spark-app-selector` label.
    pub spark_app_id: Option<String>,
    /// Its `sparkoperator.k8s.io/recovery-epoch` label (recovery-enabled apps).
    pub epoch: Option<u64>,
    pub phase: DriverPhase,
}

/// The answer to [`Action::AdvanceEpoch`] made in this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceOutcome {
    /// The store's epoch after the call: the one the next driver runs under.
    pub epoch: u64,
    /// The latest committed marker (`(epoch, seq)`), which the next driver restores.
    pub latest: Option<(u64, u64)>,
}

/// The submitter's answer to a [`Action::Submit`] made in this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmissionOutcome {
    /// 201 or 200 (a repeat of this id).
    Accepted {
        submission_id: String,
        driver_pod_name: String,
        spark_app_id: String,
    },
    /// An error answer, after the client's own retries. `retryable`: the submitter was unavailable
    /// or overloaded; otherwise it refused the request (bad arguments, template, conflict), or no
    /// request could be built.
    Rejected {
        submission_id: String,
        message: String,
        retryable: bool,
    },
}

impl SubmissionOutcome {
    fn submission_id(&self) -> &str {
        match self {
            SubmissionOutcome::Accepted { submission_id, .. }
            | SubmissionOutcome::Rejected { submission_id, .. } => submission_id,
        }
    }
}

/// Everything the reconciler observed for one decision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// The pod cache has synced; before that, nothing is decided.
    pub cache_synced: bool,
    /// The driver pod, if the cache has it.
    pub driver: Option<ObservedDriver>,
    /// The answer to [`Action::VerifyDriverAbsent`]: a live read found no pod of that name with
    /// the current submission id.
    pub driver_absent_verified: bool,
    /// The answer to [`Action::Submit`], if one was just made.
    pub submission: Option<SubmissionOutcome>,
    /// The app's other pods from the cache (owned driver pods that are not `driver`): previous
    /// runs' and older epochs' drivers.
    pub other_drivers: Vec<ObservedDriver>,
    /// The answer to [`Action::AdvanceEpoch`], if one was just made.
    pub fence: Option<FenceOutcome>,
    /// The last heartbeat in the store, when the reconciler read it (recovery-enabled apps with
    /// a running driver): `Some(None)` means read and never written.
    pub heartbeat: Option<Option<Heartbeat>>,
    /// The answer to [`Action::InspectPendingDriver`]: `Some(None)` read, no Warning event.
    pub driver_warning: Option<Option<PendingReason>>,
    /// The application's executor pods from the executor index (any run's).
    pub executors: Vec<ObservedExecutor>,
    /// The answer to [`Action::EnsureOwnedObjects`]: what was made, or why nothing could be.
    pub ui: Option<Result<UiMade, String>>,
}

/// The UI objects made for a run, for `status.driverInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UiMade {
    /// The UI Service: name, port and `<cluster IP>:<port>`.
    pub service: Option<(String, i32, String)>,
    /// The UI Ingress: name and URL.
    pub ingress: Option<(String, String)>,
}

/// Kubernetes event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An effect for the reconciler to carry out. A decision lists its actions in execution order
/// ([`Action::order`]), and the reconciler runs them as listed.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Delete the driver pod, with a uid precondition.
    DeleteDriver { name: String, uid: String },
    /// Read the driver pod from the API server (not the cache) and report
    /// [`Observed::driver_absent_verified`]: true when there is no pod of that name carrying the
    /// current submission id.
    VerifyDriverAbsent { name: String },
    /// Read the latest Warning event about the pending driver pod (`FailedMount` and the like
    /// are only in events) and report [`Observed::driver_warning`].
    InspectPendingDriver { name: String, uid: String },
    /// Create the app's UI Service and Ingresses and its driver PodDisruptionBudget (those that
    /// exist are taken as they are); report [`Observed::ui`].
    EnsureOwnedObjects,
    /// Send the submission with this (persisted) id; report [`Observed::submission`].
    Submit { submission_id: String },
    /// Fence every driver under epoch `observed` in the state store, for run `run` of the
    /// application (a new run starts from nothing), and report [`Observed::fence`] (a retry after
    /// a crash gets the epoch already fenced, not a new one).
    AdvanceEpoch { observed: u64, run: u64 },
    /// Write [`Decision::status`] with the resourceVersion that was read.
    WriteStatus,
    /// Record an event on the SparkApplication.
    RecordEvent {
        event_type: EventType,
        reason: &'static str,
        message: String,
    },
    /// Delete the SparkApplication (its TTL expired).
    DeleteApplication,
    /// Decide again after this long (zero: as soon as the effects above are done).
    Requeue(Duration),
}

impl Action {
    /// The order the actions of one decision run in, the one place this rule lives:
    /// 1. `WriteStatus` first: it persists what the later actions rely on (the submission id and
    ///    the epoch before a `Submit`, FAILING before a `DeleteDriver`), and a lost race (409)
    ///    stops everything after it;
    /// 2. `AdvanceEpoch`, then `VerifyDriverAbsent`: the reads and fences whose answers the next
    ///    round records;
    /// 3. `DeleteDriver` before `Submit`: an older epoch's driver goes before its successor is
    ///    submitted;
    /// 4. `RecordEvent`s (best effort, never blocking what matters);
    /// 5. `DeleteApplication` (after it there is nothing left to act on), then `Requeue`.
    pub fn order(&self) -> u8 {
        match self {
            Action::WriteStatus => 0,
            Action::AdvanceEpoch { .. } => 1,
            Action::VerifyDriverAbsent { .. }
            | Action::InspectPendingDriver { .. }
            | Action::EnsureOwnedObjects => 2,
            Action::DeleteDriver { .. } => 3,
            Action::Submit { .. } => 4,
            Action::RecordEvent { .. } => 5,
            Action::DeleteApplication => 6,
            Action::Requeue(_) => 7,
        }
    }
}

/// The status to persist and what to do, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The status as decided: persisted when `actions` holds [`Action::WriteStatus`]. A decision
    /// waiting for the owned objects' answer carries the status they are made for (a new run's
    /// Spark application id names its ingress) and writes nothing yet.
    pub status: SparkApplicationStatus,
    pub actions: Vec<Action>,
}

/// Digest of what a run was submitted from: the spec without `timeToLiveSeconds` and `suspend`,
/// which change nothing about a run (as in the widely used operator).
pub fn spec_hash(spec: &SparkApplicationSpec) -> String {
    let mut value = serde_json::to_value(spec)
        .expect("the spec has string keys and plain values, so it always encodes as JSON");
    if let Some(object) = value.as_object_mut() {
        object.remove("timeToLiveSeconds");
        object.remove("suspend");
    }
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// JSON with object keys sorted, whatever map order serde_json was built with.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The id of the next submission: `<uid>-<n+1>` after `<uid>-<n>`, else `<uid>-1`. The same
/// persisted status always gives the same id.
pub fn next_submission_id(uid: &str, current: &str) -> String {
    format!(
        "{uid}-{}",
        submission_number(uid, current).saturating_add(1)
    )
}

/// Which submission of the application `id` is (1 for the first), 0 for an id not of this form.
fn submission_number(uid: &str, id: &str) -> u64 {
    id.strip_prefix(uid)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
}

/// The id the next `Submit` of an application with status `stored` sends: the stored pending id,
/// else the next one. A function of the stored status, so an operator that dies before recording
/// the answer sends the same id again.
pub fn sending_id(uid: &str, stored: &SparkApplicationStatus) -> String {
    if stored.submission_pending {
        stored.submission_id.clone()
    } else {
        next_submission_id(uid, &stored.submission_id)
    }
}

/// The attempt of its run the next `Submit` of an application with status `stored` is (1 for the
/// first): the stored one while pending, else the next.
pub fn submission_attempt(stored: &SparkApplicationStatus) -> i32 {
    if stored.submission_pending {
        stored.submission_attempts
    } else {
        stored.submission_attempts.saturating_add(1)
    }
}

/// Decides the next status and actions. Pure: `now` is the only clock.
pub fn decide(app: &AppView<'_>, observed: &Observed, now: Timestamp) -> Decision {
    let original = app.status.cloned().unwrap_or_default();
    if !observed.cache_synced {
        return Decision {
            status: original,
            actions: vec![Action::Requeue(app.settings.unsynced_requeue)],
        };
    }
    let mut d = Draft {
        app,
        spec: with_defaults(app.spec),
        unsupported: unsupported_fields(app.spec),
        refused: refused_keys(app.spec, app.namespace),
        observed,
        now,
        status: original.clone(),
        effects: Vec::new(),
        events: Vec::new(),
        requeue: None,
        delete_app: false,
        awaiting_answer: false,
        awaiting_objects: false,
    };
    d.update_unsupported_condition();
    d.update_refused_condition();

    let hash = spec_hash(app.spec);
    let changed = d.status.spec_hash.as_ref().is_some_and(|h| *h != hash);
    if changed && d.status.app_state.state != State::Invalidating {
        d.status.app_state.state = State::Invalidating;
        d.event(
            EventType::Normal,
            reasons::SPEC_CHANGED,
            format!(
                "SparkApplication {} spec changed, invalidating the current run",
                app.name
            ),
        );
        d.requeue(Duration::ZERO);
    } else if app.spec.suspend == Some(true)
        && !matches!(
            d.status.app_state.state,
            State::Completed | State::Failed | State::Suspending | State::Suspended
        )
    {
        // As the widely used operator: suspending is possible from every state but the
        // terminal ones.
        d.status.app_state.state = State::Suspending;
        d.event(
            EventType::Warning,
            reasons::SUSPENDING,
            format!("SparkApplication {} is suspending", app.name),
        );
        d.requeue(Duration::ZERO);
    } else {
        match d.status.app_state.state {
            State::Suspending => d.suspending(),
            State::Suspended => d.suspended(),
            State::Resuming => d.submit_path(&hash),
            State::New | State::PendingRerun => d.submit_path(&hash),
            State::SubmissionFailed if d.status.submission_pending => d.submit_path(&hash),
            State::SubmissionFailed => d.submission_failed(&hash),
            State::Submitted | State::Running | State::Unknown => d.track_driver(),
            State::Succeeding => d.succeeding(),
            State::Failing => d.failing(),
            State::Invalidating => d.invalidating(),
            State::Completed | State::Failed => d.terminal(),
        }
        // SUCCEEDING and FAILING need nothing more from the world to be left: entered in this
        // decision, they are left in it too, and the status is written once (RUNNING →
        // COMPLETED rather than RUNNING → SUCCEEDING → COMPLETED), with both transitions' events.
        if d.status.app_state.state != original.app_state.state {
            match d.status.app_state.state {
                State::Succeeding => d.succeeding(),
                State::Failing => d.failing(),
                _ => {}
            }
        }
    }
    d.track_executors();
    if matches!(d.status.app_state.state, State::Submitted | State::Running) {
        d.ensure_owned_objects();
    }
    d.finish(&original)
}

/// A decision being made.
struct Draft<'a> {
    app: &'a AppView<'a>,
    /// With the widely used operator's defaults (restart intervals).
    spec: SparkApplicationSpec,
    unsupported: Vec<UnsupportedField>,
    /// `sparkConf` keys the operator refuses.
    refused: Vec<RefusedKey>,
    observed: &'a Observed,
    now: Timestamp,
    status: SparkApplicationStatus,
    effects: Vec<Action>,
    events: Vec<Action>,
    requeue: Option<Duration>,
    delete_app: bool,
    /// A submission is sent before anything of this decision is stored (see
    /// [`Draft::submit_path`]): the next round decides it all again with the answer.
    awaiting_answer: bool,
    /// The owned objects are made before this decision's status is stored (see
    /// [`Draft::ensure_owned_objects`]): the next round decides it again with their answer.
    awaiting_objects: bool,
}

impl<'a> Draft<'a> {
    fn finish(self, original: &SparkApplicationStatus) -> Decision {
        let mut actions = self.effects;
        if self.awaiting_answer {
            // Its status and events are decided again, from the same stored status, once the
            // answer is in; recording them now would write twice and repeat the events.
            actions.extend(self.requeue.map(Action::Requeue));
            actions.sort_by_key(Action::order);
            return Decision {
                status: original.clone(),
                actions,
            };
        }
        if self.awaiting_objects && self.status != *original {
            // One status write for the new state and the objects' record, once their answer is
            // in; its events are recorded with that write.
            actions.sort_by_key(Action::order);
            return Decision {
                status: self.status,
                actions,
            };
        }
        if self.delete_app {
            // The object goes away: writing its status first would only race the deletion.
            actions.push(Action::DeleteApplication);
            actions.sort_by_key(Action::order);
            return Decision {
                status: original.clone(),
                actions,
            };
        }
        if self.status != *original {
            actions.push(Action::WriteStatus);
        }
        actions.extend(self.events);
        if let Some(after) = self.requeue {
            actions.push(Action::Requeue(after));
        }
        // Stable: events keep the order they happened in, deletions the order they were found.
        actions.sort_by_key(Action::order);
        Decision {
            status: self.status,
            actions,
        }
    }

    fn event(&mut self, event_type: EventType, reason: &'static str, message: String) {
        self.events.push(Action::RecordEvent {
            event_type,
            reason,
            message,
        });
    }

    /// The soonest of several requeues wins.
    fn requeue(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    fn name(&self) -> &str {
        self.app.name
    }

    fn policy_type(&self) -> RestartPolicyType {
        self.spec
            .restart_policy
            .as_ref()
            .and_then(|p| p.policy_type)
            .unwrap_or(RestartPolicyType::Never)
    }

    fn time(&self) -> Time {
        Time(self.now)
    }

    /// How long since `since`, zero if `since` is in the future (clock skew).
    fn elapsed(&self, since: &Time) -> Duration {
        let ms = self
            .now
            .as_millisecond()
            .saturating_sub(since.0.as_millisecond());
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// `None` once `wait` has passed since `since`, else what is left.
    fn remaining(&self, since: &Time, wait: Duration) -> Option<Duration> {
        wait.checked_sub(self.elapsed(since))
            .filter(|d| !d.is_zero())
    }

    /// The condition listing unsupported fields, and a Warning event when it appears or changes.
    fn update_unsupported_condition(&mut self) {
        let message =
            (!self.unsupported.is_empty()).then(|| unsupported::message(&self.unsupported));
        self.update_condition(
            (unsupported::CONDITION_TYPE, unsupported::REASON),
            message,
            "fields set but not supported",
        );
    }

    /// The condition listing refused `sparkConf` keys, and a Warning event when it appears or
    /// changes.
    fn update_refused_condition(&mut self) {
        let message = (!self.refused.is_empty()).then(|| sparkconf::message(&self.refused));
        self.update_condition(
            (sparkconf::CONDITION_TYPE, sparkconf::REASON),
            message,
            "sparkConf keys refused",
        );
    }

    /// Sets the condition `type_` to `message` (removes it for `None`), with a Warning event
    /// (`what: message`) when it appears or its message changes.
    fn update_condition(
        &mut self,
        (type_, reason): (&'static str, &'static str),
        message: Option<String>,
        what: &str,
    ) {
        let existing = self.status.conditions.iter().position(|c| c.type_ == type_);
        let Some(message) = message else {
            if let Some(i) = existing {
                self.status.conditions.remove(i);
            }
            return;
        };
        if let Some(i) = existing {
            if self.status.conditions[i].message == message {
                return;
            }
            self.status.conditions.remove(i);
        }
        self.status.conditions.push(Condition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message: message.clone(),
            last_transition_time: self.time(),
            observed_generation: None,
        });
        self.event(EventType::Warning, reason, format!("{what}: {message}"));
    }

    /// NEW, PENDING_RERUN, and SUBMISSION_FAILED once a retry is due: apply the answer to a
    /// submission, clear a previous run's driver, send a prepared submission, or prepare one.
    fn submit_path(&mut self, hash: &str) {
        let observed = self.observed;
        if self.status.submission_pending
            && let Some(outcome) = self.answer()
        {
            self.apply_outcome(outcome);
            return;
        }
        // With fenced restarts every epoch has its own pod name and older drivers are deleted only
        // after the fence (below); without, a previous run's driver holds the name.
        if let Some(driver) = observed
            .driver
            .as_ref()
            .filter(|_| self.recovery().is_none())
        {
            // Ours to keep when made for the id being sent, which a predecessor may have sent
            // before it could record the answer.
            let sending = sending_id(self.app.uid, &self.status);
            let of_this_submission = driver.submission_id.as_deref() == Some(sending.as_str());
            // A previous run's driver holds the pod name; only ours is removed. A foreign pod
            // is left to the submitter to report as a conflict.
            if !of_this_submission && driver.owned {
                if !driver.terminating {
                    self.effects.push(Action::DeleteDriver {
                        name: driver.name.clone(),
                        uid: driver.uid.clone(),
                    });
                }
                self.requeue(self.app.settings.deletion_requeue);
                return;
            }
        }
        if !self.refused.is_empty() {
            // Before anything is submitted: the driver would escape the operator's control.
            let message = format!(
                "sparkConf keys refused: {}",
                sparkconf::message(&self.refused)
            );
            self.fail_spec(hash, FailureReason::RefusedSparkConf, message);
            return;
        }
        if self.unsupported.iter().any(|f| f.blocking) {
            self.fail_unsupported(hash);
            return;
        }
        if recovery::requested(&self.spec) && self.app.settings.recovery.is_none() {
            self.fail_recovery_disabled(hash);
            return;
        }
        if self.status.submission_pending {
            // Persist whatever changed first: a Submit only ever follows a status that is
            // already stored, so a crash cannot lose the id (or the epoch) it was sent with.
            if Some(&self.status) != self.app.status {
                self.requeue(Duration::ZERO);
            } else {
                if self.recovery().is_some() {
                    // The epoch is fenced and recorded: now every older driver goes, and only
                    // then is its successor submitted (fence → record → delete → submit).
                    self.delete_older_drivers();
                }
                self.effects.push(Action::Submit {
                    submission_id: self.status.submission_id.clone(),
                });
            }
            return;
        }
        let mut pod_name = driver_pod_name(self.app.name, self.app.spec);
        if self.recovery().is_some() {
            let Some(fence) = &observed.fence else {
                let observed_epoch = self
                    .status
                    .recovery_status
                    .as_ref()
                    .map_or(INITIAL_EPOCH, |r| r.epoch);
                self.effects.push(Action::AdvanceEpoch {
                    observed: observed_epoch,
                    run: self.run(),
                });
                return;
            };
            self.record_fence(fence);
            pod_name = recovery::pod_name(&pod_name, fence.epoch);
        }
        self.status.submission_attempts = submission_attempt(&self.status);
        self.status.submission_id = sending_id(self.app.uid, &self.status);
        self.status.submission_pending = true;
        self.status.last_submission_attempt_time = Some(self.time());
        self.status.driver_info.pod_name = pod_name;
        self.status.spec_hash = Some(hash.to_owned());
        if self.recovery().is_some() {
            // The fenced epoch is stored before a driver runs under it.
            self.requeue(Duration::ZERO);
            return;
        }
        // Nothing is stored before the request: the id is a function of the stored status
        // (`next_submission_id`), so an operator that dies before recording the answer sends the
        // same id again and the submitter answers it from the driver it already made. The
        // status is written once, with the answer.
        match self.answer() {
            Some(outcome) => self.apply_outcome(outcome),
            None => {
                self.effects.push(Action::Submit {
                    submission_id: self.status.submission_id.clone(),
                });
                self.awaiting_answer = true;
            }
        }
    }

    /// The submitter's answer to the status' submission id, if it came in this reconcile.
    fn answer(&self) -> Option<&'a SubmissionOutcome> {
        self.observed
            .submission
            .as_ref()
            .filter(|o| o.submission_id() == self.status.submission_id)
    }

    /// The operator's recovery settings, when this app uses fenced restarts.
    fn recovery(&self) -> Option<&RecoverySettings> {
        self.app
            .settings
            .recovery
            .as_ref()
            .filter(|_| recovery::requested(&self.spec))
    }

    /// The run of the application's progress: the first is 1.
    fn run(&self) -> u64 {
        self.status
            .recovery_status
            .as_ref()
            .map_or(FIRST_RUN, |r| r.run)
    }

    /// The next driver starts a new run: it restores nothing from the previous one (whose drivers
    /// are fenced when the new run's first epoch is).
    fn new_run(&mut self) {
        if let Some(r) = self.status.recovery_status.as_mut() {
            r.run = r.run.saturating_add(1);
            r.run_start_epoch = None;
            r.restored_from_epoch = None;
            r.restored_seq = None;
        }
    }

    /// Records the epoch the next driver runs under and the marker it will restore.
    fn record_fence(&mut self, fence: &FenceOutcome) {
        let previous = self.status.recovery_status.as_ref().map(|r| r.epoch);
        let run_start = self
            .status
            .recovery_status
            .as_ref()
            .and_then(|r| r.run_start_epoch);
        // A driver of this run ran before: this is a restart, which should resume.
        let restart = run_start.is_some();
        self.status.recovery_status = Some(RecoveryStatus {
            epoch: fence.epoch,
            run: self.run(),
            run_start_epoch: Some(run_start.unwrap_or(fence.epoch)),
            restored_from_epoch: fence.latest.map(|(epoch, _)| epoch),
            restored_seq: fence.latest.map(|(_, seq)| seq),
        });
        if previous != Some(fence.epoch) {
            let message = match previous {
                Some(old) => format!(
                    "fenced epoch {old}; the next driver of {} runs under epoch {}",
                    self.name(),
                    fence.epoch
                ),
                None => format!(
                    "the first driver of {} runs under epoch {}",
                    self.name(),
                    fence.epoch
                ),
            };
            self.event(EventType::Normal, reasons::EPOCH_ADVANCED, message);
        }
        if restart && fence.latest.is_none() {
            let message = format!(
                "SparkApplication {} restarts from zero: its drivers never committed a progress marker",
                self.name()
            );
            self.event(EventType::Warning, reasons::RESTART_FROM_ZERO, message);
        }
    }

    /// Deletes every driver of this app but the current submission's (older epochs', previous
    /// runs'), fenced already, so a zombie on a partitioned node can do no harm while it lingers.
    fn delete_older_drivers(&mut self) {
        let current = self.status.submission_id.as_str();
        let stale: Vec<Action> = self
            .observed
            .other_drivers
            .iter()
            .chain(self.observed.driver.iter())
            .filter(|d| d.owned && !d.terminating && d.submission_id.as_deref() != Some(current))
            .map(|d| Action::DeleteDriver {
                name: d.name.clone(),
                uid: d.uid.clone(),
            })
            .collect();
        for action in stale {
            if !self.effects.contains(&action) {
                self.effects.push(action);
            }
        }
    }

    /// An app asking for fenced restarts from an operator running without them.
    fn fail_recovery_disabled(&mut self, hash: &str) {
        let message = "spec.restartPolicy.recovery is set, but this operator runs with fenced restarts disabled (start it with --recovery-store kubernetes or redis://...)".to_owned();
        self.fail_spec(hash, FailureReason::UnsupportedSpec, message);
    }

    fn apply_outcome(&mut self, outcome: &SubmissionOutcome) {
        self.status.submission_pending = false;
        match outcome {
            SubmissionOutcome::Accepted {
                driver_pod_name,
                spark_app_id,
                ..
            } => {
                self.status.app_state.state = State::Submitted;
                self.status.app_state.error_message.clear();
                self.status.failure_reason = None;
                self.status.termination_time = None;
                self.status.execution_attempts = self.status.execution_attempts.saturating_add(1);
                if !driver_pod_name.is_empty() {
                    self.status.driver_info.pod_name = driver_pod_name.clone();
                }
                self.status.spark_application_id = spark_app_id.clone();
                let message = format!(
                    "SparkApplication {} was submitted successfully",
                    self.name()
                );
                self.event(EventType::Normal, reasons::SUBMITTED, message);
                // The driver may not be in the cache yet; the grace period starts now.
                self.requeue(self.app.settings.driver_creation_grace);
            }
            SubmissionOutcome::Rejected {
                message, retryable, ..
            } => {
                self.status.app_state.state = State::SubmissionFailed;
                self.status.app_state.error_message = message.clone();
                self.status.failure_reason = Some(if *retryable {
                    FailureReason::SubmitterUnavailable
                } else {
                    FailureReason::SubmissionRejected
                });
                let text = format!(
                    "failed to submit SparkApplication {}: {message}",
                    self.name()
                );
                self.event(EventType::Warning, reasons::SUBMISSION_FAILED, text);
                self.requeue(Duration::ZERO);
            }
        }
    }

    /// A spec this operator cannot run: failed, not retried (a retry cannot help), and rerun
    /// when the spec changes (the hash is recorded for that).
    fn fail_unsupported(&mut self, hash: &str) {
        let blocking: Vec<UnsupportedField> = self
            .unsupported
            .iter()
            .filter(|f| f.blocking)
            .cloned()
            .collect();
        let message = format!("unsupported spec: {}", unsupported::message(&blocking));
        self.fail_spec(hash, FailureReason::UnsupportedSpec, message);
    }

    /// A spec this operator cannot run, failed at once for `reason` with `message`.
    fn fail_spec(&mut self, hash: &str, reason: FailureReason, message: String) {
        self.status.submission_pending = false;
        self.status.spec_hash = Some(hash.to_owned());
        self.status.failure_reason = Some(reason);
        self.status.app_state.error_message = message.clone();
        self.status.termination_time.get_or_insert(Time(self.now));
        self.enter_failed(message);
    }

    fn enter_failed(&mut self, message: String) {
        self.status.app_state.state = State::Failed;
        let text = format!("SparkApplication {} failed: {message}", self.name());
        self.event(EventType::Warning, reasons::FAILED, text);
        self.requeue(Duration::ZERO);
    }

    fn submission_failed(&mut self, hash: &str) {
        if !should_retry_submission(self.policy_type(), &self.spec, &self.status) {
            let message = self.status.app_state.error_message.clone();
            self.status.termination_time.get_or_insert(Time(self.now));
            self.enter_failed(message);
            return;
        }
        let wait = retry_delay(
            self.spec
                .restart_policy
                .as_ref()
                .and_then(|p| p.on_submission_failure_retry_interval),
            self.status.submission_attempts,
        );
        let base = self.status.last_submission_attempt_time.clone();
        if let Some(left) = base.as_ref().and_then(|t| self.remaining(t, wait)) {
            self.requeue(left);
            return;
        }
        self.submit_path(hash);
    }

    /// SUBMITTED, RUNNING, UNKNOWN: follow the driver of the current submission.
    fn track_driver(&mut self) {
        let observed = self.observed;
        let current = observed
            .driver
            .as_ref()
            .filter(|d| d.submission_id.as_deref() == Some(self.status.submission_id.as_str()));
        let Some(driver) = current else {
            self.driver_missing();
            return;
        };
        if let Some(id) = driver.spark_app_id.as_ref().filter(|id| !id.is_empty()) {
            self.status.spark_application_id = id.clone();
        }
        let timeouts = self
            .spec
            .application_timeout_config
            .clone()
            .unwrap_or_default();
        if !matches!(driver.phase, DriverPhase::Pending { .. }) {
            self.driver_unblocked();
        }
        match &driver.phase {
            DriverPhase::Pending {
                waiting_reason,
                blocked,
            } => {
                self.driver_state(State::Submitted, driver);
                let Some(limit) = timeouts.driver_start_timeout_millis.map(millis) else {
                    self.pending_driver(driver, blocked.as_ref());
                    return;
                };
                let since = self.submitted_at();
                match self.remaining(&since, limit) {
                    Some(left) => {
                        self.requeue(left);
                        self.pending_driver(driver, blocked.as_ref());
                    }
                    None => {
                        let image = waiting_reason
                            .as_deref()
                            .filter(|r| FailureReason::is_image_pull_waiting_reason(r));
                        let (reason, message) = match image {
                            Some(r) => (
                                FailureReason::ImagePullFailure,
                                format!(
                                    "driver image could not be pulled ({r}) within {}ms",
                                    limit.as_millis()
                                ),
                            ),
                            None => (
                                FailureReason::DriverStartTimeout,
                                format!("driver did not start within {}ms", limit.as_millis()),
                            ),
                        };
                        self.time_out(driver, reason, reasons::DRIVER_START_TIMED_OUT, message);
                    }
                }
            }
            DriverPhase::Running { ready, started_at } => {
                self.driver_state(State::Running, driver);
                if self.heartbeat_lost(driver, started_at.map(Time)) {
                    return;
                }
                let Some(limit) = timeouts.driver_ready_timeout_millis.map(millis) else {
                    return;
                };
                if *ready {
                    return;
                }
                let since = started_at.map(Time).unwrap_or_else(|| self.submitted_at());
                match self.remaining(&since, limit) {
                    Some(left) => self.requeue(left),
                    None => {
                        let message =
                            format!("driver did not become ready within {}ms", limit.as_millis());
                        self.time_out(
                            driver,
                            FailureReason::DriverReadyTimeout,
                            reasons::DRIVER_READY_TIMED_OUT,
                            message,
                        );
                    }
                }
            }
            DriverPhase::Succeeded => {
                self.status.termination_time.get_or_insert(Time(self.now));
                self.driver_state(State::Succeeding, driver);
                self.requeue(Duration::ZERO);
            }
            DriverPhase::Failed {
                exit_code,
                reason,
                message,
            } => {
                let code = exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string());
                let text = format!(
                    "driver container failed with ExitCode: {code}, Reason: {}{}",
                    reason.as_str(),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(", {message}")
                    }
                );
                self.fail_run(*reason, text);
                self.driver_state(State::Failing, driver);
            }
            DriverPhase::Unknown => {
                self.driver_state(State::Unknown, driver);
                self.heartbeat_lost(driver, None);
            }
        }
    }

    /// Fenced restarts: a driver that looks alive but whose agent stopped heartbeating for longer
    /// than the window (a partitioned node, a hung pod) has failed; the restart policy replaces it
    /// after fencing. Returns whether it was failed.
    fn heartbeat_lost(&mut self, driver: &ObservedDriver, started_at: Option<Time>) -> bool {
        let Some(settings) = self.recovery() else {
            return false;
        };
        let window_ms = recovery::heartbeat_timeout_ms(&self.spec, settings);
        let Some(read) = self.observed.heartbeat else {
            // Not read in this reconcile (the reconciler reads it for RUNNING and UNKNOWN apps).
            self.requeue(Duration::from_millis(window_ms / 2));
            return false;
        };
        let epoch = self.status.recovery_status.as_ref().map(|r| r.epoch);
        let now_ms = u64::try_from(self.now.as_millisecond()).unwrap_or(0);
        // Before the agent's first heartbeat, the driver's start is the reference.
        let since_ms = match read.filter(|hb| Some(hb.epoch) == epoch) {
            Some(hb) => hb.at_ms,
            None => {
                let start = started_at.unwrap_or_else(|| self.submitted_at());
                u64::try_from(start.0.as_millisecond()).unwrap_or(0)
            }
        };
        let age_ms = now_ms.saturating_sub(since_ms);
        if age_ms <= window_ms {
            let next = (window_ms - age_ms).min(window_ms / 2).max(100);
            self.requeue(Duration::from_millis(next));
            return false;
        }
        let message = format!(
            "driver {} (epoch {}) looks alive but its recovery agent has not heartbeated for {age_ms}ms (window {window_ms}ms)",
            driver.name,
            epoch.unwrap_or(INITIAL_EPOCH),
        );
        self.event(EventType::Warning, reasons::HEARTBEAT_LOST, message.clone());
        self.fail_run(FailureReason::HeartbeatLost, message);
        self.status.app_state.state = State::Failing;
        true
    }

    /// When the current submission was made (its start timeout counts from there).
    fn submitted_at(&self) -> Time {
        self.status
            .last_submission_attempt_time
            .clone()
            .unwrap_or(Time(self.now))
    }

    /// The run's UI objects and driver PDB: made once per submission, the UI recorded in
    /// `status.driverInfo`. A new run's objects are made after the submission's answer and
    /// before it is stored, so SUBMITTED and the record are one status write (the Spark
    /// application id an ingress URL may name comes with the answer).
    fn ensure_owned_objects(&mut self) {
        let settings = &self.app.settings.ui;
        let wanted = settings.ui_service
            || !self.spec.driver_ingress_options.is_empty()
            || self.spec.driver_pod_disruption_budget == Some(true)
            || self.spec.monitoring.is_some()
            || self.spec.batch_scheduler.is_some();
        let current = self.status.submission_id.clone();
        if !wanted || current.is_empty() || self.status.ui_submission_id == current {
            return;
        }
        match &self.observed.ui {
            None => {
                self.effects.push(Action::EnsureOwnedObjects);
                // A status this decision changed (a new run's SUBMITTED) is written once, with
                // the objects' record, rather than twice. Not when something else is to be done
                // now: a deletion or a live read follows a stored status.
                self.awaiting_objects = self.effects.len() == 1;
            }
            Some(Ok(made)) => {
                let info = &mut self.status.driver_info;
                if let Some((name, port, address)) = &made.service {
                    info.web_ui_service_name = name.clone();
                    info.web_ui_port = *port;
                    info.web_ui_address = address.clone();
                }
                if let Some((name, url)) = &made.ingress {
                    info.web_ui_ingress_name = name.clone();
                    info.web_ui_ingress_address = url.clone();
                }
                self.status.ui_submission_id = current;
            }
            Some(Err(message)) => {
                // Running without what the spec asks (a PodGroup, a UI Service) would be a
                // silent difference: the run fails, saying why.
                self.status.ui_submission_id = current;
                self.event(
                    EventType::Warning,
                    reasons::OWNED_OBJECTS_FAILED,
                    message.clone(),
                );
                self.delete_owned_driver();
                self.fail_run(FailureReason::UnsupportedSpec, message.clone());
                self.status.app_state.state = State::Failing;
            }
        }
    }

    /// Merges the current run's executors into `status.executorState` (an executor gone from the
    /// index, deleted by its driver, keeps its last known state), with an event per change that
    /// carries the counts, and the counts in `status.executorCounts` for the printer columns.
    fn track_executors(&mut self) {
        let current = self.status.submission_id.as_str();
        let between_runs = matches!(
            self.status.app_state.state,
            State::New
                | State::PendingRerun
                | State::Invalidating
                | State::Suspending
                | State::Suspended
                | State::Resuming
        );
        if current.is_empty() || self.delete_app || between_runs {
            return;
        }
        let mut changes = Vec::new();
        for executor in &self.observed.executors {
            if executor.submission_id.as_deref() != Some(current) {
                continue;
            }
            let known = self.status.executor_state.get(&executor.name).copied();
            if known == Some(executor.state) {
                continue;
            }
            if known.is_none() && self.status.executor_state.len() >= MAX_TRACKED_EXECUTORS {
                continue;
            }
            self.status
                .executor_state
                .insert(executor.name.clone(), executor.state);
            changes.push(executor);
        }
        let counts = ExecutorCounts::of(&self.status.executor_state);
        self.status.executor_counts = (!self.status.executor_state.is_empty()).then_some(counts);
        for executor in changes {
            let name = &executor.name;
            let (event_type, reason, what) = match executor.state {
                ExecutorState::Pending => (
                    EventType::Normal,
                    reasons::EXECUTOR_PENDING,
                    format!("Executor {name} is pending"),
                ),
                ExecutorState::Running => (
                    EventType::Normal,
                    reasons::EXECUTOR_RUNNING,
                    format!("Executor {name} is running"),
                ),
                ExecutorState::Completed => (
                    EventType::Normal,
                    reasons::EXECUTOR_COMPLETED,
                    format!("Executor {name} completed"),
                ),
                ExecutorState::Failed => (
                    EventType::Warning,
                    reasons::EXECUTOR_FAILED,
                    format!(
                        "Executor {name} failed with ExitCode: {}, Reason: {}, Pod Message: {}",
                        executor.exit_code.unwrap_or(-1),
                        executor.reason.as_deref().unwrap_or("Unknown"),
                        executor.message.as_deref().unwrap_or("")
                    ),
                ),
                ExecutorState::Unknown => (
                    EventType::Warning,
                    reasons::EXECUTOR_UNKNOWN,
                    format!("Executor {name} in unknown state"),
                ),
            };
            self.event(event_type, reason, format!("{what} (executors: {counts})"));
        }
    }

    /// A driver still pending: what holds it (from the pod, else from its latest Warning event,
    /// read once it has been pending a while) goes into a condition, the error message and a
    /// Warning `SparkDriverPending` event, each time it changes.
    fn pending_driver(&mut self, driver: &ObservedDriver, blocked: Option<&PendingReason>) {
        let from_events = self.observed.driver_warning.as_ref();
        let held = blocked.or(from_events.and_then(Option::as_ref));
        if let Some(held) = held {
            self.driver_blocked(driver, held.clone());
        }
        if blocked.is_some() {
            return;
        }
        if from_events.is_some() {
            // Read in this reconcile; look again later while it stays pending.
            self.requeue(DRIVER_STUCK_RECHECK);
            return;
        }
        let since = self.submitted_at();
        match self.remaining(&since, DRIVER_STUCK_AFTER) {
            Some(left) => self.requeue(left),
            None => self.effects.push(Action::InspectPendingDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            }),
        }
    }

    fn driver_blocked(&mut self, driver: &ObservedDriver, held: PendingReason) {
        let message = format!("{}: {}", held.reason, held.message);
        let existing = self
            .status
            .conditions
            .iter()
            .position(|c| c.type_ == DRIVER_PENDING_CONDITION);
        if let Some(i) = existing {
            let c = &self.status.conditions[i];
            if c.reason == held.reason && c.message == held.message {
                return;
            }
            self.status.conditions.remove(i);
        }
        self.status.conditions.push(Condition {
            type_: DRIVER_PENDING_CONDITION.to_owned(),
            status: "True".to_owned(),
            reason: held.reason.clone(),
            message: held.message.clone(),
            last_transition_time: self.time(),
            observed_generation: None,
        });
        self.status.app_state.error_message = message.clone();
        self.event(
            EventType::Warning,
            reasons::DRIVER_PENDING,
            format!("Driver {} is pending: {message}", driver.name),
        );
    }

    /// The driver left pending: its condition goes, and the error message it set.
    fn driver_unblocked(&mut self) {
        let Some(i) = self
            .status
            .conditions
            .iter()
            .position(|c| c.type_ == DRIVER_PENDING_CONDITION)
        else {
            return;
        };
        let c = self.status.conditions.remove(i);
        if self.status.app_state.error_message == format!("{}: {}", c.reason, c.message) {
            self.status.app_state.error_message.clear();
        }
    }

    /// Moves to the state the driver implies, with the widely used operator's driver event.
    fn driver_state(&mut self, state: State, driver: &ObservedDriver) {
        if self.status.app_state.state == state {
            return;
        }
        self.status.app_state.state = state;
        let name = &driver.name;
        let (event_type, reason, message) = match state {
            State::Submitted => (
                EventType::Normal,
                reasons::DRIVER_PENDING,
                format!("Driver {name} is pending"),
            ),
            State::Running => (
                EventType::Normal,
                reasons::DRIVER_RUNNING,
                format!("Driver {name} is running"),
            ),
            State::Succeeding => (
                EventType::Normal,
                reasons::DRIVER_COMPLETED,
                format!("Driver {name} completed"),
            ),
            State::Failing => (
                EventType::Warning,
                reasons::DRIVER_FAILED,
                format!("Driver {name} failed"),
            ),
            _ => (
                EventType::Warning,
                reasons::DRIVER_UNKNOWN,
                format!("Driver {name} in unknown state"),
            ),
        };
        self.event(event_type, reason, message);
    }

    fn time_out(
        &mut self,
        driver: &ObservedDriver,
        reason: FailureReason,
        event: &'static str,
        message: String,
    ) {
        // Delete it so it stops holding resources; a rerun waits for it to be gone. With fenced
        // restarts the fence comes first: the rerun deletes it, or `failing` if none follows.
        if !driver.terminating && self.recovery().is_none() {
            self.effects.push(Action::DeleteDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            });
        }
        self.event(EventType::Warning, event, message.clone());
        self.fail_run(reason, message);
        self.status.app_state.state = State::Failing;
    }

    /// Records why the run failed; the state follows from the caller.
    fn fail_run(&mut self, reason: FailureReason, message: String) {
        self.status.failure_reason = Some(reason);
        self.status.app_state.error_message = message;
        self.status.termination_time.get_or_insert(Time(self.now));
        self.requeue(Duration::ZERO);
    }

    fn driver_missing(&mut self) {
        let settings = self.app.settings;
        if self.status.app_state.state == State::Submitted {
            let since = self.submitted_at();
            if let Some(left) = self.remaining(&since, settings.driver_creation_grace) {
                self.requeue(left);
                return;
            }
        }
        let name = self.status.driver_info.pod_name.clone();
        if !self.observed.driver_absent_verified {
            self.effects.push(Action::VerifyDriverAbsent { name });
            return;
        }
        let message = format!("driver pod {name} not found");
        self.event(
            EventType::Warning,
            reasons::DRIVER_NOT_FOUND,
            message.clone(),
        );
        self.fail_run(FailureReason::DriverLost, message);
        self.status.app_state.state = State::Failing;
    }

    fn succeeding(&mut self) {
        if self.policy_type() == RestartPolicyType::Always {
            // The next run of an `Always` application is a run of its own, not a restart.
            self.new_run();
            self.rerun();
        } else {
            self.status.app_state.state = State::Completed;
            let message = format!("SparkApplication {} completed", self.name());
            self.event(EventType::Normal, reasons::COMPLETED, message);
            self.requeue(Duration::ZERO);
        }
    }

    fn failing(&mut self) {
        if !should_retry_run(self.policy_type(), &self.spec, &self.status) {
            if self.recovery().is_some() && self.driver_may_still_run() {
                // No successor will fence it; it still must stop holding resources.
                self.delete_owned_driver();
            }
            let message = self.status.app_state.error_message.clone();
            self.enter_failed(message);
            return;
        }
        let wait = retry_delay(
            self.spec
                .restart_policy
                .as_ref()
                .and_then(|p| p.on_failure_retry_interval),
            self.status.execution_attempts,
        );
        let base = self
            .status
            .termination_time
            .clone()
            .or_else(|| self.status.last_submission_attempt_time.clone());
        if let Some(left) = base.as_ref().and_then(|t| self.remaining(t, wait)) {
            self.requeue(left);
            return;
        }
        self.rerun();
    }

    /// Failures after which the driver's process may still be running (the operator gave up on
    /// it rather than seeing it exit).
    fn driver_may_still_run(&self) -> bool {
        matches!(
            self.status.failure_reason,
            Some(
                FailureReason::DriverStartTimeout
                    | FailureReason::DriverReadyTimeout
                    | FailureReason::ImagePullFailure
                    | FailureReason::HeartbeatLost
            )
        )
    }

    /// Removes the finished run's driver and resets the run's status; the submission happens
    /// from PENDING_RERUN once the driver is gone. With fenced restarts the driver stays until
    /// its epoch is fenced, and the submission path deletes it then.
    fn rerun(&mut self) {
        if self.recovery().is_none() {
            self.delete_owned_driver();
        }
        let status = &mut self.status;
        status.spark_application_id.clear();
        status.termination_time = None;
        status.app_state.error_message.clear();
        status.driver_info = DriverInfo::default();
        status.executor_state.clear();
        status.failure_reason = None;
        status.submission_pending = false;
        // Submission retries are counted per run (the field's documented meaning).
        status.submission_attempts = 0;
        self.enter_pending_rerun();
    }

    fn invalidating(&mut self) {
        if self.recovery().is_none() {
            self.delete_owned_driver();
        }
        // What ran under the old spec is no progress of the new one.
        self.new_run();
        let status = &mut self.status;
        status.spark_application_id.clear();
        status.submission_attempts = 0;
        status.execution_attempts = 0;
        status.last_submission_attempt_time = None;
        status.termination_time = None;
        status.app_state.error_message.clear();
        status.driver_info = DriverInfo::default();
        status.executor_state.clear();
        status.failure_reason = None;
        status.submission_pending = false;
        status.spec_hash = None;
        self.enter_pending_rerun();
    }

    fn enter_pending_rerun(&mut self) {
        self.status.app_state.state = State::PendingRerun;
        let message = format!("SparkApplication {} is pending rerun", self.name());
        self.event(EventType::Warning, reasons::PENDING_RERUN, message);
        self.requeue(Duration::ZERO);
    }

    fn delete_owned_driver(&mut self) {
        if let Some(driver) = self
            .observed
            .driver
            .as_ref()
            .filter(|d| d.owned && !d.terminating)
        {
            self.effects.push(Action::DeleteDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            });
        }
    }

    /// SUSPENDING: the driver goes; once it is gone the run's status is cleared and the app is
    /// SUSPENDED.
    fn suspending(&mut self) {
        if let Some(driver) = self.observed.driver.as_ref().filter(|d| d.owned) {
            self.delete_owned_driver();
            if driver.terminating || !self.effects.is_empty() {
                self.requeue(self.app.settings.deletion_requeue);
                return;
            }
        }
        let status = &mut self.status;
        status.app_state.state = State::Suspended;
        status.spark_application_id.clear();
        status.app_state.error_message.clear();
        status.driver_info = DriverInfo::default();
        status.executor_state.clear();
        status.submission_pending = false;
        let message = format!("SparkApplication {} is suspended", self.name());
        self.event(EventType::Warning, reasons::SUSPENDED, message);
    }

    /// SUSPENDED: nothing runs until `spec.suspend` is cleared; then RESUMING submits a new run
    /// with fresh attempt counts.
    fn suspended(&mut self) {
        if self.app.spec.suspend == Some(true) {
            return;
        }
        let status = &mut self.status;
        status.app_state.state = State::Resuming;
        status.submission_attempts = 0;
        status.execution_attempts = 0;
        status.last_submission_attempt_time = None;
        status.termination_time = None;
        status.failure_reason = None;
        let message = format!("SparkApplication {} is resuming", self.name());
        self.event(EventType::Warning, reasons::RESUMING, message);
        self.requeue(Duration::ZERO);
    }

    /// COMPLETED, FAILED: only the TTL acts.
    fn terminal(&mut self) {
        let ttl = self
            .spec
            .time_to_live_seconds
            .or(self.app.settings.default_ttl_seconds);
        let (Some(ttl), Some(terminated)) = (ttl, self.status.termination_time.clone()) else {
            return;
        };
        // A TTL of zero or less expires at once, as in the widely used operator.
        let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        match self.remaining(&terminated, ttl) {
            Some(left) => self.requeue(left),
            None => self.delete_app = true,
        }
    }
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
