//! Status look-ups (`GET /api/v1/drivers/{ns}/{pod}`, `GET /api/v1/spark-submit/{id}`) against
//! an in-process kubesim, through `app()` with `oneshot`: the driver container decides (a
//! sidecar holding the pod Running does not), a collected success stays Succeeded through its
//! retention record, unknown ids are 404, an unsynced cache is 503, and serving costs the API
//! server no LIST.

use crate::submit_support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use submit_support::{Answer, TESTER, TestApp, args, request, send, submit_request};
use submitter::caches::WatchCaches;
use submitter::record;
use submitter::service::{ServiceConfig, app};
use submitter::status::{RecordConfig, Recorder, run_recorder};

/// The submitter's own namespace, where its retention records live.
const HOME: &str = "submitter-home";

/// A TestApp whose state reads watch caches, with the retention recorder running.
struct StatusApp {
    t: TestApp,
    app: Router,
    caches: WatchCaches,
}

impl StatusApp {
    async fn start() -> StatusApp {
        let t = TestApp::start().await;
        StatusApp::on(t).await
    }

    async fn on(t: TestApp) -> StatusApp {
        let namespaces: Api<Namespace> = Api::all(t.client());
        let home: Namespace = serde_json::from_value(json!({"metadata": {"name": HOME}})).unwrap();
        namespaces
            .create(&PostParams::default(), &home)
            .await
            .unwrap();
        let caches = WatchCaches::start(&t.client());
        tokio::spawn(run_recorder(
            t.client(),
            caches.clone(),
            RecordConfig {
                namespace: HOME.into(),
                retention: Duration::from_secs(3600),
            },
        ));
        let app = app(
            t.state
                .clone()
                .with_caches(caches.clone())
                .with_record_namespace(HOME),
            &ServiceConfig::default(),
        );
        StatusApp { t, app, caches }
    }

    async fn wait_synced(&self) {
        for _ in 0..200 {
            if self.caches.synced() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("caches did not sync");
    }

    /// Requests of `verb` on `resource` kubesim has counted since its counters were reset.
    fn request_count(&self, verb: &str, resource: &str) -> u64 {
        self.t
            .cluster
            .control
            .counts()
            .into_iter()
            .filter(|c| c.verb == verb && c.resource == resource)
            .map(|c| c.count)
            .sum()
    }

    /// Waits (bounded) until kubesim has counted `at_least` requests of `verb` on `resource`
    /// since its counters were last reset.
    async fn wait_for_requests(&self, verb: &str, resource: &str, at_least: u64) {
        for _ in 0..400 {
            if self.request_count(verb, resource) >= at_least {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "kubesim saw {} {verb} {resource}, not {at_least}",
            self.request_count(verb, resource)
        );
    }

    async fn get_as(&self, path: &str, identity: &str) -> Answer {
        let mut request = Request::get(path).body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(submit_support::verified_identity(identity));
        send(&self.app, request).await
    }

    async fn get(&self, path: &str) -> Answer {
        self.get_as(path, TESTER).await
    }

    async fn submit(&self, body: &Value) -> Answer {
        let answer = send(&self.app, submit_request(body, "", TESTER)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer
    }

    /// Polls the driver route until `done` holds for the answer.
    async fn wait_for(&self, path: &str, done: impl Fn(&Answer) -> bool) -> Answer {
        let mut last = None;
        for _ in 0..300 {
            let answer = self.get(path).await;
            if done(&answer) {
                return answer;
            }
            last = Some(answer.body);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{path} never reached the expected state; last answer {last:?}");
    }
}

fn driver_path(answer: &Answer) -> String {
    format!(
        "/api/v1/drivers/{}/{}",
        answer.body["namespace"].as_str().unwrap(),
        answer.body["driver_pod_name"].as_str().unwrap()
    )
}

#[tokio::test]
async fn sidecar_holding_the_pod_running_after_the_driver_exited_reports_succeeded_done() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let mut body = request("sidecar-1", &args(&[]));
    body["driver_pod_template"] = json!({
        "metadata": {"annotations": {
            "kubesim.io/run-seconds.sidecar": "-1",
            "kubesim.io/run-seconds.spark-kubernetes-driver": "1"
        }},
        "spec": {"containers": [
            {"name": "spark-kubernetes-driver"},
            {"name": "sidecar", "image": "busybox"}
        ]}
    });
    let submitted = s.submit(&body).await;
    let path = driver_path(&submitted);
    let answer = s.wait_for(&path, |a| a.body["phase"] == "Succeeded").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["action"], "Done");
    assert_eq!(answer.body["pod_phase"], "Running", "{}", answer.body);
    assert_eq!(answer.body["container_state"], "terminated");
    assert_eq!(answer.body["exit_code"], 0);
    assert_eq!(answer.body["submission_id"], "sidecar-1");
    assert_eq!(
        answer.body["driver_pod_uid"],
        submitted.body["driver_pod_uid"]
    );
    // The submission-id route finds the same driver through the annotation index.
    let by_id = s.get("/api/v1/spark-submit/sidecar-1").await;
    assert_eq!(by_id.status, StatusCode::OK);
    assert_eq!(
        by_id.body["driver_pod_name"],
        submitted.body["driver_pod_name"]
    );
    assert_eq!(by_id.body["phase"], "Succeeded");
}

#[tokio::test]
async fn running_and_failed_drivers_map_to_reconnect_and_resubmit() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let running = s
        .submit(&request(
            "running-1",
            &args(&[
                "--conf",
                "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
            ]),
        ))
        .await;
    let answer = s
        .wait_for(&driver_path(&running), |a| a.body["phase"] == "Running")
        .await;
    assert_eq!(answer.body["action"], "Reconnect");
    let failed = s
        .submit(&request(
            "failed-1",
            &args(&[
                "--conf",
                "spark.kubernetes.driver.annotation.kubesim.io/exit-code=1",
            ]),
        ))
        .await;
    let answer = s
        .wait_for(&driver_path(&failed), |a| a.body["phase"] == "Failed")
        .await;
    assert_eq!(answer.body["action"], "Resubmit");
    assert_eq!(answer.body["exit_code"], 1);
}

#[tokio::test]
async fn succeeded_driver_collected_afterwards_still_reports_succeeded() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let submitted = s.submit(&request("gc-1", &args(&[]))).await;
    let path = driver_path(&submitted);
    s.wait_for(&path, |a| a.body["phase"] == "Succeeded").await;

    // The recorder writes the record in the submitter's own namespace, without owner, so the
    // pod's collection leaves it and the user's namespace holds none.
    let namespace = submitted.body["namespace"].as_str().unwrap().to_owned();
    let records: Api<ConfigMap> = Api::namespaced(s.t.client(), HOME);
    let name = record::claim_name("gc-1");
    let mut found = None;
    for _ in 0..200 {
        if let Some(cm) = records.get_opt(&name).await.unwrap() {
            found = Some(cm);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let cm = found.expect("a retention record is written");
    assert!(cm.metadata.owner_references.is_none());
    let data = cm.data.unwrap();
    assert_eq!(data["submission_id"], "gc-1");
    assert_eq!(data["namespace"], namespace.as_str());
    assert_eq!(
        data["pod"],
        submitted.body["driver_pod_name"].as_str().unwrap()
    );
    assert_eq!(
        data["uid"],
        submitted.body["driver_pod_uid"].as_str().unwrap()
    );
    let selector = ListParams::default().labels("spark-submitter.io/record");
    let in_users_namespace = Api::<ConfigMap>::namespaced(s.t.client(), &namespace)
        .list(&selector)
        .await
        .unwrap();
    assert!(
        in_users_namespace.items.is_empty(),
        "no record in the user's namespace: {:?}",
        in_users_namespace.items
    );

    let pods: Api<Pod> = Api::namespaced(s.t.client(), &namespace);
    pods.delete(
        submitted.body["driver_pod_name"].as_str().unwrap(),
        &DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let answer = s.wait_for(&path, |a| a.body["pod_phase"].is_null()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["phase"], "Succeeded");
    assert_eq!(answer.body["action"], "Done");
    assert_eq!(answer.body["submission_id"], "gc-1");
    let by_id = s.get("/api/v1/spark-submit/gc-1").await;
    assert_eq!(by_id.status, StatusCode::OK);
    assert_eq!(by_id.body["phase"], "Succeeded");
    assert_eq!(by_id.body["pod_phase"], Value::Null);

    // A client that retries the submission itself after the collection gets the finished
    // driver back, not a second one.
    let again = send(
        &s.app,
        submit_request(&request("gc-1", &args(&[])), "", TESTER),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true);
    assert_eq!(
        again.body["driver_pod_uid"],
        submitted.body["driver_pod_uid"]
    );
    // When the driver was submitted, as the first answer said: not when it finished.
    assert_eq!(again.body["submitted_at"], submitted.body["submitted_at"]);
    let left = pods.list(&Default::default()).await.unwrap();
    assert!(left.items.is_empty(), "no second driver was created");
}

/// Holds every new watch of `resource` at kubesim (latency far beyond the test) and drops the
/// open ones: once the re-watch has arrived (kubesim's counter says so), the cache provably
/// sees nothing that happens afterwards.
async fn freeze_watch(s: &StatusApp, resource: &str) {
    let before = s.request_count("watch", resource);
    s.t.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("watch".into()),
            resource: Some(resource.into()),
            millis: 600_000,
        });
    s.t.cluster.store.drop_watches();
    s.wait_for_requests("watch", resource, before + 1).await;
}

#[tokio::test]
async fn a_driver_the_lagging_cache_has_not_seen_reads_pending_not_404() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    freeze_watch(&s, "pods").await;
    let submitted = s
        .submit(&request(
            "lagging-1",
            &args(&[
                "--conf",
                "spark.kubernetes.driver.annotation.kubesim.io/never-start=true",
            ]),
        ))
        .await;
    assert!(
        s.caches
            .pod(
                "default",
                submitted.body["driver_pod_name"].as_str().unwrap()
            )
            .is_none(),
        "the cache is behind"
    );
    for path in [
        driver_path(&submitted),
        "/api/v1/spark-submit/lagging-1".to_owned(),
    ] {
        let answer = s.get(&path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
        assert_eq!(answer.body["phase"], "Pending");
        assert_eq!(answer.body["action"], "Reconnect");
        assert_eq!(answer.body["submission_id"], "lagging-1");
        assert_eq!(
            answer.body["driver_pod_uid"],
            submitted.body["driver_pod_uid"]
        );
    }
    // What exists nowhere is still a 404.
    let answer = s.get("/api/v1/drivers/default/never-was").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let answer = s.get("/api/v1/spark-submit/never-was").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_retained_success_the_lagging_cache_has_not_seen_reads_succeeded_not_404() {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let s = StatusApp::start().await;
    s.wait_synced().await;
    freeze_watch(&s, "configmaps").await;
    let now = Timestamp::now();
    let record = record::Record {
        submission_id: "retained-1".into(),
        namespace: "default".into(),
        pod: "retained-1-driver".into(),
        uid: "u-1".into(),
        spark_app_id: "spark-1".into(),
        created_at: None,
        finished_at: now,
        retain_until: now + SignedDuration::from_hours(1),
        outcome: record::Outcome::Succeeded,
    };
    Api::<ConfigMap>::namespaced(s.t.client(), HOME)
        .create(
            &PostParams::default(),
            &record::build(&record, HOME).unwrap(),
        )
        .await
        .unwrap();
    for path in [
        "/api/v1/drivers/default/retained-1-driver",
        "/api/v1/spark-submit/retained-1",
    ] {
        let answer = s.get(path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
        assert_eq!(answer.body["phase"], "Succeeded");
        assert_eq!(answer.body["action"], "Done");
        assert_eq!(answer.body["driver_pod_uid"], "u-1");
    }
}

#[tokio::test]
async fn unknown_ids_and_pods_are_404_and_foreign_namespaces_403() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let answer = s.get("/api/v1/spark-submit/never-submitted").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.body["error_code"], "NOT_FOUND");
    assert_eq!(answer.body["submission_id"], "never-submitted");
    let answer = s.get("/api/v1/drivers/default/no-such-driver").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.body["error_code"], "NOT_FOUND");

    let submitted = s
        .submit(&request(
            "foreign-1",
            &args(&[
                "--conf",
                "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
            ]),
        ))
        .await;
    s.wait_for(&driver_path(&submitted), |a| a.status == StatusCode::OK)
        .await;
    // team-a may read team-a only; the driver lives in default.
    let answer = s.get_as(&driver_path(&submitted), "team-a").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.body["error_code"], "FORBIDDEN");
    let answer = s.get_as("/api/v1/spark-submit/foreign-1", "team-a").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let answer = s.get_as("/api/v1/spark-submit/foreign-1", "stranger").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn unsynced_cache_answers_503_and_readiness_fails_until_the_watch_recovers() {
    let t = TestApp::start().await;
    // Every initial LIST fails: the caches cannot sync, and the watcher keeps retrying.
    t.fault(json!({"verb": "list", "resource": "pods", "count": 1_000_000, "code": 500}));
    let s = StatusApp::on(t).await;
    // The pod watch has tried to list, failed, and tried again.
    s.wait_for_requests("list", "pods", 2).await;
    let answer = s.get("/api/v1/drivers/default/any").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.body["error_code"], "SUBMITTER_OVERLOADED");
    assert!(answer.headers.contains_key(http::header::RETRY_AFTER));
    let answer = s.get("/api/v1/spark-submit/any").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    let ready = send(&s.app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);

    s.t.cluster.control.clear_faults();
    s.wait_synced().await;
    let answer = s.get("/api/v1/drivers/default/any").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let ready = send(&s.app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(ready.status, StatusCode::OK);
}

#[tokio::test]
async fn readiness_goes_false_while_a_synced_watch_keeps_failing_and_back_once_it_recovers() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let readyz = || async {
        send(&s.app, Request::get("/readyz").body(Body::empty()).unwrap())
            .await
            .status
    };
    assert_eq!(readyz().await, StatusCode::OK);
    // Every new pod watch fails; the open one is dropped, so the watcher must start a new one.
    let failing_before = s.request_count("watch", "pods");
    s.t.fault(json!({"verb": "watch", "resource": "pods", "count": 1_000_000, "code": 500}));
    s.t.cluster.store.drop_watches();
    s.wait_for_requests("watch", "pods", failing_before + 1)
        .await;
    let mut answer = StatusCode::OK;
    for _ in 0..200 {
        answer = readyz().await;
        if answer == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "a watch that keeps failing is not ready"
    );
    // The API server heals; the watch's next attempt succeeds, and the next pod event shows it.
    s.t.cluster.control.clear_faults();
    let healed = s.request_count("watch", "pods");
    s.wait_for_requests("watch", "pods", healed + 1).await;
    s.submit(&request("ready-again", &args(&[]))).await;
    s.wait_for("/api/v1/spark-submit/ready-again", |a| {
        a.status == StatusCode::OK
    })
    .await;
    let mut answer = StatusCode::SERVICE_UNAVAILABLE;
    for _ in 0..200 {
        answer = readyz().await;
        if answer == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        answer,
        StatusCode::OK,
        "ready again once the watch delivers"
    );
}

#[tokio::test]
async fn serving_many_look_ups_of_known_drivers_makes_no_list_and_no_get_after_start_up() {
    let s = StatusApp::start().await;
    s.wait_synced().await;
    let mut paths = Vec::new();
    for i in 0..3 {
        let submitted = s
            .submit(&request(
                &format!("steady-{i}"),
                &args(&[
                    "--conf",
                    "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
                ]),
            ))
            .await;
        let path = driver_path(&submitted);
        s.wait_for(&path, |a| a.body["phase"] == "Running").await;
        paths.push(path);
    }
    s.t.cluster.control.reset_counts();
    for round in 0..100 {
        for (i, path) in paths.iter().enumerate() {
            assert_eq!(s.get(path).await.status, StatusCode::OK);
            let by_id = s.get(&format!("/api/v1/spark-submit/steady-{i}")).await;
            assert_eq!(by_id.status, StatusCode::OK);
        }
        if round == 50 {
            // Dropped watches resume from their resourceVersion: still no LIST.
            s.t.cluster.store.drop_watches();
            s.wait_for_requests("watch", "pods", 1).await;
            s.wait_for_requests("watch", "configmaps", 1).await;
        }
    }
    let reads = |s: &StatusApp| -> Vec<_> {
        s.t.cluster
            .control
            .counts()
            .into_iter()
            .filter(|c| c.verb == "list" || c.verb == "get")
            .collect()
    };
    assert!(
        reads(&s).is_empty(),
        "look-ups of cached drivers must not reach the API server: {:?}",
        reads(&s)
    );
    // A miss is checked live before it is a 404: one pod GET and one record LIST (in the
    // submitter's namespace) per miss, never a LIST of every pod.
    for _ in 0..10 {
        assert_eq!(
            s.get("/api/v1/drivers/default/absent").await.status,
            StatusCode::NOT_FOUND
        );
    }
    assert_eq!(s.request_count("get", "pods"), 10);
    assert_eq!(s.request_count("list", "configmaps"), 10);
    assert_eq!(s.request_count("list", "pods"), 0);
}

#[tokio::test]
async fn sweeper_deletes_records_whose_window_is_over_and_keeps_the_others() {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use submitter::sweep::sweep_once;

    let s = StatusApp::start().await;
    s.wait_synced().await;
    let api: Api<ConfigMap> = Api::namespaced(s.t.client(), HOME);
    let now = Timestamp::now();
    let hour = SignedDuration::from_hours(1);
    for (id, until) in [("old-1", now - hour), ("young-1", now + hour)] {
        let cm = record::build(
            &record::Record {
                submission_id: id.into(),
                namespace: "default".into(),
                pod: format!("{id}-driver"),
                uid: "u".into(),
                spark_app_id: "spark-x".into(),
                created_at: None,
                finished_at: now - hour - hour,
                retain_until: until,
                outcome: record::Outcome::Succeeded,
            },
            HOME,
        )
        .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    // Both reach the cache the sweeper reads, and both are served: the look-up does not judge
    // the window, the sweeper does.
    for id in ["old-1", "young-1"] {
        for _ in 0..200 {
            if !s.caches.retained(&record::submission_key(id)).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(!s.caches.retained(&record::submission_key(id)).is_empty());
        let answer = s.get(&format!("/api/v1/drivers/default/{id}-driver")).await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    sweep_once(
        &s.t.client(),
        &s.caches,
        &s.t.state.in_flight,
        &s.t.state.metrics,
        Duration::ZERO,
        Duration::from_secs(3600),
    )
    .await;
    assert!(
        api.get_opt(&record::claim_name("old-1"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        api.get_opt(&record::claim_name("young-1"))
            .await
            .unwrap()
            .is_some()
    );
    s.wait_for("/api/v1/drivers/default/old-1-driver", |a| {
        a.status == StatusCode::NOT_FOUND
    })
    .await;
}

/// A success the pod watch reports again before the ConfigMap cache shows its record (every pod
/// event after the driver's exit does, and the cache lags the write) is written once: each
/// report used to create the record again, answered 409, one wasted write per driver.
#[tokio::test]
async fn a_success_reported_again_before_the_cache_shows_its_record_is_written_once() {
    let t = TestApp::start().await;
    let home: Namespace = serde_json::from_value(json!({"metadata": {"name": HOME}})).unwrap();
    Api::<Namespace>::all(t.client())
        .create(&PostParams::default(), &home)
        .await
        .unwrap();
    let caches = WatchCaches::start(&t.client());
    tokio::time::timeout(Duration::from_secs(10), caches.ready())
        .await
        .expect("caches sync within 10 s")
        .unwrap();
    let submitted = send(
        &t.app,
        submit_request(&request("once-1", &args(&[])), "", TESTER),
    )
    .await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);
    let namespace = submitted.body["namespace"].as_str().unwrap().to_owned();
    let name = submitted.body["driver_pod_name"]
        .as_str()
        .unwrap()
        .to_owned();
    let config = RecordConfig {
        namespace: HOME.into(),
        retention: Duration::from_secs(3600),
    };
    let succeeded = |p: Option<&Pod>| {
        p.is_some_and(|p| {
            record::for_pod(p, k8s_openapi::jiff::Timestamp::now(), config.retention).is_some()
        })
    };
    let pods: Api<Pod> = Api::namespaced(t.client(), &namespace);
    let pod = tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods, &name, succeeded),
    )
    .await
    .expect("the driver succeeds within 30 s")
    .unwrap()
    .unwrap();

    // The caches' watches are dropped and their re-watches held: from here the ConfigMap cache
    // cannot show the record, as when it lags a burst of writes.
    let watches = |counts: &[kubesim::control::RequestCount]| {
        counts
            .iter()
            .filter(|c| c.watch)
            .map(|c| c.count)
            .sum::<u64>()
    };
    let before = watches(&t.cluster.control.counts());
    t.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("watch".into()),
            resource: None,
            millis: 60_000,
        });
    t.cluster.store.drop_watches();
    tokio::time::timeout(
        Duration::from_secs(30),
        t.cluster.control.counted(|c| watches(c) >= before + 2),
    )
    .await
    .expect("both re-watches are held");
    t.cluster.control.reset_counts();

    let recorder = Recorder::new(t.client(), caches.clone(), config.clone());
    let mut created = Vec::new();
    for _ in 0..3 {
        created.push(recorder.record(&pod).await.unwrap());
    }
    assert_eq!(created, [true, false, false], "the first report writes it");
    let creates: u64 = t
        .cluster
        .control
        .counts()
        .into_iter()
        .filter(|c| c.verb == "create" && c.resource == "configmaps")
        .map(|c| c.count)
        .sum();
    assert_eq!(creates, 1, "one write for three reports");
    let records: Api<ConfigMap> = Api::namespaced(t.client(), HOME);
    assert!(
        records
            .get_opt(&record::claim_name("once-1"))
            .await
            .unwrap()
            .is_some()
    );
}
