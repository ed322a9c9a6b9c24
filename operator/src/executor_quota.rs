//! Executors a ResourceQuota keeps out (pure): from the namespace's quotas (`status.hard` against
//! `status.used`, as the API server keeps them) and what one executor pod asks for, whether the
//! executors an application is missing are missing because a quota is full, for the condition
//! `ExecutorsPendingQuota`.
//!
//! Spark's driver creates its executor pods itself; a refused create leaves no pod and no event,
//! so the quota's own status is the one signal the operator can read (docs/operator.md,
//! "Executors a quota keeps out").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceQuota;
use submission::quantity::Quantity;

use crate::crd::{ExecutorState, SparkApplicationSpec};

/// The condition's type.
pub const CONDITION_TYPE: &str = "ExecutorsPendingQuota";

/// The condition's reason, as the API server's refusal says it (`exceeded quota`).
pub const REASON: &str = "ExceededQuota";

/// Spark's minimum executor memory overhead, MiB (`spark.executor.memoryOverhead` unset).
const MIN_OVERHEAD_MIB: u64 = 384;

/// Spark's default executor memory overhead factor.
const DEFAULT_OVERHEAD_FACTOR: f64 = 0.1;

/// A ResourceQuota as the decision reads it: its name and, per resource, the room left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRoom {
    pub name: String,
    pub namespace: String,
    /// `status.hard`, per resource.
    pub hard: BTreeMap<String, Quantity>,
    /// `status.used`, per resource (absent: nothing used yet).
    pub used: BTreeMap<String, Quantity>,
}

impl QuotaRoom {
    /// The quota's enforced limits and usage from its status; `None` until the quota controller
    /// has written one (the API server enforces nothing before that either). Values that are
    /// not quantities are skipped.
    pub fn of(quota: &ResourceQuota) -> Option<QuotaRoom> {
        let status = quota.status.as_ref()?;
        let parse = |map: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            map.into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(&v.0).ok()?)))
                .collect::<BTreeMap<_, _>>()
        };
        Some(QuotaRoom {
            name: quota.metadata.name.clone()?,
            namespace: quota.metadata.namespace.clone()?,
            hard: parse(status.hard.as_ref()),
            used: parse(status.used.as_ref()),
        })
    }
}

/// What one executor pod counts against a quota: its container's requests and limits as Spark
/// sets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorDemand {
    pub requests_cpu: Quantity,
    pub requests_memory: Quantity,
    /// `None`: the executor sets no CPU limit.
    pub limits_cpu: Option<Quantity>,
    pub limits_memory: Quantity,
}

impl ExecutorDemand {
    /// An executor pod of `spec` (defaulted): CPU request `executor.coreRequest` or
    /// `executor.cores`, CPU limit `executor.coreLimit`, memory `executor.memory` plus the
    /// overhead (`executor.memoryOverhead`, or `memoryOverheadFactor` × memory, at least
    /// 384 MiB), memory limit `executor.memoryLimit` or the request. What cannot be read counts
    /// as Spark's default (1 core, 1 GiB).
    pub fn of(spec: &SparkApplicationSpec) -> ExecutorDemand {
        let pod = &spec.executor.pod;
        let requests_cpu = spec
            .executor
            .core_request
            .as_deref()
            .and_then(|q| Quantity::parse(q).ok())
            .unwrap_or_else(|| Quantity::units(i64::from(pod.cores.unwrap_or(1))));
        let memory_mib = pod
            .memory
            .as_deref()
            .and_then(|m| submission::size::to_mib(m).ok())
            .unwrap_or(1024);
        let factor = spec
            .memory_overhead_factor
            .as_deref()
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(DEFAULT_OVERHEAD_FACTOR);
        let overhead_mib = pod
            .memory_overhead
            .as_deref()
            .and_then(|m| submission::size::to_mib(m).ok())
            .unwrap_or_else(|| {
                // Spark: max(factor × memory, 384 MiB), truncated to whole MiB.
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss,
                    reason = "MiB of a pod fit an f64 exactly; Spark truncates the same way"
                )]
                let scaled = (factor * memory_mib as f64) as u64;
                scaled.max(MIN_OVERHEAD_MIB)
            });
        let mib = |n: u64| Quantity::parse(&format!("{n}Mi")).unwrap_or(Quantity::ZERO);
        let requests_memory = mib(memory_mib.saturating_add(overhead_mib));
        ExecutorDemand {
            requests_cpu,
            limits_cpu: pod
                .core_limit
                .as_deref()
                .and_then(|q| Quantity::parse(q).ok()),
            limits_memory: pod
                .memory_limit
                .as_deref()
                .and_then(|q| Quantity::parse(q).ok())
                .unwrap_or(requests_memory),
            requests_memory,
        }
    }

    /// What one executor pod adds to the quota's `resource`; `None`: the resource does not
    /// count executor pods (`services`, `count/configmaps`, ...), or the pod sets no such limit.
    fn counts_against(&self, resource: &str) -> Option<Quantity> {
        match resource {
            "pods" | "count/pods" => Some(Quantity::units(1)),
            "cpu" | "requests.cpu" => Some(self.requests_cpu),
            "memory" | "requests.memory" => Some(self.requests_memory),
            "limits.cpu" => self.limits_cpu,
            "limits.memory" => Some(self.limits_memory),
            _ => None,
        }
    }
}

/// Executors missing because a quota is full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub quota: String,
    pub resource: String,
    /// Executors asked for and not there.
    pub missing: u32,
    /// `hard` and one executor's share of `resource`, for the message.
    pub hard: Quantity,
    pub requested: Quantity,
}

impl Shortfall {
    /// The condition's message, in the API server's words. Without `used`: it moves with every
    /// pod of the namespace, and each move would be a status write.
    pub fn message(&self) -> String {
        let executors = if self.missing == 1 {
            "executor"
        } else {
            "executors"
        };
        format!(
            "{} {executors} missing: exceeded quota: {}, requested: {}={}, limited: {}={}",
            self.missing, self.quota, self.resource, self.requested, self.resource, self.hard
        )
    }
}

/// How many of `executors` (each its submission id and state) belong to the run
/// `submission_id` and hold their place (and their share of a quota): pending, running or
/// unknown; a pod that finished no longer counts against a quota, and Spark replaces it.
pub fn live_executors<'a>(
    executors: impl IntoIterator<Item = (Option<&'a str>, ExecutorState)>,
    submission_id: &str,
) -> u32 {
    let live = executors
        .into_iter()
        .filter(|(id, state)| {
            *id == Some(submission_id)
                && matches!(
                    state,
                    ExecutorState::Pending | ExecutorState::Running | ExecutorState::Unknown
                )
        })
        .count();
    u32::try_from(live).unwrap_or(u32::MAX)
}

/// How many executors the application should have while its driver runs: `executor.instances`
/// with dynamic allocation off; with it on, `dynamicAllocation.minExecutors` (the number Spark
/// keeps asking for whatever the load; above it, a missing executor may simply not be wanted).
pub fn expected_executors(spec: &SparkApplicationSpec) -> u32 {
    let count = match &spec.dynamic_allocation {
        Some(dynamic) if dynamic.enabled => dynamic.min_executors.unwrap_or(0),
        _ => spec.executor.instances.unwrap_or(0),
    };
    u32::try_from(count).unwrap_or(0)
}

/// Whether `live` executors of `expected` are short because a quota in `quotas` has no room for
/// one more executor pod: the first full quota (by name) and resource (by name), or `None` when
/// every executor is there or every quota has room (then something else holds them: the
/// driver's pace, a node, a scheduler).
pub fn decide(
    expected: u32,
    live: u32,
    demand: &ExecutorDemand,
    quotas: &[QuotaRoom],
) -> Option<Shortfall> {
    let missing = expected.checked_sub(live).filter(|m| *m > 0)?;
    let mut quotas: Vec<&QuotaRoom> = quotas.iter().collect();
    quotas.sort_by(|a, b| a.name.cmp(&b.name));
    quotas.into_iter().find_map(|quota| {
        quota.hard.iter().find_map(|(resource, hard)| {
            let requested = demand.counts_against(resource)?;
            let used = quota.used.get(resource).copied().unwrap_or(Quantity::ZERO);
            (used + requested > *hard).then(|| Shortfall {
                quota: quota.name.clone(),
                resource: resource.clone(),
                missing,
                hard: *hard,
                requested,
            })
        })
    })
}

#[cfg(test)]
mod tests;
