//! Claims and retention records: one small ConfigMap per submission id, in the submitter's own
//! namespace, that binds the id to its driver from before the driver exists until the end of
//! the retention window.
//!
//! - A **claim** (`spark-submitter.io/record=reserved`) is written by the first creator of a
//!   submission id, before any driver object, and names the driver (namespace, pod) it binds
//!   the id to. Its name is a digest of the submission id alone, so across namespaces, replicas
//!   and restarts only one creation can win it (`AlreadyExists` for the others): one id, one
//!   driver, whatever the race.
//! - When the driver ends, the same object becomes its **retention record**, written once more:
//!   "this driver succeeded" (when the watch cache sees the driver container exit 0) or "this
//!   driver was killed" (by a kill, before the pod is deleted), with `retain_until`. Drivers made
//!   before claims existed get a record of the same name then.
//!
//! Why records: Kubernetes forgets a deleted pod at once, so a succeeded-then-collected driver
//! looks exactly like a lost one, and a client that reconnects late would resubmit finished work
//! (the seed's "NotFound → resubmit" row). Claims and records live in Kubernetes, not on a
//! replica's disk, so every replica and every restart sees them; they have **no**
//! ownerReference to the pod, so garbage collection of the pod leaves them. The sweeper deletes
//! a record once `retain_until` has passed, and a claim whose driver pod is gone and never
//! ended as a record (a failed driver deleted, a creation that never made its pod) after its
//! grace period.
//!
//! Where: in the submitter's own namespace (`--record-namespace`, by default the namespace the
//! service runs in), never in the users' namespaces, where one object per run would clutter
//! `kubectl get cm` and count against their quotas. One is a few hundred bytes of data. Its
//! labels select it by submission id and by driver (`namespace/pod`), so a look-up that misses
//! the cache finds it with one labelled LIST. Records of earlier versions (named by namespace
//! and id, possibly in the users' namespaces) are still read and still swept.
//!
//! Pure: building, reading and judging claims and records; the service does the I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ObjectMeta;
use sha2::{Digest, Sha256};

use submission::api::{DriverIdentity, DriverPhase, DriverStatus};
use submission::driver::{DriverObservation, observe_driver};
use submission::meta::{annotations, labels};
use submission::naming::SubmissionId;

/// Name prefix of claims and the records they become; the rest is a digest of the submission
/// id alone.
pub const NAME_PREFIX: &str = "spark-submitter-id-";

/// Default time a record outlives its driver's success.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// Keys of the record's data.
mod keys {
    pub const SUBMISSION_ID: &str = "submission_id";
    pub const NAMESPACE: &str = "namespace";
    pub const POD: &str = "pod";
    pub const UID: &str = "uid";
    pub const SPARK_APP_ID: &str = "spark_app_id";
    pub const CREATED_AT: &str = "created_at";
    pub const FINISHED_AT: &str = "finished_at";
    pub const RETAIN_UNTIL: &str = "retain_until";
    pub const OUTCOME: &str = "outcome";
}

/// How the retained driver ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its driver container exited 0.
    Succeeded,
    /// It was killed through the submitter (`DELETE`); `finished_at` is the kill's time.
    Killed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Killed => "killed",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Outcome::Succeeded => labels::RECORD_DRIVER_SUCCEEDED,
            Outcome::Killed => labels::RECORD_DRIVER_KILLED,
        }
    }
}

/// The `reason` of a killed driver's status.
pub const KILLED_REASON: &str = "Killed";

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub submission_id: String,
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub spark_app_id: String,
    /// When the driver pod was created (its `creationTimestamp`): the submission's
    /// `submitted_at`. Records written before this was kept have none.
    pub created_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    pub retain_until: Timestamp,
    pub outcome: Outcome,
}

/// 40 hex digits of SHA-256 over `parts` (NUL-separated: names and ids hold no control
/// characters, so different splits never collide).
fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    submission::naming::hex(&hasher.finalize()[..20])
}

/// The object name of the claim (and record) of `submission_id`, in whichever namespace its
/// driver runs: one name per id.
pub fn claim_name(submission_id: &str) -> String {
    format!("{NAME_PREFIX}{}", digest(&[submission_id]))
}

/// A submission id bound to its driver: what a claim says, and every record too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub submission_id: String,
    pub namespace: String,
    pub pod: String,
}

impl Claim {
    /// Whether it binds the id to the driver `namespace:pod`.
    pub fn names(&self, namespace: &str, pod: &str) -> bool {
        self.namespace == namespace && self.pod == pod
    }
}

/// The claim of `id` for its driver `namespace:pod`, in `home`: written before any driver
/// object, our labels and annotation, without ownerReferences (no garbage collection takes it),
/// and not immutable (it becomes the driver's record).
pub fn claim(id: &SubmissionId, namespace: &str, pod: &str, home: &str) -> (Claim, ConfigMap) {
    let claim = Claim {
        submission_id: id.as_str().to_owned(),
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
    };
    let object = ConfigMap {
        metadata: metadata(id, &claim, home, labels::RECORD_RESERVED),
        data: Some(BTreeMap::from([
            (keys::SUBMISSION_ID.to_owned(), claim.submission_id.clone()),
            (keys::NAMESPACE.to_owned(), claim.namespace.clone()),
            (keys::POD.to_owned(), claim.pod.clone()),
        ])),
        ..ConfigMap::default()
    };
    (claim, object)
}

/// The metadata of a claim or record of `claim` in `home`, with `state` as its record label.
fn metadata(id: &SubmissionId, claim: &Claim, home: &str, state: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(claim_name(&claim.submission_id)),
        namespace: Some(home.to_owned()),
        labels: Some(BTreeMap::from([
            (labels::SUBMISSION_ID_HASH.to_owned(), id.label_value()),
            (labels::RECORD.to_owned(), state.to_owned()),
            (
                labels::RECORD_DRIVER_HASH.to_owned(),
                driver_label(&claim.namespace, &claim.pod),
            ),
        ])),
        annotations: Some(BTreeMap::from([(
            annotations::SUBMISSION_ID.to_owned(),
            claim.submission_id.clone(),
        )])),
        ..ObjectMeta::default()
    }
}

/// What a claim or record binds: its id and driver (`None`: not one of ours, or unreadable).
pub fn read_claim(cm: &ConfigMap) -> Option<Claim> {
    if !is_claim(cm) {
        return None;
    }
    let data = cm.data.as_ref()?;
    Some(Claim {
        submission_id: data.get(keys::SUBMISSION_ID)?.clone(),
        namespace: data.get(keys::NAMESPACE)?.clone(),
        pod: data.get(keys::POD)?.clone(),
    })
}

/// Whether a ConfigMap is a claim or a record (by our label, not by its name).
pub fn is_claim(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(labels::RECORD))
}

/// Whether a ConfigMap is a claim whose driver has not ended as a record.
pub fn is_reserved(cm: &ConfigMap) -> bool {
    record_label(cm) == Some(labels::RECORD_RESERVED)
}

fn record_label(cm: &ConfigMap) -> Option<&str> {
    cm.metadata
        .labels
        .as_ref()?
        .get(labels::RECORD)
        .map(String::as_str)
}

/// `record` written over the claim `existing` (its name, namespace and resourceVersion, so the
/// write is an update that fails if the claim changed meanwhile).
pub fn over_claim(existing: &ConfigMap, record: &Record) -> Option<ConfigMap> {
    let home = existing.metadata.namespace.as_deref()?;
    let mut cm = build(record, home)?;
    cm.metadata.name.clone_from(&existing.metadata.name);
    cm.metadata
        .resource_version
        .clone_from(&existing.metadata.resource_version);
    Some(cm)
}

/// The value of the record's driver label, [`labels::RECORD_DRIVER_HASH`].
pub fn driver_label(namespace: &str, pod: &str) -> String {
    digest(&[namespace, pod])
}

/// Whether a ConfigMap is a retention record: a claim whose driver ended (by our label, not by
/// its name: names can be taken).
pub fn is_record(cm: &ConfigMap) -> bool {
    matches!(
        record_label(cm),
        Some(labels::RECORD_DRIVER_SUCCEEDED | labels::RECORD_DRIVER_KILLED)
    )
}

/// The keys a record is indexed under: its submission id and its pod.
pub fn index_keys(cm: &ConfigMap) -> Vec<String> {
    match read(cm) {
        Some(record) => vec![
            submission_key(&record.submission_id),
            pod_key(&record.namespace, &record.pod),
        ],
        None => Vec::new(),
    }
}

/// Index key of a submission id.
pub fn submission_key(submission_id: &str) -> String {
    format!("id:{submission_id}")
}

/// Index key of a driver pod.
pub fn pod_key(namespace: &str, pod: &str) -> String {
    format!("pod:{namespace}/{pod}")
}

/// Reads a record back (`None`: not a record, or one we cannot read, which is then ignored).
pub fn read(cm: &ConfigMap) -> Option<Record> {
    if !is_record(cm) {
        return None;
    }
    let data = cm.data.as_ref()?;
    let text = |key: &str| data.get(key).cloned();
    let time = |key: &str| data.get(key)?.parse::<Timestamp>().ok();
    Some(Record {
        submission_id: text(keys::SUBMISSION_ID)?,
        namespace: text(keys::NAMESPACE)?,
        pod: text(keys::POD)?,
        uid: text(keys::UID).unwrap_or_default(),
        spark_app_id: text(keys::SPARK_APP_ID).unwrap_or_default(),
        created_at: time(keys::CREATED_AT),
        finished_at: time(keys::FINISHED_AT)?,
        retain_until: time(keys::RETAIN_UNTIL)?,
        // Records written before kills existed say nothing: they are successes.
        outcome: match data.get(keys::OUTCOME).map(String::as_str) {
            Some("killed") => Outcome::Killed,
            _ => Outcome::Succeeded,
        },
    })
}

/// Whether the record's window is over at `now` (an unreadable record is judged by its
/// creation time plus `retention`, so it does not stay forever).
pub fn expired(cm: &ConfigMap, now: Timestamp, retention: Duration) -> bool {
    if let Some(record) = read(cm) {
        return record.retain_until <= now;
    }
    cm.metadata
        .creation_timestamp
        .as_ref()
        .and_then(|created| created.0.checked_add(signed(retention)).ok())
        .is_some_and(|until| until <= now)
}

fn signed(duration: Duration) -> SignedDuration {
    SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX)
}

/// The record to write for a driver pod, or `None` when there is nothing to retain: the driver
/// has not succeeded, the pod is not one of our submissions, or the window would already be over
/// at `now` (an old success seen at start-up).
pub fn for_pod(pod: &Pod, now: Timestamp, retention: Duration) -> Option<Record> {
    let observation = observe_driver(pod);
    if observation.phase != DriverPhase::Succeeded {
        return None;
    }
    // The container's finish time when reported, else now: the window starts at the success.
    let finished_at = observation.finished_at.unwrap_or(now);
    let retain_until = finished_at.checked_add(signed(retention)).ok()?;
    if retain_until <= now {
        return None;
    }
    of_pod(pod, finished_at, retain_until, Outcome::Succeeded)
}

/// The record of a kill of `pod` at `now`: the driver stays killed for `retention`, its id bound
/// to it. `None` for a pod that is not one of our submissions.
pub fn for_kill(pod: &Pod, now: Timestamp, retention: Duration) -> Option<Record> {
    let retain_until = now.checked_add(signed(retention)).ok()?;
    of_pod(pod, now, retain_until, Outcome::Killed)
}

/// The record of `pod`, a driver of ours (`None` for one without our annotation).
fn of_pod(
    pod: &Pod,
    finished_at: Timestamp,
    retain_until: Timestamp,
    outcome: Outcome,
) -> Option<Record> {
    let meta = &pod.metadata;
    Some(Record {
        submission_id: meta
            .annotations
            .as_ref()?
            .get(annotations::SUBMISSION_ID)?
            .clone(),
        namespace: meta.namespace.clone()?,
        pod: meta.name.clone()?,
        uid: meta.uid.clone().unwrap_or_default(),
        spark_app_id: spark_app_id(meta),
        created_at: meta.creation_timestamp.as_ref().map(|created| created.0),
        finished_at,
        retain_until,
        outcome,
    })
}

/// The Spark app id a driver pod is labelled with (empty without one).
pub fn spark_app_id(meta: &ObjectMeta) -> String {
    meta.labels
        .as_ref()
        .and_then(|labels| labels.get(labels::SPARK_APP_ID))
        .cloned()
        .unwrap_or_default()
}

/// The ConfigMap of a record, in `home` (the submitter's namespace): the claim of its id in its
/// final state. Our labels and annotation, immutable (nothing follows the end), and
/// deliberately without ownerReferences (the pod's garbage collection must not take it).
pub fn build(record: &Record, home: &str) -> Option<ConfigMap> {
    let id: SubmissionId = record.submission_id.parse().ok()?;
    let mut data = BTreeMap::from([
        (keys::SUBMISSION_ID.to_owned(), record.submission_id.clone()),
        (keys::NAMESPACE.to_owned(), record.namespace.clone()),
        (keys::POD.to_owned(), record.pod.clone()),
        (keys::UID.to_owned(), record.uid.clone()),
        (keys::SPARK_APP_ID.to_owned(), record.spark_app_id.clone()),
        (keys::FINISHED_AT.to_owned(), record.finished_at.to_string()),
        (
            keys::RETAIN_UNTIL.to_owned(),
            record.retain_until.to_string(),
        ),
        (keys::OUTCOME.to_owned(), record.outcome.as_str().to_owned()),
    ]);
    if let Some(created_at) = record.created_at {
        data.insert(keys::CREATED_AT.to_owned(), created_at.to_string());
    }
    let claim = Claim {
        submission_id: record.submission_id.clone(),
        namespace: record.namespace.clone(),
        pod: record.pod.clone(),
    };
    Some(ConfigMap {
        metadata: metadata(&id, &claim, home, record.outcome.label()),
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    })
}

/// When the retained driver was submitted, as the contract's `submitted_at` shows it (RFC 3339
/// in UTC to the second, like a `creationTimestamp`): its pod's creation, or for a record that
/// did not keep it, its finish.
pub fn submitted_at(record: &Record) -> String {
    record
        .created_at
        .unwrap_or(record.finished_at)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The status answer from a record: a retained success (the pod is gone), or a kill (whether
/// or not the pod is still going; a kill is the last word on its driver).
pub fn status(record: &Record) -> DriverStatus {
    let identity = DriverIdentity {
        submission_id: Some(record.submission_id.clone()),
        namespace: record.namespace.clone(),
        driver_pod_name: record.pod.clone(),
        driver_pod_uid: record.uid.clone(),
        spark_app_id: record.spark_app_id.clone(),
    };
    let (mut status, reason, message) = match record.outcome {
        Outcome::Succeeded => (
            DriverStatus::new(identity, DriverObservation::absent(true)),
            "SucceededAndRetained",
            format!(
                "the driver pod is gone; its success is retained until {}",
                record.retain_until
            ),
        ),
        Outcome::Killed => {
            let mut killed = DriverObservation::absent(false);
            killed.phase = DriverPhase::Failed;
            (
                DriverStatus::new(identity, killed),
                KILLED_REASON,
                format!(
                    "the driver was killed through the submitter at {}; its submission id stays \
                     bound to it until {}",
                    record.finished_at, record.retain_until
                ),
            )
        }
    };
    status.reason = Some(reason.into());
    status.message = Some(message);
    status.finished_at = Some(record.finished_at.to_string());
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use submission::api::ClientAction;
    use submission::meta::containers::DRIVER as DRIVER_CONTAINER_NAME;

    const HOUR: Duration = Duration::from_secs(3600);

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn pod(exit_code: Option<i64>) -> Pod {
        serde_json::from_value(pod_json(exit_code)).unwrap()
    }

    fn pod_json(exit_code: Option<i64>) -> serde_json::Value {
        let state = match exit_code {
            Some(code) => {
                json!({"terminated": {"exitCode": code, "finishedAt": "2026-01-01T00:10:00Z"}})
            }
            None => json!({"running": {}}),
        };
        json!({
            "metadata": {"name": "pi-driver", "namespace": "spark", "uid": "u-1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"spark-app-selector": "spark-1"},
                "annotations": {"spark-submitter.io/submission-id": "sub-1"}},
            "spec": {"containers": [{"name": DRIVER_CONTAINER_NAME}, {"name": "sidecar"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": DRIVER_CONTAINER_NAME, "state": state, "image": "i", "imageID": "",
                 "ready": false, "restartCount": 0},
                {"name": "sidecar", "state": {"running": {}}, "image": "i", "imageID": "",
                 "ready": true, "restartCount": 0}]}
        })
    }

    #[test]
    fn succeeded_driver_gets_a_record_that_reads_back() {
        let now = at("2026-01-01T00:11:00Z");
        let record = for_pod(&pod(Some(0)), now, HOUR).unwrap();
        assert_eq!(record.finished_at, at("2026-01-01T00:10:00Z"));
        assert_eq!(submitted_at(&record), "2026-01-01T00:00:00Z");
        assert_eq!(record.retain_until, at("2026-01-01T01:10:00Z"));
        let cm = build(&record, "spark-system").unwrap();
        assert_eq!(cm.metadata.name, Some(claim_name("sub-1")));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("spark-system"));
        assert_eq!(
            cm.metadata.labels.as_ref().unwrap()[labels::RECORD_DRIVER_HASH],
            driver_label("spark", "pi-driver")
        );
        assert!(
            cm.metadata.owner_references.is_none(),
            "GC must not take it"
        );
        assert!(is_record(&cm));
        assert_eq!(read(&cm), Some(record.clone()));
        assert_eq!(
            index_keys(&cm),
            [submission_key("sub-1"), pod_key("spark", "pi-driver")]
        );
        let status = status(&record);
        assert_eq!(status.phase, DriverPhase::Succeeded);
        assert_eq!(status.action, ClientAction::Done);
        assert_eq!(status.pod_phase, None);
    }

    #[test]
    fn no_record_for_running_failed_foreign_or_long_finished_drivers() {
        let now = at("2026-01-01T00:11:00Z");
        assert_eq!(for_pod(&pod(None), now, HOUR), None);
        assert_eq!(for_pod(&pod(Some(1)), now, HOUR), None);
        let mut foreign = pod(Some(0));
        foreign.metadata.annotations = None;
        assert_eq!(for_pod(&foreign, now, HOUR), None);
        assert_eq!(
            for_pod(&pod(Some(0)), at("2026-01-02T00:00:00Z"), HOUR),
            None
        );
    }

    #[test]
    fn a_kill_is_recorded_as_killed_and_reads_back_as_a_failed_driver() {
        let now = at("2026-01-01T00:05:00Z");
        let record = for_kill(&pod(None), now, HOUR).unwrap();
        assert_eq!(record.outcome, Outcome::Killed);
        assert_eq!(record.retain_until, at("2026-01-01T01:05:00Z"));
        let cm = build(&record, "spark-system").unwrap();
        assert_eq!(
            cm.metadata.labels.as_ref().unwrap()[labels::RECORD],
            labels::RECORD_DRIVER_KILLED
        );
        assert!(is_record(&cm));
        assert_eq!(read(&cm), Some(record.clone()));
        let status = status(&record);
        assert_eq!(status.phase, DriverPhase::Failed);
        assert_eq!(status.reason.as_deref(), Some(KILLED_REASON));
        assert_eq!(status.finished_at.as_deref(), Some("2026-01-01T00:05:00Z"));
        // A record of a version before kills says nothing of its outcome: a success.
        let mut old = cm.clone();
        old.data.as_mut().unwrap().remove("outcome");
        assert_eq!(read(&old).unwrap().outcome, Outcome::Succeeded);
    }

    #[test]
    fn expiry_follows_retain_until() {
        let record = for_pod(&pod(Some(0)), at("2026-01-01T00:11:00Z"), HOUR).unwrap();
        let cm = build(&record, "spark-system").unwrap();
        assert!(!expired(&cm, at("2026-01-01T01:09:59Z"), HOUR));
        assert!(expired(&cm, at("2026-01-01T01:10:00Z"), HOUR));
        let mut plain = cm.clone();
        plain.metadata.labels = None;
        assert!(!is_record(&plain));
        assert_eq!(read(&plain), None);
    }
}
