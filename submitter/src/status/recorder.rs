//! The retention recorder: writes the record of every succeeded driver the pod watch reports,
//! each once, unless the ConfigMap cache already shows it.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use thiserror::Error;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tracing::{info, warn};

use crate::caches::WatchCaches;
use crate::record;

/// Why a record could not be written.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("cannot create retention record {namespace}/{name}")]
    CreateRecord {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl RecordError {
    pub fn kind(&self) -> &'static str {
        match self {
            RecordError::CreateRecord { .. } => "create_record",
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
    client: kube::Client,
    caches: WatchCaches,
    config: RecordConfig,
    written: Mutex<Written>,
}

impl Recorder {
    pub fn new(client: kube::Client, caches: WatchCaches, config: RecordConfig) -> Recorder {
        Recorder {
            client,
            caches,
            config,
            written: Mutex::new(Written::default()),
        }
    }

    /// Writes the record of `pod` if it is a succeeded driver whose record neither the cache
    /// shows nor this recorder has written. Idempotent: the name is deterministic and
    /// `AlreadyExists` counts as written. True when this call created it.
    pub async fn record(&self, pod: &Pod) -> Result<bool, RecordError> {
        let Some(record) = record::for_pod(pod, Timestamp::now(), self.config.retention) else {
            return Ok(false);
        };
        let Some(cm) = record::build(&record, &self.config.namespace) else {
            return Ok(false);
        };
        let name = cm.metadata.name.clone().unwrap_or_default();
        let cached = self
            .caches
            .config_maps
            .get(&ObjectRef::new(&name).within(&self.config.namespace))
            .is_some();
        if cached || !self.written().claim(&name) {
            return Ok(false);
        }
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), &self.config.namespace);
        match api.create(&PostParams::default(), &cm).await {
            Ok(_) => {
                info!(namespace = %record.namespace, pod = %record.pod,
                    submission_id = %record.submission_id, retain_until = %record.retain_until,
                    "retained a driver's success");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(source) => {
                self.written().release(&name);
                Err(RecordError::CreateRecord {
                    namespace: self.config.namespace.clone(),
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
