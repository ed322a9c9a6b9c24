//! ScheduledSparkApplications: when a run is due and what to do about it, as a pure function of
//! the schedule, the runs it owns and the time. The controller observes, calls [`decide`], and
//! executes the decision in its order: delete runs, create the run, write the status.
//!
//! One run per tick, whatever happens: a run is named after its tick (`<schedule>-<unix
//! seconds of the tick>`), and the tick is the `status.nextRun` persisted before it came due. A
//! crash between the create and the status write, a restart, or a new leader computes the same
//! name, and the API server's AlreadyExists answer keeps the second create from making a second
//! run. After missed ticks (the operator was down, or a run was forbidden), one run catches up
//! and the schedule continues from the present: a backlog is never replayed.
//!
//! Suspension clears `status.nextRun`; resuming schedules the next tick after the present, so
//! ticks missed while suspended never run.

pub mod cron;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::{
    ConcurrencyPolicy, ScheduleState, ScheduledSparkApplication, ScheduledSparkApplicationStatus,
};
use cron::CronSchedule;

/// On every run: the name of the ScheduledSparkApplication it belongs to (kubeflow's label).
pub const SCHEDULED_APP_NAME_LABEL: &str = "sparkoperator.k8s.io/scheduled-app-name";

/// A run the schedule owns, as the cache shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    pub uid: String,
    pub created: Timestamp,
    pub outcome: RunOutcome,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Not finished (any state but COMPLETED and FAILED).
    Unfinished,
    Succeeded,
    Failed,
}

/// A run to delete, with the uid that must still match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub name: String,
    pub uid: String,
}

/// An event to record on the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// What to do, in this order: delete, create, write the status, come back after the delay.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub delete: Vec<RunRef>,
    /// The run to create, by name (its spec is the schedule's template).
    pub create: Option<String>,
    pub status: ScheduledSparkApplicationStatus,
    pub events: Vec<ScheduleEvent>,
    /// When the next tick comes due; `None`: only a change of the object wakes it.
    pub requeue_after: Option<SignedDuration>,
}

/// The run's name for a tick.
pub fn run_name(schedule: &str, tick: Timestamp) -> String {
    format!("{schedule}-{}", tick.as_second())
}

/// Decides for `app`, which owns `runs`, at `now`.
pub fn decide(app: &ScheduledSparkApplication, runs: &[Run], now: Timestamp) -> Decision {
    let name = app.metadata.name.as_deref().unwrap_or_default();
    let spec = &app.spec;
    let mut status = app.status.clone().unwrap_or_default();
    let mut decision = Decision {
        delete: Vec::new(),
        create: None,
        status: ScheduledSparkApplicationStatus::default(),
        events: Vec::new(),
        requeue_after: None,
    };
    keep_history(
        spec_limit(spec.successful_run_history_limit),
        RunOutcome::Succeeded,
        runs,
        &mut status.past_successful_run_names,
        &mut decision.delete,
    );
    keep_history(
        spec_limit(spec.failed_run_history_limit),
        RunOutcome::Failed,
        runs,
        &mut status.past_failed_run_names,
        &mut decision.delete,
    );

    if spec.suspend == Some(true) {
        status.next_run = None;
        status.reason = "Suspended".to_owned();
        decision.status = status;
        return decision;
    }
    let schedule =
        match CronSchedule::parse(&spec.schedule, spec.time_zone.as_deref().unwrap_or("")) {
            Ok(schedule) => schedule,
            Err(error) => {
                fail_validation(&mut status, &mut decision, error.to_string());
                decision.status = status;
                return decision;
            }
        };
    let generation = app.metadata.generation;
    let fresh = status.schedule_state != ScheduleState::Scheduled
        || status.next_run.is_none()
        || status.observed_generation != generation;
    if fresh {
        // New, resumed, re-validated or changed: the first tick after the present.
        match schedule.next_after(now) {
            Some(next) => {
                status.schedule_state = ScheduleState::Scheduled;
                status.reason = String::new();
                status.next_run = Some(Time(next));
                status.observed_generation = generation;
                decision.requeue_after = Some(until(now, next));
            }
            None => fail_validation(
                &mut status,
                &mut decision,
                format!("the schedule {:?} never fires", spec.schedule),
            ),
        }
        decision.status = status;
        return decision;
    }
    let Some(Time(tick)) = status.next_run else {
        decision.status = status;
        return decision;
    };
    if tick > now {
        decision.requeue_after = Some(until(now, tick));
        decision.status = status;
        return decision;
    }

    // Due. The run for this tick may already exist (a crash after its create): that is the run.
    let run = run_name(name, tick);
    let others_unfinished: Vec<&Run> = runs
        .iter()
        .filter(|r| r.outcome == RunOutcome::Unfinished && r.name != run)
        .collect();
    let already = runs.iter().any(|r| r.name == run);
    let policy = spec.concurrency_policy.unwrap_or_default();
    if !already && policy == ConcurrencyPolicy::Forbid && !others_unfinished.is_empty() {
        decision.events.push(ScheduleEvent {
            warning: false,
            reason: "ScheduledSparkApplicationRunSkipped",
            note: format!(
                "run for {tick} skipped: {} has not finished (concurrencyPolicy Forbid)",
                others_unfinished[0].name
            ),
        });
    } else {
        if !already && policy == ConcurrencyPolicy::Replace {
            for r in &others_unfinished {
                decision.delete.push(RunRef {
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                });
            }
        }
        if !already {
            decision.create = Some(run.clone());
            decision.events.push(ScheduleEvent {
                warning: false,
                reason: "ScheduledSparkApplicationRunStarted",
                note: format!("started run {run} for {tick}"),
            });
        }
        status.last_run = Some(Time(now));
        status.last_run_name = run;
    }
    match schedule.next_after(now) {
        Some(next) => {
            status.next_run = Some(Time(next));
            decision.requeue_after = Some(until(now, next));
        }
        None => status.next_run = None,
    }
    decision.status = status;
    decision
}

fn fail_validation(
    status: &mut ScheduledSparkApplicationStatus,
    decision: &mut Decision,
    reason: String,
) {
    if status.schedule_state != ScheduleState::FailedValidation || status.reason != reason {
        decision.events.push(ScheduleEvent {
            warning: true,
            reason: "ScheduledSparkApplicationFailedValidation",
            note: reason.clone(),
        });
    }
    status.schedule_state = ScheduleState::FailedValidation;
    status.reason = reason;
    status.next_run = None;
}

/// A history limit: the spec's, or 1; never negative.
fn spec_limit(limit: Option<i32>) -> usize {
    usize::try_from(limit.unwrap_or(1)).unwrap_or(0)
}

/// Keeps the `limit` most recent runs with `outcome`, names them in `names`, and marks the
/// older ones for deletion.
fn keep_history(
    limit: usize,
    outcome: RunOutcome,
    runs: &[Run],
    names: &mut Vec<String>,
    delete: &mut Vec<RunRef>,
) {
    let mut finished: Vec<&Run> = runs.iter().filter(|r| r.outcome == outcome).collect();
    finished.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.name.cmp(&a.name)));
    *names = finished
        .iter()
        .take(limit)
        .map(|r| r.name.clone())
        .collect();
    delete.extend(finished.iter().skip(limit).map(|r| RunRef {
        name: r.name.clone(),
        uid: r.uid.clone(),
    }));
}

fn until(now: Timestamp, then: Timestamp) -> SignedDuration {
    then.duration_since(now).max(SignedDuration::ZERO)
}

#[cfg(test)]
mod tests;
