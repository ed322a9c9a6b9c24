//! Following a driver's log through the submitter, as `submitter logs -f` does: read to its
//! end, or hung up mid-way; and what a followed log may hold, judged from its lines alone.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use submission::api::{LogQuery, Target};
use submitter_client::{SubmitError, SubmitterClient};

use super::invariants::{self, Tally};
use super::ledger::Ledger;

/// Whose log it is, as far as its lines can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// kubesim's scripted container named so: `started`, one `running for Ns` a second, then
    /// `exited with code C`, exactly in that order.
    Scripted { container: String },
    /// The sandbox's staged driver of recovery epoch `epoch`: its `key=value` lines, each
    /// naming that epoch, and its own error lines.
    Staged { epoch: String },
}

impl Expected {
    /// What the log of `pod`'s driver container holds: the staged driver's when the pod runs
    /// the sandbox's driver image, else kubesim's scripted container's.
    pub fn of(pod: &Pod) -> Option<Expected> {
        let container = submission::driver::driver_container_name(pod)?.to_owned();
        let image = pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .find(|c| c.name == container)?
            .image
            .clone()
            .unwrap_or_default();
        if image == crate::DRIVER_IMAGE {
            let epoch = pod
                .metadata
                .labels
                .as_ref()?
                .get(operator::labels::RECOVERY_EPOCH)?
                .clone();
            Some(Expected::Staged { epoch })
        } else {
            Some(Expected::Scripted { container })
        }
    }
}

/// How a followed log stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The answer ended as a chunked answer ends: the service says the log is over.
    Ended,
    /// The answer ended and the driver's pod was gone or being deleted (killed through the
    /// API): the log stops where the driver was stopped, without an exit line.
    EndedWithItsPod,
    /// The answer ended without the driver's exit line while the driver's node was cut off
    /// from the API server during the read: the partition's cost, as a real API server that
    /// loses the kubelet ends the stream it relayed (docs/chaos.md).
    EndedInPartition,
    /// The reader hung up after the lines it wanted.
    HungUp,
    /// The connection broke (a submitter killed, a balancer cut).
    Broke(String),
    /// Nothing came for a while after the driver had ended, and the stream stayed open.
    StuckAfterDriverEnded(String),
}

/// What a reader got.
#[derive(Debug)]
pub struct Followed {
    pub lines: Vec<String>,
    pub ending: Ending,
}

/// How long a stream may stay silent before the reader looks at the driver.
const IDLE: Duration = Duration::from_secs(15);
/// How long after its driver's container finished a stream may still be open.
const END_PATIENCE: Duration = Duration::from_secs(20);
/// A reader gives up after this long whatever happens: every load loop is bounded.
const READ_LIMIT: Duration = Duration::from_secs(600);

/// One reader of one driver's log.
#[derive(Debug, Clone)]
pub struct Follow {
    /// What the reader is, for the operation counts (`to_end`, `cut`).
    pub what: &'static str,
    pub target: Target,
    /// The driver's pod, looked at when the stream is silent.
    pub namespace: String,
    pub pod: String,
    pub expected: Expected,
    /// Hang up after this many whole lines; `None`: read to the end.
    pub hang_up_after: Option<usize>,
}

/// Follows the log until it ends or until `hang_up_after` whole lines came; the pod is looked
/// at when the stream is silent, so a stream left open after its driver ended is found rather
/// than waited on forever.
pub async fn follow(
    client: &SubmitterClient,
    kube: &kube::Client,
    reader: &Follow,
) -> Result<Followed, SubmitError> {
    let query = LogQuery {
        follow: Some(true),
        ..LogQuery::default()
    };
    let pod = (reader.namespace.as_str(), reader.pod.as_str());
    let hang_up_after = reader.hang_up_after;
    let mut stream = client.logs(&reader.target, &query).await?;
    let started = Instant::now();
    let mut text: Vec<u8> = Vec::new();
    let mut lines = Vec::new();
    let ending = loop {
        if started.elapsed() > READ_LIMIT {
            break Ending::StuckAfterDriverEnded(format!(
                "still open after {READ_LIMIT:?} (driver: {})",
                driver_end(kube, pod)
                    .await
                    .map_or("not ended".to_owned(), |d| d)
            ));
        }
        match tokio::time::timeout(IDLE, stream.next()).await {
            Ok(Some(Ok(chunk))) => {
                text.extend_from_slice(&chunk);
                while let Some(at) = text.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = text.drain(..=at).collect();
                    lines.push(String::from_utf8_lossy(&line[..at]).into_owned());
                }
                if hang_up_after.is_some_and(|n| lines.len() >= n) {
                    break Ending::HungUp;
                }
            }
            Ok(Some(Err(error))) => break Ending::Broke(error.kind().to_owned()),
            Ok(None) if pod_deleted(kube, pod).await => break Ending::EndedWithItsPod,
            Ok(None) => break Ending::Ended,
            Err(_) => {
                if let Some(ended) = driver_end(kube, pod).await {
                    break Ending::StuckAfterDriverEnded(ended);
                }
            }
        }
    };
    // A partial last line counts as a line: it is what the reader saw.
    if !text.is_empty() {
        lines.push(String::from_utf8_lossy(&text).into_owned());
    }
    Ok(Followed { lines, ending })
}

/// Whether the pod is gone or being deleted, as a user's `kubectl get` would tell after the
/// stream ended. A few tries, as the API may fail on purpose; unknown counts as not deleted, so
/// the log is judged strictly.
async fn pod_deleted(kube: &kube::Client, (namespace, name): (&str, &str)) -> bool {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    for _ in 0..5 {
        match pods.get_opt(name).await {
            Ok(None) => return true,
            Ok(Some(pod)) => return pod.metadata.deletion_timestamp.is_some(),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

/// The node `pod` runs on, when it can be read.
async fn node_of(kube: &kube::Client, (namespace, name): (&str, &str)) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    for _ in 0..5 {
        match pods.get_opt(name).await {
            Ok(pod) => return pod?.spec?.node_name,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    None
}

/// The pod's phase and its containers' states, for a violation's detail.
async fn pod_now(kube: &kube::Client, (namespace, name): (&str, &str)) -> String {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    match pods.get_opt(name).await {
        Ok(None) => "gone".to_owned(),
        Ok(Some(pod)) => {
            let status = pod.status.unwrap_or_default();
            let containers: Vec<String> = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| {
                    let state = c.state.as_ref().map_or("unknown".to_owned(), |s| {
                        match (&s.running, &s.terminated, &s.waiting) {
                            (_, Some(t), _) => format!("terminated {}", t.exit_code),
                            (Some(_), _, _) => "running".to_owned(),
                            (_, _, Some(w)) => format!("waiting {:?}", w.reason),
                            _ => "unknown".to_owned(),
                        }
                    });
                    format!("{} {state} (restarts {})", c.name, c.restart_count)
                })
                .collect();
            format!(
                "{} on {}, deleting: {}, {containers:?}",
                status.phase.unwrap_or_default(),
                pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
                pod.metadata.deletion_timestamp.is_some()
            )
        }
        Err(error) => format!("unreadable ({error})"),
    }
}

/// How the driver ended, when it ended more than [`END_PATIENCE`] ago (or its pod is gone).
async fn driver_end(kube: &kube::Client, (namespace, name): (&str, &str)) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    match pods.get_opt(name).await {
        Ok(None) => Some("its pod is gone".to_owned()),
        Ok(Some(pod)) => {
            let container = submission::driver::driver_container_name(&pod)?;
            let status = pod.status.as_ref()?.container_statuses.as_ref()?;
            let terminated = status
                .iter()
                .find(|s| s.name == container)?
                .state
                .as_ref()?
                .terminated
                .as_ref()?;
            let finished = terminated.finished_at.as_ref()?.0;
            let ago = k8s_openapi::jiff::Timestamp::now().duration_since(finished);
            (ago.as_secs() > END_PATIENCE.as_secs() as i64).then(|| {
                format!(
                    "its container exited with {} {}s ago",
                    terminated.exit_code,
                    ago.as_secs()
                )
            })
        }
        // The API may fail on purpose: nothing learnt.
        Err(_) => None,
    }
}

/// What is wrong with a followed log of `expected`'s driver: a line that is not that driver's,
/// lines out of order, or (when `ending` is [`Ending::Ended`]) an end before the driver's.
pub fn broken(expected: &Expected, lines: &[String], ending: &Ending) -> Option<String> {
    if let Ending::StuckAfterDriverEnded(how) = ending {
        return Some(format!(
            "the stream stayed open after its driver ended ({how})"
        ));
    }
    let ended = *ending == Ending::Ended;
    match expected {
        Expected::Scripted { container } => scripted(container, lines, ended),
        Expected::Staged { epoch } => staged(epoch, lines),
    }
}

fn scripted(container: &str, lines: &[String], ended: bool) -> Option<String> {
    let prefix = format!("kubesim: container {container} ");
    let mut exited = false;
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            return Some(format!(
                "line {i} is not from container {container}: {line:?}"
            ));
        };
        if exited {
            return Some(format!("line {i} comes after the exit line: {line:?}"));
        }
        let fits = match i {
            0 => rest == "started",
            _ => {
                rest == format!("running for {i}s")
                    || rest
                        .strip_prefix("exited with code ")
                        .is_some_and(|code| code.parse::<i32>().is_ok())
            }
        };
        if !fits {
            return Some(format!("line {i} is out of order: {line:?}"));
        }
        exited = rest.starts_with("exited with code ");
    }
    (ended && !exited).then(|| {
        format!(
            "the stream ended after {} lines without the container's exit line",
            lines.len()
        )
    })
}

/// The staged driver's line formats: its events (`key=value`) and its error lines.
const STAGED_LINES: [&str; 8] = [
    "restored ",
    "start ",
    "commit ",
    "fenced ",
    "done ",
    "restore: ",
    "commit: ",
    "staged-driver: ",
];

fn staged(epoch: &str, lines: &[String]) -> Option<String> {
    lines.iter().enumerate().find_map(|(i, line)| {
        if !STAGED_LINES.iter().any(|p| line.starts_with(p)) {
            return Some(format!("line {i} is not the staged driver's: {line:?}"));
        }
        let named = line
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix("epoch="));
        named
            .is_some_and(|named| named != epoch)
            .then(|| format!("line {i} is of another epoch than {epoch}: {line:?}"))
    })
}

/// Follows and judges what came: `LOG_FOLLOWS_ITS_DRIVER` for the lines and the end,
/// operations for how it went (`log_<what>_<ending>`). True when the reader hung up as it
/// meant to.
pub async fn follow_and_check(
    client: &SubmitterClient,
    kube: &kube::Client,
    tally: &Tally,
    ledger: &Ledger,
    reader: &Follow,
) -> bool {
    let (what, target) = (reader.what, &reader.target);
    let started = Instant::now();
    match follow(client, kube, reader).await {
        Ok(mut followed) => {
            if followed.ending == Ending::Ended
                && broken(&reader.expected, &followed.lines, &followed.ending).is_some()
                && broken(&reader.expected, &followed.lines, &Ending::HungUp).is_none()
                && let Some(node) = node_of(kube, (&reader.namespace, &reader.pod)).await
                && ledger.partitioned_between(&node, started, Instant::now())
            {
                // Only the missing end, and the node was cut off meanwhile.
                followed.ending = Ending::EndedInPartition;
            }
            let ending = match &followed.ending {
                Ending::Ended => "ended",
                Ending::EndedWithItsPod => "ended_with_its_pod",
                Ending::EndedInPartition => "ended_in_partition",
                Ending::HungUp => "hung_up",
                Ending::Broke(_) => "broke",
                Ending::StuckAfterDriverEnded(_) => "stuck",
            };
            tally.operation(&format!("log_{what}_{ending}"));
            tally.operations("log_lines_read", followed.lines.len() as u64);
            let found = broken(&reader.expected, &followed.lines, &followed.ending);
            let found = match found {
                Some(detail) => Some(format!(
                    "log of {target} ({what}): {detail}; its pod now: {}",
                    pod_now(kube, (&reader.namespace, &reader.pod)).await
                )),
                None => None,
            };
            tally.check(invariants::LOG_FOLLOWS_ITS_DRIVER, found);
            followed.ending == Ending::HungUp
        }
        Err(error) => {
            tally.check(
                invariants::REST_CONTRACT,
                invariants::rest_answer(&error).map(|d| format!("log {target}: {d}")),
            );
            let name = match &error {
                SubmitError::Rejected { code_text, .. } => code_text.to_lowercase(),
                other => other.kind().to_owned(),
            };
            tally.operation(&format!("log_{what}_refused_{name}"));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|l| (*l).to_owned()).collect()
    }

    fn scripted_of(container: &str) -> Expected {
        Expected::Scripted {
            container: container.into(),
        }
    }

    #[test]
    fn a_scripted_log_read_to_its_exit_line_is_whole() {
        let log = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-1 running for 1s",
            "kubesim: container d-1 running for 2s",
            "kubesim: container d-1 exited with code 0",
        ]);
        assert_eq!(broken(&scripted_of("d-1"), &log, &Ending::Ended), None);
        // Ended without the exit line because the pod was deleted (a kill): the driver ended.
        assert_eq!(
            broken(&scripted_of("d-1"), &log[..2], &Ending::EndedWithItsPod),
            None
        );
        // Cut before the exit, by the reader or by a broken connection: what came is fine.
        assert_eq!(
            broken(&scripted_of("d-1"), &log[..2], &Ending::HungUp),
            None
        );
        let broke = Ending::Broke("read_response".into());
        assert_eq!(broken(&scripted_of("d-1"), &log[..3], &broke), None);
    }

    #[test]
    fn a_log_that_ends_before_its_driver_or_stays_open_after_it_is_broken() {
        let log = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-1 running for 1s",
        ]);
        assert!(broken(&scripted_of("d-1"), &log, &Ending::Ended).is_some());
        assert!(broken(&scripted_of("d-1"), &[], &Ending::Ended).is_some());
        let stuck = Ending::StuckAfterDriverEnded("its pod is gone".into());
        assert!(broken(&scripted_of("d-1"), &log, &stuck).is_some());
    }

    #[test]
    fn a_line_of_another_container_or_out_of_order_is_broken() {
        let foreign = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-2 running for 1s",
        ]);
        assert!(broken(&scripted_of("d-1"), &foreign, &Ending::HungUp).is_some());
        let twice = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-1 started",
        ]);
        assert!(broken(&scripted_of("d-1"), &twice, &Ending::HungUp).is_some());
        let skipped = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-1 running for 2s",
        ]);
        assert!(broken(&scripted_of("d-1"), &skipped, &Ending::HungUp).is_some());
        let after_exit = lines(&[
            "kubesim: container d-1 started",
            "kubesim: container d-1 exited with code 1",
            "kubesim: container d-1 running for 2s",
        ]);
        assert!(broken(&scripted_of("d-1"), &after_exit, &Ending::Ended).is_some());
    }

    #[test]
    fn a_staged_log_holds_only_its_epochs_lines() {
        let staged = Expected::Staged { epoch: "2".into() };
        let log = lines(&[
            "restored stage=1 epoch=2",
            "start stage=2 epoch=2",
            "commit: agent unreachable (refused); retrying",
            "commit stage=2 epoch=2",
        ]);
        assert_eq!(broken(&staged, &log, &Ending::Ended), None);
        let older = lines(&["restored stage=none epoch=1"]);
        assert!(broken(&staged, &older, &Ending::HungUp).is_some());
        let agent = lines(&[r#"{"level":"INFO","fields":{"message":"serving"}}"#]);
        assert!(broken(&staged, &agent, &Ending::HungUp).is_some());
    }
}
