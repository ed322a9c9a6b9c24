//! The reconcile loop against a fake [`Effects`]: which calls it makes, in which order, how it
//! stops. The fake records every call and answers from a small script; the decisions are the real
//! `decide`.

use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::crd::{DriverInfo, RecoveryStatus};
use crate::recovery::RecoverySettings;
use crate::state_machine::{
    DriverPhase, ObservedExecutor, PendingReason, RefusedObject, UiMade, reasons, spec_hash,
};
use crate::ui::UiSettings;

/// One effect as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    ReadLive,
    /// The state the written status holds.
    WriteStatus(State),
    DriverAbsent(String),
    DriverWarning(String),
    EnsureDependencies,
    EnsureUiObjects,
    StopDriver(String),
    Submit(String),
    /// The observed epoch.
    Fence(u64),
    DeleteDriver(String),
    DeleteApplication,
    Event(&'static str),
}

/// Effects that record their calls. The "live" object is the last one written.
struct Fake {
    calls: Mutex<Vec<Call>>,
    drivers: (Option<ObservedDriver>, Vec<ObservedDriver>),
    live: Mutex<Option<SparkApplication>>,
    /// The next this many status writes lose a race (409).
    conflicts: Mutex<usize>,
    /// Status writes are answered with the status unchanged (as if something reverted them).
    writes_ignored: bool,
    /// What `driver_absent` answers.
    absent: bool,
    /// What `driver_warning` answers.
    warning: Option<PendingReason>,
    /// The Spark application id in the status the owned objects were last made for.
    ui_made_for: Mutex<Option<String>>,
    /// What `ensure_dependencies` answers as refused.
    refused_dependency: Option<RefusedObject>,
    /// What `ensure_ui_objects` answers as refused.
    refused_ui: Vec<RefusedObject>,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            calls: Mutex::new(Vec::new()),
            drivers: (None, Vec::new()),
            live: Mutex::new(None),
            conflicts: Mutex::new(0),
            writes_ignored: false,
            absent: true,
            warning: None,
            ui_made_for: Mutex::new(None),
            refused_dependency: None,
            refused_ui: Vec::new(),
        }
    }

    fn with_driver(mut self, driver: ObservedDriver) -> Fake {
        self.drivers.0 = Some(driver);
        self
    }

    fn call(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    /// The calls so far, forgetting them.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

fn bump(version: Option<&String>) -> String {
    let n: u64 = version.and_then(|v| v.parse().ok()).unwrap_or(0);
    (n + 1).to_string()
}

impl Effects for Fake {
    fn cache_synced(&self) -> bool {
        true
    }

    fn cached_drivers(
        &self,
        _app: &SparkApplication,
    ) -> (Option<ObservedDriver>, Vec<ObservedDriver>) {
        self.drivers.clone()
    }

    async fn read_live(
        &self,
        _app: &SparkApplication,
    ) -> Result<Option<SparkApplication>, ReconcileError> {
        self.call(Call::ReadLive);
        Ok(self.live.lock().unwrap().clone())
    }

    async fn write_status(
        &self,
        app: &SparkApplication,
        status: SparkApplicationStatus,
    ) -> Result<StatusWrite, ReconcileError> {
        self.call(Call::WriteStatus(status.app_state.state));
        {
            let mut conflicts = self.conflicts.lock().unwrap();
            if *conflicts > 0 {
                *conflicts -= 1;
                return Ok(StatusWrite::Conflict);
            }
        }
        let mut written = app.clone();
        if !self.writes_ignored {
            written.status = Some(status);
        }
        written.metadata.resource_version = Some(bump(app.metadata.resource_version.as_ref()));
        *self.live.lock().unwrap() = Some(written.clone());
        Ok(StatusWrite::Written(Box::new(written)))
    }

    async fn driver_absent(
        &self,
        _app: &SparkApplication,
        pod: &str,
        _submission_id: &str,
    ) -> Result<bool, ReconcileError> {
        self.call(Call::DriverAbsent(pod.to_owned()));
        Ok(self.absent)
    }

    fn cached_executors(&self, _app: &SparkApplication) -> Vec<ObservedExecutor> {
        Vec::new()
    }

    async fn ensure_dependencies(
        &self,
        _app: &SparkApplication,
    ) -> Result<Result<(), RefusedObject>, ReconcileError> {
        self.call(Call::EnsureDependencies);
        Ok(self.refused_dependency.clone().map_or(Ok(()), Err))
    }

    async fn ensure_ui_objects(
        &self,
        app: &SparkApplication,
        _settings: &UiSettings,
    ) -> Result<UiMade, ReconcileError> {
        self.call(Call::EnsureUiObjects);
        *self.ui_made_for.lock().unwrap() =
            app.status.as_ref().map(|s| s.spark_application_id.clone());
        Ok(UiMade {
            service: Some(("pi-ui-svc".into(), 4040, "10.0.0.1:4040".into())),
            ingress: None,
            refused: self.refused_ui.clone(),
        })
    }

    async fn stop_driver(
        &self,
        _app: &SparkApplication,
        pod: &str,
        _submission_id: &str,
    ) -> Result<(), ReconcileError> {
        self.call(Call::StopDriver(pod.to_owned()));
        Ok(())
    }

    fn driver_warning(&self, pod: &str, _uid: &str) -> Option<PendingReason> {
        self.call(Call::DriverWarning(pod.to_owned()));
        self.warning.clone()
    }

    async fn submit(&self, _app: &SparkApplication, submission_id: String) -> SubmissionOutcome {
        self.call(Call::Submit(submission_id.clone()));
        SubmissionOutcome::Accepted {
            submission_id,
            driver_pod_name: String::new(),
            spark_app_id: "spark-1".into(),
        }
    }

    async fn fence(
        &self,
        _app: &SparkApplication,
        observed: u64,
        _run: u64,
    ) -> Result<FenceOutcome, ReconcileError> {
        self.call(Call::Fence(observed));
        Ok(FenceOutcome {
            epoch: observed + 1,
            latest: None,
        })
    }

    async fn last_heartbeat(&self, _app: &SparkApplication) -> Option<Option<Heartbeat>> {
        Some(None)
    }

    async fn delete_driver(
        &self,
        _app: &SparkApplication,
        pod: &str,
        _uid: &str,
    ) -> Result<(), ReconcileError> {
        self.call(Call::DeleteDriver(pod.to_owned()));
        Ok(())
    }

    async fn delete_application(&self, _app: &SparkApplication) -> Result<(), ReconcileError> {
        self.call(Call::DeleteApplication);
        Ok(())
    }

    async fn record_event(
        &self,
        _app: &SparkApplication,
        _event_type: EventType,
        reason: &'static str,
        _message: String,
    ) {
        self.call(Call::Event(reason));
    }
}

const UID: &str = "app-uid";

/// The app `pi` at resourceVersion 1, with `spec` merged over a minimal Scala spec.
fn app(spec: serde_json::Value, status: Option<SparkApplicationStatus>) -> SparkApplication {
    let mut base = json!({
        "type": "Scala",
        "sparkVersion": "4.0.0",
        "mainClass": "Main",
        "mainApplicationFile": "local:///app.jar",
        "driver": {},
        "executor": {}
    });
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    let mut app: SparkApplication = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "default", "uid": UID, "resourceVersion": "1"},
        "spec": base,
    }))
    .unwrap();
    app.status = status;
    app
}

/// A status of a run submitted long ago as `app-uid-1`, in `state`.
fn run_status(app: &SparkApplication, state: State, pod: &str) -> SparkApplicationStatus {
    let long_ago = Time(Timestamp::from_second(1_000_000_000).unwrap());
    let mut status = SparkApplicationStatus {
        submission_id: format!("{UID}-1"),
        last_submission_attempt_time: Some(long_ago.clone()),
        driver_info: DriverInfo {
            pod_name: pod.into(),
            ..DriverInfo::default()
        },
        execution_attempts: 1,
        submission_attempts: 1,
        spec_hash: Some(spec_hash(&app.spec)),
        ..SparkApplicationStatus::default()
    };
    status.app_state.state = state;
    if matches!(state, State::Failing) {
        status.termination_time = Some(long_ago);
    }
    status
}

fn driver(name: &str, submission: &str, phase: DriverPhase) -> ObservedDriver {
    ObservedDriver {
        name: name.into(),
        uid: format!("{name}-uid"),
        submission_id: Some(submission.into()),
        owned: true,
        terminating: false,
        spark_app_id: Some("spark-1".into()),
        epoch: None,
        phase,
    }
}

fn reconciler(fake: Fake, settings: Settings) -> Reconciler<Fake> {
    Reconciler::new(fake, settings, Arc::new(Metrics::new()))
}

fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_new_application_is_submitted_then_recorded_with_the_answer_in_one_write() {
    let r = reconciler(Fake::new(), Settings::default());
    let action = run(r.reconcile(&app(json!({}), None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::Submit(format!("{UID}-1")),
            Call::WriteStatus(State::Submitted),
            Call::Event(reasons::SUBMITTED),
        ],
        "the id follows from the stored status; it is stored with the answer"
    );
    assert_eq!(
        action,
        ControllerAction::requeue(Settings::default().driver_creation_grace)
    );
}

#[test]
fn a_submitted_runs_ui_service_is_made_once_and_recorded_with_submitted_in_one_write() {
    let mut settings = Settings::default();
    settings.ui.ui_service = true;
    let r = reconciler(Fake::new(), settings);
    let action = run(r.reconcile(&app(json!({}), None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::Submit(format!("{UID}-1")),
            Call::EnsureUiObjects,
            Call::WriteStatus(State::Submitted),
            Call::Event(reasons::SUBMITTED),
        ],
        "the objects are made for the accepted run, and recorded in its SUBMITTED write"
    );
    assert_eq!(
        *r.effects().ui_made_for.lock().unwrap(),
        Some("spark-1".to_owned()),
        "the objects are made for the status as decided: the answer's application id (an ingress URL may name it)"
    );
    assert_eq!(
        action,
        ControllerAction::requeue(Settings::default().driver_creation_grace)
    );
    let written = r.effects().live.lock().unwrap().clone().unwrap();
    let status = written.status.clone().unwrap();
    assert_eq!(status.driver_info.web_ui_service_name, "pi-ui-svc");
    assert_eq!(status.driver_info.web_ui_address, "10.0.0.1:4040");
    // The requeue's reconcile, from the cache holding that write, makes nothing again.
    run(r.reconcile(&written)).unwrap();
    assert!(
        !r.effects().take().contains(&Call::EnsureUiObjects),
        "a run's owned objects are made once"
    );
}

#[test]
fn what_the_driver_depends_on_is_made_then_it_is_submitted_and_recorded_in_one_reconcile() {
    let r = reconciler(Fake::new(), Settings::default());
    run(r.reconcile(&app(json!({"batchScheduler": "volcano"}), None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::EnsureDependencies,
            Call::Submit(format!("{UID}-1")),
            Call::WriteStatus(State::Submitted),
            Call::Event(reasons::SUBMITTED),
        ]
    );
}

fn refused(object: &str, required: bool) -> RefusedObject {
    RefusedObject {
        object: object.into(),
        message: "forbidden".into(),
        required,
    }
}

#[test]
fn a_refused_dependency_fails_the_application_without_a_submission() {
    let mut fake = Fake::new();
    fake.refused_dependency = Some(refused("PodGroup spark-pi-pg", true));
    let r = reconciler(fake, Settings::default());
    run(r.reconcile(&app(json!({"batchScheduler": "volcano"}), None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::EnsureDependencies,
            Call::StopDriver("pi-driver".into()),
            Call::WriteStatus(State::SubmissionFailed),
            Call::Event(reasons::OWNED_OBJECTS_FAILED),
            Call::Event(reasons::SUBMISSION_FAILED),
            Call::WriteStatus(State::Failed),
            Call::Event(reasons::FAILED),
        ]
    );
}

#[test]
fn a_refused_ingress_the_spec_asks_for_stops_the_driver_between_failing_and_failed() {
    let mut fake = Fake::new();
    fake.refused_ui = vec![refused("Ingress pi-ing-4040", true)];
    let r = reconciler(fake, Settings::default());
    let spec = json!({"driverIngressOptions": [{"servicePort": 4040}]});
    run(r.reconcile(&app(spec, None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::Submit(format!("{UID}-1")),
            Call::EnsureUiObjects,
            Call::WriteStatus(State::Failing),
            Call::StopDriver("pi-driver".into()),
            Call::Event(reasons::SUBMITTED),
            Call::Event(reasons::OWNED_OBJECTS_FAILED),
            Call::WriteStatus(State::Failed),
            Call::Event(reasons::FAILED),
        ],
        "the driver the cache does not show yet is stopped before FAILED is written"
    );
}

#[test]
fn a_driver_made_by_a_predecessor_that_died_before_recording_the_answer_is_kept_and_asked_for_again()
 {
    let pending = DriverPhase::Pending {
        waiting_reason: None,
        blocked: None,
    };
    let fake = Fake::new().with_driver(driver("pi-driver", &format!("{UID}-1"), pending));
    let r = reconciler(fake, Settings::default());
    run(r.reconcile(&app(json!({}), None))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::Submit(format!("{UID}-1")),
            Call::WriteStatus(State::Submitted),
            Call::Event(reasons::SUBMITTED),
        ],
        "the same id again, and no delete"
    );
}

#[test]
fn a_retried_submission_counts_as_a_retry_and_a_reruns_first_submission_does_not() {
    let spec = json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 2,
                                        "onSubmissionFailureRetries": 2}});
    let base = app(spec.clone(), None);
    let retries = |r: &Reconciler<Fake>| {
        r.metrics
            .encode()
            .lines()
            .find(|l| l.starts_with("spark_operator_retries_total{kind=\"submission\"}"))
            .map(str::to_owned)
    };
    // A rerun after a failed run: its first submission (`<uid>-2`) is not a submission retry.
    let mut rerun = run_status(&base, State::PendingRerun, "");
    rerun.submission_attempts = 0;
    let r = reconciler(Fake::new(), Settings::default());
    run(r.reconcile(&app(spec.clone(), Some(rerun)))).unwrap();
    assert_eq!(r.effects().take()[0], Call::Submit(format!("{UID}-2")));
    assert_eq!(retries(&r), None);

    // A submission that failed once and is due again is.
    let failed = run_status(&base, State::SubmissionFailed, "");
    let r = reconciler(Fake::new(), Settings::default());
    run(r.reconcile(&app(spec, Some(failed)))).unwrap();
    assert_eq!(r.effects().take()[0], Call::Submit(format!("{UID}-2")));
    assert_eq!(
        retries(&r).as_deref(),
        Some("spark_operator_retries_total{kind=\"submission\"} 1")
    );
}

#[test]
fn a_timed_out_driver_is_deleted_only_after_its_failure_is_written() {
    let spec = json!({"applicationTimeoutConfig": {"driverStartTimeoutMillis": 1000}});
    let base = app(spec.clone(), None);
    let status = run_status(&base, State::Submitted, "pi-driver");
    let pending = DriverPhase::Pending {
        waiting_reason: None,
        blocked: None,
    };
    let fake = Fake::new().with_driver(driver("pi-driver", &format!("{UID}-1"), pending));
    let settings = Settings::default();
    let r = reconciler(fake, settings.clone());
    let action = run(r.reconcile(&app(spec, Some(status)))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::WriteStatus(State::Failed),
            Call::DeleteDriver("pi-driver".into()),
            Call::Event(reasons::DRIVER_START_TIMED_OUT),
            Call::Event(reasons::FAILED),
        ]
    );
    // The cache still shows the pod being deleted: look again once it is gone.
    assert_eq!(action, ControllerAction::requeue(settings.deletion_requeue));
}

#[test]
fn a_status_write_that_loses_a_race_stops_the_reconcile_and_requeues_soon() {
    let spec = json!({"applicationTimeoutConfig": {"driverStartTimeoutMillis": 1000}});
    let base = app(spec.clone(), None);
    let status = run_status(&base, State::Submitted, "pi-driver");
    let pending = DriverPhase::Pending {
        waiting_reason: None,
        blocked: None,
    };
    let fake = Fake::new().with_driver(driver("pi-driver", &format!("{UID}-1"), pending));
    *fake.conflicts.lock().unwrap() = 1;
    let r = reconciler(fake, Settings::default());
    let action = run(r.reconcile(&app(spec, Some(status)))).unwrap();
    assert_eq!(
        r.effects().take(),
        [Call::WriteStatus(State::Failed)],
        "nothing after a lost status write: no delete, no event"
    );
    assert_eq!(action, ControllerAction::requeue(CONFLICT_REQUEUE));
}

#[test]
fn a_reconcile_from_a_cache_older_than_its_own_write_waits_for_the_cache_without_a_request() {
    let r = reconciler(Fake::new(), Settings::default());
    let cached = app(json!({}), None);
    run(r.reconcile(&cached)).unwrap();
    let written = r.effects().live.lock().unwrap().clone().unwrap();
    r.effects().take();

    // The cache still holds the object from before the write: acting on it would submit again;
    // the write's own watch event brings it and wakes the application, so nothing is asked now.
    let action = run(r.reconcile(&cached)).unwrap();
    assert_eq!(r.effects().take(), [], "no live read, no submission");
    assert_ne!(action, ControllerAction::await_change(), "a bounded wait");

    // Once the cache shows the written version, the cached copy is used.
    run(r.reconcile(&written)).unwrap();
    let calls = r.effects().take();
    assert!(!calls.contains(&Call::ReadLive), "{calls:?}");
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Submit(_))),
        "{calls:?}"
    );
}

#[test]
fn a_reconcile_from_a_cache_older_than_its_own_write_reads_the_live_object_after_the_wait() {
    let r = reconciler(Fake::new(), Settings::default()).with_cache_catch_up(Duration::ZERO);
    let cached = app(json!({}), None);
    run(r.reconcile(&cached)).unwrap();
    let written = r.effects().live.lock().unwrap().clone().unwrap();
    r.effects().take();

    // The cache still holds the object from before the writes: the live object is read, and it
    // says the submission was made, so nothing is submitted again.
    run(r.reconcile(&cached)).unwrap();
    let calls = r.effects().take();
    assert_eq!(calls.first(), Some(&Call::ReadLive), "{calls:?}");
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Submit(_))),
        "{calls:?}"
    );

    // Once the cache shows the written version, the cached copy is used again.
    run(r.reconcile(&written)).unwrap();
    let calls = r.effects().take();
    assert!(!calls.contains(&Call::ReadLive), "{calls:?}");
}

#[test]
fn a_decision_that_never_settles_stops_after_the_round_limit() {
    let base = app(json!({}), None);
    let status = run_status(&base, State::Running, "pi-driver");
    let failed = DriverPhase::Failed {
        exit_code: Some(1),
        reason: crate::crd::FailureReason::ApplicationError,
        message: String::new(),
    };
    let mut fake = Fake::new().with_driver(driver("pi-driver", &format!("{UID}-1"), failed));
    fake.writes_ignored = true;
    let r = reconciler(fake, Settings::default());
    let action = run(r.reconcile(&app(json!({}), Some(status)))).unwrap();
    let calls = r.effects().take();
    let writes: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::WriteStatus(_)))
        .collect();
    assert_eq!(writes, vec![&Call::WriteStatus(State::Failed); MAX_ROUNDS]);
    assert_eq!(action, ControllerAction::requeue(ROUNDS_EXHAUSTED_REQUEUE));
}

#[test]
fn a_driver_missing_from_the_cache_is_read_live_and_the_loss_recorded_in_the_same_reconcile() {
    let base = app(json!({}), None);
    let status = run_status(&base, State::Running, "pi-driver");
    let r = reconciler(Fake::new(), Settings::default());
    run(r.reconcile(&app(json!({}), Some(status)))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::DriverAbsent("pi-driver".into()),
            Call::WriteStatus(State::Failed),
            Call::Event(reasons::DRIVER_NOT_FOUND),
            Call::Event(reasons::FAILED),
        ]
    );
}

#[test]
fn a_fenced_restart_fences_then_records_then_deletes_the_old_driver_then_submits() {
    let spec = json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 3,
                                        "onFailureRetryInterval": 1,
                                        "recovery": {"enabled": true}}});
    let base = app(spec.clone(), None);
    let mut status = run_status(&base, State::Failing, "pi-driver-e1");
    status.recovery_status = Some(RecoveryStatus {
        epoch: 1,
        run: 1,
        run_start_epoch: Some(1),
        ..RecoveryStatus::default()
    });
    let failed = DriverPhase::Failed {
        exit_code: Some(1),
        reason: crate::crd::FailureReason::ApplicationError,
        message: String::new(),
    };
    let fake = Fake::new().with_driver(driver("pi-driver-e1", &format!("{UID}-1"), failed));
    let settings = Settings {
        recovery: Some(RecoverySettings::default()),
        ..Settings::default()
    };
    let r = reconciler(fake, settings);
    run(r.reconcile(&app(spec, Some(status)))).unwrap();
    assert_eq!(
        r.effects().take(),
        [
            Call::WriteStatus(State::PendingRerun),
            Call::Event(reasons::PENDING_RERUN),
            Call::Fence(1),
            Call::WriteStatus(State::PendingRerun),
            Call::Event(reasons::EPOCH_ADVANCED),
            Call::Event(reasons::RESTART_FROM_ZERO),
            Call::DeleteDriver("pi-driver-e1".into()),
            Call::Submit(format!("{UID}-2")),
            Call::WriteStatus(State::Submitted),
            Call::Event(reasons::SUBMITTED),
        ]
    );
    let live = r.effects().live.lock().unwrap().clone().unwrap();
    let recovery = live.status.unwrap().recovery_status.unwrap();
    assert_eq!(recovery.epoch, 2);
}

#[test]
fn an_expired_application_is_deleted_and_nothing_else_happens() {
    let spec = json!({"timeToLiveSeconds": 1});
    let base = app(spec.clone(), None);
    let mut status = run_status(&base, State::Completed, "pi-driver");
    status.termination_time = status.last_submission_attempt_time.clone();
    let r = reconciler(Fake::new(), Settings::default());
    let action = run(r.reconcile(&app(spec, Some(status)))).unwrap();
    assert_eq!(r.effects().take(), [Call::DeleteApplication]);
    assert_eq!(action, ControllerAction::await_change());
}

#[test]
fn errors_back_off_per_application_and_a_success_resets_the_count() {
    let r = reconciler(Fake::new(), Settings::default());
    let a = app(json!({}), None);
    let delays: Vec<ControllerAction> = (0..3)
        .map(|_| r.error_policy(&a, &ReconcileError::NoStore))
        .collect();
    assert_eq!(
        delays,
        [500, 1000, 2000].map(|ms| ControllerAction::requeue(Duration::from_millis(ms)))
    );
    run(r.reconcile(&a)).unwrap();
    assert_eq!(
        r.error_policy(&a, &ReconcileError::NoStore),
        ControllerAction::requeue(Duration::from_millis(500))
    );
}

#[test]
fn health_is_ready_only_with_both_watches_synced_and_up() {
    let health = Health::default();
    assert!(!health.ready());
    let (apps, pods) = (health.apps.stream(), health.pods.stream());
    apps.on_event(true);
    pods.on_event(false);
    assert!(!health.ready());
    pods.on_event(true);
    assert!(health.ready());
    pods.on_error();
    assert!(!health.ready());
    assert!(health.synced());
    assert_eq!(health.pods.restarts(), 1);
}

#[test]
fn with_several_namespaces_every_stream_must_be_synced_and_up() {
    let health = Health::default();
    let streams = [
        (health.apps.stream(), health.pods.stream()),
        (health.apps.stream(), health.pods.stream()),
    ];
    for (apps, pods) in &streams[..1] {
        apps.on_event(true);
        pods.on_event(true);
    }
    assert!(!health.synced(), "the second namespace has not listed");
    for (apps, pods) in &streams[1..] {
        apps.on_event(true);
        pods.on_event(true);
    }
    assert!(health.ready());
    streams[1].1.on_error();
    assert!(!health.ready(), "one namespace's pod watch is down");
}
