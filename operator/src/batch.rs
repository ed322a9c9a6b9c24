//! `spec.batchScheduler` as the widely used operator hands pods to a batch scheduler
//! (`internal/scheduler/*` and its webhook's `addSchedulerName`), through the inline templates:
//! - every pod's `schedulerName` is the batch scheduler's name;
//! - Volcano: a `scheduling.volcano.sh/v1beta1` PodGroup `spark-<app>-pg` (min member 1, the
//!   application's total requests as min resources, the queue and priority class of
//!   `batchSchedulerOptions`), named on every pod by `scheduling.k8s.io/group-name`;
//! - the kube-scheduler coscheduling plugin (`kube-scheduler`): a `scheduling.x-k8s.io/v1alpha1`
//!   PodGroup `<app>-pg`, named on every pod by the `scheduling.x-k8s.io/pod-group` label;
//! - YuniKorn: the `queue` label and the `spark-driver` / `spark-executor` task-group names, with
//!   the task groups (members and resources) on the driver.
//!
//! Pure: [`apply`] rewrites the spec, [`pod_group`] is the PodGroup the reconciler creates (owned
//! by the application). Where the PodGroup's CRD is not served, the application fails with a
//! message saying so instead of running ungrouped.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::crd::{SparkApplication, SparkApplicationSpec, SparkPodSpec};

pub const VOLCANO: &str = "volcano";
pub const YUNIKORN: &str = "yunikorn";
pub const KUBE_SCHEDULER: &str = "kube-scheduler";

const VOLCANO_GROUP_ANNOTATION: &str = "scheduling.k8s.io/group-name";
const COSCHEDULING_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
const YUNIKORN_QUEUE_LABEL: &str = "queue";
const YUNIKORN_TASK_GROUP_NAME: &str = "yunikorn.apache.org/task-group-name";
const YUNIKORN_TASK_GROUPS: &str = "yunikorn.apache.org/task-groups";

/// A PodGroup to create: its API group, version, plural, and the object.
#[derive(Debug, Clone, PartialEq)]
pub struct PodGroup {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub object: Value,
}

impl PodGroup {
    /// The CRD that must be served for it.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

fn scheduler(spec: &SparkApplicationSpec) -> Option<&str> {
    spec.batch_scheduler.as_deref().filter(|s| !s.is_empty())
}

/// Whether the batch scheduler of `spec` reads a PodGroup ([`pod_group`] builds it).
pub fn makes_pod_group(spec: &SparkApplicationSpec) -> bool {
    matches!(scheduler(spec), Some(VOLCANO | KUBE_SCHEDULER))
}

fn volcano_group(name: &str) -> String {
    format!("spark-{name}-pg")
}

fn coscheduling_group(name: &str) -> String {
    format!("{name}-pg")
}

/// Spark's memory strings (`512m`, `2g`, `1024k`, a bare number of MiB) in MiB.
pub fn memory_mib(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_suffix('b').unwrap_or(&text);
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number.parse().ok()?;
    match unit {
        "" | "m" => Some(n),
        "k" => Some(n.div_ceil(1024)),
        "g" => n.checked_mul(1024),
        "t" => n.checked_mul(1024 * 1024),
        _ => None,
    }
}

/// One pod's requests as Spark makes them: its cores, and its memory plus the overhead
/// (`memoryOverhead`, else the overhead factor — 0.1, 0.4 for non-JVM applications — of the
/// memory, at least 384 MiB).
fn pod_request(spec: &SparkApplicationSpec, pod: &SparkPodSpec) -> (u64, u64) {
    let cores = pod.cores.map_or(1, |c| u64::try_from(c).unwrap_or(1));
    let memory = pod.memory.as_deref().and_then(memory_mib).unwrap_or(1024);
    let factor = spec
        .memory_overhead_factor
        .as_deref()
        .and_then(|f| f.parse::<f64>().ok())
        .unwrap_or(match spec.app_type {
            crate::crd::SparkApplicationType::Java | crate::crd::SparkApplicationType::Scala => 0.1,
            _ => 0.4,
        });
    let overhead = pod
        .memory_overhead
        .as_deref()
        .and_then(memory_mib)
        // Whole MiB of a fraction: truncating is Spark's own rounding.
        .unwrap_or_else(|| ((memory as f64 * factor) as u64).max(384));
    (cores, memory + overhead)
}

fn executors(spec: &SparkApplicationSpec) -> u64 {
    let instances = spec.executor.instances.unwrap_or(1);
    let dynamic = spec.dynamic_allocation.as_ref().filter(|d| d.enabled);
    let initial = dynamic.map_or(instances, |d| {
        instances
            .max(d.initial_executors.unwrap_or(0))
            .max(d.min_executors.unwrap_or(0))
    });
    u64::try_from(initial).unwrap_or(0)
}

/// The application's total requests (`cpu`, `memory`), or `batchSchedulerOptions.resources`.
fn min_resources(spec: &SparkApplicationSpec) -> Value {
    if let Some(resources) = spec
        .batch_scheduler_options
        .as_ref()
        .map(|o| &o.resources)
        .filter(|r| !r.is_empty())
    {
        return json!(resources);
    }
    let (driver_cores, driver_memory) = pod_request(spec, &spec.driver.pod);
    let (cores, memory) = pod_request(spec, &spec.executor.pod);
    let n = executors(spec);
    json!({
        "cpu": (driver_cores + cores * n).to_string(),
        "memory": format!("{}Mi", driver_memory + memory * n),
    })
}

/// Rewrites `spec` of the application `name` for its batch scheduler; nothing without one.
pub fn apply(spec: &mut SparkApplicationSpec, name: &str) {
    let Some(scheduler) = scheduler(spec).map(str::to_owned) else {
        return;
    };
    let queue = spec
        .batch_scheduler_options
        .as_ref()
        .and_then(|o| o.queue.clone());
    let task_groups = (scheduler == YUNIKORN).then(|| yunikorn_task_groups(spec));
    for (pod, role) in [
        (&mut spec.driver.pod, "driver"),
        (&mut spec.executor.pod, "executor"),
    ] {
        pod.scheduler_name = Some(scheduler.clone());
        match scheduler.as_str() {
            VOLCANO => {
                pod.annotations
                    .insert(VOLCANO_GROUP_ANNOTATION.to_owned(), volcano_group(name));
            }
            KUBE_SCHEDULER => {
                pod.labels.insert(
                    COSCHEDULING_GROUP_LABEL.to_owned(),
                    coscheduling_group(name),
                );
            }
            YUNIKORN => {
                if let Some(queue) = &queue {
                    pod.labels
                        .insert(YUNIKORN_QUEUE_LABEL.to_owned(), queue.clone());
                }
                pod.annotations
                    .insert(YUNIKORN_TASK_GROUP_NAME.to_owned(), format!("spark-{role}"));
            }
            _ => {}
        }
    }
    if let Some(groups) = task_groups {
        spec.driver
            .pod
            .annotations
            .insert(YUNIKORN_TASK_GROUPS.to_owned(), groups.to_string());
    }
}

fn yunikorn_task_groups(spec: &SparkApplicationSpec) -> Value {
    let group = |name: &str, members: u64, pod: &SparkPodSpec| {
        let (cores, memory) = pod_request(spec, pod);
        let mut group = json!({
            "name": name,
            "minMember": members,
            "minResource": {"cpu": cores.to_string(), "memory": format!("{memory}Mi")},
        });
        if !pod.node_selector.is_empty() || !spec.node_selector.is_empty() {
            let mut selector: BTreeMap<&String, &String> = spec.node_selector.iter().collect();
            selector.extend(pod.node_selector.iter());
            group["nodeSelector"] = json!(selector);
        }
        if !pod.labels.is_empty() {
            group["labels"] = json!(pod.labels);
        }
        group
    };
    let mut groups = vec![group("spark-driver", 1, &spec.driver.pod)];
    let n = executors(spec);
    if n > 0 {
        groups.push(group("spark-executor", n, &spec.executor.pod));
    }
    json!(groups)
}

/// The PodGroup of `app`, owned by it, for Volcano and the coscheduling plugin.
pub fn pod_group(app: &SparkApplication) -> Option<PodGroup> {
    let spec = &app.spec;
    let name = app.metadata.name.as_deref().unwrap_or("");
    let owner = json!([{
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "name": name,
        "uid": app.metadata.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    match scheduler(spec)? {
        VOLCANO => {
            let mut pg_spec = json!({"minMember": 1, "minResources": min_resources(spec)});
            if let Some(options) = &spec.batch_scheduler_options {
                if let Some(queue) = options.queue.as_deref().filter(|q| !q.is_empty()) {
                    pg_spec["queue"] = json!(queue);
                }
                if let Some(class) = options
                    .priority_class_name
                    .as_deref()
                    .filter(|c| !c.is_empty())
                {
                    pg_spec["priorityClassName"] = json!(class);
                }
            }
            Some(PodGroup {
                group: "scheduling.volcano.sh",
                version: "v1beta1",
                plural: "podgroups",
                kind: "PodGroup",
                object: json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": volcano_group(name), "namespace": app.metadata.namespace,
                                 "ownerReferences": owner},
                    "spec": pg_spec,
                }),
            })
        }
        KUBE_SCHEDULER => Some(PodGroup {
            group: "scheduling.x-k8s.io",
            version: "v1alpha1",
            plural: "podgroups",
            kind: "PodGroup",
            object: json!({
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": coscheduling_group(name), "namespace": app.metadata.namespace,
                             "ownerReferences": owner},
                "spec": {"minMember": 1, "minResources": min_resources(spec)},
            }),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(extra: Value) -> SparkApplication {
        let mut spec = json!({"type": "Scala", "sparkVersion": "4.0.4",
            "mainApplicationFile": "local:///a.jar",
            "driver": {"cores": 1, "memory": "512m"},
            "executor": {"cores": 2, "memory": "1g", "instances": 2}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "etl", "uid": "app-uid"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn spark_memory_strings_are_mebibytes() {
        for (text, mib) in [
            ("512m", Some(512)),
            ("1g", Some(1024)),
            ("2048k", Some(2)),
            ("300", Some(300)),
            ("1gb", Some(1024)),
            ("lots", None),
        ] {
            assert_eq!(memory_mib(text), mib, "{text}");
        }
    }

    #[test]
    fn volcano_gets_a_pod_group_with_the_apps_requests_and_queue_named_on_every_pod() {
        let a = app(json!({"batchScheduler": "volcano",
                           "batchSchedulerOptions": {"queue": "default", "priorityClassName": "high"}}));
        let group = pod_group(&a).unwrap();
        assert_eq!(group.crd_name(), "podgroups.scheduling.volcano.sh");
        assert_eq!(group.object["metadata"]["name"], "spark-pi-pg");
        // Driver 1 core, 512 + 384 MiB; two executors of 2 cores, 1024 + 384 MiB.
        assert_eq!(
            group.object["spec"],
            json!({"minMember": 1, "queue": "default", "priorityClassName": "high",
                   "minResources": {"cpu": "5", "memory": "3712Mi"}})
        );
        let mut spec = a.spec.clone();
        apply(&mut spec, "pi");
        for pod in [&spec.driver.pod, &spec.executor.pod] {
            assert_eq!(pod.scheduler_name.as_deref(), Some("volcano"));
            assert_eq!(pod.annotations[VOLCANO_GROUP_ANNOTATION], "spark-pi-pg");
        }
    }

    #[test]
    fn coscheduling_and_yunikorn_name_their_groups_on_the_pods() {
        let a = app(json!({"batchScheduler": "kube-scheduler"}));
        assert_eq!(pod_group(&a).unwrap().object["metadata"]["name"], "pi-pg");
        let mut spec = a.spec.clone();
        apply(&mut spec, "pi");
        assert_eq!(spec.executor.pod.labels[COSCHEDULING_GROUP_LABEL], "pi-pg");

        let y = app(json!({"batchScheduler": "yunikorn",
                           "batchSchedulerOptions": {"queue": "root.default"}}));
        assert!(pod_group(&y).is_none());
        let mut spec = y.spec.clone();
        apply(&mut spec, "pi");
        assert_eq!(spec.driver.pod.labels["queue"], "root.default");
        assert_eq!(
            spec.executor.pod.annotations[YUNIKORN_TASK_GROUP_NAME],
            "spark-executor"
        );
        let groups: Value =
            serde_json::from_str(&spec.driver.pod.annotations[YUNIKORN_TASK_GROUPS]).unwrap();
        assert_eq!(groups[1]["minMember"], 2);
        assert_eq!(
            groups[1]["minResource"],
            json!({"cpu": "2", "memory": "1408Mi"})
        );
        // No batch scheduler: nothing.
        let mut plain = app(json!({})).spec;
        apply(&mut plain, "pi");
        assert_eq!(plain.driver.pod.scheduler_name, None);
    }
}
