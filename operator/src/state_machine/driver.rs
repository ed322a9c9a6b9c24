//! SUBMITTED, RUNNING, UNKNOWN: follow the current submission's driver. Its phase moves the
//! state; a driver missing from the cache is read live before the run fails; the start and ready
//! timeouts; what holds a pending driver, from the pod or its Warning events.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::action::{Action, EventType};
use super::draft::{Draft, millis};
use super::observed::{DriverPhase, ObservedDriver, PendingReason};
use super::reasons;
use crate::crd::{ApplicationStateType as State, FailureReason};

/// The condition type a held driver shows, with the pod's reason and message.
pub const DRIVER_PENDING_CONDITION: &str = "DriverPending";

/// How long a driver has run (by its container's start time, which the kubelet reports in whole
/// seconds) before SUBMITTED → RUNNING is written. A driver that ends sooner is seen in one
/// decision from SUBMITTED to its end, as a polling operator sees it: one status write and
/// one `SparkDriverRunning` event fewer. Its container's start time is rounded down, so the
/// wait after the true start is between one and two seconds.
pub const RUNNING_SETTLE: Duration = Duration::from_secs(2);

/// How long after its submission a pending driver's Warning events are first read, and how often
/// again while it stays pending without a reason on the pod.
pub const DRIVER_STUCK_AFTER: Duration = Duration::from_secs(5);
pub const DRIVER_STUCK_RECHECK: Duration = Duration::from_secs(15);

impl Draft<'_> {
    /// SUBMITTED, RUNNING, UNKNOWN: follow the driver of the current submission.
    pub(super) fn track_driver(&mut self) {
        let observed = self.observed;
        let current = observed
            .driver
            .as_ref()
            .filter(|d| d.submission_id.as_deref() == Some(self.status.submission_id.as_str()));
        let Some(driver) = current else {
            self.driver_missing();
            return;
        };
        if let Some(id) = driver.spark_app_id.as_ref().filter(|id| !id.is_empty()) {
            self.status.spark_application_id = id.clone();
        }
        let timeouts = self
            .spec
            .application_timeout_config
            .clone()
            .unwrap_or_default();
        if let DriverPhase::Running {
            started_at: Some(started),
            ..
        } = &driver.phase
            && let Some(left) = self.running_settles(*started)
        {
            self.requeue(left);
            return;
        }
        if !matches!(driver.phase, DriverPhase::Pending { .. }) {
            self.driver_unblocked();
        }
        match &driver.phase {
            DriverPhase::Pending {
                waiting_reason,
                blocked,
            } => {
                self.driver_state(State::Submitted, driver);
                let Some(limit) = timeouts.driver_start_timeout_millis.map(millis) else {
                    self.pending_driver(driver, blocked.as_ref());
                    return;
                };
                let since = self.submitted_at();
                match self.remaining(&since, limit) {
                    Some(left) => {
                        self.requeue(left);
                        self.pending_driver(driver, blocked.as_ref());
                    }
                    None => {
                        let image = waiting_reason
                            .as_deref()
                            .filter(|r| FailureReason::is_image_pull_waiting_reason(r));
                        let (reason, message) = match image {
                            Some(r) => (
                                FailureReason::ImagePullFailure,
                                format!(
                                    "driver image could not be pulled ({r}) within {}ms",
                                    limit.as_millis()
                                ),
                            ),
                            None => (
                                FailureReason::DriverStartTimeout,
                                format!("driver did not start within {}ms", limit.as_millis()),
                            ),
                        };
                        self.time_out(driver, reason, reasons::DRIVER_START_TIMED_OUT, message);
                    }
                }
            }
            DriverPhase::Running { ready, started_at } => {
                self.driver_state(State::Running, driver);
                if self.heartbeat_lost(driver, started_at.map(Time)) {
                    return;
                }
                let Some(limit) = timeouts.driver_ready_timeout_millis.map(millis) else {
                    return;
                };
                if *ready {
                    return;
                }
                let since = started_at.map(Time).unwrap_or_else(|| self.submitted_at());
                match self.remaining(&since, limit) {
                    Some(left) => self.requeue(left),
                    None => {
                        let message =
                            format!("driver did not become ready within {}ms", limit.as_millis());
                        self.time_out(
                            driver,
                            FailureReason::DriverReadyTimeout,
                            reasons::DRIVER_READY_TIMED_OUT,
                            message,
                        );
                    }
                }
            }
            DriverPhase::Succeeded => {
                self.status.termination_time.get_or_insert(Time(self.now));
                self.driver_state(State::Succeeding, driver);
                self.requeue(Duration::ZERO);
            }
            DriverPhase::Failed {
                exit_code,
                reason,
                message,
            } => {
                let code = exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string());
                let text = format!(
                    "driver container failed with ExitCode: {code}, Reason: {}{}",
                    reason.as_str(),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(", {message}")
                    }
                );
                self.fail_run(*reason, text);
                self.driver_state(State::Failing, driver);
            }
            DriverPhase::Unknown => {
                self.driver_state(State::Unknown, driver);
                self.heartbeat_lost(driver, None);
            }
        }
    }

    /// What is left of [`RUNNING_SETTLE`] for a SUBMITTED run whose driver started at
    /// `started`; `None` when RUNNING is to be written now. Only a run whose status says nothing
    /// else about the driver waits (a `DriverPending` condition to clear is written at once).
    fn running_settles(&self, started: Timestamp) -> Option<Duration> {
        let held = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == DRIVER_PENDING_CONDITION);
        if self.status.app_state.state != State::Submitted || held {
            return None;
        }
        self.remaining(&Time(started), RUNNING_SETTLE)
    }

    /// A driver still pending: what holds it (from the pod, else from its latest Warning event,
    /// read once it has been pending a while) goes into a condition, the error message and a
    /// Warning `SparkDriverPending` event, each time it changes.
    pub(super) fn pending_driver(
        &mut self,
        driver: &ObservedDriver,
        blocked: Option<&PendingReason>,
    ) {
        let from_events = self.observed.driver_warning.as_ref();
        let held = blocked.or(from_events.and_then(Option::as_ref));
        if let Some(held) = held {
            self.driver_blocked(driver, held.clone());
        }
        if blocked.is_some() {
            return;
        }
        if from_events.is_some() {
            // Read in this reconcile; look again later while it stays pending.
            self.requeue(DRIVER_STUCK_RECHECK);
            return;
        }
        let since = self.submitted_at();
        match self.remaining(&since, DRIVER_STUCK_AFTER) {
            Some(left) => self.requeue(left),
            None => self.effects.push(Action::InspectPendingDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            }),
        }
    }

    pub(super) fn driver_blocked(&mut self, driver: &ObservedDriver, held: PendingReason) {
        let message = format!("{}: {}", held.reason, held.message);
        let existing = self
            .status
            .conditions
            .iter()
            .position(|c| c.type_ == DRIVER_PENDING_CONDITION);
        if let Some(i) = existing {
            let c = &self.status.conditions[i];
            if c.reason == held.reason && c.message == held.message {
                return;
            }
            self.status.conditions.remove(i);
        }
        self.status.conditions.push(Condition {
            type_: DRIVER_PENDING_CONDITION.to_owned(),
            status: "True".to_owned(),
            reason: held.reason.clone(),
            message: held.message.clone(),
            last_transition_time: self.time(),
            observed_generation: None,
        });
        self.status.app_state.error_message = message.clone();
        self.event(
            EventType::Warning,
            reasons::DRIVER_PENDING,
            format!("Driver {} is pending: {message}", driver.name),
        );
    }

    /// The driver left pending: its condition goes, and the error message it set.
    pub(super) fn driver_unblocked(&mut self) {
        let Some(i) = self
            .status
            .conditions
            .iter()
            .position(|c| c.type_ == DRIVER_PENDING_CONDITION)
        else {
            return;
        };
        let c = self.status.conditions.remove(i);
        if self.status.app_state.error_message == format!("{}: {}", c.reason, c.message) {
            self.status.app_state.error_message.clear();
        }
    }

    /// Moves to the state the driver implies, with the widely used operator's driver event.
    pub(super) fn driver_state(&mut self, state: State, driver: &ObservedDriver) {
        if self.status.app_state.state == state {
            return;
        }
        self.status.app_state.state = state;
        let name = &driver.name;
        let (event_type, reason, message) = match state {
            State::Submitted => (
                EventType::Normal,
                reasons::DRIVER_PENDING,
                format!("Driver {name} is pending"),
            ),
            State::Running => (
                EventType::Normal,
                reasons::DRIVER_RUNNING,
                format!("Driver {name} is running"),
            ),
            State::Succeeding => (
                EventType::Normal,
                reasons::DRIVER_COMPLETED,
                format!("Driver {name} completed"),
            ),
            State::Failing => (
                EventType::Warning,
                reasons::DRIVER_FAILED,
                format!("Driver {name} failed"),
            ),
            _ => (
                EventType::Warning,
                reasons::DRIVER_UNKNOWN,
                format!("Driver {name} in unknown state"),
            ),
        };
        self.event(event_type, reason, message);
    }

    pub(super) fn time_out(
        &mut self,
        driver: &ObservedDriver,
        reason: FailureReason,
        event: &'static str,
        message: String,
    ) {
        // Delete it so it stops holding resources; a rerun waits for it to be gone. With fenced
        // restarts the fence comes first: the rerun deletes it, or `failing` if none follows.
        if !driver.terminating && self.recovery().is_none() {
            self.effects.push(Action::DeleteDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            });
        }
        self.event(EventType::Warning, event, message.clone());
        self.fail_run(reason, message);
        self.status.app_state.state = State::Failing;
    }

    pub(super) fn driver_missing(&mut self) {
        let settings = self.app.settings;
        if self.status.app_state.state == State::Submitted {
            let since = self.submitted_at();
            if let Some(left) = self.remaining(&since, settings.driver_creation_grace) {
                self.requeue(left);
                return;
            }
        }
        let name = self.status.driver_info.pod_name.clone();
        if !self.observed.driver_absent_verified {
            self.effects.push(Action::VerifyDriverAbsent { name });
            return;
        }
        let message = format!("driver pod {name} not found");
        self.event(
            EventType::Warning,
            reasons::DRIVER_NOT_FOUND,
            message.clone(),
        );
        self.fail_run(FailureReason::DriverLost, message);
        self.status.app_state.state = State::Failing;
    }
}
