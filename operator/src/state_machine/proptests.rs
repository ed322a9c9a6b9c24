//! Property tests: random sequences of observations, answers and clock steps, fed through
//! `decide` with a simulated executor (status writes persist, submissions get answered).

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::crd::{
    ApplicationStateType as State, FailureReason, SparkApplicationSpec, SparkApplicationStatus,
};

const UID: &str = "uid-1";
const BASE: i64 = 1_750_000_000;

#[derive(Debug, Clone)]
struct Policy {
    kind: &'static str,
    on_failure_retries: Option<i32>,
    on_submission_failure_retries: Option<i32>,
    interval: i64,
    start_timeout_ms: Option<i64>,
    ready_timeout_ms: Option<i64>,
    ttl: Option<i64>,
}

#[derive(Debug, Clone)]
struct Step {
    advance: i64,
    synced: bool,
    driver: Option<(u8, u8, bool, bool)>,
    verified_absent: bool,
    outcome: u8,
    spec_change: bool,
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        prop::sample::select(vec![
            "Never",
            "OnFailure",
            "Always",
            "OnInfrastructureFailure",
        ]),
        prop::option::of(0..4i32),
        prop::option::of(0..4i32),
        1..20i64,
        prop::option::of(1_000..60_000i64),
        prop::option::of(1_000..60_000i64),
        prop::option::of(0..100i64),
    )
        .prop_map(
            |(
                kind,
                on_failure_retries,
                on_submission_failure_retries,
                interval,
                start,
                ready,
                ttl,
            )| {
                Policy {
                    kind,
                    on_failure_retries,
                    on_submission_failure_retries,
                    interval,
                    start_timeout_ms: start,
                    ready_timeout_ms: ready,
                    ttl,
                }
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..40i64,
        prop::bool::weighted(0.9),
        prop::option::weighted(
            0.7,
            (
                0..8u8,
                0..3u8,
                prop::bool::weighted(0.9),
                prop::bool::weighted(0.2),
            ),
        ),
        any::<bool>(),
        0..4u8,
        prop::bool::weighted(0.04),
    )
        .prop_map(
            |(advance, synced, driver, verified_absent, outcome, spec_change)| Step {
                advance,
                synced,
                driver,
                verified_absent,
                outcome,
                spec_change,
            },
        )
}

fn make_spec(policy: &Policy, generation: u32) -> SparkApplicationSpec {
    let mut timeouts = serde_json::Map::new();
    if let Some(ms) = policy.start_timeout_ms {
        timeouts.insert("driverStartTimeoutMillis".into(), json!(ms));
    }
    if let Some(ms) = policy.ready_timeout_ms {
        timeouts.insert("driverReadyTimeoutMillis".into(), json!(ms));
    }
    serde_json::from_value(json!({
        "type": "Scala",
        "sparkVersion": "4.0.0",
        "mainClass": "Main",
        "mainApplicationFile": "local:///app.jar",
        "arguments": [generation.to_string()],
        "timeToLiveSeconds": policy.ttl,
        "restartPolicy": {
            "type": policy.kind,
            "onFailureRetries": policy.on_failure_retries,
            "onSubmissionFailureRetries": policy.on_submission_failure_retries,
            "onFailureRetryInterval": policy.interval,
            "onSubmissionFailureRetryInterval": policy.interval,
        },
        "applicationTimeoutConfig": timeouts,
        "driver": {},
        "executor": {}
    }))
    .unwrap()
}

fn observed_driver(
    choice: (u8, u8, bool, bool),
    status: &SparkApplicationStatus,
    now: i64,
) -> ObservedDriver {
    let (phase, id, owned, terminating) = choice;
    let phase = match phase {
        0 => DriverPhase::Pending {
            waiting_reason: None,
            blocked: None,
        },
        1 => DriverPhase::Pending {
            waiting_reason: Some("ImagePullBackOff".into()),
            blocked: None,
        },
        2 => DriverPhase::Running {
            ready: false,
            started_at: Timestamp::from_second(BASE + now - 3).ok(),
        },
        3 => DriverPhase::Running {
            ready: true,
            started_at: None,
        },
        4 => DriverPhase::Succeeded,
        5 => DriverPhase::Failed {
            exit_code: Some(1),
            reason: FailureReason::ApplicationError,
            message: String::new(),
        },
        6 => DriverPhase::Failed {
            exit_code: None,
            reason: FailureReason::Evicted,
            message: String::new(),
        },
        _ => DriverPhase::Unknown,
    };
    let submission_id = match id {
        0 => Some(status.submission_id.clone()),
        1 => Some(format!("{UID}-0")),
        _ => None,
    };
    ObservedDriver {
        name: "pi-driver".into(),
        uid: "pod".into(),
        submission_id,
        owned,
        terminating,
        spark_app_id: None,
        epoch: None,
        phase,
    }
}

/// The most runs and submissions a policy allows, if bounded.
fn limits(policy: &Policy) -> Option<(i32, i32)> {
    match policy.kind {
        "Always" => None,
        "Never" => Some((1, 1)),
        _ => Some((
            policy.on_failure_retries.unwrap_or(0) + 1,
            policy.on_submission_failure_retries.unwrap_or(0) + 1,
        )),
    }
}

/// One round of the world an application with a PodGroup and a driver Ingress runs in.
#[derive(Debug, Clone)]
struct ObjectsStep {
    advance: i64,
    /// The pod cache shows the driver (it lags the API server otherwise).
    cached: bool,
    dependency_refused: bool,
    /// 0: every UI object made; 1: the operator's UI Service refused; 2: the Ingress the spec
    /// asks for refused.
    ui_refused: u8,
    /// The driver exits 0.
    exits: bool,
    /// The answers of the last round are lost (a requeue, an operator restart).
    new_reconcile: bool,
}

fn objects_step() -> impl Strategy<Value = ObjectsStep> {
    (
        0..15i64,
        prop::bool::weighted(0.5),
        prop::bool::weighted(0.3),
        0..3u8,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(advance, cached, dependency_refused, ui_refused, exits, new_reconcile)| ObjectsStep {
                advance,
                cached,
                dependency_refused,
                ui_refused,
                exits,
                new_reconcile,
            },
        )
}

/// The driver pod as the API server has it: its submission id, whether its container runs,
/// whether it was deleted.
#[derive(Debug, Clone)]
struct WorldDriver {
    submission_id: String,
    running: bool,
    deleted: bool,
}

impl WorldDriver {
    fn live(&self) -> bool {
        self.running && !self.deleted
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the cache shows and whatever the API server refuses: no driver is submitted
    /// before what it depends on exists, a refused dependency leaves no driver, and the
    /// application is never FAILED while a driver of its runs is running.
    #[test]
    fn owned_objects_keep_the_application_and_its_driver_in_agreement(
        on_failure in any::<bool>(),
        steps in prop::collection::vec(objects_step(), 1..60),
    ) {
        let mut settings = Settings::default();
        settings.ui.ui_service = true;
        let policy = if on_failure {
            json!({"type": "OnFailure", "onFailureRetries": 1, "onSubmissionFailureRetries": 1,
                   "onFailureRetryInterval": 5, "onSubmissionFailureRetryInterval": 5})
        } else {
            json!({"type": "Never"})
        };
        let spec: SparkApplicationSpec = serde_json::from_value(json!({
            "type": "Scala", "sparkVersion": "4.0.0", "mainClass": "Main",
            "mainApplicationFile": "local:///app.jar", "driver": {}, "executor": {},
            "batchScheduler": "volcano",
            "driverIngressOptions": [{"servicePort": 4040, "ingressURLFormat": "pi.example.com"}],
            "restartPolicy": policy,
        }))
        .unwrap();
        let mut persisted: Option<SparkApplicationStatus> = None;
        let mut world: Vec<WorldDriver> = Vec::new();
        let mut answers = Observed::default();
        let mut now = 0i64;

        for step in steps {
            now += step.advance;
            if step.exits {
                for driver in &mut world {
                    driver.running = false;
                }
            }
            if step.new_reconcile {
                answers = Observed::default();
            }
            let shown = world.iter().rev().find(|d| !d.deleted).filter(|_| step.cached);
            let observed = Observed {
                cache_synced: true,
                driver: shown.map(|d| ObservedDriver {
                    name: "pi-driver".into(),
                    uid: "pod".into(),
                    submission_id: Some(d.submission_id.clone()),
                    owned: true,
                    terminating: false,
                    spark_app_id: None,
                    epoch: None,
                    phase: if d.running {
                        DriverPhase::Running { ready: true, started_at: None }
                    } else {
                        DriverPhase::Succeeded
                    },
                }),
                ..answers.clone()
            };
            let view = AppView { name: "pi", namespace: "default", uid: UID, spec: &spec,
                status: persisted.as_ref(), settings: &settings };
            let decision = decide(&view, &observed, Timestamp::from_second(BASE + now).unwrap());

            // Execute, answering from the world. As in the reconciler, answers stand until a
            // status write records them (or the reconcile ends).
            for action in &decision.actions {
                match action {
                    Action::WriteStatus => {
                        persisted = Some(decision.status.clone());
                        answers = Observed::default();
                    }
                    Action::EnsureDependencies => {
                        answers.dependencies = Some(if step.dependency_refused {
                            Err(RefusedObject {
                                object: "PodGroup spark-pi-pg".into(),
                                message: "its type is not served".into(),
                                required: true,
                            })
                        } else {
                            Ok(())
                        });
                    }
                    Action::Submit { submission_id } => {
                        prop_assert_eq!(&observed.dependencies, &Some(Ok(())),
                            "a driver is submitted only once what it depends on exists");
                        let holder = world.iter().any(|d| !d.deleted && d.submission_id != *submission_id);
                        answers.submission = Some(if holder {
                            SubmissionOutcome::Rejected {
                                submission_id: submission_id.clone(),
                                message: "DRIVER_POD_ALREADY_EXISTS".into(),
                                retryable: false,
                            }
                        } else {
                            if !world.iter().any(|d| d.submission_id == *submission_id) {
                                world.push(WorldDriver {
                                    submission_id: submission_id.clone(),
                                    running: true,
                                    deleted: false,
                                });
                            }
                            SubmissionOutcome::Accepted {
                                submission_id: submission_id.clone(),
                                driver_pod_name: "pi-driver".into(),
                                spark_app_id: "spark-1".into(),
                            }
                        });
                    }
                    Action::EnsureUiObjects => {
                        let refused = match step.ui_refused {
                            0 => Vec::new(),
                            1 => vec![RefusedObject { object: "Service pi-ui-svc".into(),
                                message: "forbidden".into(), required: false }],
                            _ => vec![RefusedObject { object: "Ingress pi-ing-4040".into(),
                                message: "forbidden".into(), required: true }],
                        };
                        answers.ui = Some(UiMade { refused, ..UiMade::default() });
                    }
                    Action::StopDriver { submission_id, .. } => {
                        for driver in world.iter_mut().filter(|d| d.submission_id == *submission_id) {
                            driver.deleted = true;
                        }
                        answers.driver_stopped = true;
                    }
                    Action::DeleteDriver { .. } => {
                        // The cached driver: the newest not yet deleted.
                        if let Some(driver) = world.iter_mut().rev().find(|d| !d.deleted) {
                            driver.deleted = true;
                        }
                    }
                    Action::VerifyDriverAbsent { .. } => {
                        let current = persisted.as_ref().map(|s| s.submission_id.clone()).unwrap_or_default();
                        answers.driver_absent_verified =
                            !world.iter().any(|d| !d.deleted && d.submission_id == current);
                    }
                    Action::InspectPendingDriver { .. } => answers.driver_warning = Some(None),
                    _ => {}
                }
            }
            if decision.actions.contains(&Action::DeleteApplication) {
                break;
            }

            let stored = persisted.clone().unwrap_or_default();
            if stored.app_state.state == State::Failed {
                prop_assert!(!world.iter().any(WorldDriver::live),
                    "FAILED while a driver runs: {:?} {:?}", stored, world);
            }
            if stored.app_state.state == State::SubmissionFailed
                && stored.failure_reason == Some(FailureReason::OwnedObjectRefused)
            {
                prop_assert!(
                    !world.iter().any(|d| d.submission_id == stored.submission_id && d.live()),
                    "a refused dependency leaves no driver running: {:?}", world);
            }
        }
    }

    #[test]
    fn random_event_sequences_keep_the_invariants(policy in policy(), steps in prop::collection::vec(step(), 1..80)) {
        let settings = Settings::default();
        let mut generation = 0u32;
        let mut spec = make_spec(&policy, generation);
        let mut persisted: Option<SparkApplicationStatus> = None;
        let mut unanswered: Option<String> = None;
        let mut now = 0i64;

        for step in steps {
            now += step.advance;
            if step.spec_change {
                generation += 1;
                spec = make_spec(&policy, generation);
            }
            let input = persisted.clone().unwrap_or_default();
            let submission = unanswered.take().map(|id| match step.outcome {
                0 => SubmissionOutcome::Accepted {
                    submission_id: id,
                    driver_pod_name: "pi-driver".into(),
                    spark_app_id: "spark-1".into(),
                },
                3 => SubmissionOutcome::OverQuota {
                    submission_id: id,
                    message: "exceeded quota: compute".into(),
                },
                n => SubmissionOutcome::Rejected {
                    submission_id: id,
                    message: "refused".into(),
                    retryable: n == 1,
                },
            });
            let observed = Observed {
                cache_synced: step.synced,
                driver: step.driver.map(|c| observed_driver(c, &input, now)),
                driver_absent_verified: step.verified_absent,
                submission,
                ..Observed::default()
            };
            let view = AppView { name: "pi", namespace: "default", uid: UID, spec: &spec, status: persisted.as_ref(), settings: &settings };
            let decision = decide(&view, &observed, Timestamp::from_second(BASE + now).unwrap());

            prop_assert!(decision.actions.is_sorted_by_key(Action::order),
                "actions listed in execution order: {:?}", decision.actions);
            let writes = decision.actions.iter().filter(|a| **a == Action::WriteStatus).count();
            prop_assert!(writes <= 1);
            prop_assert_eq!(writes == 1, decision.status != input, "WriteStatus exactly when the status changed");

            for action in &decision.actions {
                if let Action::Submit { submission_id } = action {
                    // The id sent is a function of the stored status (the stored pending id,
                    // else the next one), so a crash before the answer is stored sends it again;
                    // and nothing is written with the Submit.
                    let expected = if input.submission_pending {
                        input.submission_id.clone()
                    } else {
                        next_submission_id(UID, &input.submission_id)
                    };
                    prop_assert_eq!(submission_id, &expected);
                    prop_assert_eq!(&decision.status, &input);
                    prop_assert_eq!(writes, 0);
                    prop_assert!(!decision.actions.iter().any(|a| matches!(a, Action::RecordEvent { .. })),
                        "events wait for the answer, too: {:?}", decision.actions);
                }
            }

            if !step.synced {
                prop_assert_eq!(&decision.status, &input);
            }

            let same_spec = input.spec_hash.as_deref() == Some(spec_hash(&spec).as_str());
            if input.app_state.state.is_terminal() && same_spec {
                prop_assert_eq!(decision.status.app_state.state, input.app_state.state,
                    "a terminal state stays terminal while the spec is unchanged");
            }

            if let Some((runs, submissions)) = limits(&policy) {
                prop_assert!(decision.status.execution_attempts <= runs,
                    "{} runs, limit {}", decision.status.execution_attempts, runs);
                prop_assert!(decision.status.submission_attempts <= submissions,
                    "{} submissions, limit {}", decision.status.submission_attempts, submissions);
            }

            // Execute.
            if decision.actions.contains(&Action::DeleteApplication) {
                break;
            }
            if writes == 1 {
                persisted = Some(decision.status.clone());
            }
            for action in &decision.actions {
                if let Action::Submit { submission_id } = action {
                    unanswered = Some(submission_id.clone());
                }
            }
        }
    }

    #[test]
    fn spec_hash_ignores_ttl_only(ttl in prop::option::of(any::<i64>()), args in prop::collection::vec("[a-z]{0,5}", 0..4)) {
        let base: SparkApplicationSpec = serde_json::from_value(json!({
            "type": "Python", "sparkVersion": "4", "mainApplicationFile": "local:///a.py",
            "arguments": args, "driver": {}, "executor": {}
        })).unwrap();
        let mut with_ttl = base.clone();
        with_ttl.time_to_live_seconds = ttl;
        prop_assert_eq!(spec_hash(&base), spec_hash(&with_ttl));
        let mut other = base.clone();
        other.arguments.push("extra".into());
        prop_assert_ne!(spec_hash(&base), spec_hash(&other));
    }
}
