//! What the reconciler observed for one decision: the driver and executor pods from the
//! caches, and the answers of the actions of this reconcile (a submission, a live read, a fence,
//! the owned objects).

use k8s_openapi::jiff::Timestamp;

use crate::crd::{ExecutorState, FailureReason};
use crate::executor_quota::QuotaRoom;
use crate::fence::Heartbeat;

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

/// Why a driver pod stays pending, as Kubernetes reports it: on the pod (`Unschedulable`,
/// `ErrImagePull`, ...) or in a Warning event about it (`FailedMount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingReason {
    pub reason: String,
    pub message: String,
}

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

/// The answer to [`Action::AdvanceEpoch`](super::Action::AdvanceEpoch) made in this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceOutcome {
    /// The store's epoch after the call: the one the next driver runs under.
    pub epoch: u64,
    /// The latest committed marker (`(epoch, seq)`), which the next driver restores.
    pub latest: Option<(u64, u64)>,
}

/// The submitter's answer to a [`Action::Submit`](super::Action::Submit) made in this reconcile.
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
    /// 429 `QUOTA_EXCEEDED`: a ResourceQuota of the namespace has no room for the driver's
    /// objects, and the submitter left nothing behind. `message` is the submitter's, quoting the
    /// API server's refusal (`exceeded quota: NAME, requested: …, used: …, limited: …`).
    OverQuota {
        submission_id: String,
        message: String,
    },
}

impl SubmissionOutcome {
    pub(super) fn submission_id(&self) -> &str {
        match self {
            SubmissionOutcome::Accepted { submission_id, .. }
            | SubmissionOutcome::Rejected { submission_id, .. }
            | SubmissionOutcome::OverQuota { submission_id, .. } => submission_id,
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
    /// The answer to [`Action::VerifyDriverAbsent`](super::Action::VerifyDriverAbsent): a live read found no pod of that name with
    /// the current submission id.
    pub driver_absent_verified: bool,
    /// The answer to [`Action::Submit`](super::Action::Submit), if one was just made.
    pub submission: Option<SubmissionOutcome>,
    /// The app's other pods from the cache (owned driver pods that are not `driver`): previous
    /// runs' and older epochs' drivers.
    pub other_drivers: Vec<ObservedDriver>,
    /// The answer to [`Action::AdvanceEpoch`](super::Action::AdvanceEpoch), if one was just made.
    pub fence: Option<FenceOutcome>,
    /// The last heartbeat in the store, when the reconciler read it (recovery-enabled apps with
    /// a running driver): `Some(None)` means read and never written.
    pub heartbeat: Option<Option<Heartbeat>>,
    /// The answer to [`Action::InspectPendingDriver`](super::Action::InspectPendingDriver): `Some(None)` read, no Warning event.
    pub driver_warning: Option<Option<PendingReason>>,
    /// The application's executor pods from the executor index (any run's).
    pub executors: Vec<ObservedExecutor>,
    /// The ResourceQuotas of the application's namespace, from the quota cache.
    pub quotas: Vec<QuotaRoom>,
    /// The answer to [`Action::EnsureDependencies`](super::Action::EnsureDependencies): all made, or the first the API server
    /// refused.
    pub dependencies: Option<Result<(), RefusedObject>>,
    /// The answer to [`Action::EnsureUiObjects`](super::Action::EnsureUiObjects): what was made, and what was refused.
    pub ui: Option<UiMade>,
    /// The answer to [`Action::StopDriver`](super::Action::StopDriver): the current submission's driver is gone or being
    /// deleted.
    pub driver_stopped: bool,
}

/// The UI objects made for a run, for `status.driverInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UiMade {
    /// The UI Service: name, port and `<cluster IP>:<port>`.
    pub service: Option<(String, i32, String)>,
    /// The UI Ingress: name and URL.
    pub ingress: Option<(String, String)>,
    /// The objects that could not be made.
    pub refused: Vec<RefusedObject>,
}

impl UiMade {
    /// Notes `object` as refused with `message`.
    pub fn refuse(&mut self, object: String, message: String, required: bool) {
        self.refused.push(RefusedObject {
            object,
            message,
            required,
        });
    }
}

/// An object of the run the API server refused (its type not served, the operator not allowed,
/// invalid, over quota), or that the spec does not let the operator build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedObject {
    /// `Kind name`, e.g. `Ingress pi-ing-4040`.
    pub object: String,
    /// Why, from the API server's answer.
    pub message: String,
    /// The run cannot go on without it (see `crate::ui::Planned::required`).
    pub required: bool,
}

impl RefusedObject {
    /// `object: message`, as status messages and events say it.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.object, self.message)
    }
}
