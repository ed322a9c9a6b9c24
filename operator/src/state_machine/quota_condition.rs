//! The condition `ExecutorsPendingQuota`: the current run's executors a ResourceQuota keeps out
//! ([`crate::executor_quota`]), with a Warning event when it appears or changes.

use super::draft::Draft;
use super::observed::DriverPhase;
use crate::crd::ApplicationStateType as State;
use crate::executor_quota::{self, ExecutorDemand};

impl Draft<'_> {
    /// Sets the condition while the driver runs and a full quota keeps executors out; removes
    /// it otherwise (the executors came, the quota has room, or the run is over).
    pub(super) fn update_quota_condition(&mut self) {
        let current = self.status.submission_id.as_str();
        let driver_running = self.observed.driver.as_ref().is_some_and(|d| {
            d.submission_id.as_deref() == Some(current)
                && matches!(d.phase, DriverPhase::Running { .. })
        });
        let shortfall =
            (driver_running && !self.delete_app && self.status.app_state.state == State::Running)
                .then(|| {
                    let executors = self.observed.executors.iter();
                    executor_quota::decide(
                        executor_quota::expected_executors(&self.spec),
                        executor_quota::live_executors(
                            executors.map(|e| (e.submission_id.as_deref(), e.state)),
                            current,
                        ),
                        &ExecutorDemand::of(&self.spec),
                        &self.observed.quotas,
                    )
                })
                .flatten();
        self.update_condition(
            (executor_quota::CONDITION_TYPE, executor_quota::REASON),
            shortfall.map(|s| s.message()),
            "executors a quota keeps out",
        );
    }
}
