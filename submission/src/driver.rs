//! The driver-state rule: which container of a pod is Spark's driver, and what state the driver
//! is in. One rule for the submitter's status look-ups, its sweeper and retention recorder, and
//! the operator.
//!
//! The state comes from the **driver container's** status, not the pod phase: a sidecar (Istio,
//! a log shipper, the recovery agent) keeps a pod `Running` after the driver has exited, and
//! whoever waits on the pod phase waits forever.

use k8s_openapi::api::core::v1::{Container, ContainerState as K8sContainerState, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::api::{
    ClientAction, ContainerState, DriverIdentity, DriverPhase, DriverStatus, PodPhase,
};
use crate::meta::containers::{DRIVER, DRIVER_BIND_ADDRESS_ENV};

/// What a pod says about its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverObservation {
    pub phase: DriverPhase,
    /// The pod's own `status.phase`; `None` when the pod is gone or reports none.
    pub pod_phase: Option<PodPhase>,
    /// The driver container's name; `None` when no container could be told apart.
    pub container: Option<String>,
    pub container_state: ContainerState,
    /// The driver container's exit code, once terminated.
    pub exit_code: Option<i32>,
    /// The driver container's `reason`/`message` (of its current state).
    pub container_reason: Option<String>,
    pub container_message: Option<String>,
    /// The pod's `status.reason`/`message` (`Evicted`, `DeadlineExceeded`, …).
    pub pod_reason: Option<String>,
    pub pod_message: Option<String>,
    /// When the driver container started running (while it runs).
    pub started_at: Option<Timestamp>,
    /// When the driver container terminated.
    pub finished_at: Option<Timestamp>,
    /// The pod's `Ready` condition is true.
    pub ready: bool,
}

impl DriverObservation {
    /// No pod: Succeeded when a success record outlived it, else Unknown (a lost driver).
    pub fn absent(retained_success: bool) -> DriverObservation {
        DriverObservation {
            phase: if retained_success {
                DriverPhase::Succeeded
            } else {
                DriverPhase::Unknown
            },
            pod_phase: None,
            container: None,
            container_state: ContainerState::Absent,
            exit_code: None,
            container_reason: None,
            container_message: None,
            pod_reason: None,
            pod_message: None,
            started_at: None,
            finished_at: None,
            ready: false,
        }
    }

    /// The reason that explains best: the container's own, else the pod's.
    pub fn reason(&self) -> Option<&str> {
        self.container_reason
            .as_deref()
            .or(self.pod_reason.as_deref())
    }

    /// The message that goes with [`DriverObservation::reason`].
    pub fn message(&self) -> Option<&str> {
        self.container_message
            .as_deref()
            .or(self.pod_message.as_deref())
    }
}

/// Which container of the pod is Spark's driver:
/// 1. the one named `spark-kubernetes-driver` (Spark's default, and our builder's);
/// 2. else the one carrying `SPARK_DRIVER_BIND_ADDRESS`, which Spark sets on the driver container
///    only, whatever a template named it (`podTemplateContainerName`);
/// 3. else the last container, where Spark appends its container. Not the first: a mutating
///    webhook (Istio) may add a sidecar, but rules 1-2 catch every pod Spark or we built; this is
///    the fallback for foreign pods.
///
/// Init containers, native sidecars among them, are never the driver. Without a spec (a
/// status-only object), the status named like Spark's driver, else the only one reported.
pub fn driver_container_name(pod: &Pod) -> Option<&str> {
    let containers = pod
        .spec
        .as_ref()
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        let statuses = pod
            .status
            .as_ref()
            .and_then(|status| status.container_statuses.as_deref())
            .unwrap_or_default();
        return match statuses {
            [only] => Some(only.name.as_str()),
            _ => statuses
                .iter()
                .find(|status| status.name == DRIVER)
                .map(|status| status.name.as_str()),
        };
    }
    let by_name = || containers.iter().find(|c| c.name == DRIVER);
    let by_env = || containers.iter().find(|c| marks_driver(c));
    by_name()
        .or_else(by_env)
        .or_else(|| containers.last())
        .map(|c| c.name.as_str())
}

fn marks_driver(container: &Container) -> bool {
    container
        .env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|var| var.name == DRIVER_BIND_ADDRESS_ENV)
}

/// Reads the driver's state from a pod.
///
/// Precedence, most trustworthy fact first:
/// 1. the driver container terminated → Succeeded on exit 0, else Failed, whatever the pod phase
///    (a sidecar may hold the pod `Running`; a lost node may have made it `Unknown` after);
/// 2. the pod phase is Failed or Succeeded (eviction, deadline, or statuses not reported) → that;
/// 3. the pod phase is Unknown (node lost) → Unknown;
/// 4. the container runs → Running; it waits or has no status yet → Pending.
pub fn observe_driver(pod: &Pod) -> DriverObservation {
    observe(pod, driver_container_name(pod))
}

/// Reads the pod as [`observe_driver`] does, but with `container` taken for the driver: what a
/// reader of that container's log needs to know (has it ended?), whichever container it named.
/// A name the pod does not report is `Absent`, and only the pod phase can end it.
pub fn observe_container(pod: &Pod, container: &str) -> DriverObservation {
    observe(pod, Some(container))
}

fn observe(pod: &Pod, container: Option<&str>) -> DriverObservation {
    let status = pod.status.as_ref();
    let pod_phase = status
        .and_then(|s| s.phase.as_deref())
        .and_then(PodPhase::parse);
    let state: Option<&K8sContainerState> = container.and_then(|name| {
        status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.state.as_ref())
    });
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let running = state.and_then(|s| s.running.as_ref());
    let waiting = state.and_then(|s| s.waiting.as_ref());
    let (container_state, container_reason, container_message) =
        match (terminated, running, waiting) {
            (Some(t), _, _) => (
                ContainerState::Terminated,
                t.reason.clone(),
                t.message.clone(),
            ),
            (None, Some(_), _) => (ContainerState::Running, None, None),
            (None, None, Some(w)) => (ContainerState::Waiting, w.reason.clone(), w.message.clone()),
            (None, None, None) => (ContainerState::Absent, None, None),
        };
    let exit_code = terminated.map(|t| t.exit_code);
    let phase = match (exit_code, pod_phase, container_state) {
        (Some(0), _, _) => DriverPhase::Succeeded,
        (Some(_), _, _) => DriverPhase::Failed,
        (None, Some(PodPhase::Failed), _) => DriverPhase::Failed,
        (None, Some(PodPhase::Succeeded), _) => DriverPhase::Succeeded,
        (None, Some(PodPhase::Unknown), _) => DriverPhase::Unknown,
        (None, _, ContainerState::Running) => DriverPhase::Running,
        (None, _, _) => DriverPhase::Pending,
    };
    let ready = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    DriverObservation {
        phase,
        pod_phase,
        container: container.map(str::to_owned),
        container_state,
        exit_code,
        container_reason,
        container_message,
        pod_reason: status.and_then(|s| s.reason.clone()),
        pod_message: status.and_then(|s| s.message.clone()),
        started_at: running.and_then(|r| r.started_at.as_ref()).map(|t| t.0),
        finished_at: terminated.and_then(|t| t.finished_at.as_ref()).map(|t| t.0),
        ready,
    }
}

/// Keeps of a pod only what the driver-state rule ([`observe_driver`]) and a cache's readers
/// need: the metadata (without `managedFields`), the containers' names (and the env var that
/// marks Spark's container), and the phase, reason, message, Ready and PodScheduled conditions and
/// container states. A whole driver pod is ~28 KiB in memory; the submitter's and the operator's watch
/// caches keep this instead, so their memory follows the drivers they track, not their specs.
pub fn trim_for_cache(pod: &mut Pod) {
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
    pod.metadata.managed_fields = None;
    if let Some(spec) = pod.spec.as_mut() {
        let containers = std::mem::take(&mut spec.containers)
            .into_iter()
            .map(|c| Container {
                env: c
                    .env
                    .map(|env| {
                        env.into_iter()
                            .filter(|var| var.name == DRIVER_BIND_ADDRESS_ENV)
                            .collect::<Vec<_>>()
                    })
                    .filter(|env| !env.is_empty()),
                name: c.name,
                ..Container::default()
            })
            .collect();
        *spec = PodSpec {
            containers,
            ..PodSpec::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        *status = PodStatus {
            phase: status.phase.take(),
            // Readiness is part of what the driver-state rule reports; an unscheduled pod says
            // why it is held in PodScheduled.
            conditions: status.conditions.take().map(|conditions| {
                conditions
                    .into_iter()
                    .filter(|c| c.type_ == "Ready" || c.type_ == "PodScheduled")
                    .collect()
            }),
            reason: status.reason.take(),
            message: status.message.take(),
            container_statuses: status.container_statuses.take().map(|statuses| {
                statuses
                    .into_iter()
                    .map(|c| ContainerStatus {
                        name: c.name,
                        state: c.state,
                        ..ContainerStatus::default()
                    })
                    .collect()
            }),
            ..PodStatus::default()
        };
    }
}

// Beside the rule rather than with the wire type, so that `api` stays below `driver`.
impl DriverStatus {
    /// Joins who the driver is with what was observed; the action follows the seed's table.
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
            reason: observation.reason().map(str::to_owned),
            message: observation.message().map(str::to_owned),
            finished_at: observation.finished_at.map(|at| at.to_string()),
            action: ClientAction::for_phase(observation.phase),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn status(name: &str, state: Value) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": state})
    }

    fn running() -> Value {
        json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    }

    fn terminated(code: i32) -> Value {
        json!({"terminated": {"exitCode": code, "reason": if code == 0 {"Completed"} else {"Error"},
            "finishedAt": "2026-01-01T00:10:00Z"}})
    }

    fn waiting(reason: &str) -> Value {
        json!({"waiting": {"reason": reason, "message": "pulling"}})
    }

    /// A driver pod as we and Spark build it, with an Istio sidecar: `driver` and `sidecar` are
    /// container `state` objects (`None`: not reported).
    fn with_sidecar(phase: &str, driver: Option<Value>, sidecar: Option<Value>) -> Pod {
        let mut statuses = vec![];
        if let Some(state) = sidecar {
            statuses.push(status("istio-proxy", state));
        }
        if let Some(state) = driver {
            statuses.push(status(DRIVER, state));
        }
        pod(json!({
            "metadata": {"name": "pi-driver", "namespace": "spark"},
            "spec": {"containers": [
                {"name": DRIVER, "env": [{"name": DRIVER_BIND_ADDRESS_ENV}]},
                {"name": "istio-proxy"}
            ]},
            "status": {"phase": phase, "containerStatuses": statuses}
        }))
    }

    use DriverPhase as P;

    /// The shapes a driver pod comes in, with the container that is the driver and its phase.
    #[test]
    fn the_driver_container_and_its_phase_for_every_pod_shape() {
        let cases: Vec<(&str, Pod, Option<&str>, DriverPhase)> = vec![
            (
                "single container, Spark's name",
                pod(json!({"spec": {"containers": [{"name": DRIVER}]},
                    "status": {"phase": "Running",
                        "containerStatuses": [status(DRIVER, running())]}})),
                Some(DRIVER),
                P::Running,
            ),
            (
                "single container, renamed by a template",
                pod(json!({"spec": {"containers": [{"name": "main"}]},
                    "status": {"phase": "Succeeded",
                        "containerStatuses": [status("main", terminated(0))]}})),
                Some("main"),
                P::Succeeded,
            ),
            (
                "renamed driver container beside a sidecar that keeps running",
                pod(json!({"spec": {"containers": [
                        {"name": "main", "env": [{"name": DRIVER_BIND_ADDRESS_ENV}]},
                        {"name": "istio-proxy"}]},
                    "status": {"phase": "Running", "containerStatuses": [
                        status("istio-proxy", running()), status("main", terminated(0))]}})),
                Some("main"),
                P::Succeeded,
            ),
            (
                "renamed driver container running beside a sidecar listed last",
                pod(json!({"spec": {"containers": [
                        {"name": "main", "env": [{"name": DRIVER_BIND_ADDRESS_ENV}]},
                        {"name": "log-shipper"}]},
                    "status": {"phase": "Running", "containerStatuses": [
                        status("log-shipper", running()), status("main", running())]}})),
                Some("main"),
                P::Running,
            ),
            (
                "native sidecar (an init container that always restarts) keeps running",
                pod(json!({"spec": {
                        "initContainers": [{"name": "recovery-agent", "restartPolicy": "Always"}],
                        "containers": [{"name": DRIVER}]},
                    "status": {"phase": "Running",
                        "initContainerStatuses": [status("recovery-agent", running())],
                        "containerStatuses": [status(DRIVER, terminated(1))]}})),
                Some(DRIVER),
                P::Failed,
            ),
            (
                "native sidecar started, driver not yet",
                pod(json!({"spec": {
                        "initContainers": [{"name": "recovery-agent", "restartPolicy": "Always"}],
                        "containers": [{"name": DRIVER}]},
                    "status": {"phase": "Pending",
                        "initContainerStatuses": [status("recovery-agent", running())],
                        "containerStatuses": [status(DRIVER, waiting("PodInitializing"))]}})),
                Some(DRIVER),
                P::Pending,
            ),
            (
                "foreign pod without the marker: the last container",
                pod(json!({"spec": {"containers": [{"name": "logs"}, {"name": "main"}]}})),
                Some("main"),
                P::Pending,
            ),
            (
                "status only, one container",
                pod(json!({"status": {"containerStatuses": [status("only", running())]}})),
                Some("only"),
                P::Running,
            ),
            ("nothing at all", pod(json!({})), None, P::Pending),
        ];
        for (shape, pod, container, phase) in cases {
            assert_eq!(driver_container_name(&pod), container, "{shape}");
            assert_eq!(observe_driver(&pod).phase, phase, "{shape}");
        }
    }

    /// The seed's table (`shared/seeds/001_…`), row by row, on a pod with a sidecar.
    #[test]
    fn the_seed_table_row_by_row() {
        let cases = [
            (
                "running",
                "Running",
                Some(running()),
                Some(running()),
                P::Running,
            ),
            (
                "pending",
                "Pending",
                Some(waiting("ContainerCreating")),
                None,
                P::Pending,
            ),
            (
                "succeeded",
                "Succeeded",
                Some(terminated(0)),
                Some(terminated(0)),
                P::Succeeded,
            ),
            (
                "failed",
                "Failed",
                Some(terminated(1)),
                Some(terminated(0)),
                P::Failed,
            ),
            ("unknown", "Unknown", Some(running()), None, P::Unknown),
        ];
        for (row, phase, driver, sidecar, expected) in cases {
            let pod = with_sidecar(phase, driver, sidecar);
            assert_eq!(observe_driver(&pod).phase, expected, "{row}");
        }
        assert_eq!(DriverObservation::absent(false).phase, P::Unknown);
    }

    #[test]
    fn sidecar_keeping_pod_running_after_driver_succeeded_is_succeeded() {
        let o = observe_driver(&with_sidecar(
            "Running",
            Some(terminated(0)),
            Some(running()),
        ));
        assert_eq!(o.phase, P::Succeeded);
        assert_eq!(o.pod_phase, Some(PodPhase::Running));
        assert_eq!(o.container_state, ContainerState::Terminated);
        assert_eq!(o.exit_code, Some(0));
        assert_eq!(
            o.finished_at.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:10:00Z")
        );
    }

    #[test]
    fn sidecar_keeping_pod_running_after_driver_failed_is_failed_with_its_reason() {
        let o = observe_driver(&with_sidecar(
            "Running",
            Some(terminated(137)),
            Some(running()),
        ));
        assert_eq!((o.phase, o.exit_code), (P::Failed, Some(137)));
        assert_eq!(o.reason(), Some("Error"));
    }

    #[test]
    fn gone_pod_with_retained_success_is_succeeded() {
        let o = DriverObservation::absent(true);
        assert_eq!(o.phase, P::Succeeded);
        assert_eq!(
            (o.pod_phase, o.container_state),
            (None, ContainerState::Absent)
        );
    }

    #[test]
    fn evicted_pod_without_container_status_is_failed_with_the_pod_reason() {
        let o = observe_driver(&pod(json!({
            "spec": {"containers": [{"name": DRIVER}]},
            "status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
        })));
        assert_eq!(
            (o.phase, o.container_state),
            (P::Failed, ContainerState::Absent)
        );
        assert_eq!(
            (o.reason(), o.message()),
            (Some("Evicted"), Some("low on memory"))
        );
        assert_eq!(o.pod_reason.as_deref(), Some("Evicted"));
        assert_eq!(o.container_reason, None);
    }

    #[test]
    fn running_pod_whose_driver_still_waits_is_pending_with_the_waiting_reason() {
        let o = observe_driver(&with_sidecar(
            "Running",
            Some(waiting("ImagePullBackOff")),
            Some(running()),
        ));
        assert_eq!(o.phase, P::Pending);
        assert_eq!(o.reason(), Some("ImagePullBackOff"));
        assert_eq!(o.exit_code, None);
    }

    #[test]
    fn terminated_driver_outranks_an_unknown_pod_phase() {
        let o = observe_driver(&with_sidecar("Unknown", Some(terminated(0)), None));
        assert_eq!(o.phase, P::Succeeded);
    }

    #[test]
    fn succeeded_pod_without_statuses_is_succeeded() {
        let o = observe_driver(&pod(
            json!({"spec": {"containers": [{"name": "x"}]}, "status": {"phase": "Succeeded"}}),
        ));
        assert_eq!(o.phase, P::Succeeded);
    }

    #[test]
    fn a_running_driver_reports_readiness_and_its_start() {
        let o = observe_driver(&pod(json!({
            "spec": {"containers": [{"name": DRIVER}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [status(DRIVER, running())]}
        })));
        assert_eq!(o.phase, P::Running);
        assert!(o.ready);
        assert_eq!(
            o.started_at.map(|t| t.to_string()).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
    }

    /// A named container is read instead of the driver: a sidecar that ended while the driver
    /// runs reads ended, the driver still running reads running, and a name the pod does not
    /// report waits on the pod phase alone.
    #[test]
    fn a_named_container_is_observed_instead_of_the_driver() {
        let pod = with_sidecar("Running", Some(running()), Some(terminated(1)));
        let sidecar = observe_container(&pod, "istio-proxy");
        assert_eq!(sidecar.container.as_deref(), Some("istio-proxy"));
        assert_eq!(sidecar.container_state, ContainerState::Terminated);
        assert_eq!(sidecar.phase, P::Failed);
        assert_eq!(sidecar.exit_code, Some(1));
        assert_eq!(observe_container(&pod, DRIVER), observe_driver(&pod));
        assert_eq!(observe_container(&pod, DRIVER).phase, P::Running);
        let unknown = observe_container(&pod, "nope");
        assert_eq!(unknown.container_state, ContainerState::Absent);
        assert_eq!(unknown.phase, P::Pending);
        let finished = with_sidecar("Succeeded", None, None);
        assert_eq!(observe_container(&finished, "nope").phase, P::Succeeded);
    }
}
