//! The fence rules under a lock: a state store for tests of its callers (the agent) and the
//! reference the real backends are checked against by the conformance suite. Test-only, so it
//! lives here and not in the operator.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use operator::fence::{self, FenceState};
use operator::progress_store::{AppKey, Heartbeat, Marker, ProgressStore, StoreError};

/// Where an application's state lives: its namespace and name (the scope is in the state).
type Location = (String, String);

fn location(app: &AppKey) -> Location {
    (app.namespace.clone(), app.name.clone())
}

/// An in-memory store; clones of an `Arc<MemoryStore>` share state.
#[derive(Debug, Default)]
pub struct MemoryStore {
    apps: Mutex<HashMap<Location, FenceState>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The whole state kept under the application's name (for assertions).
    pub fn snapshot(&self, app: &AppKey) -> FenceState {
        self.lock().get(&location(app)).cloned().unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Location, FenceState>> {
        // A panic while holding the lock cannot leave a half-applied rule: every rule builds a new
        // state and the map is only assigned afterwards, so the poisoned data is still consistent.
        self.apps.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ProgressStore for MemoryStore {
    async fn advance_epoch(&self, app: &AppKey, observed: u64) -> Result<u64, StoreError> {
        let mut apps = self.lock();
        let state = apps.entry(location(app)).or_default();
        let (next, advanced) = fence::advance_from(state, &app.scope_text(), observed);
        *state = next;
        Ok(advanced.epoch)
    }

    async fn epoch(&self, app: &AppKey) -> Result<u64, StoreError> {
        Ok(self
            .lock()
            .get(&location(app))
            .map_or(fence::INITIAL_EPOCH, |s| {
                fence::current_epoch(s, &app.scope_text())
            }))
    }

    async fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut apps = self.lock();
        let current = apps.get(&location(app)).cloned().unwrap_or_default();
        let (next, _) = fence::commit(&current, &app.scope_text(), epoch, seq, payload, now_ms)
            .map_err(|r| StoreError::rejected(app, r))?;
        apps.insert(location(app), next);
        Ok(())
    }

    async fn latest(&self, app: &AppKey) -> Result<Option<Marker>, StoreError> {
        Ok(self
            .lock()
            .get(&location(app))
            .and_then(|s| fence::latest_marker(s, &app.scope_text()).cloned()))
    }

    async fn heartbeat(&self, app: &AppKey, epoch: u64, now_ms: u64) -> Result<(), StoreError> {
        let mut apps = self.lock();
        let current = apps.get(&location(app)).cloned().unwrap_or_default();
        let next = fence::heartbeat(&current, &app.scope_text(), epoch, now_ms)
            .map_err(|r| StoreError::rejected(app, r))?;
        apps.insert(location(app), next);
        Ok(())
    }

    async fn last_heartbeat(&self, app: &AppKey) -> Result<Option<Heartbeat>, StoreError> {
        Ok(self
            .lock()
            .get(&location(app))
            .and_then(|s| fence::last_heartbeat(s, &app.scope_text())))
    }

    async fn prune(&self, app: &AppKey, keep: usize) -> Result<usize, StoreError> {
        let mut apps = self.lock();
        let Some(state) = apps.get_mut(&location(app)) else {
            return Ok(0);
        };
        let (next, dropped) = fence::prune(state, &app.scope_text(), keep);
        *state = next;
        Ok(dropped)
    }
}
