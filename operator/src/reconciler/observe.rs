//! From cached pods to what `decide` reads: which pod is the application's driver, and what its
//! driver container is doing. Pure: the caller hands in the pods it took from the cache.

use k8s_openapi::api::core::v1::Pod;
use kube_runtime::reflector::ObjectRef;
use submission::api::DriverPhase as Phase;
use submission::driver::observe_driver as observe_driver_container;
use submission::meta::labels::{DRIVER_ROLE, SPARK_APP_ID as SPARK_APP_SELECTOR, SPARK_ROLE};

use crate::crd::{FailureReason, SparkApplication};
use crate::labels;
use crate::state_machine::{DriverPhase, ObservedDriver, PendingReason};

/// The selector of drivers we launched (the polling benchmark lists them).
pub fn driver_pod_selector() -> String {
    format!(
        "{}=true,{SPARK_ROLE}={DRIVER_ROLE}",
        labels::LAUNCHED_BY_SPARK_OPERATOR
    )
}

/// The selector of the operator's pod watch: the drivers we launched and their executors (which
/// carry the executor confs' labels), in one cache.
pub fn operator_pod_selector() -> String {
    format!("{}=true", labels::LAUNCHED_BY_SPARK_OPERATOR)
}

/// What the operator's pod cache keeps of a pod: for a driver, what the driver-state rule reads
/// (submission's trim, then only the driver container's status and no spec: without a spec the
/// rule takes the one status reported, the same container); for an executor (its state is
/// indexed from the whole pod before this trim), only the metadata that maps it to its
/// application. No pod's annotations are read. A cached driver then costs its metadata and one
/// container status, not a `Container` (over 2 KiB unset) per container besides.
pub fn trim_for_cache(pod: &mut Pod) {
    submission::driver::trim_for_cache(pod);
    pod.metadata.annotations = None;
    if !is_driver(pod) {
        pod.spec = None;
        pod.status = None;
        return;
    }
    let Some(driver) = submission::driver::driver_container_name(pod).map(str::to_owned) else {
        return;
    };
    if let Some(statuses) = pod
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        statuses.retain(|s| s.name == driver);
    }
    pod.spec = None;
}

/// The applications a pod event concerns: a driver's owner, an executor's application (by its
/// label; executors are owned by their driver pod).
pub fn application_of(pod: Pod) -> Vec<ObjectRef<SparkApplication>> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut apps: Vec<ObjectRef<SparkApplication>> = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "SparkApplication")
        .map(|o| ObjectRef::new(&o.name).within(&namespace))
        .collect();
    apps.extend(crate::executors::app_of(pod));
    apps
}

/// Whether `pod` is a driver: the operator's pod cache also holds the executors, which carry the
/// application's submission id and a (non-controller) ownerReference to it too.
fn is_driver(pod: &Pod) -> bool {
    label(pod, SPARK_ROLE) == Some(DRIVER_ROLE)
}

/// Whether `pod` has an ownerReference to the object with `uid`.
pub fn is_owned_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|owner| owner.uid == uid)
}

/// The application's driver among `pods` (pods of its namespace; executors are passed over): a
/// driver pod it owns that
/// carries the current submission id, else the pod its status names (which may be a previous
/// run's driver, owned or not, that still holds the name). Never a name derived from the spec.
pub fn find_driver<'a>(app: &SparkApplication, pods: &'a [&'a Pod]) -> Option<&'a Pod> {
    let uid = app.metadata.uid.as_deref()?;
    let status = app.status.as_ref();
    let submission_id = status.map(|s| s.submission_id.as_str()).unwrap_or("");
    let named = status
        .map(|s| s.driver_info.pod_name.as_str())
        .unwrap_or("");
    let current = (!submission_id.is_empty())
        .then(|| {
            pods.iter().copied().find(|pod| {
                is_driver(pod)
                    && is_owned_by(pod, uid)
                    && label(pod, labels::SUBMISSION_ID) == Some(submission_id)
            })
        })
        .flatten();
    current.or_else(|| {
        (!named.is_empty())
            .then(|| {
                pods.iter()
                    .copied()
                    .find(|pod| is_driver(pod) && pod.metadata.name.as_deref() == Some(named))
            })
            .flatten()
    })
}

/// The app's owned driver pods other than `driver`: previous runs' and older epochs' drivers.
pub fn other_drivers<'a>(
    app_uid: &'a str,
    pods: &'a [&'a Pod],
    driver: Option<&'a Pod>,
) -> impl Iterator<Item = &'a Pod> + 'a {
    let current = driver.and_then(|d| d.metadata.uid.as_deref());
    pods.iter().copied().filter(move |pod| {
        is_driver(pod) && is_owned_by(pod, app_uid) && pod.metadata.uid.as_deref() != current
    })
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// What `decide` needs to know about a driver pod of the app with `app_uid`.
pub fn observe_driver(pod: &Pod, app_uid: &str) -> ObservedDriver {
    ObservedDriver {
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        submission_id: label(pod, labels::SUBMISSION_ID).map(str::to_owned),
        owned: is_owned_by(pod, app_uid),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        spark_app_id: label(pod, SPARK_APP_SELECTOR).map(str::to_owned),
        epoch: label(pod, labels::RECOVERY_EPOCH).and_then(|e| e.parse().ok()),
        phase: driver_phase(pod),
    }
}

/// The driver's phase for `decide`, from the one driver-state rule (the driver container's
/// state, not the pod phase: a sidecar keeps a pod Running after the driver has exited).
pub fn driver_phase(pod: &Pod) -> DriverPhase {
    let observed = observe_driver_container(pod);
    match observed.phase {
        Phase::Succeeded => DriverPhase::Succeeded,
        Phase::Failed => DriverPhase::Failed {
            exit_code: observed.exit_code,
            reason: FailureReason::of_failed_pod(
                observed.pod_reason.as_deref(),
                observed.container_reason.as_deref(),
            ),
            message: observed.message().unwrap_or_default().to_owned(),
        },
        Phase::Unknown => DriverPhase::Unknown,
        Phase::Running => DriverPhase::Running {
            ready: observed.ready,
            started_at: observed.started_at,
        },
        Phase::Pending => DriverPhase::Pending {
            blocked: pending_reason(pod),
            waiting_reason: observed.container_reason,
        },
    }
}

/// Container waiting reasons of a pod on its way to running; any other holds it.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// What the pending pod itself says holds it: the scheduler's `PodScheduled=False` condition,
/// else the driver container's waiting reason when it is not one of starting up
/// (`ErrImagePull`, `CreateContainerConfigError`, ...).
pub fn pending_reason(pod: &Pod) -> Option<PendingReason> {
    let status = pod.status.as_ref()?;
    if let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    {
        return Some(PendingReason {
            reason: c
                .reason
                .clone()
                .unwrap_or_else(|| "Unschedulable".to_owned()),
            message: c.message.clone().unwrap_or_default(),
        });
    }
    let observed = observe_driver_container(pod);
    let reason = observed
        .container_reason
        .filter(|r| !STARTING.contains(&r.as_str()))?;
    Some(PendingReason {
        reason,
        message: observed.container_message.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    fn app(status: serde_json::Value) -> SparkApplication {
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "default", "uid": "app-uid"},
            "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "4.0.0",
                     "mainApplicationFile": "local:///x.jar", "driver": {}, "executor": {}},
            "status": status,
        }))
        .unwrap()
    }

    fn driver(name: &str, owner: &str, submission: &str) -> Pod {
        spark_pod(name, owner, submission, DRIVER_ROLE)
    }

    fn spark_pod(name: &str, owner: &str, submission: &str, role: &str) -> Pod {
        pod(json!({
            "metadata": {"name": name, "uid": format!("{name}-uid"),
                "labels": {labels::SUBMISSION_ID: submission, SPARK_ROLE: role},
                "ownerReferences": [{"apiVersion": "v1", "kind": "SparkApplication",
                    "name": "pi", "uid": owner}]},
        }))
    }

    #[test]
    fn driver_of_the_current_submission_is_found_by_owner_and_label() {
        let a = app(json!({"submissionID": "app-uid-2", "driverInfo": {"podName": "pi-driver"}}));
        let old = driver("pi-driver", "app-uid", "app-uid-1");
        let current = driver("pi-driver-2", "app-uid", "app-uid-2");
        let foreign = driver("pi-driver-3", "other", "app-uid-2");
        let pods = [&old, &foreign, &current];
        let found = find_driver(&a, &pods).unwrap();
        assert_eq!(found.metadata.name.as_deref(), Some("pi-driver-2"));
    }

    #[test]
    fn an_executor_owned_by_the_application_is_never_taken_for_its_driver() {
        // Executors carry the run's submission id and a non-controller ownerReference to the
        // application; the cache that feeds `find_driver` holds them next to the driver.
        let a = app(json!({"submissionID": "app-uid-2", "driverInfo": {"podName": "pi-driver"}}));
        let executor = spark_pod("pi-exec-1", "app-uid", "app-uid-2", "executor");
        let old = driver("pi-driver", "app-uid", "app-uid-1");
        let current = driver("pi-driver-2", "app-uid", "app-uid-2");
        let pods = [&executor, &old, &current];
        let found = find_driver(&a, &pods).unwrap();
        assert_eq!(found.metadata.name.as_deref(), Some("pi-driver-2"));
        let others: Vec<_> = other_drivers("app-uid", &pods, Some(found))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(others, ["pi-driver"]);
        let only_executor = [&executor];
        assert!(find_driver(&a, &only_executor).is_none());
    }

    #[test]
    fn previous_driver_holding_the_status_name_is_observed_when_no_current_one_exists() {
        let a = app(json!({"submissionID": "app-uid-2", "driverInfo": {"podName": "pi-driver"}}));
        let old = driver("pi-driver", "app-uid", "app-uid-1");
        let pods = [&old];
        let observed = observe_driver(find_driver(&a, &pods).unwrap(), "app-uid");
        assert!(observed.owned);
        assert_eq!(observed.submission_id.as_deref(), Some("app-uid-1"));
    }

    #[test]
    fn pod_events_wake_the_drivers_owner_and_the_executors_application() {
        let mut d = driver("pi-driver", "app-uid", "app-uid-1");
        d.metadata.namespace = Some("etl".into());
        let apps = application_of(d);
        assert_eq!(apps, [ObjectRef::new("pi").within("etl")]);
        let executor: Pod = pod(json!({
            "metadata": {"name": "pi-exec-1", "namespace": "etl",
                "labels": {SPARK_ROLE: "executor", labels::APP_NAME: "pi"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pi-driver",
                                     "uid": "pi-driver-uid"}]},
        }));
        assert_eq!(
            application_of(executor),
            [ObjectRef::new("pi").within("etl")]
        );
    }

    #[test]
    fn no_status_means_no_driver() {
        let a = app(json!({}));
        let old = driver("pi-driver", "app-uid", "app-uid-1");
        assert!(find_driver(&a, &[&old]).is_none());
    }

    #[test]
    fn driver_container_state_decides_over_the_pod_phase() {
        let sidecar_keeps_running =
            pod(json!({"status": {"phase": "Running", "containerStatuses": [
            {"name": "agent", "image": "a", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"running": {}}},
            {"name": labels::DRIVER_CONTAINER, "image": "s", "imageID": "", "ready": false,
             "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}}));
        assert_eq!(driver_phase(&sidecar_keeps_running), DriverPhase::Succeeded);
        let failed = pod(json!({"status": {"phase": "Failed", "containerStatuses": [
            {"name": labels::DRIVER_CONTAINER, "image": "s", "imageID": "", "ready": false,
             "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}));
        assert!(matches!(
            driver_phase(&failed),
            DriverPhase::Failed {
                exit_code: Some(1),
                reason: FailureReason::ApplicationError,
                ..
            }
        ));
        let evicted = pod(json!({"status": {"phase": "Failed", "reason": "Evicted"}}));
        assert!(matches!(
            driver_phase(&evicted),
            DriverPhase::Failed {
                reason: FailureReason::Evicted,
                ..
            }
        ));
        let waiting = pod(json!({"status": {"phase": "Pending", "containerStatuses": [
            {"name": labels::DRIVER_CONTAINER, "image": "s", "imageID": "", "ready": false,
             "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}));
        assert_eq!(
            driver_phase(&waiting),
            DriverPhase::Pending {
                waiting_reason: Some("ImagePullBackOff".into()),
                blocked: Some(PendingReason {
                    reason: "ImagePullBackOff".into(),
                    message: String::new()
                }),
            }
        );
        let running = pod(json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": labels::DRIVER_CONTAINER, "image": "s", "imageID": "",
             "ready": true, "restartCount": 0, "state": {"running": {}}}]}}));
        assert_eq!(
            driver_phase(&running),
            DriverPhase::Running {
                ready: true,
                started_at: None
            }
        );
    }

    #[test]
    fn a_cached_driver_is_observed_as_the_whole_pod_is() {
        let container_status = |name: &str, state: serde_json::Value| {
            json!({"name": name, "image": "s", "imageID": "", "ready": false,
                   "restartCount": 0, "state": state})
        };
        let with = |containers: serde_json::Value, status: serde_json::Value| {
            pod(json!({
                "metadata": {"name": "pi-driver", "uid": "pod-uid",
                    "labels": {labels::SUBMISSION_ID: "app-uid-1", SPARK_ROLE: DRIVER_ROLE},
                    "annotations": {"a": "b"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "SparkApplication",
                        "name": "pi", "uid": "app-uid"}]},
                "spec": {"containers": containers},
                "status": status,
            }))
        };
        let driver_env =
            json!([{"name": submission::meta::containers::DRIVER_BIND_ADDRESS_ENV, "value": "x"}]);
        let pods = [
            // A sidecar before and after Spark's container, named as a template named it.
            with(
                json!([{"name": "agent"}, {"name": "main", "env": driver_env}, {"name": "proxy"}]),
                json!({"phase": "Running", "containerStatuses": [
                    container_status("agent", json!({"running": {}})),
                    container_status("main", json!({"terminated": {"exitCode": 3, "reason": "Error"}})),
                    container_status("proxy", json!({"running": {}}))]}),
            ),
            // The driver's status is not reported yet, a sidecar's is: it must not stand in.
            with(
                json!([{"name": labels::DRIVER_CONTAINER}, {"name": "agent"}]),
                json!({"phase": "Pending", "containerStatuses": [
                    container_status("agent", json!({"waiting": {"reason": "ErrImagePull"}}))]}),
            ),
            with(
                json!([{"name": labels::DRIVER_CONTAINER}]),
                json!({"phase": "Succeeded", "containerStatuses": [
                    container_status(labels::DRIVER_CONTAINER, json!({"terminated": {"exitCode": 0}}))]}),
            ),
        ];
        for whole in pods {
            let mut cached = whole.clone();
            trim_for_cache(&mut cached);
            assert!(cached.spec.is_none() && cached.metadata.annotations.is_none());
            assert_eq!(
                observe_driver(&cached, "app-uid"),
                observe_driver(&whole, "app-uid")
            );
            assert_eq!(pending_reason(&cached), pending_reason(&whole));
        }
    }

    #[test]
    fn a_cached_executor_still_wakes_its_application() {
        let mut executor = pod(json!({
            "metadata": {"name": "pi-exec-1", "namespace": "default",
                "labels": {SPARK_ROLE: "executor", labels::APP_NAME: "pi"}},
            "spec": {"containers": [{"name": "spark-kubernetes-executor"}]},
            "status": {"phase": "Running"},
        }));
        let before = application_of(executor.clone());
        trim_for_cache(&mut executor);
        assert!(executor.spec.is_none() && executor.status.is_none());
        assert_eq!(application_of(executor), before);
        assert!(!before.is_empty());
    }

    #[test]
    fn an_unschedulable_driver_still_says_why_after_the_cache_trims_it() {
        let mut unscheduled = pod(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 Insufficient memory."}]}}));
        submission::driver::trim_for_cache(&mut unscheduled);
        assert_eq!(
            pending_reason(&unscheduled),
            Some(PendingReason {
                reason: "Unschedulable".into(),
                message: "0/3 nodes are available: 3 Insufficient memory.".into()
            })
        );
    }
}
