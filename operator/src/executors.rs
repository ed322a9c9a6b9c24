//! Executor pods: one watch of the executors the operator's drivers start (Spark's
//! `spark-role=executor` label plus ours), feeding an index by (namespace, application name), so a
//! reconcile reads its application's executors without scanning every pod, and the controller
//! maps each executor event to its application.
//!
//! The pure part ([`observe_executor`], [`executor_state`]) turns a pod into what `decide` reads;
//! `decide` merges it into `status.executorState`, where an executor deleted by its driver keeps
//! its last known state.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube_runtime::reflector::ObjectRef;
use kube_runtime::watcher::Event;
use submission::meta::labels::{EXECUTOR_ROLE, SPARK_ROLE};

use crate::crd::{ExecutorState, SparkApplication};
use crate::labels;
use crate::state_machine::ObservedExecutor;

/// The selector of the executor watch: executors of the operator's applications.
pub fn executor_pod_selector() -> String {
    format!(
        "{}=true,{SPARK_ROLE}={EXECUTOR_ROLE}",
        labels::LAUNCHED_BY_SPARK_OPERATOR
    )
}

/// The executor's state from its pod phase, as the widely used operator reads it.
pub fn executor_state(pod: &Pod) -> ExecutorState {
    match pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
    {
        "Pending" => ExecutorState::Pending,
        "Running" => ExecutorState::Running,
        "Succeeded" => ExecutorState::Completed,
        "Failed" => ExecutorState::Failed,
        _ => ExecutorState::Unknown,
    }
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The application an executor belongs to: (namespace, name) from its labels; `None` for a
/// pod that is not an executor (the watch that feeds the index also carries drivers).
fn app_key(pod: &Pod) -> Option<(String, String)> {
    if label(pod, SPARK_ROLE) != Some(EXECUTOR_ROLE) {
        return None;
    }
    Some((
        pod.metadata.namespace.clone()?,
        label(pod, labels::APP_NAME)?.to_owned(),
    ))
}

/// What `decide` needs to know about an executor pod.
pub fn observe_executor(pod: &Pod) -> ObservedExecutor {
    let terminated = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|c| {
            c.name == labels::EXECUTOR_CONTAINER || c.name == labels::LEGACY_EXECUTOR_CONTAINER
        })
        .and_then(|c| c.state.as_ref()?.terminated.as_ref());
    ObservedExecutor {
        name: pod.metadata.name.clone().unwrap_or_default(),
        submission_id: label(pod, labels::SUBMISSION_ID).map(str::to_owned),
        state: executor_state(pod),
        exit_code: terminated.map(|t| t.exit_code),
        reason: terminated.and_then(|t| t.reason.clone()),
        message: pod.status.as_ref().and_then(|s| s.message.clone()),
    }
}

/// The controller's mapper: an executor's event concerns its application.
pub fn app_of(pod: Pod) -> Option<ObjectRef<SparkApplication>> {
    let (namespace, name) = app_key(&pod)?;
    Some(ObjectRef::new(&name).within(&namespace))
}

type Executors = HashMap<(String, String), BTreeMap<String, ObservedExecutor>>;

/// The executors of every application, by (namespace, application name), kept from the
/// executor watch's events.
#[derive(Debug, Default)]
pub struct ExecutorIndex {
    current: RwLock<Executors>,
    /// A re-list in progress: the new contents, swapped in when it is done.
    relisting: Mutex<Option<Executors>>,
}

impl ExecutorIndex {
    pub fn new() -> Arc<ExecutorIndex> {
        Arc::new(ExecutorIndex::default())
    }

    /// Applies one watch event.
    pub fn apply(&self, event: &Event<Pod>) {
        match event {
            Event::Apply(pod) => {
                if let Some(key) = app_key(pod) {
                    let executor = observe_executor(pod);
                    self.write()
                        .entry(key)
                        .or_default()
                        .insert(executor.name.clone(), executor);
                }
            }
            Event::Delete(pod) => {
                if let (Some(key), Some(name)) = (app_key(pod), pod.metadata.name.as_ref()) {
                    let mut current = self.write();
                    if let Some(executors) = current.get_mut(&key) {
                        executors.remove(name);
                        if executors.is_empty() {
                            current.remove(&key);
                        }
                    }
                }
            }
            Event::Init => *self.relisting() = Some(Executors::new()),
            Event::InitApply(pod) => {
                if let (Some(key), Some(building)) = (app_key(pod), self.relisting().as_mut()) {
                    let executor = observe_executor(pod);
                    building
                        .entry(key)
                        .or_default()
                        .insert(executor.name.clone(), executor);
                }
            }
            Event::InitDone => {
                if let Some(fresh) = self.relisting().take() {
                    *self.write() = fresh;
                }
            }
        }
    }

    /// The executors of application `name` in `namespace`, by pod name.
    pub fn executors(&self, namespace: &str, name: &str) -> Vec<ObservedExecutor> {
        let current = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        current
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|e| e.values().cloned().collect())
            .unwrap_or_default()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Executors> {
        // Every write replaces whole entries; a poisoned lock still holds a usable map.
        self.current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn relisting(&self) -> std::sync::MutexGuard<'_, Option<Executors>> {
        self.relisting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn executor(name: &str, app: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "etl", "labels": {
                labels::APP_NAME: app, labels::SUBMISSION_ID: "uid-1",
                SPARK_ROLE: EXECUTOR_ROLE}},
            "status": {"phase": phase, "message": "evicted",
                "containerStatuses": [{"name": labels::EXECUTOR_CONTAINER, "image": "s",
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn pod_phases_are_the_executor_states_of_the_widely_used_operator() {
        for (phase, state) in [
            ("Pending", ExecutorState::Pending),
            ("Running", ExecutorState::Running),
            ("Succeeded", ExecutorState::Completed),
            ("Failed", ExecutorState::Failed),
            ("Unknown", ExecutorState::Unknown),
        ] {
            assert_eq!(
                executor_state(&executor("e", "pi", phase)),
                state,
                "{phase}"
            );
        }
        let failed = observe_executor(&executor("e", "pi", "Failed"));
        assert_eq!(failed.exit_code, Some(137));
        assert_eq!(failed.reason.as_deref(), Some("OOMKilled"));
        assert_eq!(failed.submission_id.as_deref(), Some("uid-1"));
    }

    #[test]
    fn the_index_follows_watch_events_per_application() {
        let index = ExecutorIndex::default();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(executor("pi-exec-1", "pi", "Running")));
        index.apply(&Event::InitApply(executor(
            "other-exec-1",
            "other",
            "Running",
        )));
        // Not visible before the list is complete.
        assert!(index.executors("etl", "pi").is_empty());
        index.apply(&Event::InitDone);
        assert_eq!(index.executors("etl", "pi").len(), 1);
        index.apply(&Event::Apply(executor("pi-exec-2", "pi", "Pending")));
        index.apply(&Event::Apply(executor("pi-exec-1", "pi", "Succeeded")));
        let states: Vec<_> = index
            .executors("etl", "pi")
            .into_iter()
            .map(|e| (e.name, e.state))
            .collect();
        assert_eq!(
            states,
            [
                ("pi-exec-1".to_owned(), ExecutorState::Completed),
                ("pi-exec-2".to_owned(), ExecutorState::Pending)
            ]
        );
        index.apply(&Event::Delete(executor("pi-exec-1", "pi", "Succeeded")));
        assert_eq!(index.executors("etl", "pi").len(), 1);
        assert!(index.executors("other-ns", "pi").is_empty());
        // A re-list replaces everything: what it does not list is gone.
        index.apply(&Event::Init);
        index.apply(&Event::InitDone);
        assert!(index.executors("etl", "other").is_empty());
        // Drivers share the watch; they are not executors.
        let mut driver = executor("pi-driver", "pi", "Running");
        driver
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(SPARK_ROLE.into(), "driver".into());
        index.apply(&Event::Apply(driver.clone()));
        assert!(index.executors("etl", "pi").is_empty());
        assert!(app_of(driver).is_none());
        let app = app_of(executor("pi-exec-9", "pi", "Running")).unwrap();
        assert_eq!(
            (app.name.as_str(), app.namespace.as_deref()),
            ("pi", Some("etl"))
        );
    }
}
