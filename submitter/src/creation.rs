//! What creating a driver's objects ends with: the driver pod ([`Submitted`]), or why not
//! ([`SubmitDriverError`]). Below the in-flight map, which shares these outcomes between
//! concurrent duplicates, and below `submit`, which produces them.

pub mod driver_pod;

use thiserror::Error;

use crate::kube_api::CallError;
use crate::record::Record;
use driver_pod::DriverPod;
use submission::error_chain::error_chain;

/// Why a submission did not complete.
#[derive(Debug, Error)]
pub enum SubmitDriverError {
    #[error("{kind} {name} belongs to another submission")]
    ConflictingObject {
        kind: String,
        name: String,
        other_submission_id: Option<String>,
    },
    #[error("driver pod {name} of this submission is being deleted")]
    DriverPodTerminating { name: String },
    #[error("the submission id is bound to driver {namespace}:{pod}")]
    BoundToAnotherDriver { namespace: String, pod: String },
    #[error("{kind} {name} is not a kind of object the submitter creates")]
    UnsupportedObject { kind: String, name: String },
    #[error("cannot read {kind} {name}")]
    ReadObject {
        kind: String,
        name: String,
        #[source]
        source: CallError,
    },
    #[error("cannot create {kind} {name}")]
    CreateObject {
        kind: String,
        name: String,
        #[source]
        source: CallError,
    },
    #[error("cannot make the driver pod the owner of {kind} {name}")]
    AttachOwner {
        kind: String,
        name: String,
        #[source]
        source: CallError,
    },
    #[error("cannot delete {kind} {name} of an earlier driver")]
    DeleteStaleObject {
        kind: String,
        name: String,
        #[source]
        source: CallError,
    },
    #[error("the driver's objects kept changing during {rounds} attempts")]
    Unsettled { rounds: usize },
    #[error("cannot claim the submission id")]
    ClaimId {
        #[source]
        source: CallError,
    },
    /// Not a failure of the submission: its driver ended (a retained success, a kill), so
    /// nothing may be created; the answer comes from the record.
    #[error("the driver of this submission id has ended")]
    Ended { record: Box<Record> },
}

impl SubmitDriverError {
    /// A stable name for metrics, logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SubmitDriverError::ConflictingObject { .. } => "conflicting_object",
            SubmitDriverError::DriverPodTerminating { .. } => "driver_pod_terminating",
            SubmitDriverError::BoundToAnotherDriver { .. } => "bound_to_another_driver",
            SubmitDriverError::UnsupportedObject { .. } => "unsupported_object",
            SubmitDriverError::ReadObject { .. } => "read_object",
            SubmitDriverError::CreateObject { .. } => "create_object",
            SubmitDriverError::AttachOwner { .. } => "attach_owner",
            SubmitDriverError::DeleteStaleObject { .. } => "delete_stale_object",
            SubmitDriverError::Unsettled { .. } => "unsettled",
            SubmitDriverError::ClaimId { .. } => "claim_id",
            SubmitDriverError::Ended { .. } => "ended",
        }
    }

    /// The failed API call, if one failed.
    pub fn call_error(&self) -> Option<&CallError> {
        match self {
            SubmitDriverError::ReadObject { source, .. }
            | SubmitDriverError::CreateObject { source, .. }
            | SubmitDriverError::AttachOwner { source, .. }
            | SubmitDriverError::DeleteStaleObject { source, .. }
            | SubmitDriverError::ClaimId { source } => Some(source),
            _ => None,
        }
    }

    /// What the log may say about the failure: the whole error chain, except that an answer of
    /// the API server is reduced to its code, reason and the fields it names. The API server
    /// quotes rejected values in its messages (`Invalid value: "…"`), and those values are the
    /// client's input, which may hold a secret; the client gets the message in its answer, the
    /// log does not.
    pub fn loggable_cause(&self) -> String {
        let Some(call) = self.call_error() else {
            return error_chain(self);
        };
        let Some(status) = call.status() else {
            return error_chain(self);
        };
        let fields = call.rejected_fields();
        format!(
            "{self}: the API server answered {} {} (fields: [{}]; its message is not logged)",
            status.code,
            status.reason,
            fields.join(", ")
        )
    }

    /// Kind and name of the built object the error is about.
    pub fn object(&self) -> Option<(&str, &str)> {
        match self {
            SubmitDriverError::ConflictingObject { kind, name, .. }
            | SubmitDriverError::UnsupportedObject { kind, name }
            | SubmitDriverError::ReadObject { kind, name, .. }
            | SubmitDriverError::CreateObject { kind, name, .. }
            | SubmitDriverError::AttachOwner { kind, name, .. }
            | SubmitDriverError::DeleteStaleObject { kind, name, .. } => Some((kind, name)),
            SubmitDriverError::DriverPodTerminating { name } => Some(("Pod", name)),
            SubmitDriverError::BoundToAnotherDriver { .. }
            | SubmitDriverError::Unsettled { .. }
            | SubmitDriverError::ClaimId { .. }
            | SubmitDriverError::Ended { .. } => None,
        }
    }

    /// Kind of the object the error is about (`Pod`, `ConfigMap`, …).
    pub fn object_kind(&self) -> Option<&str> {
        match self {
            SubmitDriverError::ConflictingObject { kind, .. }
            | SubmitDriverError::UnsupportedObject { kind, .. }
            | SubmitDriverError::ReadObject { kind, .. }
            | SubmitDriverError::CreateObject { kind, .. }
            | SubmitDriverError::AttachOwner { kind, .. }
            | SubmitDriverError::DeleteStaleObject { kind, .. } => Some(kind),
            SubmitDriverError::DriverPodTerminating { .. } => Some("Pod"),
            SubmitDriverError::BoundToAnotherDriver { .. }
            | SubmitDriverError::Unsettled { .. }
            | SubmitDriverError::ClaimId { .. }
            | SubmitDriverError::Ended { .. } => None,
        }
    }
}

/// A failed submission and whether this attempt removed what it had created.
#[derive(Debug)]
pub struct Failure {
    pub error: SubmitDriverError,
    pub rolled_back: bool,
}

/// The driver pod a submission ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// This attempt created the pod (201); otherwise it existed (200, duplicate).
    pub created: bool,
    pub pod: DriverPod,
}

impl Submitted {
    pub fn pod_uid(&self) -> &str {
        &self.pod.uid
    }
}
