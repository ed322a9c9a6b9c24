//! The invariants and their tally: every check counted, every violation kept with what was seen.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use submitter_client::SubmitError;

/// Never two live drivers for one submission id or one application epoch.
pub const ONE_LIVE_DRIVER: &str = "one_live_driver";
/// Every answer for one submission id names the same driver pod.
pub const ONE_DRIVER_PER_SUBMISSION: &str = "one_driver_per_submission";
/// No object of ours without a live owner after the sweep window.
pub const NO_ORPHANS: &str = "no_orphans";
/// No progress write accepted from a stale epoch: each stage's output published once.
pub const NO_STALE_EPOCH_WRITE: &str = "no_stale_epoch_write";
/// Every application ends terminal (Always excepted), consistent with its driver's exit.
pub const TERMINAL_AND_CONSISTENT: &str = "terminal_and_consistent";
/// Every REST answer per the contract: 5xx only as a retryable 500/503 with the envelope.
pub const REST_CONTRACT: &str = "rest_contract";

/// Every invariant, for the report.
pub const ALL: [&str; 6] = [
    ONE_LIVE_DRIVER,
    ONE_DRIVER_PER_SUBMISSION,
    NO_ORPHANS,
    NO_STALE_EPOCH_WRITE,
    TERMINAL_AND_CONSISTENT,
    REST_CONTRACT,
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
        self.with(|c| *c.operations.entry(name.to_owned()).or_default() += 1);
    }

    /// Adds `n` to an operation's count.
    pub fn operations(&self, name: &str, n: u64) {
        self.with(|c| *c.operations.entry(name.to_owned()).or_default() += n);
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

    pub fn violations(&self) -> Vec<Violation> {
        self.with(|c| c.violations.clone())
    }

    /// `{operations, checks, violations}` for the report.
    pub fn to_json(&self) -> Value {
        self.with(|c| {
            let checks: BTreeMap<&str, u64> = ALL
                .iter()
                .map(|name| (*name, c.checks.get(name).copied().unwrap_or(0)))
                .collect();
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
fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending" | "Running") | None
        )
}

/// Live drivers grouped by submission id and by (application, epoch); more than one in a group
/// is a violation, one per group found.
pub fn two_live_drivers(drivers: &[Pod]) -> Vec<String> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in drivers.iter().filter(|p| live(p)) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        if let Some(id) = annotations.get(submission::meta::annotations::SUBMISSION_ID) {
            by_key
                .entry(format!("submission id {id}"))
                .or_default()
                .push(name.clone());
        }
        if let (Some(app), Some(epoch)) = (
            labels.get(operator::labels::APP_NAME),
            labels.get(operator::labels::RECOVERY_EPOCH),
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
        if let Some(epoch) = epoch {
            labels.insert(operator::labels::APP_NAME.into(), json!("app"));
            labels.insert(operator::labels::RECOVERY_EPOCH.into(), json!(epoch));
        }
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {submission::meta::annotations::SUBMISSION_ID: id},
            },
            "status": {"phase": phase},
        }))
        .unwrap()
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
            ["submission id s9: live drivers [\"x\", \"y\"]"]
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
}
