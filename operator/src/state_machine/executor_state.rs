//! The current run's executors in `status.executorState` and `status.executorCounts`, with an
//! event per change.

use super::action::EventType;
use super::draft::Draft;
use super::reasons;
use crate::crd::{ApplicationStateType as State, ExecutorCounts, ExecutorState};

/// At most this many executors of one application are tracked in its status, as in the widely
/// used operator (`maxTrackedExecutorPerApp`): a status is one object, with a size limit.
pub const MAX_TRACKED_EXECUTORS: usize = 1000;

impl Draft<'_> {
    /// Merges the current run's executors into `status.executorState` (an executor gone from the
    /// index, deleted by its driver, keeps its last known state), with an event per change that
    /// carries the counts, and the counts in `status.executorCounts` for the printer columns.
    pub(super) fn track_executors(&mut self) {
        let current = self.status.submission_id.as_str();
        let between_runs = matches!(
            self.status.app_state.state,
            State::New
                | State::PendingRerun
                | State::Invalidating
                | State::Suspending
                | State::Suspended
                | State::Resuming
        );
        if current.is_empty() || self.delete_app || between_runs {
            return;
        }
        let mut changes = Vec::new();
        for executor in &self.observed.executors {
            if executor.submission_id.as_deref() != Some(current) {
                continue;
            }
            let known = self.status.executor_state.get(&executor.name).copied();
            if known == Some(executor.state) {
                continue;
            }
            if known.is_none() && self.status.executor_state.len() >= MAX_TRACKED_EXECUTORS {
                continue;
            }
            self.status
                .executor_state
                .insert(executor.name.clone(), executor.state);
            changes.push(executor);
        }
        let counts = ExecutorCounts::of(&self.status.executor_state);
        self.status.executor_counts = (!self.status.executor_state.is_empty()).then_some(counts);
        for executor in changes {
            let name = &executor.name;
            let (event_type, reason, what) = match executor.state {
                ExecutorState::Pending => (
                    EventType::Normal,
                    reasons::EXECUTOR_PENDING,
                    format!("Executor {name} is pending"),
                ),
                ExecutorState::Running => (
                    EventType::Normal,
                    reasons::EXECUTOR_RUNNING,
                    format!("Executor {name} is running"),
                ),
                ExecutorState::Completed => (
                    EventType::Normal,
                    reasons::EXECUTOR_COMPLETED,
                    format!("Executor {name} completed"),
                ),
                ExecutorState::Failed => (
                    EventType::Warning,
                    reasons::EXECUTOR_FAILED,
                    format!(
                        "Executor {name} failed with ExitCode: {}, Reason: {}, Pod Message: {}",
                        executor.exit_code.unwrap_or(-1),
                        executor.reason.as_deref().unwrap_or("Unknown"),
                        executor.message.as_deref().unwrap_or("")
                    ),
                ),
                ExecutorState::Unknown => (
                    EventType::Warning,
                    reasons::EXECUTOR_UNKNOWN,
                    format!("Executor {name} in unknown state"),
                ),
            };
            self.event(event_type, reason, format!("{what} (executors: {counts})"));
        }
    }
}
