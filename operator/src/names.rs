//! The driver pod's name, one rule for everything that names or finds the driver: the argument
//! vector, the state machine's expected pod, and the objects that select the driver (its
//! PodDisruptionBudget).

use crate::crd::SparkApplicationSpec;

/// The conf that names the driver pod.
pub const DRIVER_POD_NAME_CONF: &str = "spark.kubernetes.driver.pod.name";

/// The driver pod's name: `spec.driver.podName`, else `sparkConf`'s
/// `spark.kubernetes.driver.pod.name`, else `<app>-driver`.
pub fn driver_pod_name(app_name: &str, spec: &SparkApplicationSpec) -> String {
    if let Some(name) = spec.driver.pod_name.as_deref().filter(|n| !n.is_empty()) {
        return name.to_owned();
    }
    if let Some(name) = spec
        .spark_conf
        .get(DRIVER_POD_NAME_CONF)
        .filter(|n| !n.is_empty())
    {
        return name.clone();
    }
    format!("{app_name}-driver")
}
