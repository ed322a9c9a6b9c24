//! The I/O shell of ScheduledSparkApplications: one watch of the schedules and one of their runs
//! (SparkApplications carrying [`SCHEDULED_APP_NAME_LABEL`]) per namespace watched, each with a
//! reflector cache, and kube-runtime's `Controller` over them calling the pure
//! [`crate::schedule::decide`].
//!
//! A decision is executed in its order: delete runs (uid precondition), create the run (POST: an
//! AlreadyExists answer means this tick's run was made before, by this replica before a crash or
//! by a previous leader, and is the run), write the status (carrying the resourceVersion read),
//! record the events. Before deleting or creating, the schedule is read live and decided again,
//! so a cache that lags this operator's own last status write never acts on a tick already run.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube_runtime::events::{Event, EventType};

use crate::events::EventRecorder;
use kube_runtime::reflector::Store;
use submission::error_chain::error_chain;
use thiserror::Error;
use tracing::{info, instrument, warn};

use crate::crd::{ApplicationStateType, ScheduledSparkApplication, SparkApplication};
use crate::metrics::Metrics;
use crate::reconciler::Health;
use crate::reconciler::kube::event_action;
use crate::schedule::{self, Decision, Run, RunOutcome, SCHEDULED_APP_NAME_LABEL};
use crate::watches::{ParentWatches, WatchOf, parent_watches};

/// How soon to look again after a status write lost a race (409).
const CONFLICT_REQUEUE: Duration = Duration::from_millis(200);

/// The longest a schedule sleeps without a look (a tick far away is reached in steps).
const MAX_SLEEP: Duration = Duration::from_secs(300);

/// Error backoff of a schedule's reconcile.
const ERROR_REQUEUE: Duration = Duration::from_secs(2);

/// The time schedules run on: the wall clock, or (tests) the wall clock sped up from a fixed
/// origin, so that an `@every 3m` example ticks in seconds and restarted operators sharing the
/// clock agree on the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleClock {
    origin: Timestamp,
    speed: u32,
}

impl Default for ScheduleClock {
    fn default() -> ScheduleClock {
        ScheduleClock::system()
    }
}

impl ScheduleClock {
    /// The wall clock.
    pub fn system() -> ScheduleClock {
        ScheduleClock {
            origin: Timestamp::UNIX_EPOCH,
            speed: 1,
        }
    }

    /// Time runs `speed` times faster than the wall clock from `origin` on.
    pub fn accelerated(origin: Timestamp, speed: u32) -> ScheduleClock {
        ScheduleClock {
            origin,
            speed: speed.max(1),
        }
    }

    /// The schedules' present.
    pub fn now(&self) -> Timestamp {
        let wall = Timestamp::now();
        if self.speed == 1 {
            return wall;
        }
        let elapsed = wall.duration_since(self.origin);
        self.origin
            .checked_add(elapsed.saturating_mul(i32::try_from(self.speed).unwrap_or(i32::MAX)))
            .unwrap_or(wall)
    }

    /// How long to really wait for `duration` of schedule time to pass.
    pub fn real(&self, duration: SignedDuration) -> Duration {
        let real = Duration::try_from(duration.max(SignedDuration::ZERO)).unwrap_or(MAX_SLEEP);
        real / self.speed
    }
}

/// A schedule's reconcile failed; it is retried.
#[derive(Debug, Error)]
pub enum ScheduleError {
    #[error("the ScheduledSparkApplication has no name, namespace or uid")]
    ReadSchedule,
    #[error("cannot read the ScheduledSparkApplication")]
    ReadLive(#[source] kube::Error),
    #[error("cannot delete run {name}")]
    DeleteRun {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create run {name}")]
    CreateRun {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the status of the ScheduledSparkApplication")]
    WriteStatus(#[source] kube::Error),
}

impl ScheduleError {
    /// A stable name for logs, metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ScheduleError::ReadSchedule => "read_schedule",
            ScheduleError::ReadLive(_) => "read_live",
            ScheduleError::DeleteRun { .. } => "delete_run",
            ScheduleError::CreateRun { .. } => "create_run",
            ScheduleError::WriteStatus(_) => "write_status",
        }
    }
}

/// What every schedule's reconcile shares.
pub struct ScheduleContext {
    client: Client,
    /// The run caches, one per namespace watched (or one for all).
    runs: Vec<Store<SparkApplication>>,
    recorder: EventRecorder,
    clock: ScheduleClock,
    metrics: Arc<Metrics>,
}

/// Runs the ScheduledSparkApplication controller over `namespaces` (`None`: all) until
/// `shutdown`.
pub async fn run(
    client: Client,
    namespaces: Vec<Option<String>>,
    health: Arc<Health>,
    recorder: EventRecorder,
    clock: ScheduleClock,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let all: Vec<ParentWatches<ScheduledSparkApplication, SparkApplication>> = namespaces
        .iter()
        .map(|ns| {
            // Only runs: SparkApplications a schedule made carry its label.
            parent_watches::<ScheduledSparkApplication, SparkApplication>(
                &client,
                ns.as_deref(),
                (
                    WatchOf {
                        health: &health.schedules,
                        resource: "scheduledsparkapplications",
                    },
                    WatchOf {
                        health: &health.runs,
                        resource: "sparkapplications",
                    },
                ),
                SCHEDULED_APP_NAME_LABEL,
                &metrics,
            )
        })
        .collect();
    let ctx = Arc::new(ScheduleContext {
        client,
        runs: all.iter().map(|s| s.child_reader.clone()).collect(),
        recorder,
        clock,
        metrics,
    });
    let shutdown = futures::FutureExt::shared(shutdown);
    let controllers = all.into_iter().map(|streams| {
        Controller::for_stream(streams.parents, streams.parent_reader)
            .with_config(ControllerConfig::default().concurrency(4))
            .owns_stream(streams.children)
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|result| async move {
                if let Err(error) = result {
                    warn!(error = %error_chain(&error), "schedule controller error");
                }
            })
    });
    futures::future::join_all(controllers).await;
}

fn error_policy(
    schedule: Arc<ScheduledSparkApplication>,
    error: &ScheduleError,
    ctx: Arc<ScheduleContext>,
) -> Action {
    ctx.metrics.reconcile_error(error.kind());
    warn!(
        schedule = %schedule.name_any(),
        ns = %schedule.namespace().unwrap_or_default(),
        kind = error.kind(),
        error = %error_chain(error),
        "schedule reconcile failed"
    );
    Action::requeue(ERROR_REQUEUE)
}

/// Where a run stands, from its application state.
pub fn run_outcome(app: &SparkApplication) -> RunOutcome {
    match app.status.as_ref().map(|s| s.app_state.state) {
        Some(ApplicationStateType::Completed) => RunOutcome::Succeeded,
        Some(ApplicationStateType::Failed) => RunOutcome::Failed,
        _ => RunOutcome::Unfinished,
    }
}

/// The runs `schedule_uid` owns in `namespace`, from the caches.
fn cached_runs(ctx: &ScheduleContext, namespace: &str, schedule_uid: &str) -> Vec<Run> {
    ctx.runs
        .iter()
        .flat_map(|store| {
            store.state_filter(|app| {
                app.metadata.namespace.as_deref() == Some(namespace)
                    && app.metadata.deletion_timestamp.is_none()
                    && app
                        .owner_references()
                        .iter()
                        .any(|owner| owner.uid == schedule_uid)
            })
        })
        .map(|app| Run {
            name: app.name_any(),
            uid: app.metadata.uid.clone().unwrap_or_default(),
            created: app
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
            outcome: run_outcome(&app),
        })
        .collect()
}

/// The run SparkApplication of `schedule` named `name`: the template as its spec, the
/// schedule's labels plus [`SCHEDULED_APP_NAME_LABEL`], owned by the schedule (as the widely
/// used operator makes it).
pub fn run_application(schedule: &ScheduledSparkApplication, name: &str) -> SparkApplication {
    let mut labels = schedule.labels().clone();
    labels.insert(SCHEDULED_APP_NAME_LABEL.to_owned(), schedule.name_any());
    SparkApplication {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: schedule.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: ScheduledSparkApplication::api_version(&()).into_owned(),
                kind: ScheduledSparkApplication::kind(&()).into_owned(),
                name: schedule.name_any(),
                uid: schedule.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: schedule.spec.template.clone(),
        status: None,
    }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

#[instrument(skip_all, fields(schedule = %cached.name_any(), ns = %cached.namespace().unwrap_or_default()))]
async fn reconcile(
    cached: Arc<ScheduledSparkApplication>,
    ctx: Arc<ScheduleContext>,
) -> Result<Action, ScheduleError> {
    let (Some(namespace), Some(uid)) = (cached.namespace(), cached.metadata.uid.clone()) else {
        return Err(ScheduleError::ReadSchedule);
    };
    let api: Api<ScheduledSparkApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let runs_api: Api<SparkApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = ctx.clock.now();
    let runs = cached_runs(&ctx, &namespace, &uid);
    let mut schedule = (*cached).clone();
    let mut decision = schedule::decide(&schedule, &runs, now);
    if decision.create.is_some() || !decision.delete.is_empty() {
        // Act only on the schedule as it is now: the cache may predate the status write that
        // recorded this tick's run.
        match api
            .get_opt(&schedule.name_any())
            .await
            .map_err(ScheduleError::ReadLive)?
        {
            Some(live) if live.metadata.uid.as_deref() == Some(uid.as_str()) => schedule = live,
            _ => return Ok(Action::await_change()),
        }
        decision = schedule::decide(&schedule, &runs, now);
    }
    execute(&ctx, &api, &runs_api, &schedule, decision).await
}

async fn execute(
    ctx: &ScheduleContext,
    api: &Api<ScheduledSparkApplication>,
    runs_api: &Api<SparkApplication>,
    schedule: &ScheduledSparkApplication,
    decision: Decision,
) -> Result<Action, ScheduleError> {
    for run in &decision.delete {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(run.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match runs_api.delete(&run.name, &params).await {
            Ok(_) => info!(run = %run.name, "deleted a run"),
            Err(error) if is_status(&error, 404) || is_status(&error, 409) => {}
            Err(source) => {
                return Err(ScheduleError::DeleteRun {
                    name: run.name.clone(),
                    source,
                });
            }
        }
    }
    if let Some(name) = &decision.create {
        match runs_api
            .create(&PostParams::default(), &run_application(schedule, name))
            .await
        {
            Ok(_) => info!(run = %name, "created a run"),
            // The tick's run exists: made before a crash or by another leader. One run per tick.
            Err(error) if is_status(&error, 409) => info!(run = %name, "the run exists already"),
            Err(source) => {
                return Err(ScheduleError::CreateRun {
                    name: name.clone(),
                    source,
                });
            }
        }
    }
    if schedule.status.as_ref() != Some(&decision.status) {
        let mut body = schedule.clone();
        body.status = Some(decision.status.clone());
        body.metadata.managed_fields = None;
        match api
            .replace_status(&schedule.name_any(), &PostParams::default(), &body)
            .await
        {
            Ok(_) => {}
            Err(error) if is_status(&error, 409) => return Ok(Action::requeue(CONFLICT_REQUEUE)),
            Err(source) => return Err(ScheduleError::WriteStatus(source)),
        }
    }
    for event in &decision.events {
        publish(&ctx.recorder, schedule, event).await;
    }
    Ok(match decision.requeue_after {
        // A little past the tick, so that the schedule's clock has reached it.
        Some(after) => {
            Action::requeue((ctx.clock.real(after) + Duration::from_millis(20)).min(MAX_SLEEP))
        }
        None => Action::await_change(),
    })
}

async fn publish(
    recorder: &EventRecorder,
    schedule: &ScheduledSparkApplication,
    event: &schedule::ScheduleEvent,
) {
    let published = Event {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.to_owned(),
        action: event_action(event.reason, &event.note),
        note: Some(event.note.clone()),
        secondary: None,
    };
    if let Err(error) = recorder
        .publish(&published, &schedule.object_ref(&()))
        .await
    {
        warn!(reason = event.reason, error = %error_chain(&error), "cannot record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schedule() -> ScheduledSparkApplication {
        serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "ScheduledSparkApplication",
            "metadata": {"name": "nightly", "namespace": "etl", "uid": "s-uid",
                         "labels": {"team": "data"}},
            "spec": {"schedule": "@every 3m", "template": {
                "type": "Scala", "sparkVersion": "4.0.4", "mainApplicationFile": "local:///a.jar",
                "driver": {}, "executor": {}}},
        }))
        .unwrap()
    }

    #[test]
    fn a_run_is_the_template_owned_by_the_schedule_with_its_labels() {
        let run = run_application(&schedule(), "nightly-60");
        assert_eq!(run.metadata.namespace.as_deref(), Some("etl"));
        let labels = run.metadata.labels.unwrap();
        assert_eq!(labels["team"], "data");
        assert_eq!(labels[SCHEDULED_APP_NAME_LABEL], "nightly");
        let owner = &run.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ScheduledSparkApplication", "s-uid")
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(run.spec, schedule().spec.template);
    }

    #[test]
    fn an_accelerated_clock_agrees_across_instances_and_shortens_waits() {
        let origin = Timestamp::now();
        let a = ScheduleClock::accelerated(origin, 60);
        let b = ScheduleClock::accelerated(origin, 60);
        let (first, second) = (a.now(), b.now());
        // Two instances from one origin tell the same time (within the gap between the reads).
        assert!(second.duration_since(first) < SignedDuration::from_secs(60));
        assert!(first >= origin);
        assert_eq!(a.real(SignedDuration::from_mins(3)), Duration::from_secs(3));
        assert_eq!(
            ScheduleClock::system().real(SignedDuration::from_secs(-5)),
            Duration::ZERO
        );
    }

    #[test]
    fn finished_states_are_the_outcomes_of_runs() {
        let mut app = run_application(&schedule(), "nightly-60");
        assert_eq!(run_outcome(&app), RunOutcome::Unfinished);
        app.status = Some(Default::default());
        for (state, outcome) in [
            (ApplicationStateType::Completed, RunOutcome::Succeeded),
            (ApplicationStateType::Failed, RunOutcome::Failed),
            (ApplicationStateType::Running, RunOutcome::Unfinished),
            (
                ApplicationStateType::SubmissionFailed,
                RunOutcome::Unfinished,
            ),
        ] {
            app.status.as_mut().unwrap().app_state.state = state;
            assert_eq!(run_outcome(&app), outcome, "{state:?}");
        }
    }
}
