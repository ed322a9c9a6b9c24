//! What a driver depends on besides the objects the submitter makes with it: the objects that
//! must exist before it is submitted, each owned by the application.
//!
//! - The PodGroup its batch scheduler reads before placing the pod (Volcano, the coscheduling
//!   plugin): a gang scheduler that sees the pod before its group holds or misplaces it.
//! - The monitoring ConfigMap it mounts: without it the kubelet holds the driver in
//!   `FailedMount`.
//! - Its PodDisruptionBudget: protected from its first moment, not from some time after.
//!
//! Pure: [`of`] builds them, in the order they are made; [`needed`] is the same rule for the
//! state machine, which sends no submission until they exist, and fails the submission when the
//! API server refuses one.

use serde_json::Value;

use crate::batch;
use crate::crd::{SparkApplication, SparkApplicationSpec};
use crate::monitoring;
use crate::ui;

/// An object to make before the driver, with the API it is made through.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// The API group, `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub name: String,
    /// The CRD that must be installed for the API to be served, for a type Kubernetes does not
    /// have itself.
    pub crd: Option<String>,
    pub object: Value,
}

impl Dependency {
    /// `Kind name`, as messages name it.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// Whether a run of `spec` has objects to make before its driver (the rule [`of`] follows,
/// without building them).
pub fn needed(spec: &SparkApplicationSpec) -> bool {
    batch::makes_pod_group(spec)
        || monitoring::needs_config_map(spec)
        || spec.driver_pod_disruption_budget == Some(true)
}

/// The objects to make before the driver of `app`, in the order they are made: what the
/// scheduler reads first.
pub fn of(app: &SparkApplication) -> Vec<Dependency> {
    let mut out = Vec::new();
    if let Some(group) = batch::pod_group(app) {
        out.push(Dependency {
            group: group.group,
            version: group.version,
            kind: group.kind,
            plural: group.plural,
            name: group.object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            crd: Some(group.crd_name()),
            object: group.object,
        });
    }
    if let Some(pdb) = ui::driver_pdb(app) {
        out.push(Dependency {
            group: "policy",
            version: "v1",
            kind: "PodDisruptionBudget",
            plural: "poddisruptionbudgets",
            name: pdb.metadata.name.clone().unwrap_or_default(),
            crd: None,
            object: encode(&pdb),
        });
    }
    if let Some(config_map) = monitoring::config_map(app) {
        out.push(Dependency {
            group: "",
            version: "v1",
            kind: "ConfigMap",
            plural: "configmaps",
            name: config_map.metadata.name.clone().unwrap_or_default(),
            crd: None,
            object: encode(&config_map),
        });
    }
    out
}

fn encode<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("a Kubernetes object of plain fields always encodes")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn app(extra: Value) -> SparkApplication {
        let mut spec = json!({"type": "Scala", "sparkVersion": "4.0.0",
            "mainApplicationFile": "local:///a.jar", "driver": {}, "executor": {}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "etl", "uid": "app-uid"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn what_the_scheduler_mounts_and_protects_is_made_first_and_only_when_asked() {
        let cases = [
            (json!({}), vec![]),
            (json!({"batchScheduler": "yunikorn"}), vec![]),
            (
                json!({"batchScheduler": "volcano"}),
                vec!["PodGroup spark-pi-pg"],
            ),
            (
                json!({"batchScheduler": "kube-scheduler"}),
                vec!["PodGroup pi-pg"],
            ),
            (
                json!({"driverPodDisruptionBudget": true}),
                vec!["PodDisruptionBudget pi-driver"],
            ),
            (
                json!({"monitoring": {"exposeDriverMetrics": true, "exposeExecutorMetrics": false,
                    "prometheus": {"jmxExporterJar": "/p.jar"}}}),
                vec!["ConfigMap pi-prom-conf"],
            ),
            // Both files inside the image: nothing to mount.
            (
                json!({"monitoring": {"exposeDriverMetrics": true, "exposeExecutorMetrics": false,
                    "metricsPropertiesFile": "/m.properties",
                    "prometheus": {"jmxExporterJar": "/p.jar", "configFile": "/p.yaml"}}}),
                vec![],
            ),
            (
                json!({"batchScheduler": "volcano", "driverPodDisruptionBudget": true,
                    "monitoring": {"exposeDriverMetrics": true, "exposeExecutorMetrics": true,
                        "prometheus": {"jmxExporterJar": "/p.jar"}}}),
                vec![
                    "PodGroup spark-pi-pg",
                    "PodDisruptionBudget pi-driver",
                    "ConfigMap pi-prom-conf",
                ],
            ),
        ];
        for (spec, expected) in cases {
            let app = app(spec.clone());
            let made: Vec<String> = of(&app).iter().map(Dependency::describe).collect();
            assert_eq!(made, expected, "{spec}");
            assert_eq!(needed(&app.spec), !made.is_empty(), "{spec}");
            for dependency in of(&app) {
                assert_eq!(dependency.object["metadata"]["name"], dependency.name);
                assert_eq!(
                    dependency.object["metadata"]["ownerReferences"][0]["uid"],
                    "app-uid",
                    "{}",
                    dependency.describe()
                );
            }
        }
    }

    #[test]
    fn only_a_pod_group_names_the_crd_it_needs() {
        let app = app(json!({"batchScheduler": "volcano", "driverPodDisruptionBudget": true}));
        let crds: Vec<Option<String>> = of(&app).into_iter().map(|d| d.crd).collect();
        assert_eq!(
            crds,
            [Some("podgroups.scheduling.volcano.sh".to_owned()), None]
        );
    }
}
