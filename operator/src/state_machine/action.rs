//! What a decision asks of the reconciler: the [`Action`]s in the one order they run in, and the
//! [`Decision`] that carries them with the status to persist.

use std::time::Duration;

use crate::crd::SparkApplicationStatus;

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
    /// Read the driver pod `name` from the API server (not the cache) and, when it carries
    /// `submission_id` and is not being deleted yet, delete it with its uid as the precondition;
    /// report [`Observed::driver_stopped`](super::Observed::driver_stopped). For a run that
    /// failed right after its submission, whose driver the cache may not show yet.
    StopDriver { name: String, submission_id: String },
    /// Read the driver pod from the API server (not the cache) and report
    /// [`Observed::driver_absent_verified`](super::Observed::driver_absent_verified): true when
    /// there is no pod of that name carrying the current submission id.
    VerifyDriverAbsent { name: String },
    /// Read the latest Warning event about the pending driver pod (`FailedMount` and the like
    /// are only in events) and report [`Observed::driver_warning`](super::Observed::driver_warning).
    InspectPendingDriver { name: String, uid: String },
    /// Create what the driver depends on (`crate::dependencies`: its PodGroup, its
    /// PodDisruptionBudget, its monitoring ConfigMap; those that exist are taken as they are)
    /// before it is submitted; report
    /// [`Observed::dependencies`](super::Observed::dependencies).
    EnsureDependencies,
    /// Create the run's UI Service and Ingresses (those that exist are taken as they are);
    /// report [`Observed::ui`](super::Observed::ui).
    EnsureUiObjects,
    /// Send the submission with this (persisted) id; report
    /// [`Observed::submission`](super::Observed::submission).
    Submit { submission_id: String },
    /// Fence every driver under epoch `observed` in the state store, for run `run` of the
    /// application (a new run starts from nothing), and report
    /// [`Observed::fence`](super::Observed::fence) (a retry after a crash gets the epoch already
    /// fenced, not a new one).
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
    /// 2. `AdvanceEpoch`, then the reads and the objects whose answers the next round records
    ///    (`VerifyDriverAbsent`, `EnsureDependencies`, ...);
    /// 3. `DeleteDriver` and `StopDriver` before `Submit`: an older epoch's driver goes before
    ///    its successor is submitted;
    /// 4. `RecordEvent`s (best effort, never blocking what matters);
    /// 5. `DeleteApplication` (after it there is nothing left to act on), then `Requeue`.
    pub fn order(&self) -> u8 {
        match self {
            Action::WriteStatus => 0,
            Action::AdvanceEpoch { .. } => 1,
            Action::VerifyDriverAbsent { .. }
            | Action::InspectPendingDriver { .. }
            | Action::EnsureDependencies
            | Action::EnsureUiObjects => 2,
            Action::DeleteDriver { .. } | Action::StopDriver { .. } => 3,
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
    /// waiting for the UI objects' answer carries the status they are made for (a new run's
    /// Spark application id names its ingress) and writes nothing yet.
    pub status: SparkApplicationStatus,
    pub actions: Vec<Action>,
}
