//! Driver state for `namespace:pod` look-ups, and the table that tells a client what to do.
//!
//! The state comes from the **driver container's** status, not the pod phase: a sidecar (Istio,
//! a log shipper) keeps a pod `Running` after the driver has exited, and an orchestrator that
//! waits on the pod phase waits forever. The client action follows the seed's table
//! (`shared/seeds/001_…`): Pending/Running → reconnect, Succeeded → done, Failed/Unknown/missing
//! → resubmit, except that a missing pod whose success was retained reports Succeeded → done.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Spark's default name for the driver container.
pub const DRIVER_CONTAINER_NAME: &str = "spark-kubernetes-driver";

/// The environment variable Spark's `BasicDriverFeatureStep` sets on the driver container only.
/// The env var Spark sets only on its driver container (marks it in a pod).
pub const DRIVER_BIND_ADDRESS_ENV: &str = "SPARK_DRIVER_BIND_ADDRESS";

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
    fn parse(text: &str) -> Option<PodPhase> {
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

/// What the pod says about the driver, derived by [`observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverObservation {
    pub phase: DriverPhase,
    pub action: ClientAction,
    /// `None` when there is no pod.
    pub pod_phase: Option<PodPhase>,
    pub container_state: ContainerState,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// RFC 3339, from the container's `terminated.finishedAt`.
    pub finished_at: Option<String>,
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

impl DriverStatus {
    /// Joins who the driver is with what was observed.
    pub fn new(identity: DriverIdentity, observation: DriverObservation) -> DriverStatus {
        DriverStatus {
            submission_id: identity.submission_id,
            namespace: identity.namespace,
            driver_pod_name: identity.driver_pod_name,
            driver_pod_uid: identity.driver_pod_uid,
            spark_app_id: identity.spark_app_id,
            phase: observation.phase,
            pod_phase: observation.pod_phase,
            container_state: observation.container_state,
            exit_code: observation.exit_code,
            reason: observation.reason,
            message: observation.message,
            finished_at: observation.finished_at,
            action: observation.action,
        }
    }
}

/// The phase and the client action for a pod (`None`: not found). `retained_success` says that a
/// success record outlived the pod; it only matters when the pod is gone, since a live pod is
/// the better witness.
pub fn classify(pod: Option<&Value>, retained_success: bool) -> (DriverPhase, ClientAction) {
    let observation = observe(pod, retained_success);
    (observation.phase, observation.action)
}

/// Which container of the pod is Spark's driver:
/// 1. the one named `spark-kubernetes-driver` (Spark's default, and our builder's);
/// 2. else the one carrying `SPARK_DRIVER_BIND_ADDRESS`, which Spark sets on the driver container
///    only, whatever a template named it (`podTemplateContainerName`);
/// 3. else the last container, where Spark appends its container. Not first: a mutating webhook
///    (Istio) may add a sidecar, but it does so after Spark created the pod spec, and rules 1-2
///    catch every pod Spark or we built; this is the fallback for foreign pods.
///
/// Without a spec (a status-only object), the single reported container, if there is one.
pub fn driver_container_name(pod: &Value) -> Option<&str> {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .filter(|containers| !containers.is_empty());
    let Some(containers) = containers else {
        let statuses = container_statuses(pod);
        if let Some(named) = statuses
            .iter()
            .find(|status| name_of(status) == Some(DRIVER_CONTAINER_NAME))
        {
            return name_of(named);
        }
        return match statuses {
            [only] => name_of(only),
            _ => None,
        };
    };
    let by_name = containers
        .iter()
        .find(|container| name_of(container) == Some(DRIVER_CONTAINER_NAME));
    let by_env = || {
        containers.iter().find(|container| {
            container
                .get("env")
                .and_then(Value::as_array)
                .is_some_and(|env| {
                    env.iter()
                        .any(|var| name_of(var) == Some(DRIVER_BIND_ADDRESS_ENV))
                })
        })
    };
    by_name
        .or_else(by_env)
        .or_else(|| containers.last())
        .and_then(name_of)
}

/// Reads the driver's state from a pod (`None`: not found); see [`classify`].
///
/// Precedence, most trustworthy fact first:
/// 1. the driver container terminated → Succeeded on exit 0, else Failed, whatever the pod phase
///    (a sidecar may hold the pod `Running`; a lost node may have made it `Unknown` after);
/// 2. the pod phase is Failed or Succeeded (eviction, deadline, or statuses not reported) → that;
/// 3. the pod phase is Unknown (node lost) → Unknown: the seed's table resubmits;
/// 4. the container runs → Running; it waits or has no status yet → Pending.
pub fn observe(pod: Option<&Value>, retained_success: bool) -> DriverObservation {
    let Some(pod) = pod else {
        let phase = if retained_success {
            DriverPhase::Succeeded
        } else {
            DriverPhase::Unknown
        };
        return DriverObservation {
            phase,
            action: ClientAction::for_phase(phase),
            pod_phase: None,
            container_state: ContainerState::Absent,
            exit_code: None,
            reason: None,
            message: None,
            finished_at: None,
        };
    };
    let pod_phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .and_then(PodPhase::parse);
    let state = driver_container_name(pod).and_then(|name| {
        container_statuses(pod)
            .iter()
            .find(|status| name_of(status) == Some(name))
            .and_then(|status| status.get("state"))
    });
    let (container_state, detail) = match state {
        Some(state) if state.get("terminated").is_some() => {
            (ContainerState::Terminated, state.get("terminated"))
        }
        Some(state) if state.get("running").is_some() => {
            (ContainerState::Running, state.get("running"))
        }
        Some(state) if state.get("waiting").is_some() => {
            (ContainerState::Waiting, state.get("waiting"))
        }
        _ => (ContainerState::Absent, None),
    };
    let text = |value: Option<&Value>, key: &str| {
        value
            .and_then(|value| value.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let exit_code = detail
        .filter(|_| container_state == ContainerState::Terminated)
        .and_then(|terminated| terminated.get("exitCode"))
        .and_then(Value::as_i64)
        .and_then(|code| i32::try_from(code).ok());
    let pod_status = pod.get("status");

    let phase = match (container_state, exit_code, pod_phase) {
        (ContainerState::Terminated, Some(0), _) => DriverPhase::Succeeded,
        (ContainerState::Terminated, _, _) => DriverPhase::Failed,
        (_, _, Some(PodPhase::Failed)) => DriverPhase::Failed,
        (_, _, Some(PodPhase::Succeeded)) => DriverPhase::Succeeded,
        (_, _, Some(PodPhase::Unknown)) => DriverPhase::Unknown,
        (ContainerState::Running, _, _) => DriverPhase::Running,
        (ContainerState::Waiting | ContainerState::Absent, _, _) => DriverPhase::Pending,
    };
    // The container's own reason explains best; the pod's (`Evicted`) when the container has none.
    let reason = text(detail, "reason").or_else(|| text(pod_status, "reason"));
    let message = text(detail, "message").or_else(|| text(pod_status, "message"));
    let finished_at = match container_state {
        ContainerState::Terminated => text(detail, "finishedAt"),
        _ => None,
    };
    DriverObservation {
        phase,
        action: ClientAction::for_phase(phase),
        pod_phase,
        container_state,
        exit_code,
        reason,
        message,
        finished_at,
    }
}

fn container_statuses(pod: &Value) -> &[Value] {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn name_of(value: &Value) -> Option<&str> {
    value.get("name").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A driver pod with a sidecar; `driver` and `sidecar` are container `state` objects.
    fn pod(phase: &str, driver: Option<Value>, sidecar: Option<Value>) -> Value {
        let mut statuses = vec![];
        if let Some(state) = sidecar {
            statuses.push(json!({"name": "istio-proxy", "state": state}));
        }
        if let Some(state) = driver {
            statuses.push(json!({"name": DRIVER_CONTAINER_NAME, "state": state}));
        }
        json!({
            "metadata": {"name": "pi-driver", "namespace": "spark"},
            "spec": {"containers": [
                {"name": DRIVER_CONTAINER_NAME, "env": [{"name": DRIVER_BIND_ADDRESS_ENV}]},
                {"name": "istio-proxy"}
            ]},
            "status": {"phase": phase, "containerStatuses": statuses}
        })
    }

    fn running() -> Value {
        json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    }

    fn terminated(code: i64) -> Value {
        json!({"terminated": {"exitCode": code, "reason": if code == 0 {"Completed"} else {"Error"},
            "finishedAt": "2026-01-01T00:10:00Z"}})
    }

    fn waiting(reason: &str) -> Value {
        json!({"waiting": {"reason": reason, "message": "pulling"}})
    }

    use ClientAction::*;
    use DriverPhase as P;

    #[test]
    fn the_seed_table_row_by_row() {
        let cases: Vec<(&str, Option<Value>, (DriverPhase, ClientAction))> = vec![
            (
                "running",
                Some(pod("Running", Some(running()), Some(running()))),
                (P::Running, Reconnect),
            ),
            (
                "pending",
                Some(pod("Pending", Some(waiting("ContainerCreating")), None)),
                (P::Pending, Reconnect),
            ),
            (
                "succeeded",
                Some(pod("Succeeded", Some(terminated(0)), Some(terminated(0)))),
                (P::Succeeded, Done),
            ),
            (
                "failed",
                Some(pod("Failed", Some(terminated(1)), Some(terminated(0)))),
                (P::Failed, Resubmit),
            ),
            (
                "unknown",
                Some(pod("Unknown", Some(running()), None)),
                (P::Unknown, Resubmit),
            ),
            ("not found", None, (P::Unknown, Resubmit)),
        ];
        for (row, pod, expected) in cases {
            assert_eq!(classify(pod.as_ref(), false), expected, "{row}");
        }
    }

    #[test]
    fn sidecar_keeping_pod_running_after_driver_succeeded_is_done() {
        let pod = pod("Running", Some(terminated(0)), Some(running()));
        let observation = observe(Some(&pod), false);
        assert_eq!(
            (observation.phase, observation.action),
            (P::Succeeded, Done)
        );
        assert_eq!(observation.pod_phase, Some(PodPhase::Running));
        assert_eq!(observation.container_state, ContainerState::Terminated);
        assert_eq!(observation.exit_code, Some(0));
        assert_eq!(
            observation.finished_at.as_deref(),
            Some("2026-01-01T00:10:00Z")
        );
    }

    #[test]
    fn sidecar_keeping_pod_running_after_driver_failed_is_failed() {
        let pod = pod("Running", Some(terminated(137)), Some(running()));
        let observation = observe(Some(&pod), false);
        assert_eq!(
            (observation.phase, observation.action),
            (P::Failed, Resubmit)
        );
        assert_eq!(observation.exit_code, Some(137));
        assert_eq!(observation.reason.as_deref(), Some("Error"));
    }

    #[test]
    fn gone_pod_with_retained_success_is_done() {
        let observation = observe(None, true);
        assert_eq!(
            (observation.phase, observation.action),
            (P::Succeeded, Done)
        );
        assert_eq!(observation.pod_phase, None);
        assert_eq!(observation.container_state, ContainerState::Absent);
    }

    #[test]
    fn live_pod_outranks_retained_success() {
        let pod = pod("Failed", Some(terminated(2)), None);
        assert_eq!(classify(Some(&pod), true), (P::Failed, Resubmit));
    }

    #[test]
    fn evicted_pod_without_container_status_is_failed_with_pod_reason() {
        let pod = json!({
            "spec": {"containers": [{"name": DRIVER_CONTAINER_NAME}]},
            "status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
        });
        let observation = observe(Some(&pod), false);
        assert_eq!(observation.phase, P::Failed);
        assert_eq!(observation.container_state, ContainerState::Absent);
        assert_eq!(observation.reason.as_deref(), Some("Evicted"));
        assert_eq!(observation.message.as_deref(), Some("low on memory"));
    }

    #[test]
    fn pod_without_status_is_pending() {
        let pod = json!({"spec": {"containers": [{"name": DRIVER_CONTAINER_NAME}]}});
        assert_eq!(classify(Some(&pod), false), (P::Pending, Reconnect));
    }

    #[test]
    fn running_pod_whose_driver_still_waits_is_pending_with_reason() {
        let pod = pod(
            "Running",
            Some(waiting("ImagePullBackOff")),
            Some(running()),
        );
        let observation = observe(Some(&pod), false);
        assert_eq!(
            (observation.phase, observation.action),
            (P::Pending, Reconnect)
        );
        assert_eq!(observation.reason.as_deref(), Some("ImagePullBackOff"));
        assert_eq!(observation.exit_code, None);
    }

    #[test]
    fn terminated_driver_outranks_unknown_pod_phase() {
        let pod = pod("Unknown", Some(terminated(0)), None);
        assert_eq!(classify(Some(&pod), false), (P::Succeeded, Done));
    }

    #[test]
    fn succeeded_pod_without_statuses_is_succeeded() {
        let pod =
            json!({"spec": {"containers": [{"name": "x"}]}, "status": {"phase": "Succeeded"}});
        assert_eq!(classify(Some(&pod), false), (P::Succeeded, Done));
    }

    #[test]
    fn driver_container_is_found_by_name_then_env_then_position() {
        let named = json!({"spec": {"containers": [
            {"name": DRIVER_CONTAINER_NAME}, {"name": "sidecar"}]}});
        assert_eq!(driver_container_name(&named), Some(DRIVER_CONTAINER_NAME));
        let by_env = json!({"spec": {"containers": [
            {"name": "main", "env": [{"name": DRIVER_BIND_ADDRESS_ENV, "valueFrom": {}}]},
            {"name": "istio-proxy"}]}});
        assert_eq!(driver_container_name(&by_env), Some("main"));
        let last = json!({"spec": {"containers": [{"name": "logs"}, {"name": "main"}]}});
        assert_eq!(driver_container_name(&last), Some("main"));
        let status_only = json!({"status": {"containerStatuses": [{"name": "only"}]}});
        assert_eq!(driver_container_name(&status_only), Some("only"));
        assert_eq!(driver_container_name(&json!({})), None);
    }

    #[test]
    fn renamed_driver_container_terminating_is_read_by_its_name() {
        let pod = json!({
            "spec": {"containers": [
                {"name": "main", "env": [{"name": DRIVER_BIND_ADDRESS_ENV}]},
                {"name": "istio-proxy"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "istio-proxy", "state": running()},
                {"name": "main", "state": terminated(0)}]}
        });
        assert_eq!(classify(Some(&pod), false), (P::Succeeded, Done));
    }

    #[test]
    fn action_for_every_phase_follows_the_table() {
        assert_eq!(ClientAction::for_phase(P::Pending), Reconnect);
        assert_eq!(ClientAction::for_phase(P::Running), Reconnect);
        assert_eq!(ClientAction::for_phase(P::Succeeded), Done);
        assert_eq!(ClientAction::for_phase(P::Failed), Resubmit);
        assert_eq!(ClientAction::for_phase(P::Unknown), Resubmit);
    }

    #[test]
    fn status_serialises_phases_as_enums_and_omits_empty_details() {
        let status = DriverStatus::new(
            DriverIdentity {
                submission_id: None,
                namespace: "spark".into(),
                driver_pod_name: "pi-driver".into(),
                driver_pod_uid: "u".into(),
                spark_app_id: "spark-1".into(),
            },
            observe(Some(&pod("Running", Some(running()), None)), false),
        );
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({
                "namespace": "spark", "driver_pod_name": "pi-driver", "driver_pod_uid": "u",
                "spark_app_id": "spark-1", "phase": "Running", "pod_phase": "Running",
                "container_state": "running", "action": "Reconnect"
            })
        );
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        fn any_state() -> impl Strategy<Value = Option<Value>> {
            prop_oneof![
                Just(None),
                Just(Some(running())),
                Just(Some(waiting("X"))),
                (-5i64..300).prop_map(|code| Some(terminated(code))),
            ]
        }

        fn any_phase() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec![
                "Pending",
                "Running",
                "Succeeded",
                "Failed",
                "Unknown",
                "",
            ])
        }

        proptest! {
            /// A terminated driver decides alone, whatever the pod phase and the sidecar do.
            #[test]
            fn terminated_driver_decides(code in -5i64..300, phase in any_phase(), sidecar in any_state()) {
                let pod = pod(phase, Some(terminated(code)), sidecar);
                let expected = if code == 0 { (P::Succeeded, Done) } else { (P::Failed, Resubmit) };
                prop_assert_eq!(classify(Some(&pod), false), expected);
            }

            /// The sidecar's state never changes the answer.
            #[test]
            fn sidecar_is_ignored(phase in any_phase(), driver in any_state(), a in any_state(), b in any_state()) {
                prop_assert_eq!(
                    classify(Some(&pod(phase, driver.clone(), a)), false),
                    classify(Some(&pod(phase, driver, b)), false)
                );
            }

            /// The action is always the table's for the phase.
            #[test]
            fn action_matches_phase(phase in any_phase(), driver in any_state(), retained in any::<bool>()) {
                let (driver_phase, action) = classify(Some(&pod(phase, driver, None)), retained);
                prop_assert_eq!(action, ClientAction::for_phase(driver_phase));
            }
        }
    }
}
