//! The invariants and their tally: every check counted, every violation kept with what was
//! seen. The checks here are pure functions over what a user can list (pods, ConfigMaps,
//! Services, applications) and what the workload was answered; `monitor` and `end_checks`
//! feed them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::Resource;
use operator::crd::{ApplicationStateType, SparkApplication};
use serde_json::{Value, json};
use submission::meta::{annotations, labels};
use submitter_client::SubmitError;

use super::schedule::FaultKind;

/// Never two live drivers for one submission id (in any namespace) or one application epoch.
pub const ONE_LIVE_DRIVER: &str = "one_live_driver";
/// Every answer for one submission id names the same driver pod.
pub const ONE_DRIVER_PER_SUBMISSION: &str = "one_driver_per_submission";
/// A submission killed through the API never gets another driver.
pub const KILLED_STAYS_KILLED: &str = "killed_stays_killed";
/// No application FAILED while a driver of its current run is alive.
pub const NO_FAILED_APP_WITH_LIVE_DRIVER: &str = "no_failed_app_with_live_driver";
/// No object of ours without a live owner for longer than the sweep needs, and none at all
/// after the sweep window at the end.
pub const NO_ORPHANS: &str = "no_orphans";
/// No driver without the ConfigMaps it mounts (while it runs) or its Service (after the drain).
pub const DRIVER_OBJECTS_PRESENT: &str = "driver_objects_present";
/// No progress write accepted from a stale epoch: each stage's output published once.
pub const NO_STALE_EPOCH_WRITE: &str = "no_stale_epoch_write";
/// Every application ends terminal (Always excepted), consistent with its driver's exit.
pub const TERMINAL_AND_CONSISTENT: &str = "terminal_and_consistent";
/// Every REST answer per the contract: 5xx only as a retryable 500/503 with the envelope.
pub const REST_CONTRACT: &str = "rest_contract";
/// A followed log ends when its driver ends, and holds only that driver's lines.
pub const LOG_FOLLOWS_ITS_DRIVER: &str = "log_follows_its_driver";
/// Once every reader is gone (hung up or read to the end), no submitter holds a log stream.
pub const LOG_STREAMS_RELEASED: &str = "log_streams_released";
/// The workload goes on completing work: a run where nothing works does not pass.
pub const WORKLOAD_PROGRESS: &str = "workload_progress";

/// Every invariant, for the report.
pub const ALL: [&str; 12] = [
    ONE_LIVE_DRIVER,
    ONE_DRIVER_PER_SUBMISSION,
    KILLED_STAYS_KILLED,
    NO_FAILED_APP_WITH_LIVE_DRIVER,
    NO_ORPHANS,
    DRIVER_OBJECTS_PRESENT,
    NO_STALE_EPOCH_WRITE,
    TERMINAL_AND_CONSISTENT,
    REST_CONTRACT,
    LOG_FOLLOWS_ITS_DRIVER,
    LOG_STREAMS_RELEASED,
    WORKLOAD_PROGRESS,
];

/// One broken invariant.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub invariant: &'static str,
    /// Seconds since the soak started.
    pub at_seconds: f64,
    pub detail: String,
}

#[derive(Debug, Default)]
struct Counts {
    operations: BTreeMap<String, u64>,
    /// Faults applied (`kind`) and found without a target (`kind_skipped`).
    faults: BTreeMap<String, u64>,
    checks: BTreeMap<&'static str, u64>,
    violations: Vec<Violation>,
    /// Violations already reported, so a condition seen on every poll is kept once.
    seen: BTreeSet<(&'static str, String)>,
}

/// What the soak did and saw, shared by its tasks.
#[derive(Debug)]
pub struct Tally {
    started: std::time::Instant,
    counts: Mutex<Counts>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            started: std::time::Instant::now(),
            counts: Mutex::default(),
        }
    }
}

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut Counts) -> T) -> T {
        let mut counts = match self.counts.lock() {
            Ok(counts) => counts,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut counts)
    }

    /// Counts one operation of the workload (`submit_created`, `status_lookup`, ...).
    pub fn operation(&self, name: &str) {
        self.operations(name, 1);
    }

    /// Adds `n` to an operation's count.
    pub fn operations(&self, name: &str, n: u64) {
        self.with(|c| *c.operations.entry(name.to_owned()).or_default() += n);
    }

    /// An operation's count so far.
    pub fn operation_count(&self, name: &str) -> u64 {
        self.with(|c| c.operations.get(name).copied().unwrap_or(0))
    }

    /// Counts one fault of `kind`: applied, or skipped because it found nothing to act on.
    pub fn fault(&self, kind: FaultKind, applied: bool) {
        let name = if applied {
            kind.name().to_owned()
        } else {
            format!("{}_skipped", kind.name())
        };
        self.with(|c| *c.faults.entry(name).or_default() += 1);
    }

    /// Faults applied and skipped, by kind.
    pub fn faults(&self) -> BTreeMap<String, u64> {
        self.with(|c| c.faults.clone())
    }

    /// How many faults of `kind` were applied.
    pub fn applied(&self, kind: FaultKind) -> u64 {
        self.with(|c| c.faults.get(kind.name()).copied().unwrap_or(0))
    }

    /// Counts one evaluation of `invariant`; `broken` holds what broke it, if anything.
    pub fn check(&self, invariant: &'static str, broken: Option<String>) {
        let at_seconds = self.started.elapsed().as_secs_f64();
        self.with(|c| {
            *c.checks.entry(invariant).or_default() += 1;
            if let Some(detail) = broken
                && c.seen.insert((invariant, detail.clone()))
            {
                tracing::error!(invariant, %detail, "invariant violated");
                c.violations.push(Violation {
                    invariant,
                    at_seconds,
                    detail,
                });
            }
        });
    }

    /// One evaluation of `invariant` over many findings: a pass when there are none.
    pub fn check_all(&self, invariant: &'static str, broken: Vec<String>) {
        if broken.is_empty() {
            self.check(invariant, None);
        }
        for detail in broken {
            self.check(invariant, Some(detail));
        }
    }

    pub fn violations(&self) -> Vec<Violation> {
        self.with(|c| c.violations.clone())
    }

    /// How many times each invariant was evaluated.
    pub fn checks(&self) -> BTreeMap<&'static str, u64> {
        self.with(|c| {
            ALL.iter()
                .map(|name| (*name, c.checks.get(name).copied().unwrap_or(0)))
                .collect()
        })
    }

    /// Violations by invariant, every invariant listed.
    pub fn violations_by_invariant(&self) -> BTreeMap<&'static str, u64> {
        self.with(|c| {
            let mut by: BTreeMap<&'static str, u64> = ALL.iter().map(|name| (*name, 0)).collect();
            for v in &c.violations {
                *by.entry(v.invariant).or_default() += 1;
            }
            by
        })
    }

    /// `{operations, checks, violations}` for the report.
    pub fn to_json(&self) -> Value {
        let checks = self.checks();
        self.with(|c| {
            json!({
                "operations": c.operations,
                "checks": checks,
                "violations": c.violations.iter().map(|v| json!({
                    "invariant": v.invariant,
                    "atSeconds": v.at_seconds,
                    "detail": v.detail,
                })).collect::<Vec<_>>(),
            })
        })
    }
}

/// Whether a pod is a live driver: not being deleted, not finished.
pub fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending" | "Running") | None
        )
}

/// Whether a driver's own container may still run: the pod is [`live`] and its driver
/// container has not terminated. A pod with a sidecar (the recovery agent) stays Running a
/// moment after its driver container exited, and the operator rightly fails the application
/// on that exit.
pub fn driver_container_live(pod: &Pod) -> bool {
    let terminated = submission::driver::driver_container_name(pod).is_some_and(|name| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|all| all.iter().find(|c| c.name == name))
            .and_then(|c| c.state.as_ref())
            .is_some_and(|state| state.terminated.is_some())
    });
    live(pod) && !terminated
}

fn name_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn submission_id(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::SUBMISSION_ID))
        .map(String::as_str)
}

fn label<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Live drivers grouped by submission id (whatever their namespace) and by (application,
/// epoch); more than one in a group is a violation, one per group found.
pub fn two_live_drivers(drivers: &[Pod]) -> Vec<String> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in drivers.iter().filter(|p| live(p)) {
        let name = name_of(pod);
        if let Some(id) = submission_id(pod) {
            by_key
                .entry(format!("submission id {id}"))
                .or_default()
                .push(name.clone());
        }
        if let (Some(app), Some(epoch)) = (
            label(&pod.metadata, operator::labels::APP_NAME),
            label(&pod.metadata, operator::labels::RECOVERY_EPOCH),
        ) {
            by_key
                .entry(format!("application {app} epoch {epoch}"))
                .or_default()
                .push(name);
        }
    }
    by_key
        .into_iter()
        .filter(|(_, pods)| pods.len() > 1)
        .map(|(key, pods)| format!("{key}: live drivers {pods:?}"))
        .collect()
}

/// Driver pods of a killed submission (`killed`: id to the uid of the driver killed) other
/// than the one killed: a killed id must never get a new driver.
pub fn killed_but_replaced(drivers: &[Pod], killed: &BTreeMap<String, String>) -> Vec<String> {
    drivers
        .iter()
        .filter_map(|pod| {
            let id = submission_id(pod)?;
            let killed_uid = killed.get(id)?;
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            (uid != killed_uid).then(|| {
                format!(
                    "submission {id} was killed (driver uid {killed_uid}) and has driver {} (uid {uid})",
                    name_of(pod)
                )
            })
        })
        .collect()
}

/// Applications in `state` (FAILED for the invariant; SUBMISSION_FAILED, which the operator
/// retries, is only counted) while a driver of their current run (the pod their status names,
/// or one carrying their current submission id) is alive. `apps` must be read before
/// `drivers`: a driver that ended before the application failed cannot show alive in a later
/// listing.
pub fn failed_with_live_driver(
    apps: &[SparkApplication],
    drivers: &[Pod],
    failed: ApplicationStateType,
) -> Vec<String> {
    let mut broken = Vec::new();
    for app in apps {
        let Some(status) = &app.status else { continue };
        let state = status.app_state.state;
        if state != failed {
            continue;
        }
        let name = app.metadata.name.as_deref().unwrap_or_default();
        let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
        for pod in drivers.iter().filter(|p| driver_container_live(p)) {
            let of_app = label(&pod.metadata, operator::labels::APP_NAME) == Some(name)
                && pod.metadata.namespace.as_deref() == Some(namespace);
            let current = pod.metadata.name.as_deref() == Some(&status.driver_info.pod_name)
                || (!status.submission_id.is_empty()
                    && submission_id(pod) == Some(&status.submission_id));
            if of_app && current {
                broken.push(format!(
                    "{namespace}/{name} is {state:?} while its driver {} is {}",
                    name_of(pod),
                    pod.status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .unwrap_or("new")
                ));
            }
        }
    }
    broken
}

/// The ConfigMaps a pod mounts and cannot start without (volumes not marked optional).
fn mounted_config_maps(pod: &Pod) -> Vec<&str> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.config_map.as_ref())
        .filter(|c| c.optional != Some(true))
        .map(|c| c.name.as_str())
        .collect()
}

/// Drivers not being deleted that lack a ConfigMap they mount: `(pod uid, what is missing)`.
/// ConfigMaps are created before their pod, so one listed after the pod must show them; the
/// monitor confirms a finding on its next listing before calling it a violation.
pub fn drivers_without_config_maps(
    drivers: &[Pod],
    configmaps: &[ConfigMap],
) -> Vec<(String, String)> {
    let present: BTreeSet<(&str, &str)> = configmaps
        .iter()
        .map(|c| {
            (
                c.metadata.namespace.as_deref().unwrap_or_default(),
                c.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    drivers
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let missing: Vec<&str> = mounted_config_maps(pod)
                .into_iter()
                .filter(|name| !present.contains(&(namespace, name)))
                .collect();
            (!missing.is_empty()).then(|| {
                (
                    pod.metadata.uid.clone().unwrap_or_default(),
                    format!("driver {} lacks the ConfigMaps {missing:?}", name_of(pod)),
                )
            })
        })
        .collect()
}

/// Drivers not being deleted without a Service they own (Spark's headless driver Service).
pub fn drivers_without_service(drivers: &[Pod], services: &[Service]) -> Vec<String> {
    let owners: BTreeSet<&str> = services
        .iter()
        .flat_map(|s| s.metadata.owner_references.iter().flatten())
        .map(|o| o.uid.as_str())
        .collect();
    drivers
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !owners.contains(p.metadata.uid.as_deref().unwrap_or_default()))
        .map(|pod| format!("driver {} has no Service", name_of(pod)))
        .collect()
}

/// Everything of the cluster the orphan check looks at, every namespace.
#[derive(Debug, Default)]
pub struct Objects {
    pub pods: Vec<Pod>,
    pub configmaps: Vec<ConfigMap>,
    pub services: Vec<Service>,
    pub apps: Vec<SparkApplication>,
}

/// An object of ours that nothing will collect as things stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub uid: String,
    pub detail: String,
    /// An ownerless ConfigMap beside a pod of its Spark application: a submission cut between
    /// the pod and the owner patch, which a retry adopts and the sweep removes once the pod is
    /// gone (docs/submitter-service.md), so not yet an orphan while the pod is there.
    pub beside_its_driver: bool,
}

/// Objects whose owners are gone, and objects of ours (Spark or operator labels) without an
/// owner: executors, ConfigMaps and Services of a submission. Driver pods of direct
/// submissions belong to their client and retention records to the submitter: not orphans.
pub fn orphans(objects: &Objects) -> Vec<Orphan> {
    let mut uids: BTreeSet<&str> = objects
        .pods
        .iter()
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect();
    uids.extend(
        objects
            .apps
            .iter()
            .filter_map(|a| a.metadata.uid.as_deref()),
    );
    let apps_with_pods: BTreeSet<(&str, &str)> = objects
        .pods
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.namespace.as_deref()?,
                label(&p.metadata, labels::SPARK_APP_ID)?,
            ))
        })
        .collect();
    let mut found = Vec::new();
    let mut look = |kind: &str, meta: &kube::api::ObjectMeta, driver: bool| {
        let ours = label(meta, labels::SPARK_APP_ID).is_some()
            || label(meta, operator::labels::APP_NAME).is_some();
        if label(meta, labels::RECORD).is_some() {
            return;
        }
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        let name = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        let uid = meta.uid.clone().unwrap_or_default();
        if !owners.is_empty() && !owners.iter().any(|o| uids.contains(o.uid.as_str())) {
            found.push(Orphan {
                uid,
                detail: format!("{kind} {name}: its owners are gone"),
                beside_its_driver: false,
            });
        } else if owners.is_empty() && ours && !driver {
            let beside_its_driver = kind == "configmap"
                && label(meta, labels::SPARK_APP_ID).is_some_and(|app| {
                    apps_with_pods.contains(&(meta.namespace.as_deref().unwrap_or_default(), app))
                });
            found.push(Orphan {
                uid,
                detail: format!("{kind} {name}: ours without an owner"),
                beside_its_driver,
            });
        }
    };
    for pod in &objects.pods {
        let driver = label(&pod.metadata, labels::SPARK_ROLE) == Some(labels::DRIVER_ROLE);
        look("pod", pod.meta(), driver);
    }
    for configmap in &objects.configmaps {
        look("configmap", configmap.meta(), false);
    }
    for service in &objects.services {
        look("service", service.meta(), false);
    }
    found
}

/// The REST contract for one failed call: an answer with a 5xx status must be the envelope with
/// a retryable 500 or 503; an answer without the envelope is a violation whatever its status.
pub fn rest_answer(error: &SubmitError) -> Option<String> {
    match error {
        SubmitError::Rejected {
            status,
            code,
            code_text,
            ..
        } if *status >= 500 => {
            let retryable = code.is_some_and(submission::api::ErrorCode::retryable);
            (!matches!(status, 500 | 503) || !retryable)
                .then(|| format!("HTTP {status} with code {code_text} (retryable: {retryable})"))
        }
        SubmitError::UnexpectedResponse { status, body, .. } => {
            Some(format!("HTTP {status} without the envelope: {body:.200}"))
        }
        SubmitError::DecodeResponse { status, source } => Some(format!(
            "HTTP {status} success body not decodable: {source}"
        )),
        _ => None,
    }
}

/// The published stages of a recovery-enabled staged app: each stage at most once (a second
/// publish means a write of a stale epoch was accepted); `complete` also wants every stage.
pub fn stale_epoch_writes(
    app: &str,
    committed: &[(u64, u64)],
    stages: u64,
    complete: bool,
) -> Option<String> {
    let mut by_stage: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (stage, epoch) in committed {
        by_stage.entry(*stage).or_default().push(*epoch);
    }
    let twice: Vec<String> = by_stage
        .iter()
        .filter(|(_, epochs)| epochs.len() > 1)
        .map(|(stage, epochs)| format!("stage {stage} published by epochs {epochs:?}"))
        .collect();
    if !twice.is_empty() {
        return Some(format!("{app}: {}", twice.join("; ")));
    }
    let missing: Vec<u64> = (1..=stages).filter(|s| !by_stage.contains_key(s)).collect();
    (complete && !missing.is_empty())
        .then(|| format!("{app}: COMPLETED without publishing stages {missing:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(name: &str, id: &str, phase: &str, epoch: Option<&str>) -> Pod {
        let mut labels = serde_json::Map::new();
        labels.insert(labels::SPARK_ROLE.into(), json!(labels::DRIVER_ROLE));
        if let Some(epoch) = epoch {
            labels.insert(operator::labels::APP_NAME.into(), json!("app"));
            labels.insert(operator::labels::RECOVERY_EPOCH.into(), json!(epoch));
        }
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": format!("uid-{name}"),
                "labels": labels,
                "annotations": {annotations::SUBMISSION_ID: id},
            },
            "spec": {
                "containers": [{"name": "spark-kubernetes-driver"}],
                "volumes": [
                    {"name": "conf", "configMap": {"name": format!("{name}-conf")}},
                    {"name": "extra", "configMap": {"name": "optional", "optional": true}},
                ],
            },
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn in_namespace(mut pod: Pod, namespace: &str) -> Pod {
        pod.metadata.namespace = Some(namespace.into());
        pod
    }

    fn app(name: &str, state: &str, driver: &str, id: &str) -> SparkApplication {
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {
                "type": "Scala",
                "mode": "cluster",
                "sparkVersion": "4.0.0",
                "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                "driver": {},
                "executor": {},
            },
            "status": {
                "applicationState": {"state": state},
                "driverInfo": {"podName": driver},
                "submissionID": id,
            },
        }))
        .unwrap()
    }

    fn config_map(name: &str, app: Option<&str>, owner: Option<&str>) -> ConfigMap {
        let mut value = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}});
        if let Some(app) = app {
            value["metadata"]["labels"] = json!({labels::SPARK_APP_ID: app});
        }
        if let Some(owner) = owner {
            value["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "v1", "kind": "Pod", "name": owner, "uid": format!("uid-{owner}"),
            }]);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn two_running_drivers_of_one_epoch_are_a_violation_and_a_finished_one_is_not() {
        let fine = [
            driver("a-e1", "s1", "Failed", Some("1")),
            driver("a-e2", "s2", "Running", Some("2")),
        ];
        assert!(two_live_drivers(&fine).is_empty());
        let same_epoch = [
            driver("a-e2", "s2", "Running", Some("2")),
            driver("b-e2", "s3", "Pending", Some("2")),
        ];
        assert_eq!(two_live_drivers(&same_epoch).len(), 1);
        let same_id = [
            driver("x", "s9", "Running", None),
            driver("y", "s9", "Running", None),
        ];
        assert_eq!(
            two_live_drivers(&same_id),
            ["submission id s9: live drivers [\"default/x\", \"default/y\"]"]
        );
    }

    #[test]
    fn one_submission_id_live_in_two_namespaces_is_two_drivers() {
        let raced = [
            driver("x", "s9", "Running", None),
            in_namespace(driver("x", "s9", "Pending", None), "jobs"),
        ];
        assert_eq!(
            two_live_drivers(&raced),
            ["submission id s9: live drivers [\"default/x\", \"jobs/x\"]"]
        );
    }

    #[test]
    fn a_killed_submission_with_any_other_driver_is_a_violation() {
        let killed = BTreeMap::from([("s1".to_owned(), "uid-x".to_owned())]);
        assert!(killed_but_replaced(&[driver("x", "s1", "Failed", None)], &killed).is_empty());
        let again = killed_but_replaced(&[driver("x2", "s1", "Succeeded", None)], &killed);
        assert_eq!(again.len(), 1, "{again:?}");
        assert!(killed_but_replaced(&[driver("y", "s2", "Running", None)], &killed).is_empty());
    }

    #[test]
    fn a_failed_application_with_its_current_driver_running_is_a_violation() {
        let running = driver("app-driver", "sub-2", "Running", Some("2"));
        let failed = app("app", "FAILED", "app-driver", "sub-2");
        assert_eq!(
            failed_with_live_driver(
                std::slice::from_ref(&failed),
                std::slice::from_ref(&running),
                ApplicationStateType::Failed
            )
            .len(),
            1
        );
        // SUBMISSION_FAILED is not FAILED: the invariant's check leaves it to its own count.
        let retrying = app("app", "SUBMISSION_FAILED", "app-driver", "sub-2");
        assert!(
            failed_with_live_driver(
                &[retrying],
                std::slice::from_ref(&running),
                ApplicationStateType::Failed
            )
            .is_empty()
        );
        // The same driver found by its submission id while the status names no pod yet.
        let unnamed = app("app", "SUBMISSION_FAILED", "", "sub-2");
        assert_eq!(
            failed_with_live_driver(
                &[unnamed],
                std::slice::from_ref(&running),
                ApplicationStateType::SubmissionFailed
            )
            .len(),
            1
        );
        // The driver container exited while the agent sidecar keeps the pod Running: ended.
        let mut exited = running.clone();
        exited.status.get_or_insert_default().container_statuses = Some(vec![
            serde_json::from_value(json!({
                "name": "spark-kubernetes-driver", "image": "spark", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1}},
            }))
            .unwrap(),
        ]);
        assert!(
            failed_with_live_driver(
                std::slice::from_ref(&failed),
                &[exited],
                ApplicationStateType::Failed
            )
            .is_empty()
        );
        // Ended, being deleted, of an older run, or the application still running: fine.
        let ended = driver("app-driver", "sub-2", "Failed", Some("2"));
        assert!(
            failed_with_live_driver(
                std::slice::from_ref(&failed),
                &[ended],
                ApplicationStateType::Failed
            )
            .is_empty()
        );
        let mut deleting = running.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(
            failed_with_live_driver(
                std::slice::from_ref(&failed),
                &[deleting],
                ApplicationStateType::Failed
            )
            .is_empty()
        );
        let older = app("app", "FAILED", "app-driver-e3", "sub-3");
        assert!(
            failed_with_live_driver(
                &[older],
                std::slice::from_ref(&running),
                ApplicationStateType::Failed
            )
            .is_empty()
        );
        let going = app("app", "RUNNING", "app-driver", "sub-2");
        assert!(
            failed_with_live_driver(&[going], &[running], ApplicationStateType::Failed).is_empty()
        );
    }

    #[test]
    fn a_driver_lacks_the_config_maps_it_mounts_not_the_optional_ones() {
        let pod = driver("x", "s1", "Running", None);
        let missing = drivers_without_config_maps(std::slice::from_ref(&pod), &[]);
        assert_eq!(
            missing,
            [(
                "uid-x".to_owned(),
                "driver default/x lacks the ConfigMaps [\"x-conf\"]".to_owned()
            )]
        );
        let present = [config_map("x-conf", Some("app-x"), Some("x"))];
        assert!(drivers_without_config_maps(&[pod], &present).is_empty());
    }

    #[test]
    fn a_driver_without_an_owned_service_is_found() {
        let pod = driver("x", "s1", "Succeeded", None);
        assert_eq!(
            drivers_without_service(std::slice::from_ref(&pod), &[]),
            ["driver default/x has no Service"]
        );
        let service: Service = serde_json::from_value(json!({"metadata": {
            "name": "x-svc", "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "uid-x"}],
        }}))
        .unwrap();
        assert!(drivers_without_service(&[pod], &[service]).is_empty());
    }

    #[test]
    fn orphans_are_objects_whose_owner_is_gone_or_ours_without_owner() {
        let mut pod = driver("x", "s1", "Running", None);
        pod.metadata
            .labels
            .get_or_insert_default()
            .insert(labels::SPARK_APP_ID.into(), "app-x".into());
        let objects = Objects {
            pods: vec![pod],
            configmaps: vec![
                config_map("owned", Some("app-x"), Some("x")),
                config_map("owner-gone", Some("app-y"), Some("y")),
                config_map("adopting", Some("app-x"), None),
                config_map("left", Some("app-z"), None),
                config_map("not-ours", None, None),
            ],
            ..Objects::default()
        };
        let found = orphans(&objects);
        let summary: Vec<(&str, bool)> = found
            .iter()
            .map(|o| (o.detail.as_str(), o.beside_its_driver))
            .collect();
        assert_eq!(
            summary,
            [
                ("configmap default/owner-gone: its owners are gone", false),
                ("configmap default/adopting: ours without an owner", true),
                ("configmap default/left: ours without an owner", false),
            ]
        );
    }

    fn rejected(status: u16, code: submission::api::ErrorCode) -> SubmitError {
        SubmitError::Rejected {
            status,
            code: Some(code),
            code_text: code.to_string(),
            message: "m".into(),
            submission_id: "s".into(),
            retry_after: None,
        }
    }

    #[test]
    fn only_a_retryable_500_or_503_envelope_is_a_server_error_per_the_contract() {
        use submission::api::ErrorCode;
        assert_eq!(
            rest_answer(&rejected(503, ErrorCode::SubmitterOverloaded)),
            None
        );
        assert_eq!(
            rest_answer(&rejected(500, ErrorCode::InternalServerError)),
            None
        );
        assert_eq!(
            rest_answer(&rejected(422, ErrorCode::InvalidPodTemplate)),
            None
        );
        assert!(rest_answer(&rejected(502, ErrorCode::InternalServerError)).is_some());
        assert!(rest_answer(&rejected(500, ErrorCode::Forbidden)).is_some());
        let bare = SubmitError::UnexpectedResponse {
            status: 500,
            body: "<html>".into(),
            retry_after: None,
        };
        assert!(rest_answer(&bare).is_some());
        assert_eq!(
            rest_answer(&SubmitError::TimedOut {
                after: std::time::Duration::from_secs(1)
            }),
            None
        );
    }

    #[test]
    fn a_stage_published_twice_is_a_stale_epoch_write() {
        assert_eq!(
            stale_epoch_writes("a", &[(1, 0), (2, 0), (3, 1)], 3, true),
            None
        );
        assert!(stale_epoch_writes("a", &[(1, 0), (2, 0), (2, 1)], 2, false).is_some());
        assert!(stale_epoch_writes("a", &[(1, 0)], 2, true).is_some());
        assert_eq!(stale_epoch_writes("a", &[(1, 0)], 2, false), None);
    }

    #[test]
    fn the_tally_counts_faults_checks_and_violations_by_invariant() {
        let tally = Tally::default();
        tally.fault(FaultKind::KillApi, true);
        tally.fault(FaultKind::KillApi, false);
        tally.check_all(NO_ORPHANS, vec![]);
        tally.check_all(NO_ORPHANS, vec!["a".into(), "b".into(), "a".into()]);
        assert_eq!(tally.applied(FaultKind::KillApi), 1);
        assert_eq!(tally.faults()["kill_api_skipped"], 1);
        assert_eq!(tally.checks()[NO_ORPHANS], 4);
        assert_eq!(tally.violations_by_invariant()[NO_ORPHANS], 2);
        assert_eq!(tally.violations_by_invariant()[REST_CONTRACT], 0);
    }
}
