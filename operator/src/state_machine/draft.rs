//! A decision being made: the status as drafted, the effects and events gathered so far, and
//! the helpers every phase's decisions share (the time, requeues, failing a run).
//! [`Draft::finish`] turns it into the [`Decision`]: which actions run, in which order, and
//! whether the status is written now or once an answer is in.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::action::{Action, Decision, EventType};
use super::observed::Observed;
use super::policy::retry_delay;
use super::reasons;
use super::view::AppView;
use crate::crd::{
    ApplicationStateType as State, FailureReason, RestartPolicyType, SparkApplicationSpec,
    SparkApplicationStatus,
};
use crate::sparkconf::RefusedKey;
use crate::unsupported::UnsupportedField;

/// A decision being made.
pub(super) struct Draft<'a> {
    pub(super) app: &'a AppView<'a>,
    /// With the widely used operator's defaults (restart intervals).
    pub(super) spec: SparkApplicationSpec,
    pub(super) unsupported: Vec<UnsupportedField>,
    /// `sparkConf` keys the operator refuses.
    pub(super) refused: Vec<RefusedKey>,
    pub(super) observed: &'a Observed,
    pub(super) now: Timestamp,
    pub(super) status: SparkApplicationStatus,
    pub(super) effects: Vec<Action>,
    pub(super) events: Vec<Action>,
    pub(super) requeue: Option<Duration>,
    pub(super) delete_app: bool,
    /// A submission is sent before anything of this decision is stored (see
    /// [`Draft::submit_path`]): the next round decides it all again with the answer.
    pub(super) awaiting_answer: bool,
    /// The UI objects are made before this decision's status is stored (see
    /// [`Draft::ensure_ui_objects`]): the next round decides it again with their answer.
    pub(super) awaiting_objects: bool,
}

impl<'a> Draft<'a> {
    /// The decision: the actions in execution order, and the status (written only when it
    /// changed and no answer it waits for is still to come).
    pub(super) fn finish(self, original: &SparkApplicationStatus) -> Decision {
        let mut actions = self.effects;
        if self.awaiting_answer {
            // Its status and events are decided again, from the same stored status, once the
            // answer is in; recording them now would write twice and repeat the events.
            actions.extend(self.requeue.map(Action::Requeue));
            actions.sort_by_key(Action::order);
            return Decision {
                status: original.clone(),
                actions,
            };
        }
        if self.awaiting_objects && self.status != *original {
            // One status write for the new state and the objects' record, once their answer is
            // in; its events are recorded with that write.
            actions.sort_by_key(Action::order);
            return Decision {
                status: self.status,
                actions,
            };
        }
        if self.delete_app {
            // The object goes away: writing its status first would only race the deletion.
            actions.push(Action::DeleteApplication);
            actions.sort_by_key(Action::order);
            return Decision {
                status: original.clone(),
                actions,
            };
        }
        if self.status != *original {
            actions.push(Action::WriteStatus);
        }
        actions.extend(self.events);
        if let Some(after) = self.requeue {
            actions.push(Action::Requeue(after));
        }
        // Stable: events keep the order they happened in, deletions the order they were found.
        actions.sort_by_key(Action::order);
        Decision {
            status: self.status,
            actions,
        }
    }

    pub(super) fn event(&mut self, event_type: EventType, reason: &'static str, message: String) {
        self.events.push(Action::RecordEvent {
            event_type,
            reason,
            message,
        });
    }

    /// The soonest of several requeues wins.
    pub(super) fn requeue(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    pub(super) fn name(&self) -> &str {
        self.app.name
    }

    pub(super) fn policy_type(&self) -> RestartPolicyType {
        self.spec
            .restart_policy
            .as_ref()
            .and_then(|p| p.policy_type)
            .unwrap_or(RestartPolicyType::Never)
    }

    pub(super) fn time(&self) -> Time {
        Time(self.now)
    }

    /// How long since `since`, zero if `since` is in the future (clock skew).
    pub(super) fn elapsed(&self, since: &Time) -> Duration {
        let ms = self
            .now
            .as_millisecond()
            .saturating_sub(since.0.as_millisecond());
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// `None` once `wait` has passed since `since`, else what is left.
    pub(super) fn remaining(&self, since: &Time, wait: Duration) -> Option<Duration> {
        wait.checked_sub(self.elapsed(since))
            .filter(|d| !d.is_zero())
    }

    /// What is left of a retry's wait ([`retry_delay`]: `interval` seconds times `attempts`)
    /// counted from `since`; `None` once the retry is due, or with nothing to count from.
    pub(super) fn retry_wait(
        &self,
        interval: Option<i64>,
        attempts: i32,
        since: Option<&Time>,
    ) -> Option<Duration> {
        let wait = retry_delay(interval, attempts);
        since.and_then(|t| self.remaining(t, wait))
    }

    /// When the current submission was made (its start timeout counts from there).
    pub(super) fn submitted_at(&self) -> Time {
        self.status
            .last_submission_attempt_time
            .clone()
            .unwrap_or(Time(self.now))
    }

    /// Records why the run failed; the state follows from the caller.
    pub(super) fn fail_run(&mut self, reason: FailureReason, message: String) {
        self.status.failure_reason = Some(reason);
        self.status.app_state.error_message = message;
        self.status.termination_time.get_or_insert(Time(self.now));
        self.requeue(Duration::ZERO);
    }

    pub(super) fn enter_failed(&mut self, message: String) {
        self.status.app_state.state = State::Failed;
        let text = format!("SparkApplication {} failed: {message}", self.name());
        self.event(EventType::Warning, reasons::FAILED, text);
        self.requeue(Duration::ZERO);
    }

    pub(super) fn delete_owned_driver(&mut self) {
        if let Some(driver) = self
            .observed
            .driver
            .as_ref()
            .filter(|d| d.owned && !d.terminating)
        {
            self.effects.push(Action::DeleteDriver {
                name: driver.name.clone(),
                uid: driver.uid.clone(),
            });
        }
    }
}

/// A duration of `ms` milliseconds, zero for a negative count.
pub(super) fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
