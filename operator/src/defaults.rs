//! The widely used operator's defaulting webhook (`SetSparkApplicationDefaults`, on by default in
//! its chart), as a pure function. It writes the defaults into the stored object; we apply them
//! when reading instead, so the user's object stays as written and both the argv and the restart
//! logic see the same effective spec.

use crate::crd::{DeployMode, RestartPolicy, RestartPolicyType, SparkApplicationSpec};

/// Seconds between retries when a restarting policy does not say.
pub const DEFAULT_RETRY_INTERVAL_SECONDS: i64 = 5;

/// The spec with the webhook's defaults filled in:
/// - `mode: cluster`; `restartPolicy.type: Never`;
/// - with any other restart policy, both retry intervals 5 seconds;
/// - driver and executor `cores: 1` and `memory: 1g` unless `sparkConf` sets them;
/// - `executor.instances: 1` unless `sparkConf` sets it or dynamic allocation is on;
/// - `dynamicAllocation.shuffleTrackingEnabled: true` when dynamic allocation is on.
///
/// One deliberate difference: the webhook looks up `spark.dynamicallocation.enabled` in
/// `sparkConf` (a lower-case typo, so it never matches); we look up the key Spark reads,
/// `spark.dynamicAllocation.enabled`, so dynamic allocation set there gets no fixed instance count.
pub fn with_defaults(spec: &SparkApplicationSpec) -> SparkApplicationSpec {
    let mut spec = spec.clone();
    spec.mode.get_or_insert(DeployMode::Cluster);

    let policy = spec
        .restart_policy
        .get_or_insert_with(RestartPolicy::default);
    let policy_type = *policy.policy_type.get_or_insert(RestartPolicyType::Never);
    if policy_type != RestartPolicyType::Never {
        policy
            .on_failure_retry_interval
            .get_or_insert(DEFAULT_RETRY_INTERVAL_SECONDS);
        policy
            .on_submission_failure_retry_interval
            .get_or_insert(DEFAULT_RETRY_INTERVAL_SECONDS);
    }

    let conf_has = |key: &str| spec.spark_conf.contains_key(key);
    let driver_cores = !conf_has("spark.driver.cores");
    let driver_memory = !conf_has("spark.driver.memory");
    let executor_cores = !conf_has("spark.executor.cores");
    let executor_memory = !conf_has("spark.executor.memory");
    let instances_in_conf = spec
        .spark_conf
        .get("spark.executor.instances")
        .is_some_and(|v| !v.is_empty());
    let dynamic = dynamic_allocation_enabled(&spec);

    if driver_cores {
        spec.driver.pod.cores.get_or_insert(1);
    }
    if driver_memory {
        spec.driver
            .pod
            .memory
            .get_or_insert_with(|| "1g".to_owned());
    }
    if executor_cores {
        spec.executor.pod.cores.get_or_insert(1);
    }
    if executor_memory {
        spec.executor
            .pod
            .memory
            .get_or_insert_with(|| "1g".to_owned());
    }
    if !instances_in_conf && !dynamic {
        spec.executor.instances.get_or_insert(1);
    }
    if let Some(allocation) = spec.dynamic_allocation.as_mut().filter(|a| a.enabled) {
        allocation.shuffle_tracking_enabled.get_or_insert(true);
    }
    spec
}

/// Dynamic allocation is on: the spec's `dynamicAllocation` decides when present, else
/// `sparkConf`.
pub fn dynamic_allocation_enabled(spec: &SparkApplicationSpec) -> bool {
    match &spec.dynamic_allocation {
        Some(allocation) => allocation.enabled,
        None => spec
            .spark_conf
            .get("spark.dynamicAllocation.enabled")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::DynamicAllocation;

    fn minimal() -> SparkApplicationSpec {
        serde_json::from_value(serde_json::json!({
            "type": "Scala",
            "sparkVersion": "4.0.0",
            "mainApplicationFile": "local:///opt/app.jar",
            "driver": {},
            "executor": {}
        }))
        .unwrap()
    }

    #[test]
    fn minimal_spec_gets_the_webhook_defaults() {
        let spec = with_defaults(&minimal());
        assert_eq!(spec.mode, Some(DeployMode::Cluster));
        let policy = spec.restart_policy.unwrap();
        assert_eq!(policy.policy_type, Some(RestartPolicyType::Never));
        assert_eq!(policy.on_failure_retry_interval, None);
        assert_eq!(spec.driver.pod.cores, Some(1));
        assert_eq!(spec.driver.pod.memory.as_deref(), Some("1g"));
        assert_eq!(spec.executor.pod.cores, Some(1));
        assert_eq!(spec.executor.pod.memory.as_deref(), Some("1g"));
        assert_eq!(spec.executor.instances, Some(1));
    }

    #[test]
    fn restarting_policy_gets_five_second_intervals_unless_set() {
        let mut spec = minimal();
        spec.restart_policy = Some(RestartPolicy {
            policy_type: Some(RestartPolicyType::OnFailure),
            on_failure_retry_interval: Some(30),
            ..RestartPolicy::default()
        });
        let policy = with_defaults(&spec).restart_policy.unwrap();
        assert_eq!(policy.on_failure_retry_interval, Some(30));
        assert_eq!(policy.on_submission_failure_retry_interval, Some(5));
    }

    #[test]
    fn spark_conf_settings_suppress_resource_defaults() {
        let mut spec = minimal();
        for key in [
            "spark.driver.cores",
            "spark.driver.memory",
            "spark.executor.cores",
            "spark.executor.memory",
            "spark.executor.instances",
        ] {
            spec.spark_conf.insert(key.into(), "3".into());
        }
        let spec = with_defaults(&spec);
        assert_eq!(spec.driver.pod.cores, None);
        assert_eq!(spec.driver.pod.memory, None);
        assert_eq!(spec.executor.pod.cores, None);
        assert_eq!(spec.executor.pod.memory, None);
        assert_eq!(spec.executor.instances, None);
    }

    #[test]
    fn dynamic_allocation_gets_no_instances_and_shuffle_tracking() {
        let mut spec = minimal();
        spec.dynamic_allocation = Some(DynamicAllocation {
            enabled: true,
            ..DynamicAllocation::default()
        });
        let spec = with_defaults(&spec);
        assert_eq!(spec.executor.instances, None);
        assert_eq!(
            spec.dynamic_allocation.unwrap().shuffle_tracking_enabled,
            Some(true)
        );

        let mut spec = minimal();
        spec.spark_conf
            .insert("spark.dynamicAllocation.enabled".into(), "true".into());
        assert_eq!(with_defaults(&spec).executor.instances, None);
    }

    #[test]
    fn defaults_are_idempotent() {
        let once = with_defaults(&minimal());
        assert_eq!(with_defaults(&once), once);
    }
}
