//! The retention recorder: ends the claim of every succeeded driver the pod watch reports as
//! its record ([`crate::claim::end`]), each once, unless the ConfigMap cache already shows it
//! ended.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use thiserror::Error;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tracing::{info, warn};

use crate::caches::WatchCaches;
use crate::claim::{self, Ended};
use crate::kube_api::{CallError, KubeApi};
use crate::record;
use crate::state::DEFAULT_CALL_TIMEOUT;

/// Why a record could not be written.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("cannot write retention record {namespace}/{name}")]
    WriteRecord {
        namespace: String,
        name: String,
        #[source]
        source: CallError,
    },
}

impl RecordError {
    pub fn kind(&self) -> &'static str {
        match self {
            RecordError::WriteRecord { .. } => "write_record",
        }
    }
}

/// Where and for how long the recorder keeps records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordConfig {
    /// The submitter's own namespace.
    pub namespace: String,
    pub retention: Duration,
}

/// Records this replica has written (or is writing, or found written) and its ConfigMap cache
/// may not show yet. Every later event of a succeeded pod reaches the recorder again; without
/// this memory each one would create the record again, for a 409, until the cache caught up.
/// Bounded: the oldest names go first, long after the cache has shown them.
#[derive(Debug, Default)]
struct Written {
    names: HashSet<String>,
    order: VecDeque<String>,
}

impl Written {
    /// Names remembered; far more than the records written while a cache lags.
    const REMEMBERED: usize = 8192;

    /// Takes `name` for a write: false if it is already written or being written.
    fn claim(&mut self, name: &str) -> bool {
        if !self.names.insert(name.to_owned()) {
            return false;
        }
        self.order.push_back(name.to_owned());
        if self.order.len() > Self::REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.names.remove(&oldest);
        }
        true
    }

    /// Gives `name` back after a failed write, so the retry may write it.
    fn release(&mut self, name: &str) {
        self.names.remove(name);
        self.order.retain(|n| n != name);
    }
}

/// Writes the retention records of succeeded driver pods: each once, unless the cache shows it.
pub struct Recorder {
    api: KubeApi,
    caches: WatchCaches,
    config: RecordConfig,
    written: Mutex<Written>,
}

impl Recorder {
    pub fn new(client: kube::Client, caches: WatchCaches, config: RecordConfig) -> Recorder {
        Recorder {
            api: KubeApi::new(client, DEFAULT_CALL_TIMEOUT),
            caches,
            config,
            written: Mutex::new(Written::default()),
        }
    }

    /// Writes the record of `pod` if it is a succeeded driver whose record neither the cache
    /// shows nor this recorder has written: over its id's claim, or new for a driver from before
    /// claims. Idempotent: the name is the id's, and a claim that has ended already (this
    /// success, or a kill) stays as it is. True when this call wrote it.
    pub async fn record(&self, pod: &Pod) -> Result<bool, RecordError> {
        let Some(record) = record::for_pod(pod, Timestamp::now(), self.config.retention) else {
            return Ok(false);
        };
        let home = &self.config.namespace;
        let name = record::claim_name(&record.submission_id);
        let ended = self
            .caches
            .config_map(home, &name)
            .is_some_and(|cm| record::is_record(&cm));
        if ended || !self.written().claim(&name) {
            return Ok(false);
        }
        match claim::end(&self.api, Some(&self.caches), home, &record).await {
            Ok(Ended::Written) => {
                info!(namespace = %record.namespace, pod = %record.pod,
                    submission_id = %record.submission_id, retain_until = %record.retain_until,
                    "retained a driver's success");
                Ok(true)
            }
            Ok(Ended::Already(_) | Ended::Other) => Ok(false),
            Err(source) => {
                self.written().release(&name);
                Err(RecordError::WriteRecord {
                    namespace: home.clone(),
                    name,
                    source,
                })
            }
        }
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Pause before a failed record write is tried again.
const RECORD_RETRY: Duration = Duration::from_secs(2);

/// Record writes in flight at once: successes come in bursts (a wave of drivers finishing), and
/// one write at a time leaves the records minutes behind at thousands of drivers.
const RECORD_WRITES_IN_FLIGHT: usize = 8;

/// Runs the recorder until the task is dropped: every succeeded driver the pod watch reports
/// gets its retention record. It subscribes before the caches sync and then passes once over
/// the whole pod cache, so a success seen during start-up or while it lagged is not missed.
pub async fn run_recorder(client: kube::Client, caches: WatchCaches, config: RecordConfig) {
    let mut successes = caches.succeeded.subscribe();
    if caches.ready().await.is_err() {
        warn!("watch caches stopped before syncing; the recorder does not run");
        return;
    }
    let recorder = Recorder::new(client, caches.clone(), config);
    let mut backlog: Vec<Arc<Pod>> = caches.pods.state();
    loop {
        // Failed writes stay in the backlog: the pod may be gone from the cache by the retry.
        let failed: Vec<Arc<Pod>> = futures::stream::iter(backlog.drain(..))
            .map(|pod| {
                let recorder = &recorder;
                async move {
                    match recorder.record(&pod).await {
                        Ok(_) => None,
                        Err(error) => {
                            warn!(kind = error.kind(), error = %error, "retention record not written; retrying");
                            Some(pod)
                        }
                    }
                }
            })
            .buffer_unordered(RECORD_WRITES_IN_FLIGHT)
            .filter_map(std::future::ready)
            .collect()
            .await;
        backlog = failed;
        let next = if backlog.is_empty() {
            successes.recv().await
        } else {
            match tokio::time::timeout(RECORD_RETRY, successes.recv()).await {
                Ok(next) => next,
                Err(_) => continue,
            }
        };
        match next {
            Ok(pod) => backlog.push(pod),
            Err(RecvError::Lagged(missed)) => {
                warn!(
                    missed,
                    "recorder fell behind the pod watch; passing over the cache"
                );
                backlog.extend(caches.pods.state());
            }
            Err(RecvError::Closed) => return,
        }
        // Take what else has arrived, so a burst is written concurrently.
        while backlog.len() < 4 * RECORD_WRITES_IN_FLIGHT {
            match successes.try_recv() {
                Ok(pod) => backlog.push(pod),
                Err(TryRecvError::Lagged(_)) => {
                    backlog.extend(caches.pods.state());
                    break;
                }
                Err(_) => break,
            }
        }
    }
}
