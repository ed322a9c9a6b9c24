use serde_json::{Value, json};

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("an RFC 3339 instant")
}

/// A schedule named `nightly`; `spec` and `status` are merged over the defaults.
fn app(spec: Value, status: Value) -> ScheduledSparkApplication {
    let mut full = json!({
        "schedule": "0 2 * * *",
        "timeZone": "UTC",
        "template": {"type": "Scala", "mode": "cluster", "sparkVersion": "4.0.0",
                     "mainApplicationFile": "local:///x.jar", "driver": {}, "executor": {}},
    });
    if let (Some(full), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": "nightly", "namespace": "default", "uid": "s-uid", "generation": 1},
        "spec": full,
        "status": status,
    }))
    .expect("a ScheduledSparkApplication")
}

/// A status scheduled for `next_run`, computed for generation 1.
fn scheduled(next_run: &str) -> Value {
    json!({"scheduleState": "Scheduled", "nextRun": next_run, "observedGeneration": 1})
}

fn run(name: &str, created: &str, outcome: RunOutcome) -> Run {
    Run {
        name: name.to_owned(),
        uid: format!("{name}-uid"),
        created: at(created),
        outcome,
    }
}

fn next_run(decision: &Decision) -> Option<Timestamp> {
    decision.status.next_run.as_ref().map(|t| t.0)
}

#[test]
fn a_new_schedule_waits_for_its_first_tick() {
    let d = decide(&app(json!({}), json!({})), &[], at("2026-12-01T10:00:00Z"));
    assert_eq!(d.status.schedule_state, ScheduleState::Scheduled);
    assert_eq!(next_run(&d), Some(at("2026-12-02T02:00:00Z")));
    assert_eq!(d.requeue_after, Some(SignedDuration::from_hours(16)));
    assert_eq!((d.create, d.delete), (None, vec![]));
}

#[test]
fn a_due_tick_creates_one_run_named_after_the_tick() {
    let tick = at("2026-12-02T02:00:00Z");
    let now = at("2026-12-02T02:00:01Z");
    let d = decide(&app(json!({}), scheduled("2026-12-02T02:00:00Z")), &[], now);
    assert_eq!(d.create.as_deref(), Some("nightly-1796176800"));
    assert_eq!(d.create, Some(run_name("nightly", tick)));
    assert_eq!(d.status.last_run_name, "nightly-1796176800");
    assert_eq!(d.status.last_run.as_ref().map(|t| t.0), Some(now));
    assert_eq!(next_run(&d), Some(at("2026-12-03T02:00:00Z")));
    assert_eq!(d.events[0].reason, "ScheduledSparkApplicationRunStarted");
}

#[test]
fn a_crash_before_the_status_write_never_makes_a_second_run() {
    let a = app(json!({}), scheduled("2026-12-02T02:00:00Z"));
    // A restart or a new leader decides again from the same persisted status: the same name.
    let first = decide(&a, &[], at("2026-12-02T02:00:01Z"));
    let again = decide(&a, &[], at("2026-12-02T02:03:00Z"));
    assert_eq!(first.create, again.create);
    // Once the cache shows the run, nothing is created; the status catches up.
    let created = run(
        "nightly-1796176800",
        "2026-12-02T02:00:01Z",
        RunOutcome::Unfinished,
    );
    let after = decide(&a, &[created], at("2026-12-02T02:03:00Z"));
    assert_eq!(after.create, None);
    assert_eq!(after.status.last_run_name, "nightly-1796176800");
    assert_eq!(next_run(&after), Some(at("2026-12-03T02:00:00Z")));
}

#[test]
fn missed_ticks_catch_up_with_one_run_then_continue_from_now() {
    // Down for three days: one run for the first missed tick, none for the backlog.
    let now = at("2026-12-05T09:00:00Z");
    let d = decide(&app(json!({}), scheduled("2026-12-02T02:00:00Z")), &[], now);
    assert_eq!(
        d.create,
        Some(run_name("nightly", at("2026-12-02T02:00:00Z")))
    );
    assert_eq!(next_run(&d), Some(at("2026-12-06T02:00:00Z")));
}

#[test]
fn concurrency_policies_decide_what_an_unfinished_run_means() {
    let busy = run(
        "nightly-1796090400",
        "2026-12-01T02:00:00Z",
        RunOutcome::Unfinished,
    );
    let now = at("2026-12-02T02:00:00Z");
    let due = |policy: &str| {
        decide(
            &app(
                json!({"concurrencyPolicy": policy}),
                scheduled("2026-12-02T02:00:00Z"),
            ),
            std::slice::from_ref(&busy),
            now,
        )
    };

    let allow = due("Allow");
    assert_eq!(allow.create.as_deref(), Some("nightly-1796176800"));
    assert!(allow.delete.is_empty());

    let forbid = due("Forbid");
    assert_eq!(forbid.create, None);
    assert_eq!(
        forbid.events[0].reason,
        "ScheduledSparkApplicationRunSkipped"
    );
    assert_eq!(next_run(&forbid), Some(at("2026-12-03T02:00:00Z")));
    assert_eq!(forbid.status.last_run_name, "");

    let replace = due("Replace");
    assert_eq!(replace.create.as_deref(), Some("nightly-1796176800"));
    assert_eq!(
        replace.delete,
        vec![RunRef {
            name: busy.name.clone(),
            uid: busy.uid.clone()
        }]
    );
}

#[test]
fn history_keeps_the_newest_runs_of_each_outcome() {
    let runs = [
        run("nightly-1", "2026-11-27T02:00:00Z", RunOutcome::Succeeded),
        run("nightly-2", "2026-11-28T02:00:00Z", RunOutcome::Failed),
        run("nightly-3", "2026-11-29T02:00:00Z", RunOutcome::Succeeded),
        run("nightly-4", "2026-11-30T02:00:00Z", RunOutcome::Failed),
        run("nightly-5", "2026-12-01T02:00:00Z", RunOutcome::Succeeded),
        run("nightly-6", "2026-12-01T03:00:00Z", RunOutcome::Unfinished),
    ];
    let a = app(
        json!({"successfulRunHistoryLimit": 2}),
        scheduled("2026-12-02T02:00:00Z"),
    );
    let d = decide(&a, &runs, at("2026-12-01T10:00:00Z"));
    assert_eq!(
        d.status.past_successful_run_names,
        ["nightly-5", "nightly-3"]
    );
    assert_eq!(d.status.past_failed_run_names, ["nightly-4"]);
    let deleted: Vec<&str> = d.delete.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(deleted, ["nightly-1", "nightly-2"]);

    let none_kept = app(
        json!({"successfulRunHistoryLimit": 0, "failedRunHistoryLimit": -1}),
        scheduled("2026-12-02T02:00:00Z"),
    );
    let d = decide(&none_kept, &runs, at("2026-12-01T10:00:00Z"));
    assert_eq!(
        d.delete.len(),
        5,
        "every finished run, never the unfinished one"
    );
}

#[test]
fn suspension_clears_the_next_run_and_resuming_skips_what_was_missed() {
    let suspended = decide(
        &app(json!({"suspend": true}), scheduled("2026-12-02T02:00:00Z")),
        &[],
        at("2026-12-03T09:00:00Z"),
    );
    assert_eq!(suspended.create, None);
    assert_eq!(next_run(&suspended), None);
    assert_eq!(suspended.requeue_after, None);

    let mut resumed = app(json!({"suspend": false}), json!({}));
    resumed.status = Some(suspended.status);
    let d = decide(&resumed, &[], at("2026-12-05T09:00:00Z"));
    assert_eq!(d.create, None, "ticks missed while suspended never run");
    assert_eq!(next_run(&d), Some(at("2026-12-06T02:00:00Z")));
}

#[test]
fn a_bad_schedule_fails_validation_with_one_warning() {
    let d = decide(
        &app(json!({"schedule": "61 * * * *"}), json!({})),
        &[],
        at("2026-12-01T10:00:00Z"),
    );
    assert_eq!(d.status.schedule_state, ScheduleState::FailedValidation);
    assert!(
        d.status.reason.contains("minute value 61"),
        "{}",
        d.status.reason
    );
    assert_eq!(d.events.len(), 1);
    assert!(d.events[0].warning);
    let mut again = app(json!({"schedule": "61 * * * *"}), json!({}));
    again.status = Some(d.status);
    assert!(
        decide(&again, &[], at("2026-12-01T10:05:00Z"))
            .events
            .is_empty()
    );

    let bad_zone = decide(
        &app(json!({"timeZone": "Mars/Olympus_Mons"}), json!({})),
        &[],
        at("2026-12-01T10:00:00Z"),
    );
    assert_eq!(
        bad_zone.status.schedule_state,
        ScheduleState::FailedValidation
    );

    let never = decide(
        &app(json!({"schedule": "0 0 30 2 *"}), json!({})),
        &[],
        at("2026-12-01T10:00:00Z"),
    );
    assert_eq!(never.status.schedule_state, ScheduleState::FailedValidation);
    assert!(never.status.reason.contains("never fires"));
}

#[test]
fn a_fixed_schedule_is_scheduled_again_and_a_spec_change_recomputes_the_tick() {
    let mut fixed = app(
        json!({"schedule": "0 3 * * *"}),
        json!({"scheduleState": "FailedValidation", "reason": "bad"}),
    );
    let d = decide(&fixed, &[], at("2026-12-01T10:00:00Z"));
    assert_eq!(d.status.schedule_state, ScheduleState::Scheduled);
    assert_eq!(next_run(&d), Some(at("2026-12-02T03:00:00Z")));

    fixed.status = Some(d.status);
    fixed.metadata.generation = Some(2);
    fixed.spec.schedule = "0 4 * * *".to_owned();
    let d = decide(&fixed, &[], at("2026-12-01T11:00:00Z"));
    assert_eq!(next_run(&d), Some(at("2026-12-02T04:00:00Z")));
    assert_eq!(d.status.observed_generation, Some(2));
}

#[test]
fn a_tick_shifted_by_daylight_saving_runs_once_under_its_own_name() {
    // 02:30 New York does not exist on 2026-03-08: the tick is 03:30 EDT (07:30Z).
    let a = app(
        json!({"schedule": "30 2 * * *", "timeZone": "America/New_York"}),
        json!({}),
    );
    let d = decide(&a, &[], at("2026-03-07T12:00:00Z"));
    assert_eq!(next_run(&d), Some(at("2026-03-08T07:30:00Z")));
    let mut due = a.clone();
    due.status = Some(d.status);
    let d = decide(&due, &[], at("2026-03-08T07:30:00Z"));
    assert_eq!(
        d.create,
        Some(run_name("nightly", at("2026-03-08T07:30:00Z")))
    );
    assert_eq!(next_run(&d), Some(at("2026-03-09T06:30:00Z")));
}
