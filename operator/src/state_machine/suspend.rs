//! SUSPENDING and SUSPENDED (`spec.suspend`): the driver goes, the run's status is cleared, and
//! clearing `suspend` resumes with fresh attempt counts.

use std::time::Duration;

use super::action::EventType;
use super::draft::Draft;
use super::reasons;
use crate::crd::{ApplicationStateType as State, DriverInfo};

impl Draft<'_> {
    /// SUSPENDING: the driver goes; once it is gone the run's status is cleared and the app is
    /// SUSPENDED.
    pub(super) fn suspending(&mut self) {
        if let Some(driver) = self.observed.driver.as_ref().filter(|d| d.owned) {
            self.delete_owned_driver();
            if driver.terminating || !self.effects.is_empty() {
                self.requeue(self.app.settings.deletion_requeue);
                return;
            }
        }
        let status = &mut self.status;
        status.app_state.state = State::Suspended;
        status.spark_application_id.clear();
        status.app_state.error_message.clear();
        status.driver_info = DriverInfo::default();
        status.executor_state.clear();
        status.submission_pending = false;
        let message = format!("SparkApplication {} is suspended", self.name());
        self.event(EventType::Warning, reasons::SUSPENDED, message);
    }

    /// SUSPENDED: nothing runs until `spec.suspend` is cleared; then RESUMING submits a new run
    /// with fresh attempt counts.
    pub(super) fn suspended(&mut self) {
        if self.app.spec.suspend == Some(true) {
            return;
        }
        let status = &mut self.status;
        status.app_state.state = State::Resuming;
        status.submission_attempts = 0;
        status.execution_attempts = 0;
        status.last_submission_attempt_time = None;
        status.termination_time = None;
        status.failure_reason = None;
        let message = format!("SparkApplication {} is resuming", self.name());
        self.event(EventType::Warning, reasons::RESUMING, message);
        self.requeue(Duration::ZERO);
    }
}
