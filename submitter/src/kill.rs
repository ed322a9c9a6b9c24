//! Killing a driver, by submission id or `namespace:pod`: `DELETE …`, what
//! `spark-submit --kill namespace:pod` does, through the service.
//!
//! Spark's kill (`K8SSparkSubmitOperation`) deletes the driver pod, with
//! `spark.kubernetes.appKillPodDeletionGracePeriod` as the grace period when that conf is set on
//! the kill command, else the pod's own; the executors and the driver's other objects go with
//! it by garbage collection. Here `grace_period_seconds` is that conf.
//!
//! The steps: find the driver as a status look-up does (same access rule); refuse a driver a
//! `SparkApplication` owns (its operator would start it again: 409 naming the application);
//! end the id's claim as the kill's record ([`crate::record::for_kill`], [`crate::claim::end`])
//! before the delete, and wait (bounded) for this replica's cache to show it, so the submission
//! is known as killed before its pod can be gone; then delete the pod with its uid as
//! precondition. The answer is the
//! status after the kill: `phase: Failed`, `reason: Killed`.
//!
//! Decided: a kill is idempotent (a second one answers the same status, and deletes again if
//! the pod is still there: a crash between record and delete is repaired by the repeat); a
//! driver that already finished (its container terminated) is not deleted and is answered as it
//! is, since there is nothing to stop and its pod holds its log; a driver known only from its
//! record is answered from it. A killed submission stays killed: its record binds the id, so a
//! repeated POST answers the killed driver (200 `duplicate_submission`) and creates nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use thiserror::Error;
use tracing::info;

use crate::claim::{self, Ended};
use crate::fairness::charged_identity;
use crate::kube_api::CallError;
use crate::record::{self, Outcome, Record};
use crate::state::AppState;
use crate::status::{Located, LookupError, locate};
use crate::tls::PeerIdentity;
use submission::api::{DriverPhase, DriverStatus, KillQuery, QueryError, Target};
use submission::driver::observe_driver;

/// The `kind` of the owner the operator gives its drivers.
const SPARK_APPLICATION: &str = "SparkApplication";

/// Why a driver was not killed.
#[derive(Debug, Error)]
pub enum KillError {
    #[error("invalid kill options")]
    Options(#[source] QueryError),
    #[error("the driver could not be found")]
    Locate(#[source] LookupError),
    #[error(
        "driver {namespace}:{pod} belongs to SparkApplication {namespace}/{application}, whose \
         operator would start it again; delete or suspend the application instead"
    )]
    OwnedByApplication {
        namespace: String,
        pod: String,
        application: String,
    },
    #[error("the kill of {namespace}:{pod} could not be recorded")]
    WriteRecord {
        namespace: String,
        pod: String,
        #[source]
        source: CallError,
    },
    #[error("the kill of {namespace}:{pod} cannot be recorded: its id is claimed otherwise")]
    Unrecordable { namespace: String, pod: String },
    #[error("the driver pod {namespace}:{pod} could not be deleted")]
    DeletePod {
        namespace: String,
        pod: String,
        #[source]
        source: CallError,
    },
}

impl KillError {
    pub fn kind(&self) -> &'static str {
        match self {
            KillError::Options(_) => "options",
            KillError::Locate(error) => error.kind(),
            KillError::OwnedByApplication { .. } => "owned_by_application",
            KillError::WriteRecord { .. } => "write_record",
            KillError::Unrecordable { .. } => "unrecordable",
            KillError::DeletePod { .. } => "delete_pod",
        }
    }
}

/// Kills the driver `target` names, for `peer`; its status after the kill.
pub async fn kill(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    target: &Target,
    query: &KillQuery,
) -> Result<DriverStatus, KillError> {
    query.check().map_err(KillError::Options)?;
    let located = locate(state, peer, target)
        .await
        .map_err(KillError::Locate)?;
    let Located::Pod { pod, killed } = located else {
        // Gone, known from its record (a success, or an earlier kill): nothing left to stop.
        return Ok(located.status());
    };
    let status = Located::Pod {
        pod: pod.clone(),
        killed: killed.clone(),
    }
    .status();
    if let Some(application) = owning_application(&pod) {
        return Err(KillError::OwnedByApplication {
            namespace: status.namespace,
            pod: status.driver_pod_name,
            application: application.to_owned(),
        });
    }
    let record = match killed {
        Some(record) => record,
        None if finished(&pod) => return Ok(status),
        None => match record_kill(state, &pod).await? {
            Recorded::Killed { record, first } => {
                if first {
                    state.metrics.kill();
                }
                info!(namespace = %status.namespace, pod = %status.driver_pod_name,
                    identity = %charged_identity(peer), grace_period_seconds = query.grace_period_seconds,
                    "killing a driver");
                record
            }
            Recorded::Succeeded => return Ok(located_status(&pod, None)),
        },
    };
    let grace = query
        .grace_period_seconds
        .map(|seconds| u32::try_from(seconds).unwrap_or(u32::MAX));
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    state
        .kube
        .delete_pod(&status.namespace, &status.driver_pod_name, uid, grace)
        .await
        .map_err(|source| KillError::DeletePod {
            namespace: status.namespace.clone(),
            pod: status.driver_pod_name.clone(),
            source,
        })?;
    Ok(located_status(&pod, Some(record)))
}

fn located_status(pod: &Arc<Pod>, killed: Option<Record>) -> DriverStatus {
    Located::Pod {
        pod: pod.clone(),
        killed,
    }
    .status()
}

/// The `SparkApplication` among the pod's owners, by name.
fn owning_application(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.kind == SPARK_APPLICATION)
        .map(|owner| owner.name.as_str())
}

/// Whether the driver container has already ended, one way or the other.
fn finished(pod: &Pod) -> bool {
    matches!(
        observe_driver(pod).phase,
        DriverPhase::Succeeded | DriverPhase::Failed
    )
}

/// What recording a kill found.
enum Recorded {
    /// The kill's record: this kill's (`first`), or a concurrent one's.
    Killed { record: Record, first: bool },
    /// The driver's success was retained meanwhile: nothing to stop.
    Succeeded,
}

/// Ends the id's claim as the kill's record (or finds the one a concurrent kill wrote) and
/// waits, bounded, for this replica's cache to show it ended.
async fn record_kill(state: &AppState, pod: &Pod) -> Result<Recorded, KillError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let Some(record) = record::for_kill(pod, Timestamp::now(), state.retention) else {
        // Only pods of ours are located, and ours carry everything a record needs.
        return Err(KillError::Unrecordable {
            namespace,
            pod: name,
        });
    };
    let home = &state.record_namespace;
    let claim_name = record::claim_name(&record.submission_id);
    let ended = claim::end(&state.kube, state.synced_caches(), home, &record)
        .await
        .map_err(|source| KillError::WriteRecord {
            namespace: namespace.clone(),
            pod: name.clone(),
            source,
        })?;
    let recorded = match ended {
        Ended::Written => Recorded::Killed {
            record,
            first: true,
        },
        Ended::Already(existing) if existing.outcome == Outcome::Succeeded => {
            return Ok(Recorded::Succeeded);
        }
        Ended::Already(existing) => Recorded::Killed {
            record: *existing,
            first: false,
        },
        Ended::Other => {
            return Err(KillError::Unrecordable {
                namespace,
                pod: name,
            });
        }
    };
    if let Some(caches) = state.synced_caches() {
        let deadline = tokio::time::Instant::now() + state.cache_catch_up;
        caches
            .wait_until(deadline, |caches| {
                caches
                    .config_map(home, &claim_name)
                    .is_some_and(|cm| record::is_record(&cm))
            })
            .await;
    }
    Ok(recorded)
}
