//! Fenced restarts' decisions: the epoch a new driver runs under and the marker it restores,
//! older drivers deleted once fenced, a new run of the progress, a driver whose agent stopped
//! heartbeating.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::action::{Action, EventType};
use super::draft::Draft;
use super::observed::{FenceOutcome, ObservedDriver};
use super::reasons;
use crate::crd::{ApplicationStateType as State, FailureReason, RecoveryStatus};
use crate::fence::INITIAL_EPOCH;
use crate::recovery::{self, RecoverySettings};

/// The run of an application's progress before any spec change or `Always` rerun.
pub const FIRST_RUN: u64 = 1;

impl Draft<'_> {
    /// The operator's recovery settings, when this app uses fenced restarts.
    pub(super) fn recovery(&self) -> Option<&RecoverySettings> {
        self.app
            .settings
            .recovery
            .as_ref()
            .filter(|_| recovery::requested(&self.spec))
    }

    /// The run of the application's progress: the first is 1.
    pub(super) fn run(&self) -> u64 {
        self.status
            .recovery_status
            .as_ref()
            .map_or(FIRST_RUN, |r| r.run)
    }

    /// The next driver starts a new run: it restores nothing from the previous one (whose drivers
    /// are fenced when the new run's first epoch is).
    pub(super) fn new_run(&mut self) {
        if let Some(r) = self.status.recovery_status.as_mut() {
            r.run = r.run.saturating_add(1);
            r.run_start_epoch = None;
            r.restored_from_epoch = None;
            r.restored_seq = None;
        }
    }

    /// Records the epoch the next driver runs under and the marker it will restore.
    pub(super) fn record_fence(&mut self, fence: &FenceOutcome) {
        let previous = self.status.recovery_status.as_ref().map(|r| r.epoch);
        let run_start = self
            .status
            .recovery_status
            .as_ref()
            .and_then(|r| r.run_start_epoch);
        // A driver of this run ran before: this is a restart, which should resume.
        let restart = run_start.is_some();
        self.status.recovery_status = Some(RecoveryStatus {
            epoch: fence.epoch,
            run: self.run(),
            run_start_epoch: Some(run_start.unwrap_or(fence.epoch)),
            restored_from_epoch: fence.latest.map(|(epoch, _)| epoch),
            restored_seq: fence.latest.map(|(_, seq)| seq),
        });
        if previous != Some(fence.epoch) {
            let message = match previous {
                Some(old) => format!(
                    "fenced epoch {old}; the next driver of {} runs under epoch {}",
                    self.name(),
                    fence.epoch
                ),
                None => format!(
                    "the first driver of {} runs under epoch {}",
                    self.name(),
                    fence.epoch
                ),
            };
            self.event(EventType::Normal, reasons::EPOCH_ADVANCED, message);
        }
        if restart && fence.latest.is_none() {
            let message = format!(
                "SparkApplication {} restarts from zero: its drivers never committed a progress marker",
                self.name()
            );
            self.event(EventType::Warning, reasons::RESTART_FROM_ZERO, message);
        }
    }

    /// Deletes every driver of this app but the current submission's (older epochs', previous
    /// runs'), fenced already, so a zombie on a partitioned node can do no harm while it lingers.
    pub(super) fn delete_older_drivers(&mut self) {
        let current = self.status.submission_id.as_str();
        let stale: Vec<Action> = self
            .observed
            .other_drivers
            .iter()
            .chain(self.observed.driver.iter())
            .filter(|d| d.owned && !d.terminating && d.submission_id.as_deref() != Some(current))
            .map(|d| Action::DeleteDriver {
                name: d.name.clone(),
                uid: d.uid.clone(),
            })
            .collect();
        for action in stale {
            if !self.effects.contains(&action) {
                self.effects.push(action);
            }
        }
    }

    /// Fenced restarts: a driver that looks alive but whose agent stopped heartbeating for longer
    /// than the window (a partitioned node, a hung pod) has failed; the restart policy replaces it
    /// after fencing. Returns whether it was failed.
    pub(super) fn heartbeat_lost(
        &mut self,
        driver: &ObservedDriver,
        started_at: Option<Time>,
    ) -> bool {
        let Some(settings) = self.recovery() else {
            return false;
        };
        let window_ms = recovery::heartbeat_timeout_ms(&self.spec, settings);
        let Some(read) = self.observed.heartbeat else {
            // Not read in this reconcile (the reconciler reads it for RUNNING and UNKNOWN apps).
            self.requeue(Duration::from_millis(window_ms / 2));
            return false;
        };
        let epoch = self.status.recovery_status.as_ref().map(|r| r.epoch);
        let now_ms = u64::try_from(self.now.as_millisecond()).unwrap_or(0);
        // Before the agent's first heartbeat, the driver's start is the reference.
        let since_ms = match read.filter(|hb| Some(hb.epoch) == epoch) {
            Some(hb) => hb.at_ms,
            None => {
                let start = started_at.unwrap_or_else(|| self.submitted_at());
                u64::try_from(start.0.as_millisecond()).unwrap_or(0)
            }
        };
        let age_ms = now_ms.saturating_sub(since_ms);
        if age_ms <= window_ms {
            let next = (window_ms - age_ms).min(window_ms / 2).max(100);
            self.requeue(Duration::from_millis(next));
            return false;
        }
        let message = format!(
            "driver {} (epoch {}) looks alive but its recovery agent has not heartbeated for {age_ms}ms (window {window_ms}ms)",
            driver.name,
            epoch.unwrap_or(INITIAL_EPOCH),
        );
        self.event(EventType::Warning, reasons::HEARTBEAT_LOST, message.clone());
        self.fail_run(FailureReason::HeartbeatLost, message);
        self.status.app_state.state = State::Failing;
        true
    }
}
