//! The operator's Prometheus metrics: one registry, label values from fixed sets only (states,
//! outcomes, error kinds, resource names), never from object names.

use std::sync::Mutex;
use std::time::Duration;

use kube_runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::crd::{ApplicationStateType, SparkApplication};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: &'static str,
}

/// Every state, so that a state with no app reads 0 rather than disappearing.
const STATES: [ApplicationStateType; 14] = [
    ApplicationStateType::New,
    ApplicationStateType::Submitted,
    ApplicationStateType::Running,
    ApplicationStateType::Completed,
    ApplicationStateType::Failed,
    ApplicationStateType::SubmissionFailed,
    ApplicationStateType::PendingRerun,
    ApplicationStateType::Invalidating,
    ApplicationStateType::Succeeding,
    ApplicationStateType::Failing,
    ApplicationStateType::Suspending,
    ApplicationStateType::Suspended,
    ApplicationStateType::Resuming,
    ApplicationStateType::Unknown,
];

/// Submission outcomes, the `outcome` label of `submissions`.
pub mod outcome {
    pub const CREATED: &str = "created";
    pub const DUPLICATE: &str = "duplicate";
    pub const REJECTED: &str = "rejected";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const QUOTA_EXCEEDED: &str = "quota_exceeded";
}

/// Every metric of `operator run`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    applications: Family<StateLabels, Gauge>,
    submissions: Family<OutcomeLabels, Counter>,
    retries: Family<KindLabels, Counter>,
    reconcile_errors: Family<KindLabels, Counter>,
    reconcile_duration: Histogram,
    watch_restarts: Family<ResourceLabels, Counter>,
    /// The app cache, read at scrape time for the by-state gauge (no per-event bookkeeping).
    apps: Mutex<Vec<Store<SparkApplication>>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("spark_operator");
        let applications = Family::<StateLabels, Gauge>::default();
        registry.register(
            "applications",
            "SparkApplications in the cache, by state",
            applications.clone(),
        );
        let submissions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "submissions",
            "Submissions sent to the submitter, by outcome",
            submissions.clone(),
        );
        let retries = Family::<KindLabels, Counter>::default();
        registry.register(
            "retries",
            "Reruns (kind=run) and repeated submissions of a run (kind=submission)",
            retries.clone(),
        );
        let reconcile_errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Failed reconciles, by error kind",
            reconcile_errors.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took, its submission included",
            reconcile_duration.clone(),
        );
        let watch_restarts = Family::<ResourceLabels, Counter>::default();
        registry.register(
            "watch_restarts",
            "Times a watch went down after being up, by resource",
            watch_restarts.clone(),
        );
        Metrics {
            registry,
            applications,
            submissions,
            retries,
            reconcile_errors,
            reconcile_duration,
            watch_restarts,
            apps: Mutex::new(Vec::new()),
        }
    }

    /// The app caches the by-state gauge is computed from (one per namespace watched).
    pub fn set_app_caches(&self, stores: Vec<Store<SparkApplication>>) {
        *self
            .apps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stores;
    }

    pub fn submission(&self, outcome: &'static str) {
        self.submissions
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// `kind`: `run` or `submission`.
    pub fn retry(&self, kind: &'static str) {
        self.retries.get_or_create(&KindLabels { kind }).inc();
    }

    pub fn reconcile_error(&self, kind: &'static str) {
        self.reconcile_errors
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    pub fn reconciled(&self, took: Duration) {
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    pub fn watch_restart(&self, resource: &'static str) {
        self.watch_restarts
            .get_or_create(&ResourceLabels { resource })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let stores = self
            .apps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if !stores.is_empty() {
            let apps: Vec<_> = stores.iter().flat_map(Store::state).collect();
            for state in STATES {
                let count = apps
                    .iter()
                    .filter(|app| {
                        app.status
                            .as_ref()
                            .map(|s| s.app_state.state)
                            .unwrap_or_default()
                            == state
                    })
                    .count();
                self.applications
                    .get_or_create(&StateLabels {
                        state: state.as_str(),
                    })
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_bounded_labels() {
        let metrics = Metrics::new();
        metrics.submission(outcome::CREATED);
        metrics.retry("run");
        metrics.watch_restart("pods");
        metrics.reconciled(Duration::from_millis(3));
        let text = metrics.encode();
        assert!(text.contains("spark_operator_submissions_total{outcome=\"created\"} 1"));
        assert!(text.contains("spark_operator_retries_total{kind=\"run\"} 1"));
        assert!(text.contains("spark_operator_watch_restarts_total{resource=\"pods\"} 1"));
        assert!(text.contains("spark_operator_reconcile_duration_seconds_count 1"));
    }
}
