//! The SparkApplication state machine, as one pure function:
//! `decide(app, observed, now) -> Decision { status, actions }`.
//!
//! The reconciler observes (the app from the API, the driver pod from the watch cache, the answer
//! of a submission it just made), calls [`decide`], then executes the actions in the order they
//! are listed ([`Action::order`]) and calls `decide` again on what changed. Nothing here reads a
//! clock, a cache or the network.
//!
//! States and transitions are the widely used operator's (table in `docs/operator.md`), with
//! these differences:
//! - **The submission id is a function of the persisted status.** Ids are `<app uid>-<n>` with
//!   `n` one more than the last id's, so a retry after a crash reuses the id and the submitter
//!   answers with the driver it already made; the answer is recorded with the id in one write.
//!   With fenced restarts the prepared submission (`status.submissionPending`, the id, the epoch)
//!   is written first and [`Action::Submit`] follows from the stored status.
//! - **A missing driver is not failed at once**: first a grace period after the submission, then a
//!   live read ([`Action::VerifyDriverAbsent`]); only its confirmation fails the run.
//! - **Per-stage timeouts** (`spec.applicationTimeoutConfig`, from the official Apache Spark
//!   operator) and the **`OnInfrastructureFailure`** restart policy.
//! - Spec changes are detected by a digest in `status.specHash`, not by comparing update events,
//!   so a change made while the operator was down is still seen.
//! - Nothing is decided before the pod cache has synced.
//!
//! Its parts, from the bottom up: what it is given (`view`, `observed`) and what it answers
//! (`action`, [`reasons`]); the ids and the spec digest a run is known by (`submission_id`,
//! `spec_hash`) and the retry rules (`policy`); the decision being drafted (`draft`), then the
//! decisions per concern: the spec's conditions (`conditions`), fenced restarts (`fencing`),
//! submitting (`submit`), following the driver (`driver`), the run's owned objects
//! (`owned_objects`), its executors (`executor_state`), a run's end (`run_end`) and suspension
//! (`suspend`). [`decide`] below picks the state's decisions and finishes the draft.

mod action;
mod observed;
mod policy;
pub mod reasons;
mod spec_hash;
mod submission_id;
mod view;

mod conditions;
mod draft;
mod driver;
mod executor_state;
mod fencing;
mod owned_objects;
mod quota_condition;
mod run_end;
mod submit;
mod suspend;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::crd::ApplicationStateType as State;
use crate::defaults::with_defaults;
use crate::sparkconf::refused_keys;
use crate::unsupported::unsupported_fields;
use draft::Draft;

pub use action::{Action, Decision, EventType};
pub use driver::{
    DRIVER_PENDING_CONDITION, DRIVER_STUCK_AFTER, DRIVER_STUCK_RECHECK, RUNNING_SETTLE,
};
pub use executor_state::MAX_TRACKED_EXECUTORS;
pub use fencing::FIRST_RUN;
pub use observed::{
    DriverPhase, FenceOutcome, Observed, ObservedDriver, ObservedExecutor, PendingReason,
    RefusedObject, SubmissionOutcome, UiMade,
};
pub use owned_objects::WEB_UI_CONDITION;
pub use policy::{retry_delay, should_retry_run, should_retry_submission};
pub use spec_hash::spec_hash;
pub use submission_id::{next_submission_id, sending_id, submission_attempt};
pub use view::{AppView, Settings};

/// Decides the next status and actions. Pure: `now` is the only clock.
pub fn decide(app: &AppView<'_>, observed: &Observed, now: Timestamp) -> Decision {
    let original = app.status.cloned().unwrap_or_default();
    if !observed.cache_synced {
        return Decision {
            status: original,
            actions: vec![Action::Requeue(app.settings.unsynced_requeue)],
        };
    }
    let mut d = Draft {
        app,
        spec: with_defaults(app.spec),
        unsupported: unsupported_fields(app.spec),
        refused: refused_keys(app.spec, app.namespace),
        observed,
        now,
        status: original.clone(),
        effects: Vec::new(),
        events: Vec::new(),
        requeue: None,
        delete_app: false,
        awaiting_answer: false,
        awaiting_objects: false,
    };
    d.update_unsupported_condition();
    d.update_refused_condition();

    let hash = spec_hash(app.spec);
    let changed = d.status.spec_hash.as_ref().is_some_and(|h| *h != hash);
    if changed && d.status.app_state.state != State::Invalidating {
        d.status.app_state.state = State::Invalidating;
        d.event(
            EventType::Normal,
            reasons::SPEC_CHANGED,
            format!(
                "SparkApplication {} spec changed, invalidating the current run",
                app.name
            ),
        );
        d.requeue(Duration::ZERO);
    } else if app.spec.suspend == Some(true)
        && !matches!(
            d.status.app_state.state,
            State::Completed | State::Failed | State::Suspending | State::Suspended
        )
    {
        // As the widely used operator: suspending is possible from every state but the
        // terminal ones.
        d.status.app_state.state = State::Suspending;
        d.event(
            EventType::Warning,
            reasons::SUSPENDING,
            format!("SparkApplication {} is suspending", app.name),
        );
        d.requeue(Duration::ZERO);
    } else {
        match d.status.app_state.state {
            State::Suspending => d.suspending(),
            State::Suspended => d.suspended(),
            State::Resuming => d.submit_path(&hash),
            State::New | State::PendingRerun => d.submit_path(&hash),
            State::SubmissionFailed if d.status.submission_pending => d.submit_path(&hash),
            State::SubmissionFailed => d.submission_failed(&hash),
            State::Submitted | State::Running | State::Unknown => d.track_driver(),
            State::Succeeding => d.succeeding(),
            State::Failing => d.failing(),
            State::Invalidating => d.invalidating(),
            State::Completed | State::Failed => d.terminal(),
        }
        if matches!(d.status.app_state.state, State::Submitted | State::Running) {
            d.ensure_ui_objects();
        }
        // SUCCEEDING and FAILING need nothing more from the world to be left: entered in this
        // decision, they are left in it too, and the status is written once (RUNNING →
        // COMPLETED rather than RUNNING → SUCCEEDING → COMPLETED), with both transitions' events.
        if d.status.app_state.state != original.app_state.state {
            match d.status.app_state.state {
                State::Succeeding => d.succeeding(),
                State::Failing => d.failing(),
                _ => {}
            }
        }
    }
    d.track_executors();
    d.update_quota_condition();
    d.finish(&original)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
