//! What the agent knows and the rules it answers by: restored marker, latest commit, fenced or not,
//! heartbeats. Plain data and synchronous functions; the shells (`api`, `heartbeat`) lock it, call
//! the store between two calls here, and pass the time in. No clock, no I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::progress_store::{Marker, StoreError};

/// The largest payload a marker may carry: the Kubernetes store keeps several markers in one
/// ConfigMap (1 MiB in all), so a payload is a resume hint, not a checkpoint.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;

/// The wire error codes of the marker API, one per kind of answer a driver must handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed; do not retry it unchanged.
    BadRequest,
    /// No such route.
    NotFound,
    /// The route exists, the method does not.
    MethodNotAllowed,
    /// The agent is still restoring the latest marker; retry.
    NotReady,
    /// This driver's epoch was superseded: stop writing side effects and exit.
    Fenced,
    /// The marker does not move progress forward.
    StaleMarker,
    /// The state store did not answer; retry.
    StoreUnavailable,
    /// Something the driver cannot fix (details in the agent's log).
    Internal,
}

impl ErrorCode {
    /// The code on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BAD_REQUEST",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::NotReady => "NOT_READY",
            Self::Fenced => "FENCED",
            Self::StaleMarker => "STALE_MARKER",
            Self::StoreUnavailable => "STORE_UNAVAILABLE",
            Self::Internal => "INTERNAL_ERROR",
        }
    }
}

/// The error body of every failed answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// One of [`ErrorCode`].
    pub error: String,
    /// For people; never internal error text.
    pub message: String,
    /// The agent's epoch (on `FENCED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The store's current epoch (on `FENCED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
    /// The latest committed sequence number (on `STALE_MARKER`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_seq: Option<u64>,
}

impl ErrorBody {
    /// A body with only a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: code.as_str().to_owned(),
            message: message.into(),
            epoch: None,
            current_epoch: None,
            latest_seq: None,
        }
    }
}

/// `POST /v1/marker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRequest {
    /// The driver's progress counter (a stage number); must grow.
    pub seq: u64,
    /// What the driver needs to resume, opaque to the agent.
    pub payload: String,
}

/// The answer to a commit that landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitView {
    /// Always true.
    pub committed: bool,
    /// The epoch it was committed under.
    pub epoch: u64,
    /// Its sequence number.
    pub seq: u64,
}

/// `GET /v1/marker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkerView {
    /// The agent's (and its driver's) epoch.
    pub epoch: u64,
    /// The epoch of the marker restored at start, `null` when nothing was committed before.
    pub restored_from_epoch: Option<u64>,
    /// The latest committed marker: the restored one or a newer one committed through this agent.
    pub marker: Option<Marker>,
}

/// `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    /// The agent's epoch.
    pub epoch: u64,
    /// Whether a newer epoch fenced this agent.
    pub fenced: bool,
    /// The epoch of the marker restored at start.
    pub restored_from_epoch: Option<u64>,
    /// When the last heartbeat landed (agent clock, ms since the Unix epoch).
    pub last_heartbeat_ms: Option<u64>,
    /// How many heartbeats landed.
    pub heartbeats: u64,
}

/// Reading the marker failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The restore has not finished.
    #[error("the agent is still restoring the latest marker")]
    NotReady,
}

impl ReadError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotReady => "not_ready",
        }
    }

    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotReady => ErrorCode::NotReady,
        }
    }

    /// The error body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody::new(self.code(), self.to_string())
    }
}

/// Committing a marker failed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The body is not `{"seq": <u64>, "payload": <string>}`, or too large.
    #[error("invalid marker: {reason}")]
    BadRequest {
        /// What is wrong.
        reason: String,
    },
    /// The restore has not finished.
    #[error("the agent is still restoring the latest marker")]
    NotReady,
    /// The agent's epoch was superseded; nothing was written.
    #[error("epoch {epoch} was fenced by epoch {current}; this driver must stop")]
    Fenced {
        /// The agent's epoch.
        epoch: u64,
        /// The current epoch in the store.
        current: u64,
    },
    /// The sequence number does not move progress forward.
    #[error("marker {seq} is not after the latest committed marker {latest}")]
    StaleMarker {
        /// Offered.
        seq: u64,
        /// Latest committed.
        latest: u64,
    },
    /// The store cannot represent the marker.
    #[error("marker {seq} is out of the store's range")]
    OutOfRange {
        /// Offered.
        seq: u64,
    },
    /// The store did not answer (in time); the commit may or may not have landed, and a retry of
    /// the same marker is safe.
    #[error("committing marker {seq} failed in the store")]
    Store {
        /// Offered.
        seq: u64,
        /// The store's error; `None` for a timeout.
        #[source]
        source: Option<StoreError>,
    },
    /// The stored progress cannot be read by the store.
    #[error("committing marker {seq} found unreadable stored progress")]
    Corrupt {
        /// Offered.
        seq: u64,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

impl CommitError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "bad_request",
            Self::NotReady => "not_ready",
            Self::Fenced { .. } => "fenced",
            Self::StaleMarker { .. } => "stale_marker",
            Self::OutOfRange { .. } => "out_of_range",
            Self::Store { .. } => "store_unavailable",
            Self::Corrupt { .. } => "corrupt",
        }
    }

    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadRequest { .. } | Self::OutOfRange { .. } => ErrorCode::BadRequest,
            Self::NotReady => ErrorCode::NotReady,
            Self::Fenced { .. } => ErrorCode::Fenced,
            Self::StaleMarker { .. } => ErrorCode::StaleMarker,
            Self::Store { .. } => ErrorCode::StoreUnavailable,
            Self::Corrupt { .. } => ErrorCode::Internal,
        }
    }

    /// The error body; 5xx bodies are generic (the cause goes to the log).
    pub fn body(&self) -> ErrorBody {
        let code = self.code();
        let mut body = match self {
            Self::Store { .. } => ErrorBody::new(
                code,
                "the state store is unavailable; retry the same marker",
            ),
            Self::Corrupt { .. } => ErrorBody::new(code, "the agent cannot commit markers"),
            _ => ErrorBody::new(code, self.to_string()),
        };
        match *self {
            Self::Fenced { epoch, current } => {
                body.epoch = Some(epoch);
                body.current_epoch = Some(current);
            }
            Self::StaleMarker { latest, .. } => body.latest_seq = Some(latest),
            _ => {}
        }
        body
    }
}

/// What a failed heartbeat means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// This heartbeat learnt that a newer epoch fenced the agent: stop writing.
    NewlyFenced {
        /// The current epoch in the store.
        current: u64,
    },
    /// The store failed; try again at the next beat.
    Retry,
}

/// The agent's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentState {
    epoch: u64,
    ready: bool,
    restored: Option<Marker>,
    latest: Option<Marker>,
    fenced_by: Option<u64>,
    last_heartbeat_ms: Option<u64>,
    heartbeats: u64,
}

impl AgentState {
    /// An agent under `epoch` that has not restored yet.
    pub fn new(epoch: u64) -> Self {
        Self {
            epoch,
            ready: false,
            restored: None,
            latest: None,
            fenced_by: None,
            last_heartbeat_ms: None,
            heartbeats: 0,
        }
    }

    /// The agent's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The restore finished with `marker` (the latest committed one, if any): ready.
    pub fn restored(&mut self, marker: Option<Marker>) {
        self.latest = marker.clone();
        self.restored = marker;
        self.ready = true;
    }

    /// Whether the restore finished (the startup probe).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The epoch that fenced this agent, if any.
    pub fn fenced_by(&self) -> Option<u64> {
        self.fenced_by
    }

    /// `GET /v1/marker`.
    pub fn marker_view(&self) -> Result<MarkerView, ReadError> {
        if !self.ready {
            return Err(ReadError::NotReady);
        }
        Ok(MarkerView {
            epoch: self.epoch,
            restored_from_epoch: self.restored.as_ref().map(|m| m.epoch),
            marker: self.latest.clone(),
        })
    }

    /// `GET /v1/status`.
    pub fn status_view(&self) -> StatusView {
        StatusView {
            epoch: self.epoch,
            fenced: self.fenced_by.is_some(),
            restored_from_epoch: self.restored.as_ref().map(|m| m.epoch),
            last_heartbeat_ms: self.last_heartbeat_ms,
            heartbeats: self.heartbeats,
        }
    }

    /// Whether a commit may go to the store. A fenced agent refuses without asking the store.
    pub fn admit_commit(&self, request: &CommitRequest) -> Result<(), CommitError> {
        if !self.ready {
            return Err(CommitError::NotReady);
        }
        if let Some(current) = self.fenced_by {
            return Err(CommitError::Fenced {
                epoch: self.epoch,
                current,
            });
        }
        if request.payload.len() > MAX_PAYLOAD_BYTES {
            return Err(CommitError::BadRequest {
                reason: format!(
                    "payload of {} bytes exceeds {MAX_PAYLOAD_BYTES}",
                    request.payload.len()
                ),
            });
        }
        Ok(())
    }

    /// The store accepted `request` at `now_ms`.
    pub fn commit_landed(&mut self, request: CommitRequest, now_ms: u64) -> CommitView {
        let view = CommitView {
            committed: true,
            epoch: self.epoch,
            seq: request.seq,
        };
        let newer = self.latest.as_ref().is_none_or(|m| request.seq > m.seq);
        if newer {
            self.latest = Some(Marker {
                epoch: self.epoch,
                seq: request.seq,
                payload: request.payload,
                committed_at_ms: now_ms,
            });
        }
        view
    }

    /// The store refused or failed a commit of `seq` (`None`: no answer in time).
    pub fn commit_failed(&mut self, seq: u64, error: Option<StoreError>) -> CommitError {
        match error {
            Some(StoreError::Fenced { current, .. }) => {
                self.fenced_by = Some(current);
                CommitError::Fenced {
                    epoch: self.epoch,
                    current,
                }
            }
            Some(StoreError::StaleMarker { latest, .. }) => {
                CommitError::StaleMarker { seq, latest }
            }
            Some(StoreError::OutOfRange { .. }) => CommitError::OutOfRange { seq },
            Some(source @ StoreError::Corrupt { .. }) => CommitError::Corrupt { seq, source },
            Some(
                source @ (StoreError::Backend { .. } | StoreError::ConflictRetriesExhausted { .. }),
            ) => CommitError::Store {
                seq,
                source: Some(source),
            },
            None => CommitError::Store { seq, source: None },
        }
    }

    /// Whether a heartbeat may go to the store (not once fenced: heartbeats are writes too).
    pub fn admit_heartbeat(&self) -> bool {
        self.fenced_by.is_none()
    }

    /// A heartbeat landed at `now_ms`.
    pub fn heartbeat_landed(&mut self, now_ms: u64) {
        self.last_heartbeat_ms = Some(now_ms);
        self.heartbeats = self.heartbeats.saturating_add(1);
    }

    /// A heartbeat failed with `error` (`None`: no answer in time).
    pub fn heartbeat_failed(&mut self, error: Option<&StoreError>) -> HeartbeatOutcome {
        match error {
            Some(StoreError::Fenced { current, .. }) => {
                self.fenced_by = Some(*current);
                HeartbeatOutcome::NewlyFenced { current: *current }
            }
            _ => HeartbeatOutcome::Retry,
        }
    }
}

/// Whether reading the latest marker at start may be retried after `error` (unreadable stored
/// progress cannot repair itself).
pub fn restore_retryable(error: &StoreError) -> bool {
    !matches!(error, StoreError::Corrupt { .. })
}

/// The wait before retry `attempt` (0-based) of a store call at start: 100 ms doubling, at most 5 s.
pub fn backoff(attempt: u32) -> Duration {
    const FIRST_MS: u64 = 100;
    const MAX_MS: u64 = 5_000;
    let factor = 1u64.checked_shl(attempt.min(16)).unwrap_or(u64::MAX);
    Duration::from_millis(FIRST_MS.saturating_mul(factor).min(MAX_MS))
}

#[cfg(test)]
mod tests;
