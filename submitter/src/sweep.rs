//! The sweeper: removes ConfigMaps whose driver pod never came, records whose retention window
//! is over, and claims whose driver is gone without a record.
//!
//! A submission creates the ConfigMaps its pod mounts before the pod, without owner, and makes
//! the pod their owner afterwards. A crash, or an ambiguous pod POST whose rollback must leave
//! them (a late pod would mount them), can leave ConfigMaps that nothing will ever collect. The
//! sweeper deletes a ConfigMap when all of these hold:
//! - it carries our submission label and annotation (only ours are watched at all);
//! - it has no `ownerReferences` (an owned one is the garbage collector's business);
//! - it is older than the grace period (default 5 minutes; far longer than any creation, so a
//!   submission running on another replica is never raced);
//! - no pod of the same submission exists in its namespace;
//! - no creation for that submission is running in this replica.
//!
//! Everything is read from the service's watch caches ([`crate::caches`]), never from a periodic
//! LIST; nothing is decided before both have synced. The
//! delete carries the cached uid and resourceVersion as preconditions, so a ConfigMap that
//! gained its owner after the cache saw it (the cache lags) is not deleted.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Preconditions};
use thiserror::Error;
use tracing::{info, warn};

use crate::caches::WatchCaches;
use crate::inflight::InFlight;
use crate::metrics::Metrics;
use crate::record;
use submission::meta::annotations;

/// Default grace period before an ownerless ConfigMap without pod is removed.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// Default pause between two passes over the cache.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// Sweeper settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepConfig {
    pub grace: Duration,
    pub interval: Duration,
    /// Only for retention records that cannot be read: their creation time plus this is their
    /// end (a readable record carries its own `retain_until`).
    pub retention: Duration,
}

impl Default for SweepConfig {
    fn default() -> SweepConfig {
        SweepConfig {
            grace: DEFAULT_GRACE,
            interval: DEFAULT_INTERVAL,
            retention: record::DEFAULT_RETENTION,
        }
    }
}

/// What the sweeper needs to know about one ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub namespace: &'a str,
    pub submission_id: Option<&'a str>,
    pub has_owner: bool,
    pub terminating: bool,
    /// `creationTimestamp`, milliseconds since the epoch.
    pub created_ms: Option<i64>,
}

impl<'a> Candidate<'a> {
    pub fn of(cm: &'a ConfigMap) -> Candidate<'a> {
        let meta = &cm.metadata;
        Candidate {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            submission_id: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::SUBMISSION_ID))
                .map(String::as_str),
            has_owner: meta
                .owner_references
                .as_ref()
                .is_some_and(|o| !o.is_empty()),
            terminating: meta.deletion_timestamp.is_some(),
            created_ms: meta
                .creation_timestamp
                .as_ref()
                .map(|time| time.0.as_millisecond()),
        }
    }
}

/// Whether to delete: see the module documentation. Pure; `pods` holds (namespace, submission
/// id) of every pod of ours, `running` answers for in-flight creations.
pub fn sweepable(
    candidate: &Candidate<'_>,
    pods: &HashSet<(&str, &str)>,
    running: impl Fn(&str, &str) -> bool,
    now_ms: i64,
    grace: Duration,
) -> bool {
    let Some(submission_id) = candidate.submission_id else {
        // Not annotated by us (someone copied our label): not ours to judge.
        return false;
    };
    let Some(created_ms) = candidate.created_ms else {
        return false;
    };
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    !candidate.has_owner
        && !candidate.terminating
        && now_ms.saturating_sub(created_ms) >= grace_ms
        && !pods.contains(&(candidate.namespace, submission_id))
        && !running(candidate.namespace, submission_id)
}

/// Why one deletion failed.
#[derive(Debug, Error)]
pub enum SweepError {
    #[error("cannot delete ConfigMap {namespace}/{name}")]
    DeleteConfigMap {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl SweepError {
    pub fn kind(&self) -> &'static str {
        match self {
            SweepError::DeleteConfigMap { .. } => "delete_config_map",
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One pass over the caches; returns how many ConfigMaps were deleted.
pub async fn sweep_once(
    client: &kube::Client,
    caches: &WatchCaches,
    in_flight: &InFlight,
    metrics: &Metrics,
    grace: Duration,
    retention: Duration,
) -> usize {
    let pods = caches.pods.state();
    let pod_keys: HashSet<(&str, &str)> = pods
        .iter()
        .filter_map(|pod| {
            let meta = &pod.metadata;
            let id = meta.annotations.as_ref()?.get(annotations::SUBMISSION_ID)?;
            Some((meta.namespace.as_deref()?, id.as_str()))
        })
        .collect();
    let now = now_ms();
    let mut deleted = 0;
    let now_ts = k8s_openapi::jiff::Timestamp::now();
    for cm in caches.config_maps.state() {
        if record::is_claim(&cm) {
            // Claims and records have no owner and outlive their pod on purpose. A record is
            // judged by its window; a claim whose driver never ended as a record by the rule of
            // an ownerless ConfigMap, with the driver it names: no pod of its id in its
            // namespace, none being created here, older than the grace period (a failed driver
            // deleted, a creation that never made its pod). Then the id is free again.
            let over = if record::is_reserved(&cm) {
                record::read_claim(&cm).is_some_and(|claim| {
                    let candidate = Candidate {
                        namespace: &claim.namespace,
                        submission_id: Some(&claim.submission_id),
                        ..Candidate::of(&cm)
                    };
                    sweepable(
                        &candidate,
                        &pod_keys,
                        |ns, id| in_flight.contains(ns, id),
                        now,
                        grace,
                    )
                })
            } else {
                record::expired(&cm, now_ts, retention)
            };
            if over {
                match delete(client, &cm).await {
                    Ok(true) => info!(
                        namespace = cm.metadata.namespace.as_deref(),
                        record = cm.metadata.name.as_deref(),
                        "claim or retention window over; deleted"
                    ),
                    Ok(false) => {}
                    Err(error) => {
                        warn!(error = %error, kind = error.kind(), "deleting an expired record failed; next pass retries")
                    }
                }
            }
            continue;
        }
        let candidate = Candidate::of(&cm);
        if !sweepable(
            &candidate,
            &pod_keys,
            |ns, id| in_flight.contains(ns, id),
            now,
            grace,
        ) {
            continue;
        }
        match delete(client, &cm).await {
            Ok(true) => {
                deleted += 1;
                metrics.swept();
                info!(
                    namespace = candidate.namespace,
                    config_map = cm.metadata.name.as_deref(),
                    submission_id = candidate.submission_id,
                    "swept a ConfigMap whose driver pod never came"
                );
            }
            Ok(false) => {}
            Err(error) => {
                warn!(error = %error, kind = error.kind(), "sweeping failed; next pass retries")
            }
        }
    }
    deleted
}

/// Deletes `cm` if it is still the version the cache saw; false if it changed or went.
async fn delete(client: &kube::Client, cm: &ConfigMap) -> Result<bool, SweepError> {
    let namespace = cm.metadata.namespace.clone().unwrap_or_default();
    let name = cm.metadata.name.clone().unwrap_or_default();
    let api = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: cm.metadata.uid.clone(),
            resource_version: cm.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(source) => Err(SweepError::DeleteConfigMap {
            namespace,
            name,
            source,
        }),
    }
}

/// Runs the sweeper until the task is dropped: waits for both caches, then a pass every
/// `config.interval`.
pub async fn run(
    client: kube::Client,
    caches: WatchCaches,
    in_flight: InFlight,
    metrics: Arc<Metrics>,
    config: SweepConfig,
) {
    if caches.ready().await.is_err() {
        warn!("watch caches stopped before syncing; the sweeper does not run");
        return;
    }
    info!(grace_secs = config.grace.as_secs(), "sweeper started");
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweep_once(
            &client,
            &caches,
            &in_flight,
            &metrics,
            config.grace,
            config.retention,
        )
        .await;
        metrics.sweep_pass();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: Option<&'static str>, owner: bool, age_ms: i64) -> Candidate<'static> {
        Candidate {
            namespace: "spark",
            submission_id: id,
            has_owner: owner,
            terminating: false,
            created_ms: Some(1_000_000 - age_ms),
        }
    }

    const GRACE: Duration = Duration::from_secs(300);

    #[test]
    fn ownerless_old_config_map_without_pod_is_swept() {
        let pods = HashSet::new();
        assert!(sweepable(
            &candidate(Some("a"), false, 300_000),
            &pods,
            |_, _| false,
            1_000_000,
            GRACE
        ));
    }

    #[test]
    fn each_condition_alone_keeps_the_config_map() {
        let none = HashSet::new();
        let now = 1_000_000;
        // Owned: the garbage collector's business.
        assert!(!sweepable(
            &candidate(Some("a"), true, 400_000),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Young: its submission may still be creating the pod on another replica.
        assert!(!sweepable(
            &candidate(Some("a"), false, 299_999),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Its pod exists.
        let pods = HashSet::from([("spark", "a")]);
        assert!(!sweepable(
            &candidate(Some("a"), false, 400_000),
            &pods,
            |_, _| false,
            now,
            GRACE
        ));
        // A pod of the same id in another namespace does not count.
        let elsewhere = HashSet::from([("other", "a")]);
        assert!(sweepable(
            &candidate(Some("a"), false, 400_000),
            &elsewhere,
            |_, _| false,
            now,
            GRACE
        ));
        // Being created in this replica right now.
        assert!(!sweepable(
            &candidate(Some("a"), false, 400_000),
            &none,
            |ns, id| (ns, id) == ("spark", "a"),
            now,
            GRACE
        ));
        // Not annotated by us.
        assert!(!sweepable(
            &candidate(None, false, 400_000),
            &none,
            |_, _| false,
            now,
            GRACE
        ));
        // Already going.
        let mut terminating = candidate(Some("a"), false, 400_000);
        terminating.terminating = true;
        assert!(!sweepable(&terminating, &none, |_, _| false, now, GRACE));
    }

    #[test]
    fn zero_grace_sweeps_at_once() {
        let none = HashSet::new();
        assert!(sweepable(
            &candidate(Some("a"), false, 0),
            &none,
            |_, _| false,
            1_000_000,
            Duration::ZERO
        ));
    }
}
