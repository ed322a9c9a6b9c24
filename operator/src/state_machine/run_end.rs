//! A run's end: SUCCEEDING completes or reruns (`Always`), FAILING reruns when the restart
//! policy allows it once its interval has passed or fails, INVALIDATING (the spec changed)
//! starts over; COMPLETED and FAILED wait for their time to live.

use std::time::Duration;

use super::action::EventType;
use super::draft::Draft;
use super::policy::should_retry_run;
use super::reasons;
use crate::crd::{ApplicationStateType as State, DriverInfo, FailureReason, RestartPolicyType};

impl Draft<'_> {
    pub(super) fn succeeding(&mut self) {
        if self.policy_type() == RestartPolicyType::Always {
            // The next run of an `Always` application is a run of its own, not a restart.
            self.new_run();
            self.rerun();
        } else {
            self.status.app_state.state = State::Completed;
            let message = format!("SparkApplication {} completed", self.name());
            self.event(EventType::Normal, reasons::COMPLETED, message);
            self.requeue(Duration::ZERO);
        }
    }

    pub(super) fn failing(&mut self) {
        if !self.refused_run_stopped() {
            return;
        }
        if !should_retry_run(self.policy_type(), &self.spec, &self.status) {
            if self.recovery().is_some() && self.driver_may_still_run() {
                // No successor will fence it; it still must stop holding resources.
                self.delete_owned_driver();
            }
            let message = self.status.app_state.error_message.clone();
            self.enter_failed(message);
            return;
        }
        let interval = self
            .spec
            .restart_policy
            .as_ref()
            .and_then(|p| p.on_failure_retry_interval);
        let since = self
            .status
            .termination_time
            .clone()
            .or_else(|| self.status.last_submission_attempt_time.clone());
        let attempts = self.status.execution_attempts;
        if let Some(left) = self.retry_wait(interval, attempts, since.as_ref()) {
            self.requeue(left);
            return;
        }
        self.rerun();
    }

    /// Failures after which the driver's process may still be running (the operator gave up on
    /// it rather than seeing it exit).
    pub(super) fn driver_may_still_run(&self) -> bool {
        matches!(
            self.status.failure_reason,
            Some(
                FailureReason::DriverStartTimeout
                    | FailureReason::DriverReadyTimeout
                    | FailureReason::ImagePullFailure
                    | FailureReason::HeartbeatLost
            )
        )
    }

    /// Removes the finished run's driver and resets the run's status; the submission happens
    /// from PENDING_RERUN once the driver is gone. With fenced restarts the driver stays until
    /// its epoch is fenced, and the submission path deletes it then.
    pub(super) fn rerun(&mut self) {
        if self.recovery().is_none() {
            self.delete_owned_driver();
        }
        self.clear_run();
        self.enter_pending_rerun();
    }

    /// Clears what belongs to the run that ended (its driver, executors and outcome) and a
    /// pending submission. Submission retries are counted per run (the field's documented
    /// meaning).
    fn clear_run(&mut self) {
        let status = &mut self.status;
        status.spark_application_id.clear();
        status.termination_time = None;
        status.app_state.error_message.clear();
        status.driver_info = DriverInfo::default();
        status.executor_state.clear();
        status.failure_reason = None;
        status.submission_pending = false;
        status.submission_attempts = 0;
    }

    pub(super) fn invalidating(&mut self) {
        if self.recovery().is_none() {
            self.delete_owned_driver();
        }
        // What ran under the old spec is no progress of the new one.
        self.new_run();
        self.clear_run();
        let status = &mut self.status;
        status.execution_attempts = 0;
        status.last_submission_attempt_time = None;
        status.spec_hash = None;
        self.enter_pending_rerun();
    }

    pub(super) fn enter_pending_rerun(&mut self) {
        self.status.app_state.state = State::PendingRerun;
        let message = format!("SparkApplication {} is pending rerun", self.name());
        self.event(EventType::Warning, reasons::PENDING_RERUN, message);
        self.requeue(Duration::ZERO);
    }

    /// COMPLETED, FAILED: only the TTL acts.
    pub(super) fn terminal(&mut self) {
        let ttl = self
            .spec
            .time_to_live_seconds
            .or(self.app.settings.default_ttl_seconds);
        let (Some(ttl), Some(terminated)) = (ttl, self.status.termination_time.clone()) else {
            return;
        };
        // A TTL of zero or less expires at once, as in the widely used operator.
        let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        match self.remaining(&terminated, ttl) {
            Some(left) => self.requeue(left),
            None => self.delete_app = true,
        }
    }
}
