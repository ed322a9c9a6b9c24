//! The operator end to end: its controller on an in-process kubesim, submitting through a real
//! submitter over mTLS. Each test has its own cluster, submitter and operator.

use crate::e2e_support;

use std::time::Duration;

use e2e_support::{Env, chart_operator_rules, wait_until};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use operator::controller::serve_probes;
use operator::crd::{ApplicationStateType as State, FailureReason};
use serde_json::json;
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_runs_to_completed() {
    let env = Env::start().await;
    let config = env.run_config();
    let metrics = config.metrics.clone();
    let operator = env.operator_with(config).await;
    let (probes, serve) = serve_probes(
        "127.0.0.1:0".parse().unwrap(),
        operator.health.clone(),
        metrics.clone(),
    )
    .await
    .unwrap();
    let server = tokio::spawn(serve);
    assert!(
        http_get(probes, "/readyz")
            .await
            .starts_with("HTTP/1.0 200")
    );
    env.create_app("pi", json!({})).await;
    let app = env.wait_for_state("pi", State::Completed).await;
    let status = app.status.unwrap();
    assert_eq!(status.execution_attempts, 1);
    assert!(!status.submission_pending);
    assert!(!status.spark_application_id.is_empty());
    assert_eq!(env.driver_pods("pi").await.len(), 1);
    let text = http_get(probes, "/metrics").await;
    assert!(
        text.contains("spark_operator_submissions_total{outcome=\"created\"} 1"),
        "{text}"
    );
    assert!(text.contains("spark_operator_applications{state=\"COMPLETED\"} 1"));
    server.abort();
}

/// One plain HTTP/1.0 GET; the whole answer as text.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: probes\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_driver_is_retried_on_failure_then_fails() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "flaky",
        json!({
            "driver": {"annotations": {"kubesim.io/exit-code": "1"}},
            "restartPolicy": {"type": "OnFailure", "onFailureRetries": 2,
                              "onFailureRetryInterval": 1},
        }),
    )
    .await;
    let app = env.wait_for_state("flaky", State::Failed).await;
    let status = app.status.unwrap();
    assert_eq!(status.execution_attempts, 3);
    assert_eq!(status.failure_reason, Some(FailureReason::ApplicationError));
    assert!(
        status.submission_id.ends_with("-3"),
        "{}",
        status.submission_id
    );
    // Each rerun replaced the previous run's driver, which held the same name.
    assert_eq!(env.pod_creations(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_refused_by_the_submitter_is_submission_failed_then_failed() {
    let env = Env::start().await;
    // A foreign pod already holds the driver's name: the submitter answers 409.
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": "taken-driver"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let foreign = env
        .pods()
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let _operator = env.operator().await;
    env.create_app(
        "taken",
        json!({"restartPolicy": {"type": "OnFailure", "onSubmissionFailureRetries": 1,
                                 "onSubmissionFailureRetryInterval": 2}}),
    )
    .await;
    // SUBMISSION_FAILED while a submission retry is due, FAILED once retries are spent (as
    // the widely used operator does).
    let failed = env
        .wait_for_state("taken", State::SubmissionFailed)
        .await
        .status
        .unwrap();
    assert_eq!(failed.submission_attempts, 1);
    let app = env.wait_for_state("taken", State::Failed).await;
    let status = app.status.unwrap();
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::SubmissionRejected)
    );
    assert_eq!(status.submission_attempts, 2);
    assert_eq!(status.execution_attempts, 0);
    assert!(
        status
            .app_state
            .error_message
            .contains("DRIVER_POD_ALREADY_EXISTS")
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
    assert!(
        reasons
            .iter()
            .any(|r| r == "SparkApplicationSubmissionFailed"),
        "{reasons:?}"
    );
    // The foreign pod is not the operator's to delete.
    let pod = env.pods().get("taken-driver").await.unwrap();
    assert_eq!(pod.metadata.uid, foreign.metadata.uid);
    assert!(pod.metadata.deletion_timestamp.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_deleted_by_hand_is_rerun_per_policy() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "lost",
        json!({
            "driver": {"annotations": {"kubesim.io/run-seconds": "60"}},
            "restartPolicy": {"type": "OnFailure", "onFailureRetries": 1,
                              "onFailureRetryInterval": 1},
        }),
    )
    .await;
    let app = env.wait_for_state("lost", State::Running).await;
    let first = app.status.unwrap().submission_id;
    env.pods()
        .delete("lost-driver", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let app = env
        .wait_for_app("lost", "a rerun after the driver was deleted", |app| {
            app.status.as_ref().is_some_and(|s| {
                s.execution_attempts == 2
                    && s.submission_id != first
                    && matches!(s.app_state.state, State::Submitted | State::Running)
            })
        })
        .await;
    let pods = env.driver_pods("lost").await;
    assert_eq!(pods.len(), 1, "only the rerun's driver");
    assert_eq!(
        pods[0].metadata.labels.as_ref().unwrap()["sparkoperator.k8s.io/submission-id"],
        app.status.unwrap().submission_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_before_the_answer_was_recorded_keeps_the_driver_and_records_the_same_id() {
    let env = Env::start().await;
    // Every status write of the app fails: the first operator submits, and its driver is made,
    // but the answer never reaches the status (as when the operator dies right after sending).
    let rule: kubesim::control::FaultRule = serde_json::from_value(json!({
        "verb": "update", "resource": "sparkapplications/status", "name": "restart",
        "code": 500, "count": 1_000_000
    }))
    .unwrap();
    env.cluster.control.add_fault(rule);
    let first = env.operator().await;
    let app = env
        .create_app(
            "restart",
            json!({"driver": {"annotations": {"kubesim.io/run-seconds": "1"}}}),
        )
        .await;
    let uid = app.metadata.uid.unwrap();
    let made = wait_until("the driver to be made", || async {
        env.driver_pods("restart").await.into_iter().next()
    })
    .await;
    drop(first);
    let stored = env.apps().get("restart").await.unwrap().status;
    assert!(
        stored.as_ref().is_none_or(|s| s.submission_id.is_empty()),
        "nothing recorded: {stored:?}"
    );

    env.cluster.control.clear_faults();
    let _second = env.operator().await;
    let app = env.wait_for_state("restart", State::Completed).await;
    let id = format!("{uid}-1");
    assert_eq!(app.status.unwrap().submission_id, id, "the id first sent");
    let drivers = env.driver_pods("restart").await;
    assert_eq!(drivers.len(), 1);
    assert_eq!(
        drivers[0].metadata.uid, made.metadata.uid,
        "the first driver"
    );
    assert_eq!(
        drivers[0].metadata.labels.as_ref().unwrap()["sparkoperator.k8s.io/submission-id"],
        id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_before_a_reruns_answer_was_recorded_keeps_that_rerun_driver() {
    let env = Env::start().await;
    let first = env.operator().await;
    let app = env
        .create_app(
            "rerun",
            json!({
                "driver": {"annotations": {"kubesim.io/exit-code": "1"}},
                "restartPolicy": {"type": "OnFailure", "onFailureRetries": 1,
                                  "onFailureRetryInterval": 1},
            }),
        )
        .await;
    let uid = app.metadata.uid.unwrap();
    // The old driver's deletion is slow, which leaves time to make every status write fail
    // before the rerun is submitted: its driver is made, its answer never recorded.
    env.cluster.control.add_latency(
        serde_json::from_value(json!({"verb": "delete", "resource": "pods", "millis": 2000}))
            .unwrap(),
    );
    env.wait_for_state("rerun", State::PendingRerun).await;
    env.cluster.control.add_fault(
        serde_json::from_value(json!({
            "verb": "update", "resource": "sparkapplications/status", "name": "rerun",
            "code": 500, "count": 1_000_000
        }))
        .unwrap(),
    );
    let second_id = format!("{uid}-2");
    let made = wait_until("the rerun's driver to be made", || async {
        env.driver_pods("rerun").await.into_iter().find(|pod| {
            pod.metadata.labels.as_ref().unwrap()["sparkoperator.k8s.io/submission-id"] == second_id
        })
    })
    .await;
    drop(first);
    let stored = env.apps().get("rerun").await.unwrap().status.unwrap();
    assert_eq!(
        (stored.app_state.state, stored.submission_id.as_str()),
        (State::PendingRerun, format!("{uid}-1").as_str()),
        "the rerun's answer was not recorded"
    );

    env.cluster.control.clear_faults();
    env.cluster.control.clear_latency();
    let _second = env.operator().await;
    // The rerun's driver exits 1 as well, and no retry is left.
    let app = env.wait_for_state("rerun", State::Failed).await;
    let status = app.status.unwrap();
    assert_eq!(status.submission_id, second_id);
    assert_eq!(status.execution_attempts, 2);
    let drivers = env.driver_pods("rerun").await;
    assert_eq!(drivers.len(), 1);
    assert_eq!(
        drivers[0].metadata.uid, made.metadata.uid,
        "the rerun's driver was kept, not deleted and made again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_while_a_submission_hangs_submits_exactly_one_driver() {
    let env = Env::start().await;
    // A submitter that accepts connections and never answers: the first operator hangs in the
    // submission, which never reaches the real submitter.
    let black_hole = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole = black_hole.local_addr().unwrap();
    let (accepted, mut connected) = tokio::sync::mpsc::unbounded_channel();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = black_hole.accept().await {
            held.push(stream);
            let _ = accepted.send(());
        }
    });
    let mut config = env.run_config();
    config.submitter.url = format!("https://localhost:{}/api/v1/spark-submit", hole.port());
    config.submitter.request_timeout = Duration::from_secs(25);
    let first = env.operator_with(config).await;
    let app = env
        .create_app(
            "restart",
            json!({"driver": {"annotations": {"kubesim.io/run-seconds": "1"}}}),
        )
        .await;
    connected.recv().await.unwrap();
    drop(first);
    assert_eq!(env.pod_creations(), 0, "nothing was submitted yet");

    let _second = env.operator().await;
    let app_done = env.wait_for_state("restart", State::Completed).await;
    let uid = app.metadata.uid.unwrap();
    assert_eq!(app_done.status.unwrap().submission_id, format!("{uid}-1"));
    assert_eq!(env.driver_pods("restart").await.len(), 1);
    assert_eq!(env.pod_creations(), 1);
    holder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_and_compacted_watches_still_complete() {
    let env = Env::start().await;
    let operator = env.operator().await;
    env.create_app(
        "resilient",
        json!({"driver": {"annotations": {"kubesim.io/run-seconds": "4"}}}),
    )
    .await;
    env.wait_for_state("resilient", State::Running).await;
    let before = (
        env.watch_requests("sparkapplications"),
        env.watch_requests("pods"),
    );
    env.cluster.store.drop_watches();
    wait_until("both watches to resume after the drop", || {
        let resumed = env.watch_requests("sparkapplications") > before.0
            && env.watch_requests("pods") > before.1;
        async move { resumed.then_some(()) }
    })
    .await;
    // History forgotten: resumes get 410 and the watches re-list.
    env.cluster.store.compact();
    env.cluster.store.drop_watches();
    env.wait_for_state("resilient", State::Completed).await;
    let health = operator.health.clone();
    wait_until("the watches to be ready again", || {
        let ready = health.ready();
        async move { ready.then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_makes_no_list_calls() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    for name in ["steady-a", "steady-b"] {
        env.create_app(
            name,
            json!({"driver": {"annotations": {"kubesim.io/run-seconds": "4"}}}),
        )
        .await;
    }
    for name in ["steady-a", "steady-b"] {
        env.wait_for_state(name, State::Running).await;
    }
    env.cluster.control.reset_counts();
    // The barrier: the drivers finish and the operator follows both apps to COMPLETED, which it
    // can only learn from its watches. Whatever it listed meanwhile is counted.
    for name in ["steady-a", "steady-b"] {
        env.wait_for_state(name, State::Completed).await;
    }
    assert_eq!(env.list_calls(), 0, "{:#?}", env.cluster.control.counts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_field_is_reported_and_the_app_still_runs() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app("partial", json!({"executor": {"memoryLimit": "4g"}}))
        .await;
    let app = env.wait_for_state("partial", State::Completed).await;
    let conditions = app.status.unwrap().conditions;
    let condition = conditions
        .iter()
        .find(|c| c.type_ == operator::unsupported::CONDITION_TYPE)
        .expect("the UnsupportedFields condition");
    assert_eq!(condition.status, "True");
    assert!(
        condition.message.contains("spec.executor.memoryLimit"),
        "{}",
        condition.message
    );
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let warnings: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(operator::unsupported::REASON))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spark_conf_refused_by_the_submitter_fails_without_a_driver() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "badconf",
        json!({"executor": {"memory": null}, "sparkConf": {"spark.executor.memory": "lots"}}),
    )
    .await;
    let app = env.wait_for_state("badconf", State::Failed).await;
    let status = app.status.unwrap();
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::SubmissionRejected)
    );
    assert!(
        status
            .app_state
            .error_message
            .contains("INVALID_SPARK_SUBMIT_ARGS"),
        "{}",
        status.app_state.error_message
    );
    assert_eq!(env.pod_creations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_drops_while_a_watch_is_down_and_returns_after() {
    let env = Env::start().await;
    let operator = env.operator().await;
    env.create_app(
        "waiting",
        json!({"driver": {"annotations": {"kubesim.io/run-seconds": "4"}}}),
    )
    .await;
    env.wait_for_state("waiting", State::Running).await;
    // The pod watch's reconnections fail for a while.
    let rule: kubesim::control::FaultRule = serde_json::from_value(
        json!({"verb": "watch", "resource": "pods", "code": 500, "count": 3}),
    )
    .unwrap();
    env.cluster.control.add_fault(rule);
    env.cluster.store.drop_watches();
    let health = operator.health.clone();
    wait_until("readiness to drop", || {
        let down = !health.ready();
        async move { down.then_some(()) }
    })
    .await;
    assert!(
        health.synced(),
        "the cache stays usable while the watch reconnects"
    );
    env.wait_for_state("waiting", State::Completed).await;
    wait_until("readiness to return", || {
        let ready = health.ready();
        async move { ready.then_some(()) }
    })
    .await;
    assert!(operator.health.pods.restarts() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spark_conf_namespace_elsewhere_is_refused_before_anything_is_submitted() {
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app(
        "escape",
        json!({"sparkConf": {"spark.kubernetes.namespace": "kube-system"}}),
    )
    .await;
    let app = env.wait_for_state("escape", State::Failed).await;
    let status = app.status.unwrap();
    assert_eq!(status.failure_reason, Some(FailureReason::RefusedSparkConf));
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == operator::sparkconf::CONDITION_TYPE)
        .expect("the SparkConfRefused condition");
    assert!(
        condition.message.contains("spark.kubernetes.namespace"),
        "{}",
        condition.message
    );
    // The event is recorded after the status that fails the app: wait for it.
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let warnings: Vec<Event> = wait_until("the SparkConfRefused warning", || {
        let events = events.clone();
        async move {
            let found: Vec<Event> = events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(operator::sparkconf::REASON))
                .collect();
            (!found.is_empty()).then_some(found)
        }
    })
    .await;
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert_eq!(env.pod_creations(), 0, "nothing was submitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_run_reports_a_crd_another_manager_owns_and_leaves_it_unchanged() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::ResourceExt;
    use kube::api::{Patch, PatchParams};

    let env = Env::start().await;
    // Another controller (a Helm release of the widely used operator) manages the CRD, with a
    // field of its own that differs from ours.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let mut theirs = operator::crd::crd();
    theirs.spec.names.short_names = Some(vec!["sparkapp".into(), "helmapp".into()]);
    crds.patch(
        &theirs.name_any(),
        &PatchParams::apply("helm"),
        &Patch::Apply(&theirs),
    )
    .await
    .unwrap();

    let mut config = env.run_config();
    config.install_crd = true;
    let health = std::sync::Arc::new(operator::reconciler::Health::default());
    let run = operator::controller::run(env.client.clone(), config, health, std::future::pending());
    let error = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("operator run stops at once")
        .expect_err("a CRD another manager owns is not overwritten");
    assert_eq!(error.kind(), "crd_managed_elsewhere");
    assert!(error.to_string().contains("shortNames"), "{error}");
    let now = crds.get(&theirs.name_any()).await.unwrap();
    assert_eq!(
        now.spec.names.short_names,
        Some(vec!["sparkapp".to_owned(), "helmapp".to_owned()]),
        "the other manager's CRD is unchanged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_watching_two_namespaces_runs_their_apps_and_reads_no_other() {
    use k8s_openapi::api::core::v1::Namespace;

    let env = Env::start().await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for ns in ["team-a", "team-b", "team-c"] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    operator::controller::install_crd(&env.client)
        .await
        .unwrap();
    // Present from the start: an operator that listed team-c would see it at once.
    env.create_app_in("team-c", "outside", json!({})).await;

    // The operator runs as its own service account, granted the chart's namespaced rules in
    // team-a and team-b only: a read anywhere else is refused, and the journal names it.
    let client = env
        .operator_account(&["team-a", "team-b"], &chart_operator_rules())
        .await;

    let mut config = env.run_config();
    config.namespaces = vec!["team-a".into(), "team-b".into()];
    config.install_crd = false;
    let _operator = env.operator_as(client, config).await;
    env.create_app_in("team-a", "pi", json!({})).await;
    env.create_app_in("team-b", "pi", json!({})).await;
    env.wait_for_state_in("team-a", "pi", State::Completed)
        .await;
    env.wait_for_state_in("team-b", "pi", State::Completed)
        .await;

    let outside: Api<operator::crd::SparkApplication> =
        Api::namespaced(env.client.clone(), "team-c");
    assert!(
        outside.get("outside").await.unwrap().status.is_none(),
        "an app outside the namespaces watched is not reconciled"
    );
    // Everything the operator asked for was in a namespace it watches, and was allowed.
    let asked: Vec<_> = env
        .cluster
        .control
        .authz()
        .into_iter()
        .filter(|a| a.user == "system:serviceaccount:default:spark-operator")
        .collect();
    assert!(
        asked
            .iter()
            .any(|a| a.verb == "list" && a.resource == "pods"),
        "{asked:?}"
    );
    for request in &asked {
        assert!(
            ["team-a", "team-b"].contains(&request.namespace.as_str()) && request.allowed,
            "{request:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_client_certificate_is_reloaded_when_its_files_change() {
    let env = Env::start().await;
    let mut config = env.run_config().submitter;
    config.cert_check_interval = Duration::ZERO;
    config.max_retries = 1;
    let client = submitter_client::SubmitterClient::new(config).unwrap();
    // Rotated before the first connection: it must present the new certificate, here one of an
    // identity the submitter's policy does not know.
    env.rotate_operator_certificate("stranger.example").unwrap();
    let error = client
        .driver_status("default", "no-such-driver")
        .await
        .unwrap_err();
    assert_eq!(
        error.status(),
        Some(403),
        "answered for the new identity: {error}"
    );
}
