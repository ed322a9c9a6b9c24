//! Concurrent duplicates inside one replica share one in-flight creation.
//!
//! The first request for a driver starts its creation as a spawned task and registers the
//! task's shared result; requests for the same driver arriving meanwhile await that result
//! instead of racing it through the API server. The task, not the request, owns the work: a
//! client that disconnects or a request that times out never cancels a creation halfway (which
//! would leave a pod without its Service, or ConfigMaps without their pod).
//!
//! Across replicas the API server's `AlreadyExists` on the POSTs is the arbiter; this map only
//! saves the wasted round trips and gives the sweeper the submissions it must not touch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::creation::{Failure, SubmitDriverError, Submitted};

/// What every waiter on one creation gets.
pub type SharedOutcome = Result<Submitted, TaskFailure>;

/// A creation that did not produce a driver; cheap to clone for every waiter.
#[derive(Debug, Clone)]
pub enum TaskFailure {
    Failed(Arc<SubmitDriverError>),
    /// The task panicked or was aborted (the runtime shutting down).
    Lost,
}

/// Identifies one driver: (namespace, pod name, submission id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub namespace: String,
    pub pod: String,
    pub submission_id: String,
}

/// The in-flight creations of this replica.
#[derive(Debug, Default, Clone)]
pub struct InFlight {
    map: Arc<Mutex<HashMap<Key, Shared<BoxFuture<'static, SharedOutcome>>>>>,
}

impl InFlight {
    /// Joins the creation of `key` if one is running, else spawns `work` as that creation.
    /// Returns the shared outcome and whether this caller started it. `work` comes boxed: a
    /// creation's future is kilobytes (every API call's state inside), and unboxed it was
    /// copied whole at each move (into this call, into the task, and the task's stages),
    /// a tenth of a fresh submission's instructions.
    pub fn join_or_start(
        &self,
        key: Key,
        work: BoxFuture<'static, Result<Submitted, Failure>>,
    ) -> (Shared<BoxFuture<'static, SharedOutcome>>, bool) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = map.get(&key) {
            return (running.clone(), false);
        }
        let this = self.clone();
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let outcome = work.await;
            // Removed before the result is published, so a request arriving after the result
            // starts afresh (and finds the pod) rather than joining a finished creation.
            this.remove(&task_key);
            outcome
        });
        let shared = async move {
            match task.await {
                Ok(Ok(submitted)) => Ok(submitted),
                Ok(Err(failure)) => Err(TaskFailure::Failed(Arc::new(failure.error))),
                Err(_) => Err(TaskFailure::Lost),
            }
        }
        .boxed()
        .shared();
        map.insert(key, shared.clone());
        (shared, true)
    }

    fn remove(&self, key: &Key) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// Whether a creation for `submission_id` in `namespace` is running (the sweeper asks).
    pub fn contains(&self, namespace: &str, submission_id: &str) -> bool {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .any(|key| key.namespace == namespace && key.submission_id == submission_id)
    }

    /// How many creations are running.
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
