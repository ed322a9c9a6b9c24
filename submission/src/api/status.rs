//! Driver state for `namespace:pod` look-ups, and the table that tells a client what to do.
//!
//! The state itself comes from [`crate::driver::observe_driver`] (the driver container's status,
//! not the pod phase). The client action follows the seed's table (`shared/seeds/001_…`):
//! Pending/Running → reconnect, Succeeded → done, Failed/Unknown/missing → resubmit, except that
//! a missing pod whose success was retained reports Succeeded → done.

use serde::{Deserialize, Serialize};

/// The driver's state as a client needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DriverPhase {
    /// Not started yet (scheduling, pulling, waiting).
    Pending,
    /// The driver container runs.
    Running,
    /// The driver container exited 0 (or its success was retained after the pod went away).
    Succeeded,
    /// The driver container exited non-zero, or the pod failed before it ran.
    Failed,
    /// No trustworthy state: the pod is gone, or its node stopped reporting.
    Unknown,
}

/// What a client that kept the `namespace:pod` id should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClientAction {
    /// Keep polling the same driver.
    Reconnect,
    /// Finished successfully; do not submit again.
    Done,
    /// Submit again (with a new submission id: this one's driver is finished or lost).
    Resubmit,
}

impl ClientAction {
    /// The seed's table from a driver phase.
    pub fn for_phase(phase: DriverPhase) -> ClientAction {
        match phase {
            DriverPhase::Pending | DriverPhase::Running => ClientAction::Reconnect,
            DriverPhase::Succeeded => ClientAction::Done,
            DriverPhase::Failed | DriverPhase::Unknown => ClientAction::Resubmit,
        }
    }
}

/// The pod's own `status.phase`, reported beside the driver phase for diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    /// The phase a pod's `status.phase` names; `None` for anything else.
    pub fn parse(text: &str) -> Option<PodPhase> {
        match text {
            "Pending" => Some(PodPhase::Pending),
            "Running" => Some(PodPhase::Running),
            "Succeeded" => Some(PodPhase::Succeeded),
            "Failed" => Some(PodPhase::Failed),
            "Unknown" => Some(PodPhase::Unknown),
            _ => None,
        }
    }
}

/// Which of Kubernetes' container states the driver container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    Waiting,
    Running,
    Terminated,
    /// No status for the driver container (not reported yet, or no pod).
    Absent,
}

/// Who the driver is: what a status answer carries besides the observation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverIdentity {
    pub submission_id: Option<String>,
    pub namespace: String,
    pub driver_pod_name: String,
    pub driver_pod_uid: String,
    pub spark_app_id: String,
}

/// `GET /api/v1/drivers/{namespace}/{pod}` and `GET /api/v1/spark-submit/{submission_id}` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    pub namespace: String,
    pub driver_pod_name: String,
    pub driver_pod_uid: String,
    pub spark_app_id: String,
    pub phase: DriverPhase,
    /// `null` when the pod is gone (a retained success).
    pub pod_phase: Option<PodPhase>,
    pub container_state: ContainerState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub action: ClientAction,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_for_every_phase_follows_the_table() {
        use ClientAction::*;
        use DriverPhase as P;
        assert_eq!(ClientAction::for_phase(P::Pending), Reconnect);
        assert_eq!(ClientAction::for_phase(P::Running), Reconnect);
        assert_eq!(ClientAction::for_phase(P::Succeeded), Done);
        assert_eq!(ClientAction::for_phase(P::Failed), Resubmit);
        assert_eq!(ClientAction::for_phase(P::Unknown), Resubmit);
    }
}
