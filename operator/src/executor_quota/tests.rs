use proptest::prelude::*;
use serde_json::json;

use super::*;

fn spec(extra: serde_json::Value) -> SparkApplicationSpec {
    let mut base = json!({
        "type": "Scala", "sparkVersion": "3.5.0", "mode": "cluster",
        "mainApplicationFile": "local:///app.jar",
        "driver": {}, "executor": {"instances": 3},
    });
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).unwrap()
}

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

fn quota(name: &str, hard: &[(&str, &str)], used: &[(&str, &str)]) -> QuotaRoom {
    let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect();
    QuotaRoom {
        name: name.to_owned(),
        namespace: "etl".to_owned(),
        hard: map(hard),
        used: map(used),
    }
}

fn one_core_1408mi() -> ExecutorDemand {
    ExecutorDemand::of(&spec(
        json!({"executor": {"instances": 3, "cores": 1, "memory": "1g"}}),
    ))
}

#[test]
fn an_executor_pod_asks_for_its_cores_and_memory_plus_sparks_overhead() {
    let demand = one_core_1408mi();
    assert_eq!(demand.requests_cpu, q("1"));
    // 1 GiB plus max(10 %, 384 MiB).
    assert_eq!(demand.requests_memory, q("1408Mi"));
    assert_eq!(demand.limits_memory, q("1408Mi"));
    assert_eq!(demand.limits_cpu, None);
    let sized = ExecutorDemand::of(&spec(json!({"executor": {
        "instances": 1, "cores": 4, "coreRequest": "500m", "coreLimit": "2",
        "memory": "8g", "memoryOverhead": "1g", "memoryLimit": "12Gi"}})));
    assert_eq!(sized.requests_cpu, q("500m"));
    assert_eq!(sized.limits_cpu, Some(q("2")));
    assert_eq!(sized.requests_memory, q("9Gi"));
    assert_eq!(sized.limits_memory, q("12Gi"));
    let factor = ExecutorDemand::of(&spec(json!({"memoryOverheadFactor": "0.5",
        "executor": {"instances": 1, "memory": "2g"}})));
    assert_eq!(factor.requests_memory, q("3Gi"));
}

#[test]
fn a_full_pod_count_names_the_quota_the_resource_and_the_executors_missing() {
    let full = quota("compute", &[("pods", "2")], &[("pods", "2")]);
    let shortfall = decide(3, 1, &one_core_1408mi(), &[full]).expect("the quota is full");
    assert_eq!(
        shortfall.message(),
        "2 executors missing: exceeded quota: compute, requested: pods=1, limited: pods=2"
    );
    let count = quota("objects", &[("count/pods", "4")], &[("count/pods", "4")]);
    assert_eq!(
        decide(3, 2, &one_core_1408mi(), &[count]).map(|s| s.message()),
        Some(
            "1 executor missing: exceeded quota: objects, requested: count/pods=1, \
             limited: count/pods=4"
                .to_owned()
        )
    );
}

#[test]
fn memory_and_cpu_compare_one_executors_share_with_what_is_left() {
    let demand = one_core_1408mi();
    // 3Gi - 2Gi = 1Gi left, an executor needs 1408Mi.
    let memory = quota(
        "mem",
        &[("requests.memory", "3Gi")],
        &[("requests.memory", "2Gi")],
    );
    assert_eq!(
        decide(3, 1, &demand, &[memory]).map(|s| s.resource),
        Some("requests.memory".to_owned())
    );
    // 1408Mi left: exactly one more fits.
    let exact = quota("mem", &[("memory", "3456Mi")], &[("memory", "2Gi")]);
    assert_eq!(decide(3, 1, &demand, &[exact]), None);
    let cpu = quota(
        "cpu",
        &[("limits.memory", "10Gi"), ("cpu", "2500m")],
        &[("cpu", "2")],
    );
    assert_eq!(
        decide(3, 1, &demand, &[cpu]).map(|s| s.resource),
        Some("cpu".to_owned())
    );
    // An executor without a CPU limit does not count against limits.cpu.
    let limits = quota("lim", &[("limits.cpu", "1")], &[("limits.cpu", "1")]);
    assert_eq!(decide(3, 1, &demand, &[limits]), None);
}

#[test]
fn no_condition_when_the_executors_are_there_or_no_quota_is_full_on_what_an_executor_uses() {
    let demand = one_core_1408mi();
    let full = quota("compute", &[("pods", "4")], &[("pods", "4")]);
    assert_eq!(decide(3, 3, &demand, std::slice::from_ref(&full)), None);
    assert_eq!(decide(3, 4, &demand, std::slice::from_ref(&full)), None);
    let room = quota("compute", &[("pods", "10")], &[("pods", "4")]);
    assert_eq!(decide(3, 1, &demand, &[room]), None);
    let other = quota(
        "svc",
        &[("services", "1"), ("count/configmaps", "2")],
        &[("services", "1"), ("count/configmaps", "2")],
    );
    assert_eq!(decide(3, 1, &demand, &[other]), None);
    assert_eq!(decide(3, 1, &demand, &[]), None);
}

#[test]
fn dynamic_allocation_expects_its_minimum_and_a_fixed_size_its_instances() {
    assert_eq!(expected_executors(&spec(json!({}))), 3);
    let dynamic = spec(
        json!({"dynamicAllocation": {"enabled": true, "minExecutors": 2,
        "maxExecutors": 10}}),
    );
    assert_eq!(expected_executors(&dynamic), 2);
    let no_minimum = spec(json!({"dynamicAllocation": {"enabled": true}}));
    assert_eq!(expected_executors(&no_minimum), 0);
}

#[test]
fn a_quota_without_a_status_enforces_nothing_yet() {
    let rq: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "compute", "namespace": "etl"},
        "spec": {"hard": {"pods": "2"}}}))
    .unwrap();
    assert_eq!(QuotaRoom::of(&rq), None);
    let rq: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "compute", "namespace": "etl"},
        "spec": {"hard": {"pods": "2"}},
        "status": {"hard": {"pods": "2", "requests.memory": "1.5Gi"}, "used": {"pods": "1"}}}))
    .unwrap();
    let room = QuotaRoom::of(&rq).unwrap();
    assert_eq!(room.hard["requests.memory"], q("1536Mi"));
    assert_eq!(room.used["pods"], q("1"));
}

proptest! {
    /// The condition holds exactly when executors are missing and some resource an executor
    /// counts against has less room than one executor's share.
    #[test]
    fn the_condition_holds_exactly_when_executors_are_missing_and_a_quota_is_full(
        expected in 0u32..6,
        live in 0u32..6,
        hard_pods in 0i64..8,
        used_pods in 0i64..8,
        hard_mib in 0u64..8192,
        used_mib in 0u64..8192,
    ) {
        let demand = one_core_1408mi();
        let quotas = [
            quota("a-pods", &[("pods", &hard_pods.to_string())], &[("pods", &used_pods.to_string())]),
            quota("b-mem", &[("requests.memory", &format!("{hard_mib}Mi"))],
                &[("requests.memory", &format!("{used_mib}Mi"))]),
        ];
        let pods_full = used_pods + 1 > hard_pods;
        let memory_full = used_mib + 1408 > hard_mib;
        let got = decide(expected, live, &demand, &quotas);
        prop_assert_eq!(got.is_some(), live < expected && (pods_full || memory_full));
        if let Some(shortfall) = got {
            prop_assert_eq!(shortfall.missing, expected - live);
            // Quotas are read in name order.
            prop_assert_eq!(shortfall.quota, if pods_full { "a-pods" } else { "b-mem" });
        }
    }
}
