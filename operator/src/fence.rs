//! The fencing rules of fenced restarts, as plain functions over plain data.
//!
//! Every state store backend (Redis, Kubernetes, memory) keeps, per application, a [`FenceState`]
//! and applies exactly these rules atomically: the Kubernetes backend runs them between a read and a
//! compare-and-swap, the Redis backend mirrors them in one Lua script per operation, and the memory
//! backend runs them under a lock. No clock and no I/O here: the time is passed in by the caller.
//!
//! The rules, in one place:
//! - progress belongs to a *scope*: one application object (its uid) and one run of it (a spec
//!   change and the next run of an `Always` application start a new run). Only the operator's
//!   fence, [`advance_from`], sets the scope; a fence for another scope starts from nothing (no
//!   markers, no heartbeat), so an application deleted and created again under the same name, or a
//!   new run, never restores what belonged to another;
//! - the epoch only grows, across scopes too; [`advance_from`] bumps it only when the caller saw the
//!   current epoch, so an operator that retries after a crash gets the epoch it already fenced
//!   instead of a second one;
//! - a write made on behalf of a driver (a marker commit, a heartbeat) is accepted only under the
//!   current scope and epoch; anything else is [`Rejected::Fenced`] and nothing is written. Before
//!   the first fence there is no scope, so no driver write is ever accepted there: no driver runs
//!   under [`INITIAL_EPOCH`];
//! - marker sequence numbers only grow across all epochs of a scope (progress never moves
//!   backwards); the exact repeat of the latest marker is accepted without a second copy, so a
//!   retry after a lost answer is harmless.

use serde::{Deserialize, Serialize};

/// The epoch of an application no driver has run under yet: the store's state before the
/// operator's first fence. The operator fences before every driver, the first one included, so
/// the first driver runs under epoch 1 and no driver ever runs under 0 (a store that lost its
/// state reads as epoch 0 and refuses every driver's write).
pub const INITIAL_EPOCH: u64 = 0;

/// A progress marker a driver committed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    /// The epoch the committing driver ran under.
    pub epoch: u64,
    /// The driver's own progress counter (a stage, a batch id); grows across epochs.
    pub seq: u64,
    /// Opaque to the store: what the driver needs to resume (usually JSON text).
    pub payload: String,
    /// When the store accepted it, milliseconds since the Unix epoch (the caller's clock).
    pub committed_at_ms: u64,
}

/// The last heartbeat an agent wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    /// The epoch of the agent that wrote it.
    pub epoch: u64,
    /// When, milliseconds since the Unix epoch (the agent's clock).
    pub at_ms: u64,
}

/// What the store keeps per application.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceState {
    /// The application object and run the progress belongs to (`<uid>/<run>`); `None` until the
    /// operator's first fence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The current epoch; only the driver started under it may write.
    pub epoch: u64,
    /// Committed markers, oldest first (the last is the one a restarted driver restores).
    pub markers: Vec<Marker>,
    /// The latest heartbeat, if any agent has written one.
    pub heartbeat: Option<Heartbeat>,
}

/// Why the store refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// The writer's epoch is not the current one: it was fenced (or never handed out).
    #[error("write under epoch {attempted} fenced, current epoch is {current}")]
    Fenced {
        /// The epoch the writer claimed.
        attempted: u64,
        /// The store's current epoch.
        current: u64,
    },
    /// The marker would move progress backwards (or repeat a sequence number with other content).
    #[error("marker {seq} is not after the latest committed marker {latest}")]
    StaleMarker {
        /// The sequence number offered.
        seq: u64,
        /// The latest committed sequence number.
        latest: u64,
    },
}

impl Rejected {
    /// A stable label for metrics, events and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Fenced { .. } => "fenced",
            Self::StaleMarker { .. } => "stale_marker",
        }
    }
}

/// The result of an advance: the epoch the caller must hand to the new driver, and whether this call
/// moved it (false on a retry that finds the work already done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advanced {
    /// The epoch after the call: the one the new driver gets.
    pub epoch: u64,
    /// Whether this call changed the store.
    pub moved: bool,
}

/// Fences the driver that ran under `observed` in `scope` and returns the epoch for its successor.
///
/// - another scope (or none yet): start `scope` from nothing, at an epoch above both the stored
///   one and `observed`; every driver of the other scope is fenced with it.
/// - current == observed: the normal case, bump by one.
/// - current > observed: the driver under `observed` is already fenced (an operator retrying after a
///   crash, or a lost answer): return the current epoch unchanged, so retries never burn a second
///   epoch and the resubmitted driver gets the same one as the first attempt.
/// - current < observed: the store lost its state (a flushed Redis, a deleted object) while drivers
///   may still hold `observed`; jump past it so no epoch ever handed out is reused.
pub fn advance_from(state: &FenceState, scope: &str, observed: u64) -> (FenceState, Advanced) {
    if state.scope.as_deref() != Some(scope) {
        let epoch = state.epoch.max(observed).saturating_add(1);
        let next = FenceState {
            scope: Some(scope.to_owned()),
            epoch,
            markers: Vec::new(),
            heartbeat: None,
        };
        return (next, Advanced { epoch, moved: true });
    }
    let (epoch, moved) = match state.epoch.cmp(&observed) {
        std::cmp::Ordering::Equal => (state.epoch.saturating_add(1), true),
        std::cmp::Ordering::Greater => (state.epoch, false),
        std::cmp::Ordering::Less => (observed.saturating_add(1), true),
    };
    let next = FenceState {
        epoch,
        ..state.clone()
    };
    (next, Advanced { epoch, moved })
}

/// Commits a marker under `scope` and `epoch`. Returns the new state and whether a marker was
/// appended (false for the exact repeat of the latest one).
pub fn commit(
    state: &FenceState,
    scope: &str,
    epoch: u64,
    seq: u64,
    payload: &str,
    now_ms: u64,
) -> Result<(FenceState, bool), Rejected> {
    check_writer(state, scope, epoch)?;
    if let Some(last) = state.markers.last() {
        if last.epoch == epoch && last.seq == seq && last.payload == payload {
            return Ok((state.clone(), false));
        }
        if seq <= last.seq {
            return Err(Rejected::StaleMarker {
                seq,
                latest: last.seq,
            });
        }
    }
    let mut next = state.clone();
    next.markers.push(Marker {
        epoch,
        seq,
        payload: payload.to_owned(),
        committed_at_ms: now_ms,
    });
    Ok((next, true))
}

/// Records a heartbeat under `scope` and `epoch`; a fenced agent's heartbeat is refused like its
/// commits, which is how the agent learns it was fenced.
pub fn heartbeat(
    state: &FenceState,
    scope: &str,
    epoch: u64,
    now_ms: u64,
) -> Result<FenceState, Rejected> {
    check_writer(state, scope, epoch)?;
    Ok(FenceState {
        heartbeat: Some(Heartbeat {
            epoch,
            at_ms: now_ms,
        }),
        ..state.clone()
    })
}

/// Drops all but the newest `keep` markers of `scope`, never the latest one (it is what a restart
/// restores), so `keep` is at least 1. Returns the new state and how many were dropped (none from
/// another scope). Not epoch-guarded: it is the operator's housekeeping, not a write on behalf of
/// a driver, and it cannot change what a driver restores.
pub fn prune(state: &FenceState, scope: &str, keep: usize) -> (FenceState, usize) {
    if !is_scope(state, scope) {
        return (state.clone(), 0);
    }
    let keep = keep.max(1);
    let drop = state.markers.len().saturating_sub(keep);
    let mut next = state.clone();
    next.markers.drain(..drop);
    (next, drop)
}

/// Whether `state` holds the progress of `scope`.
pub fn is_scope(state: &FenceState, scope: &str) -> bool {
    state.scope.as_deref() == Some(scope)
}

/// The marker a restarted driver of `scope` restores (none from another scope).
pub fn latest_marker<'a>(state: &'a FenceState, scope: &str) -> Option<&'a Marker> {
    state.markers.last().filter(|_| is_scope(state, scope))
}

/// The latest heartbeat of `scope` (none from another scope).
pub fn last_heartbeat(state: &FenceState, scope: &str) -> Option<Heartbeat> {
    state.heartbeat.filter(|_| is_scope(state, scope))
}

/// The current epoch of `scope`: [`INITIAL_EPOCH`] while the state belongs to another scope.
pub fn current_epoch(state: &FenceState, scope: &str) -> u64 {
    if is_scope(state, scope) {
        state.epoch
    } else {
        INITIAL_EPOCH
    }
}

/// Whether a heartbeat is too old to count as evidence the driver is alive: none at all, or older
/// than `window_ms` at `now_ms`. A heartbeat from the future (clock skew) counts as fresh.
pub fn is_stale(heartbeat: Option<&Heartbeat>, now_ms: u64, window_ms: u64) -> bool {
    match heartbeat {
        None => true,
        Some(hb) => now_ms.saturating_sub(hb.at_ms) > window_ms,
    }
}

fn check_writer(state: &FenceState, scope: &str, epoch: u64) -> Result<(), Rejected> {
    if is_scope(state, scope) && epoch == state.epoch {
        Ok(())
    } else {
        Err(Rejected::Fenced {
            attempted: epoch,
            current: state.epoch,
        })
    }
}

#[cfg(test)]
mod tests;
