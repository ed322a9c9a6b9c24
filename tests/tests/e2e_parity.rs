//! Kubeflow parity end to end: the operator's controllers on an in-process kubesim, submitting
//! through a real submitter over mTLS, for the features the widely used operator has beyond a
//! plain SparkApplication (the Spark version, schedules, stuck drivers, executors, the UI).

use crate::e2e_support;

use e2e_support::{Env, executor_pod, install_pod_group_crd, wait_until};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams};
use kubesim::control::{FaultRule, FaultTiming};
use operator::crd::{
    ApplicationStateType as State, ExecutorState, ScheduleState, ScheduledSparkApplication,
    ScheduledSparkApplicationStatus, SparkApplication,
};
use operator::schedule::SCHEDULED_APP_NAME_LABEL;
use operator::scheduled_controller::ScheduleClock;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_version_of_the_application_decides_what_its_driver_gets() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    // Spark 3.5 never made a NetworkPolicy; 4.2 on does. The label names the release.
    for (name, version, image, policy) in [
        ("old", "3.5.1", "apache/spark:3.5.1", false),
        ("new", "4.3.0", "apache/spark:4.3.0", true),
    ] {
        env.create_app(name, json!({"sparkVersion": version, "image": image}))
            .await;
        env.wait_for_state(name, State::Completed).await;
        let driver = env.driver_pods(name).await.remove(0);
        let labels = driver.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("spark-version").map(String::as_str),
            Some(version),
            "{name}"
        );
        let app_id = labels.get("spark-app-selector").cloned().unwrap();
        let policies: Api<NetworkPolicy> = Api::namespaced(env.client.clone(), "default");
        let found = policies
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .any(|p| {
                p.metadata
                    .labels
                    .unwrap_or_default()
                    .get("spark-app-selector")
                    == Some(&app_id)
            });
        assert_eq!(found, policy, "{name} ({version}): NetworkPolicy present");
    }
}

/// Schedule time runs this much faster than the wall clock in these tests.
const SCHEDULE_SPEED: u32 = 30;

/// The sandbox's operator configuration with schedules on an accelerated clock (one origin, so
/// restarted operators agree on the time).
fn scheduled_config(env: &Env, clock: ScheduleClock) -> operator::controller::RunConfig {
    let mut config = env.run_config();
    config.schedule_clock = clock;
    config
}

fn schedules(env: &Env) -> Api<ScheduledSparkApplication> {
    Api::namespaced(env.client.clone(), "default")
}

/// Creates a ScheduledSparkApplication `name` on `schedule`, with `extra` merged into its spec.
async fn create_schedule(env: &Env, name: &str, schedule: &str, extra: Value) {
    let mut spec = json!({
        "schedule": schedule,
        "template": {
            "type": "Scala", "mode": "cluster", "image": "apache/spark:4.0.4",
            "sparkVersion": "4.0.4",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": {"cores": 1, "memory": "512m",
                       "annotations": {"kubesim.io/run-seconds": "0.2"}},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let schedule: ScheduledSparkApplication = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name, "namespace": "default", "labels": {"team": "data"}},
        "spec": spec,
    }))
    .unwrap();
    schedules(env)
        .create(&PostParams::default(), &schedule)
        .await
        .unwrap();
}

/// The runs of schedule `name` (by its label), by tick.
async fn runs_of(env: &Env, name: &str) -> Vec<(i64, SparkApplication)> {
    let mut runs: Vec<(i64, SparkApplication)> = env
        .apps()
        .list(&ListParams::default().labels(&format!("{SCHEDULED_APP_NAME_LABEL}={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|app| {
            let tick = app
                .metadata
                .name
                .as_deref()
                .and_then(|n| n.strip_prefix(&format!("{name}-")))
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("run {:?} is not named from a tick", app.metadata.name));
            (tick, app)
        })
        .collect();
    runs.sort_by_key(|(tick, _)| *tick);
    runs
}

async fn wait_for_schedule(
    env: &Env,
    name: &str,
    what: &str,
    probe: impl Fn(&ScheduledSparkApplicationStatus) -> bool,
) -> ScheduledSparkApplicationStatus {
    let api = schedules(env);
    let probe = &probe;
    wait_until(what, || {
        let api = api.clone();
        async move {
            let status = api.get(name).await.ok()?.status?;
            probe(&status).then_some(status)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_runs_owned_applications_per_tick_and_keeps_its_history() {
    let env = Env::start().await;
    let clock = ScheduleClock::accelerated(Timestamp::now(), SCHEDULE_SPEED);
    let _operator = env.operator_with(scheduled_config(&env, clock)).await;
    create_schedule(
        &env,
        "nightly",
        "@every 3m",
        json!({"successfulRunHistoryLimit": 1}),
    )
    .await;
    let scheduled = wait_for_schedule(&env, "nightly", "a next run", |s| {
        s.schedule_state == ScheduleState::Scheduled && s.next_run.is_some()
    })
    .await;
    let first_tick = scheduled.next_run.unwrap().0.as_second();
    // Two runs completed: the older one is deleted, the newer one is the history.
    let status = wait_for_schedule(&env, "nightly", "two completed runs", |s| {
        s.past_successful_run_names
            .first()
            .is_some_and(|n| n != &format!("nightly-{first_tick}"))
    })
    .await;
    assert_eq!(status.past_successful_run_names.len(), 1);
    assert!(status.last_run.is_some());
    assert!(status.next_run.is_some());
    let kept = &status.past_successful_run_names[0];
    let first = format!("nightly-{first_tick}");
    wait_until("the first run to be deleted", || {
        let apps = env.apps();
        let first = first.clone();
        async move { apps.get_opt(&first).await.unwrap().is_none().then_some(()) }
    })
    .await;
    let run = env.apps().get(kept).await.unwrap();
    let owner = &run.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(owner.kind, "ScheduledSparkApplication");
    assert_eq!(owner.name, "nightly");
    let labels = run.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "data");
    assert_eq!(
        run.status.unwrap().app_state.state,
        State::Completed,
        "the kept run completed"
    );
    // Ticks are the schedule's interval apart: never two runs for one tick.
    let ticks: Vec<i64> = runs_of(&env, "nightly")
        .await
        .iter()
        .map(|(t, _)| *t)
        .collect();
    for pair in ticks.windows(2) {
        assert!(pair[1] - pair[0] >= 180, "{ticks:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_created_before_a_crash_is_the_ticks_run_for_the_next_operator() {
    let env = Env::start().await;
    let clock = ScheduleClock::accelerated(Timestamp::now(), SCHEDULE_SPEED);
    let first = env.operator_with(scheduled_config(&env, clock)).await;
    create_schedule(
        &env,
        "hourly",
        "@every 3m",
        json!({"successfulRunHistoryLimit": 5}),
    )
    .await;
    wait_for_schedule(&env, "hourly", "a next run", |s| s.next_run.is_some()).await;
    // The run's create takes effect but its answer is lost, and the status write that would
    // record it fails: the operator dies before the run is recorded.
    let fault = |verb: &str, resource: &str, when, count| FaultRule {
        verb: Some(verb.into()),
        group: Some("sparkoperator.k8s.io".into()),
        resource: Some(resource.into()),
        namespace: None,
        name: None,
        count,
        code: 500,
        message: None,
        when,
        delay_ms: 0,
    };
    let control = &env.cluster.control;
    control.add_fault(fault("create", "sparkapplications", FaultTiming::After, 1));
    control.add_fault(fault(
        "update",
        "scheduledsparkapplications/status",
        FaultTiming::Before,
        1000,
    ));
    let tick = wait_until("the first run", || async {
        runs_of(&env, "hourly").await.first().map(|(tick, _)| *tick)
    })
    .await;
    drop(first);
    let recorded = schedules(&env).get("hourly").await.unwrap().status.unwrap();
    assert!(recorded.last_run_name.is_empty(), "{recorded:?}");
    env.cluster.control.clear_faults();

    let _second = env.operator_with(scheduled_config(&env, clock)).await;
    let run = format!("hourly-{tick}");
    wait_for_schedule(&env, "hourly", "the first run recorded", |s| {
        s.last_run_name == run
    })
    .await;
    let next = wait_for_schedule(&env, "hourly", "the next run", |s| {
        !s.last_run_name.is_empty() && s.last_run_name != run
    })
    .await;
    let next_tick: i64 = next.last_run_name["hourly-".len()..].parse().unwrap();
    // Up to the second run, exactly the two ticks' runs exist: no catch-up run was made for
    // the tick the first operator had run.
    let ticks: Vec<i64> = runs_of(&env, "hourly")
        .await
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t <= next_tick)
        .collect();
    assert_eq!(ticks, [tick, next_tick]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_held_pending_shows_why_on_the_application() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    // A ConfigMap that does not exist (the kubelet reports FailedMount only in an event), and a
    // node selector no node matches (the scheduler says so on the pod).
    env.create_app(
        "unmounted",
        json!({"driver": {"configMaps": [{"name": "missing-conf", "path": "/etc/extra"}]}}),
    )
    .await;
    env.create_app(
        "nowhere",
        json!({"driver": {"nodeSelector": {"disk": "quantum"}}}),
    )
    .await;
    for (app, reason, says) in [
        ("unmounted", "FailedMount", "missing-conf"),
        (
            "nowhere",
            "Unschedulable",
            "didn't match Pod's node affinity/selector",
        ),
    ] {
        let held = env
            .wait_for_app(app, &format!("{app}'s DriverPending condition"), |a| {
                a.status
                    .as_ref()
                    .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "DriverPending"))
            })
            .await
            .status
            .unwrap();
        assert_eq!(held.app_state.state, State::Submitted, "{app}");
        let condition = held
            .conditions
            .iter()
            .find(|c| c.type_ == "DriverPending")
            .unwrap();
        assert_eq!(condition.reason, reason, "{app}");
        assert!(condition.message.contains(says), "{app}: {condition:?}");
        assert!(held.app_state.error_message.contains(says), "{app}");
        let notes = wait_until(&format!("{app}'s SparkDriverPending warning"), || async {
            let notes: Vec<String> = env
                .warnings(app, "SparkDriverPending")
                .await
                .into_iter()
                .filter_map(|e| e.note)
                .collect();
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        assert!(notes[0].contains(says), "{app}: {notes:?}");
    }
    // The warnings come from the operator's events watch: no LIST per pending driver, only the
    // list each watch starts from.
    let counts = env.cluster.control.counts();
    let events = |watch: bool| -> u64 {
        counts
            .iter()
            .filter(|c| c.resource == "events" && c.group.is_empty() && c.watch == watch)
            .filter(|c| watch || c.verb == "list")
            .map(|c| c.count)
            .sum()
    };
    assert_eq!(events(false), events(true), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_states_reach_the_status_and_deleted_executors_keep_their_last_state() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "counted",
        json!({"driver": {"annotations": {"kubesim.io/run-seconds": "-1"}}}),
    )
    .await;
    let app = env.wait_for_state("counted", State::Running).await;
    let driver = env.driver_pods("counted").await.remove(0);
    let failing = executor_pod(
        &app,
        &driver,
        "counted-exec-1",
        json!({"kubesim.io/run-seconds": "0.2", "kubesim.io/exit-code": "3"}),
    );
    let running = executor_pod(
        &app,
        &driver,
        "counted-exec-2",
        json!({"kubesim.io/run-seconds": "-1"}),
    );
    for pod in [&failing, &running] {
        env.pods()
            .create(&PostParams::default(), pod)
            .await
            .unwrap();
    }
    let seen = env
        .wait_for_app("counted", "one failed and one running executor", |a| {
            a.status
                .as_ref()
                .and_then(|s| s.executor_counts)
                .is_some_and(|c| c.failed == 1 && c.running == 1)
        })
        .await
        .status
        .unwrap();
    assert_eq!(seen.executor_state["counted-exec-1"], ExecutorState::Failed);
    assert_eq!(
        seen.executor_state["counted-exec-2"],
        ExecutorState::Running
    );
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let failed_note = wait_until("a SparkExecutorFailed event", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SparkExecutorFailed"))
            .and_then(|e| e.note)
    })
    .await;
    assert!(failed_note.contains("counted-exec-1"), "{failed_note}");
    assert!(failed_note.contains("ExitCode: 3"), "{failed_note}");
    assert!(
        failed_note.contains("failed)"),
        "counts in the note: {failed_note}"
    );

    // The driver finishes and deletes its executors.
    env.pods()
        .delete("counted-exec-2", &Default::default())
        .await
        .unwrap();
    wait_until("the executor to be gone", || async {
        env.pods()
            .get_opt("counted-exec-2")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    env.cluster
        .kubelet
        .kill(
            "default",
            driver.metadata.name.as_deref().unwrap(),
            Some("spark-kubernetes-driver"),
            0,
        )
        .unwrap();
    let done = env
        .wait_for_state("counted", State::Completed)
        .await
        .status
        .unwrap();
    // Gone from the cluster, still in the status: its last state is what the watch showed last
    // (running, or how its termination ended when the kubelet reported it before the removal).
    assert!(
        done.executor_state.contains_key("counted-exec-2"),
        "{:?}",
        done.executor_state
    );
    assert_eq!(done.executor_state["counted-exec-1"], ExecutorState::Failed);
    let counts = done.executor_counts.unwrap();
    assert_eq!(
        counts.pending + counts.running + counts.completed + counts.failed + counts.unknown,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_service_and_ingresses_are_made_recorded_and_collected_with_the_application() {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::networking::v1::Ingress;

    let env = Env::start().await;
    let mut config = env.run_config();
    config.settings.ui.ingress_url_format = Some("{{$appName}}.ui.example.com".into());
    config.settings.ui.ingress_class_name = Some("nginx".into());
    let _operator = env.operator_with(config).await;
    env.create_app(
        "webbed",
        json!({
            "driver": {"annotations": {"kubesim.io/run-seconds": "-1"}},
            "sparkUIOptions": {"serviceLabels": {"team": "data"}},
            "driverIngressOptions": [{"servicePort": 7077, "servicePortName": "connect",
                                      "ingressURLFormat": "connect.example.com/{{$appName}}"}],
        }),
    )
    .await;
    let app = env
        .wait_for_app("webbed", "the UI recorded in driverInfo", |a| {
            a.status
                .as_ref()
                .is_some_and(|s| !s.driver_info.web_ui_ingress_name.is_empty())
        })
        .await;
    let info = app.status.unwrap().driver_info;
    assert_eq!(info.web_ui_service_name, "webbed-ui-svc");
    assert_eq!(info.web_ui_port, 4040);
    assert_eq!(info.web_ui_ingress_name, "webbed-ui-ingress");
    assert_eq!(info.web_ui_ingress_address, "http://webbed.ui.example.com");
    let services: Api<Service> = Api::namespaced(env.client.clone(), "default");
    let ui = services.get("webbed-ui-svc").await.unwrap();
    let ip = ui.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    assert_eq!(info.web_ui_address, format!("{ip}:4040"));
    assert_eq!(
        ui.metadata.owner_references.as_ref().unwrap()[0].uid,
        app.metadata.uid.clone().unwrap()
    );
    assert_eq!(ui.metadata.labels.as_ref().unwrap()["team"], "data");
    // The UI Service reaches the driver: its endpoints list the driver pod.
    let driver = env.driver_pods("webbed").await.remove(0);
    let selector = ui.spec.unwrap().selector.unwrap();
    let labels = driver.metadata.labels.unwrap();
    assert!(
        selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{selector:?}"
    );
    let connect = services.get("webbed-driver-7077").await.unwrap();
    assert_eq!(
        connect.spec.unwrap().ports.unwrap()[0].name.as_deref(),
        Some("connect")
    );
    let ingresses: Api<Ingress> = Api::namespaced(env.client.clone(), "default");
    let ui_ingress = ingresses.get("webbed-ui-ingress").await.unwrap();
    let spec = ui_ingress.spec.unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    assert_eq!(
        spec.rules.unwrap()[0].host.as_deref(),
        Some("webbed.ui.example.com")
    );
    let connect_ingress = ingresses.get("webbed-ing-7077").await.unwrap();
    assert_eq!(
        connect_ingress.metadata.annotations.unwrap()["nginx.ingress.kubernetes.io/rewrite-target"],
        "/$2"
    );
    // Owned: deleting the application collects them.
    env.apps()
        .delete("webbed", &Default::default())
        .await
        .unwrap();
    wait_until("the UI objects to be collected", || async {
        let left = services.get_opt("webbed-ui-svc").await.unwrap().is_some()
            || services
                .get_opt("webbed-driver-7077")
                .await
                .unwrap()
                .is_some()
            || ingresses
                .get_opt("webbed-ui-ingress")
                .await
                .unwrap()
                .is_some()
            || ingresses
                .get_opt("webbed-ing-7077")
                .await
                .unwrap()
                .is_some();
        (!left).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_applications_ui_service_is_created_once_and_never_read_back() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.cluster.control.reset_counts();
    let names = ["ui-a", "ui-b", "ui-c", "ui-d"];
    for name in names {
        env.create_app(name, json!({})).await;
    }
    for name in names {
        let app = env.wait_for_state(name, State::Completed).await;
        assert_eq!(
            app.status.unwrap().driver_info.web_ui_service_name,
            format!("{name}-ui-svc")
        );
    }
    let counts = env.cluster.control.counts();
    let services = |verb: &str| -> u64 {
        counts
            .iter()
            .filter(|c| c.resource == "services" && c.verb == verb && !c.watch)
            .map(|c| c.count)
            .sum()
    };
    // Per application, the submitter's driver Service and the operator's UI Service; a second
    // create would be answered 409 and read back.
    assert_eq!(services("create"), 2 * names.len() as u64, "{counts:#?}");
    assert_eq!(services("get"), 0, "{counts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_service_can_be_turned_off() {
    use k8s_openapi::api::core::v1::Service;

    let env = Env::start().await;
    let mut config = env.run_config();
    config.settings.ui.ui_service = false;
    let _operator = env.operator_with(config).await;
    env.create_app("plain", json!({})).await;
    let app = env.wait_for_state("plain", State::Completed).await;
    assert!(
        app.status
            .unwrap()
            .driver_info
            .web_ui_service_name
            .is_empty()
    );
    let services: Api<Service> = Api::namespaced(env.client.clone(), "default");
    assert!(services.get_opt("plain-ui-svc").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_pdb_is_made_when_the_spec_asks_and_goes_with_the_application() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;

    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app("guarded", json!({"driverPodDisruptionBudget": true}))
        .await;
    env.create_app("unguarded", json!({})).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), "default");
    let pdb = wait_until("the driver PDB", || async {
        pdbs.get_opt("guarded-driver").await.unwrap()
    })
    .await;
    let spec = pdb.spec.unwrap();
    assert_eq!(
        spec.min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    // Made before the driver (it protects the driver from its first moment).
    let driver = wait_until("the driver", || async {
        env.driver_pods("guarded").await.pop()
    })
    .await;
    let labels = driver.metadata.labels.unwrap();
    let selector = spec.selector.unwrap().match_labels.unwrap();
    assert!(
        selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{selector:?}"
    );
    env.wait_for_state("unguarded", State::Completed).await;
    assert!(pdbs.get_opt("unguarded-driver").await.unwrap().is_none());
    env.apps()
        .delete("guarded", &Default::default())
        .await
        .unwrap();
    wait_until("the PDB to be collected", || async {
        pdbs.get_opt("guarded-driver")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_the_driver_and_resume_runs_the_application_again() {
    use kube::api::{Patch, PatchParams};

    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "pausable",
        json!({"driver": {"annotations": {"kubesim.io/run-seconds": "-1"}}}),
    )
    .await;
    let running = env.wait_for_state("pausable", State::Running).await;
    let first_id = running.status.unwrap().submission_id;
    let suspend = |on: bool| {
        let apps = env.apps();
        async move {
            apps.patch(
                "pausable",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": on}})),
            )
            .await
            .unwrap();
        }
    };
    suspend(true).await;
    env.wait_for_state("pausable", State::Suspended).await;
    assert!(
        env.pods()
            .get_opt("pausable-driver")
            .await
            .unwrap()
            .is_none()
    );
    suspend(false).await;
    let resumed = env
        .wait_for_app("pausable", "a new run after resuming", |a| {
            a.status
                .as_ref()
                .is_some_and(|s| s.submission_id != first_id && s.app_state.state == State::Running)
        })
        .await;
    let drivers = env.driver_pods("pausable").await;
    assert_eq!(drivers.len(), 1);
    let labels = drivers[0].metadata.labels.clone().unwrap();
    assert_eq!(
        labels["sparkoperator.k8s.io/submission-id"],
        resumed.status.unwrap().submission_id
    );
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for reason in [
        "SparkApplicationSuspending",
        "SparkApplicationSuspended",
        "SparkApplicationResuming",
    ] {
        assert!(reasons.iter().any(|r| r == reason), "{reason}: {reasons:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitoring_runs_the_jmx_exporter_with_its_config_map_port_and_annotations() {
    use k8s_openapi::api::core::v1::ConfigMap;

    let env = Env::start().await;
    let _operator = env.operator().await;
    let jar = "/prometheus/jmx_prometheus_javaagent-0.11.0.jar";
    env.create_app(
        "watched",
        json!({"monitoring": {"exposeDriverMetrics": true, "exposeExecutorMetrics": true,
                              "prometheus": {"jmxExporterJar": jar, "port": 8090}}}),
    )
    .await;
    let app = env.wait_for_state("watched", State::Completed).await;
    assert!(
        app.status
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.type_ != "UnsupportedFields")
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    let prom = config_maps.get("watched-prom-conf").await.unwrap();
    let data = prom.data.unwrap();
    assert!(data["metrics.properties"].contains("JmxSink"));
    assert!(data.contains_key("prometheus.yaml"));
    let driver = env.driver_pods("watched").await.remove(0);
    let annotations = driver.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8090");
    let spec = driver.spec.unwrap();
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == "spark-kubernetes-driver")
        .unwrap();
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("jmx-exporter"))
        .unwrap();
    assert_eq!(port.container_port, 8090);
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/etc/metrics/conf")
        .unwrap();
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert_eq!(
        volume.config_map.as_ref().unwrap().name,
        "watched-prom-conf"
    );
    // Spark's configuration carries the agent and the metrics settings.
    let properties: String = config_maps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|cm| cm.data?.get("spark.properties").cloned())
        .find(|p| p.contains("spark.metrics.namespace"))
        .unwrap();
    // (Java properties escape `:` and `=`.)
    let agent = properties
        .lines()
        .find(|l| l.starts_with("spark.driver.extraJavaOptions="))
        .unwrap()
        .replace('\\', "");
    assert_eq!(
        agent,
        format!(
            "spark.driver.extraJavaOptions=-javaagent:{jar}=8090:/etc/metrics/conf/prometheus.yaml"
        )
    );
    assert!(properties.contains("default.watched"), "{properties}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_schedulers_get_their_pod_groups_and_a_missing_crd_fails_the_application() {
    use kube::api::{ApiResource, DynamicObject};

    let env = Env::start().await;
    install_pod_group_crd(&env.client, "scheduling.volcano.sh", "v1beta1").await;
    let _operator = env.operator().await;
    env.create_app(
        "grouped",
        json!({"batchScheduler": "volcano",
               "batchSchedulerOptions": {"queue": "analytics"}}),
    )
    .await;
    // No coscheduling CRD in this cluster.
    env.create_app("ungroupable", json!({"batchScheduler": "kube-scheduler"}))
        .await;
    let app = env.wait_for_state("grouped", State::Completed).await;
    assert!(
        app.status
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.type_ != "UnsupportedFields")
    );
    let resource = ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    let groups: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), "default", &resource);
    let group = groups.get("spark-grouped-pg").await.unwrap();
    assert_eq!(group.data["spec"]["queue"], "analytics");
    assert_eq!(group.data["spec"]["minMember"], 1);
    assert_eq!(
        group.metadata.owner_references.unwrap()[0].uid,
        app.metadata.uid.unwrap()
    );
    let driver = env.driver_pods("grouped").await.remove(0);
    assert_eq!(
        driver.metadata.annotations.unwrap()["scheduling.k8s.io/group-name"],
        "spark-grouped-pg"
    );
    assert_eq!(
        driver.spec.unwrap().scheduler_name.as_deref(),
        Some("volcano")
    );

    let failed = env.wait_for_state("ungroupable", State::Failed).await;
    let message = failed.status.unwrap().app_state.error_message;
    assert!(
        message.contains("podgroups.scheduling.x-k8s.io"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conf_config_maps_packages_and_the_driver_memory_limit_reach_the_driver_as_kubeflow_sets_them()
 {
    use k8s_openapi::api::core::v1::{ConfigMap, Container};

    let env = Env::start().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    // The pods mount them: without them the kubelet would hold the driver in FailedMount.
    for (name, key) in [
        ("spark-conf", "log4j2.properties"),
        ("hadoop-conf", "core-site.xml"),
    ] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {key: "x"}}))
                .unwrap();
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let _operator = env.operator().await;
    env.create_app(
        "confs",
        json!({
            "sparkConfigMap": "spark-conf",
            "hadoopConfigMap": "hadoop-conf",
            "deps": {"packages": ["org.example:greeting:1.0.0"],
                     "repositories": ["file:///opt/maven-repo"],
                     "excludePackages": ["org.example:unused"]},
            "driver": {"memoryLimit": "2g"},
        }),
    )
    .await;
    let app = env.wait_for_state("confs", State::Completed).await;
    let conditions = app.status.unwrap().conditions;
    assert!(
        conditions.iter().all(|c| c.type_ != "UnsupportedFields"),
        "{conditions:?}"
    );

    let driver = env.driver_pods("confs").await.remove(0);
    let spec = driver.spec.unwrap();
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == "spark-kubernetes-driver")
        .unwrap();
    let env_values = |c: &Container, name: &str| -> Vec<String> {
        c.env
            .iter()
            .flatten()
            .filter(|e| e.name == name)
            .filter_map(|e| e.value.clone())
            .collect()
    };
    assert_eq!(env_values(container, "SPARK_CONF_DIR"), ["/etc/spark/conf"]);
    assert_eq!(
        env_values(container, "HADOOP_CONF_DIR"),
        ["/opt/hadoop/conf"]
    );
    let config_map_at = |path: &str| {
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"));
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.config_map.as_ref())
            .map(|c| c.name.clone())
    };
    assert_eq!(
        config_map_at("/etc/spark/conf").as_deref(),
        Some("spark-conf")
    );
    assert_eq!(
        config_map_at("/etc/hadoop/conf").as_deref(),
        Some("hadoop-conf")
    );
    assert_eq!(
        config_map_at("/opt/hadoop/conf").as_deref(),
        Some("hadoop-conf")
    );
    // spark.properties stays where the driver reads it.
    assert!(config_map_at("/opt/spark/conf").is_some_and(|n| n.ends_with("-conf-map")));
    let resources = container.resources.clone().unwrap();
    let memory = |m: Option<std::collections::BTreeMap<String, _>>| {
        m.and_then(
            |m: std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >| { m.get("memory").map(|q| q.0.clone()) },
        )
    };
    assert_eq!(memory(resources.requests).as_deref(), Some("896Mi"));
    assert_eq!(memory(resources.limits).as_deref(), Some("2Gi"));

    // The packages reach the driver's spark.properties, for its own spark-submit to resolve; the
    // executors' template mounts the Spark conf ConfigMap with SPARK_CONF_DIR pointing at it.
    let data: Vec<_> = config_maps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|cm| cm.data)
        .collect();
    let properties = data
        .iter()
        .find_map(|d| d.get("spark.properties"))
        .unwrap()
        .replace('\\', "");
    for line in [
        "spark.jars.packages=org.example:greeting:1.0.0",
        "spark.jars.repositories=file:///opt/maven-repo",
        "spark.jars.excludes=org.example:unused",
    ] {
        assert!(
            properties.lines().any(|l| l == line),
            "{line}: {properties}"
        );
    }
    let executor_template = data
        .iter()
        .find_map(|d| d.get("podspec-configmap-key"))
        .unwrap();
    // (Spark's YAML of the template.)
    for text in [
        "SPARK_CONF_DIR",
        "mountPath: /etc/spark/conf",
        "name: spark-conf",
    ] {
        assert!(
            executor_template.contains(text),
            "{text}: {executor_template}"
        );
    }
}
