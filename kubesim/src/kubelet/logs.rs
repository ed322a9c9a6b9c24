//! The kubelet's side of `GET .../pods/NAME/log`: which instance of a container a request
//! reads (the kubelet's `validateContainerLogStatus`), and reading it in order, followed while
//! that instance runs (its `ReadLogs`).
//!
//! A reader holds one open file (or a scripted log, computed line by line) and a small buffer:
//! a log is never held whole, however long it is or however long a follower stays. A follower
//! wakes when the pod's bell rings (a line written, a status change) and at least once a
//! second, as the kubelet rechecks its container; it ends once the instance it follows has
//! stopped and every line written before the stop has been sent, or as soon as its node is
//! partitioned: the API server's connection to that kubelet is lost, its copy of the stream
//! fails, and it ends the response it was relaying (`StreamObject` ignores the copy's error,
//! so the client sees the chunked body end, not an aborted connection).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::{Notify, mpsc};

use super::container_log::{self, Flow, ReadOptions, ScriptedLog, Writer};
use super::machine::{Behaviour, State, Terminated};
use super::{Kubelet, lock};

/// How often a follower checks its container without being woken (the kubelet's
/// `logForceCheckPeriod`).
const FORCE_CHECK: Duration = Duration::from_secs(1);

/// Output gathered before it is sent: a follower's memory is this and one line.
const CHUNK: usize = 32 * 1024;

/// What a client asked of a container's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    /// The container.
    pub container: String,
    /// The last terminated instance instead of the current one.
    pub previous: bool,
    /// Keep sending while the instance runs.
    pub follow: bool,
    /// Tail, since, byte limit and timestamps.
    pub read: ReadOptions,
}

/// Why a container's log cannot be read, in the kubelet's words (the API server relays them as
/// a 400 `BadRequest`).
#[derive(Debug, thiserror::Error)]
pub enum OpenLogError {
    /// The kubelet runs no such pod.
    #[error("pod {pod:?} does not exist")]
    PodNotFound {
        /// The pod.
        pod: String,
    },
    /// The pod has no such container.
    #[error("container {container:?} in pod {pod:?} is not available")]
    ContainerNotAvailable {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
    /// `previous` for a container that has not terminated before.
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
    /// The container has not started yet.
    #[error("container {container:?} in pod {pod:?} is waiting to start: {reason}")]
    Waiting {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
        /// Why it waits (`ContainerCreating`, `PodInitializing`, ...).
        reason: &'static str,
    },
}

impl OpenLogError {
    /// A stable name for the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PodNotFound { .. } => "PodNotFound",
            Self::ContainerNotAvailable { .. } => "ContainerNotAvailable",
            Self::NoPrevious { .. } => "NoPrevious",
            Self::Waiting { .. } => "Waiting",
        }
    }
}

/// Where one instance of a container stands now, for a follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InstanceNow {
    Running,
    /// Stopped: when and with which code, unless the pod is gone.
    Ended(Option<(SystemTime, i32)>),
}

/// What is read.
enum Source {
    /// A real process's log file, positioned where reading starts.
    File(BufReader<File>),
    /// A scripted container's log and the next line to send.
    Scripted { log: ScriptedLog, next: u64 },
    /// An instance that never wrote a file (its process could not be started).
    Empty,
}

/// How a follower learns about its instance.
struct Follow {
    kubelet: Weak<Kubelet>,
    /// The pod's node: a partition there ends the follow.
    node: String,
    uid: String,
    container: String,
    instance: u64,
    bell: Arc<Notify>,
}

impl Follow {
    fn now(&self) -> InstanceNow {
        match self.kubelet.upgrade() {
            Some(k) => k.instance_now(&self.uid, &self.container, self.instance),
            None => InstanceNow::Ended(None),
        }
    }

    /// Whether the API server has lost this kubelet (its node is partitioned).
    fn cut_off(&self) -> bool {
        self.kubelet
            .upgrade()
            .is_some_and(|k| k.is_partitioned(&self.node))
    }
}

/// One container instance's log, opened for reading.
pub struct ContainerLog {
    source: Source,
    writer: Writer,
    /// Lines still to send when a tail is read without following (`None`: no bound).
    lines_left: Option<u64>,
    follow: Option<Follow>,
}

/// What one step of reading found.
enum Step {
    /// Output was added; there may be more.
    More,
    /// Nothing more to read now.
    Caught,
    /// `limitBytes` reached, or the tail sent: the log ends here.
    Done,
}

impl ContainerLog {
    /// Reads what is there now into `out` (at most about [`CHUNK`] bytes per call).
    fn step(&mut self, out: &mut Vec<u8>) -> io::Result<Step> {
        match &mut self.source {
            Source::Empty => Ok(Step::Caught),
            Source::File(reader) => {
                let mut line = Vec::new();
                while out.len() < CHUNK {
                    if self.lines_left == Some(0) {
                        return Ok(Step::Done);
                    }
                    line.clear();
                    let n = reader.read_until(b'\n', &mut line)?;
                    if n == 0 {
                        return Ok(Step::Caught);
                    }
                    if line.last() != Some(&b'\n') {
                        // A record still being written: read it again whole, as the kubelet
                        // seeks back over an incomplete line.
                        reader.seek(SeekFrom::Current(-(n as i64)))?;
                        return Ok(Step::Caught);
                    }
                    let Some(entry) = container_log::parse(&line) else {
                        continue;
                    };
                    if self.writer.write(&entry, out) == Flow::Full {
                        return Ok(Step::Done);
                    }
                    if let Some(left) = &mut self.lines_left {
                        *left -= 1;
                    }
                }
                Ok(Step::More)
            }
            Source::Scripted { log, next } => {
                let len = log.len_at(SystemTime::now());
                while *next < len && out.len() < CHUNK {
                    let (at, text) = log.line(*next);
                    *next += 1;
                    let entry = container_log::Entry {
                        at,
                        content: text.as_bytes(),
                    };
                    if self.writer.write(&entry, out) == Flow::Full {
                        return Ok(Step::Done);
                    }
                }
                Ok(if *next < len {
                    Step::More
                } else {
                    Step::Caught
                })
            }
        }
    }

    /// Everything there is now, as text (no following).
    pub fn read_now(mut self) -> io::Result<String> {
        let mut out = Vec::new();
        while let Step::More = self.step(&mut out)? {}
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The log as a stream of chunks: what is there now, then, when following, what the
    /// instance writes until it stops. The stream ends early when its receiver is dropped.
    pub fn into_stream(self) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(self.pump(tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    async fn pump(mut self, tx: mpsc::Sender<io::Result<Bytes>>) {
        let mut out = Vec::with_capacity(CHUNK);
        // Set once the followed instance was seen stopped: what remains is read, then it ends.
        let mut stopped = self.follow.is_none();
        loop {
            if self.follow.as_ref().is_some_and(Follow::cut_off) {
                return;
            }
            let bell = self.follow.as_ref().map(|f| f.bell.clone());
            let rung = bell.as_ref().map(|b| b.notified());
            tokio::pin!(rung);
            if let Some(r) = rung.as_mut().as_pin_mut() {
                // Armed before reading: a line written after the read still wakes us.
                r.enable();
            }
            let step = self.step(&mut out);
            if !out.is_empty() {
                let chunk = Bytes::from(std::mem::replace(&mut out, Vec::with_capacity(CHUNK)));
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
            match step {
                Ok(Step::More) => continue,
                Ok(Step::Done) => return,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
                Ok(Step::Caught) if stopped => return,
                Ok(Step::Caught) => {}
            }
            let Some(follow) = &self.follow else {
                return;
            };
            let mut wait = FORCE_CHECK;
            match follow.now() {
                InstanceNow::Running => {
                    if let Source::Scripted { log, .. } = &self.source
                        && let Some(at) = log.next_at(SystemTime::now())
                    {
                        wait = wait.min(at.duration_since(SystemTime::now()).unwrap_or_default());
                    }
                }
                InstanceNow::Ended(end) => {
                    if let Source::Scripted { log, .. } = &mut self.source {
                        log.ended = end.or(log.ended);
                    }
                    // Lines written before the stop are in the file by now: the exit is
                    // reported only once the container's outputs are drained.
                    stopped = true;
                    continue;
                }
            }
            tokio::select! {
                () = async { if let Some(r) = rung.as_mut().as_pin_mut() { r.await } } => {}
                () = tokio::time::sleep(wait) => {}
                () = tx.closed() => return,
            }
        }
    }
}

impl Kubelet {
    /// Opens the log of the instance of `req.container` that the kubelet would serve: the
    /// previous one with `previous`, else the running one, else the last one to stop.
    pub fn open_log(
        self: &Arc<Self>,
        namespace: &str,
        pod: &str,
        req: &LogRequest,
    ) -> Result<ContainerLog, OpenLogError> {
        let st = lock(&self.state);
        let e = st
            .names
            .get(&(namespace.to_string(), pod.to_string()))
            .and_then(|uid| st.pods.get(uid))
            .ok_or_else(|| OpenLogError::PodNotFound {
                pod: pod.to_string(),
            })?;
        let name = req.container.as_str();
        let c = e
            .machine
            .find(name)
            .and_then(|cref| e.machine.container(cref))
            .ok_or_else(|| OpenLogError::ContainerNotAvailable {
                pod: pod.to_string(),
                container: name.to_string(),
            })?;
        // (instance, started, end): the kubelet's order of choice.
        let (instance, started_at, ended) = match (&c.state, &c.last) {
            (_, Some(last)) if req.previous => ended(last),
            _ if req.previous => {
                return Err(OpenLogError::NoPrevious {
                    pod: pod.to_string(),
                    container: name.to_string(),
                });
            }
            (State::Running { started_at, .. }, _) => (c.instance, *started_at, None),
            (State::Terminated(t), _) | (State::Waiting { .. }, Some(t)) => ended(t),
            (State::Waiting { reason, .. }, None) => {
                return Err(OpenLogError::Waiting {
                    pod: pod.to_string(),
                    container: name.to_string(),
                    reason,
                });
            }
        };
        let source = match c.behaviour {
            Behaviour::Scripted { .. } => {
                let log = ScriptedLog {
                    container: name.to_string(),
                    started_at,
                    ended,
                };
                let len = log.len_at(SystemTime::now());
                let next = req.read.tail.map_or(0, |n| len.saturating_sub(n));
                Source::Scripted { log, next }
            }
            Behaviour::Process => {
                let current = self.log_path(namespace, pod, name);
                let path = if instance == c.instance {
                    current
                } else {
                    super::process::previous_log(&current)
                };
                // Opened under the lock: a restart moves the file aside only under it too.
                match File::open(&path) {
                    Ok(f) => Source::File(BufReader::new(f)),
                    Err(_) => Source::Empty,
                }
            }
        };
        let follow = (req.follow && ended.is_none()).then(|| Follow {
            kubelet: Arc::downgrade(self),
            node: e.node.clone(),
            uid: e.uid.clone(),
            container: name.to_string(),
            instance,
            bell: e.bell.clone(),
        });
        drop(st);
        let source = match source {
            Source::File(mut reader) => {
                if let Some(n) = req.read.tail {
                    let start = container_log::tail_start(reader.get_mut(), n).unwrap_or(0);
                    reader.get_mut().seek(SeekFrom::Start(start)).ok();
                }
                Source::File(reader)
            }
            other => other,
        };
        Ok(ContainerLog {
            source,
            writer: Writer::new(&req.read),
            lines_left: req.read.tail.filter(|_| !req.follow),
            follow,
        })
    }

    /// Where instance `instance` of the pod `uid`'s container `container` stands now.
    fn instance_now(&self, uid: &str, container: &str, instance: u64) -> InstanceNow {
        let st = lock(&self.state);
        let Some(c) = st.pods.get(uid).and_then(|e| {
            e.machine
                .find(container)
                .and_then(|r| e.machine.container(r))
        }) else {
            return InstanceNow::Ended(None);
        };
        let end = |t: &Terminated| InstanceNow::Ended(Some((t.finished_at, t.exit_code)));
        match (&c.state, &c.last) {
            (State::Running { .. }, _) if c.instance == instance => InstanceNow::Running,
            (State::Terminated(t), _) if t.instance == instance => end(t),
            (_, Some(t)) if t.instance == instance => end(t),
            _ => InstanceNow::Ended(None),
        }
    }
}

/// A stopped instance: its number, start and end.
fn ended(t: &Terminated) -> (u64, SystemTime, Option<(SystemTime, i32)>) {
    (t.instance, t.started_at, Some((t.finished_at, t.exit_code)))
}
