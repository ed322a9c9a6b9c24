//! What a submission costs the API server, counted by kubesim (`cluster.control.counts()`),
//! with the service's watch caches synced as `submitter serve` runs it: a fresh submission
//! makes only its writes (the claim of its id, Spark's creates, one owner patch per ConfigMap;
//! no GET), a duplicate the caches show complete makes none, and a duplicate the caches have
//! not seen yet makes one (the claim's create, whose `AlreadyExists` tells it). Refusals and rollbacks stay what they
//! are without caches: a foreign object is refused and nothing is left behind.

use crate::submit_support;

use std::time::Duration;

use axum::Router;
use http::StatusCode;
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use submission::builder::DriverObjects;
use submit_support::{Answer, TESTER, TestApp, args, built, creates, send, submit_request};
use submitter::caches::WatchCaches;
use submitter::service::{ServiceConfig, app};

/// A TestApp whose state reads synced watch caches.
struct CachedApp {
    t: TestApp,
    app: Router,
    caches: WatchCaches,
}

impl CachedApp {
    async fn start() -> CachedApp {
        CachedApp::start_with(Duration::from_secs(1)).await
    }

    /// `catch_up`: how long a submission waits for lagging caches.
    async fn start_with(catch_up: Duration) -> CachedApp {
        let t = TestApp::start().await;
        let caches = WatchCaches::start(&t.client());
        let app = app(
            t.state
                .clone()
                .with_caches(caches.clone())
                .with_cache_catch_up(catch_up),
            &ServiceConfig::default(),
        );
        tokio::time::timeout(Duration::from_secs(10), caches.ready())
            .await
            .expect("caches sync within 10 s")
            .unwrap();
        CachedApp { t, app, caches }
    }

    async fn submit(&self, body: &Value) -> Answer {
        send(&self.app, submit_request(body, "", TESTER)).await
    }

    /// Requests kubesim counted since the last reset, by (verb, resource); the caches' own
    /// watches are long-lived requests of their own and left out.
    fn requests(&self) -> Vec<(String, String, u64)> {
        let mut rows: Vec<(String, String, u64)> = self
            .t
            .cluster
            .control
            .counts()
            .into_iter()
            .filter(|c| !c.watch)
            .map(|c| (c.verb, c.resource, c.count))
            .collect();
        rows.sort();
        rows
    }

    /// Waits (bounded, on the caches' events) until they show `built`'s driver complete: the
    /// pod, and every ConfigMap owned by it.
    async fn wait_cached_complete(&self, built: &DriverObjects) {
        let namespace = built.identity.namespace.as_str();
        let pod = built.identity.driver_pod_name.as_str();
        let config_maps: Vec<&str> = built
            .objects
            .iter()
            .filter(|o| o["kind"] == "ConfigMap")
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        let complete = self
            .caches
            .wait_until(
                tokio::time::Instant::now() + Duration::from_secs(10),
                |caches| {
                    let Some(uid) = caches
                        .pod(namespace, pod)
                        .and_then(|p| p.metadata.uid.clone())
                    else {
                        return false;
                    };
                    config_maps.iter().all(|name| {
                        caches.config_map(namespace, name).is_some_and(|cm| {
                            cm.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|o| o.uid == uid)
                        })
                    })
                },
            )
            .await;
        assert!(complete, "the caches never showed the complete driver");
    }
}

/// A submission whose driver runs until deleted (no status churn from the kubelet).
fn request(id: &str, extra: &[&str]) -> Value {
    let mut extra = extra.to_vec();
    extra.extend([
        "--conf",
        "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
    ]);
    json!({"submission_id": id, "spark_submit_args": args(&extra)})
}

fn row(verb: &str, resource: &str, count: u64) -> (String, String, u64) {
    (verb.to_owned(), resource.to_owned(), count)
}

#[tokio::test]
async fn fresh_submission_makes_its_claim_sparks_writes_and_one_owner_patch_per_config_map() {
    let s = CachedApp::start().await;
    // (case, extra arguments, executor template, expected requests)
    let cases = [
        (
            "spark 4.3: the claim, pod, Service, NetworkPolicy, spark-conf ConfigMap",
            vec!["--conf", "spark.kubernetes.container.image=spark:4.3.0"],
            None,
            vec![
                row("create", "configmaps", 2),
                row("create", "networkpolicies", 1),
                row("create", "pods", 1),
                row("create", "services", 1),
                row("patch", "configmaps", 1),
            ],
        ),
        (
            "spark 4.0 with an executor template: the claim, no NetworkPolicy, two ConfigMaps",
            vec![],
            Some(submit_support::executor_template()),
            vec![
                row("create", "configmaps", 3),
                row("create", "pods", 1),
                row("create", "services", 1),
                row("patch", "configmaps", 2),
            ],
        ),
    ];
    for (i, (case, extra, template, expected)) in cases.into_iter().enumerate() {
        let mut body = request(&format!("fresh-{i}"), &extra);
        if let Some(template) = template {
            body["executor_pod_template"] = template;
        }
        s.t.cluster.control.reset_counts();
        let answer = s.submit(&body).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{case}: {}",
            answer.body
        );
        assert_eq!(s.requests(), expected, "{case}");
        let uid = s.t.assert_complete(&built(&body)).await;
        assert_eq!(answer.body["driver_pod_uid"], uid.as_str(), "{case}");
    }
}

#[tokio::test]
async fn duplicate_the_caches_show_complete_makes_no_request() {
    let s = CachedApp::start().await;
    let body = request("cached-dup", &[]);
    let first = s.submit(&body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    s.wait_cached_complete(&built(&body)).await;
    s.t.cluster.control.reset_counts();
    let again = s.submit(&body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true);
    assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
    assert_eq!(again.body["submitted_at"], first.body["submitted_at"]);
    assert_eq!(again.body["spark_app_id"], first.body["spark_app_id"]);
    assert_eq!(s.requests(), vec![], "no request at all");
}

#[tokio::test]
async fn duplicate_the_caches_show_complete_is_refused_as_a_fresh_submission_would_be() {
    let s = CachedApp::start().await;
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "spark"}})).unwrap();
    Api::<ServiceAccount>::namespaced(s.t.client(), "default")
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let as_spark = [
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
    ];
    let body = request("cached-refusals", &as_spark);
    let first = s.submit(&body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    s.wait_cached_complete(&built(&body)).await;
    let executors_as_other = {
        let mut other = as_spark.to_vec();
        other.extend([
            "--conf",
            "spark.kubernetes.authenticate.executor.serviceAccountName=other",
        ]);
        request("cached-refusals", &other)
    };
    let mut bad_argv = body.clone();
    bad_argv["spark_submit_args"] = json!(["--deploy-mode", "nowhere"]);
    // (case, identity, body, status, error code)
    let cases = [
        ("namespace not allowed", "team-a", &body, 403, "FORBIDDEN"),
        (
            "executor account not allowed",
            "spark-only",
            &executors_as_other,
            403,
            "FORBIDDEN",
        ),
        (
            "arguments that do not parse",
            submit_support::TESTER,
            &bad_argv,
            400,
            "INVALID_SPARK_SUBMIT_ARGS",
        ),
    ];
    for (case, identity, body, status, code) in cases {
        let answer = send(&s.app, submit_request(body, "", identity)).await;
        assert_eq!(answer.status.as_u16(), status, "{case}: {}", answer.body);
        assert_eq!(answer.body["error_code"], code, "{case}");
    }
    let allowed = send(&s.app, submit_request(&body, "", "spark-only")).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.body);
    assert_eq!(allowed.body["driver_pod_uid"], first.body["driver_pod_uid"]);
}

#[tokio::test]
async fn duplicate_the_lagging_caches_have_not_seen_makes_one_request() {
    // Waits for the caches as long as the test may take: the count, not a timing, is asserted.
    let s = CachedApp::start_with(Duration::from_secs(30)).await;
    // Both watches are dropped and their re-watches held for a while: until then the caches
    // see nothing new, afterwards they resume from where they were.
    submit_support::hold_rewatches(&s.t.cluster, Duration::from_secs(3)).await;
    // Another replica (no caches) creates the driver meanwhile.
    let body = request("lagging-dup", &[]);
    let first = send(&s.t.app, submit_request(&body, "", TESTER)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let built = built(&body);
    assert!(
        s.caches
            .pod(&built.identity.namespace, &built.identity.driver_pod_name)
            .is_none(),
        "the caches have not seen the driver"
    );
    s.t.cluster.control.reset_counts();
    let again = s.submit(&body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true);
    assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
    assert_eq!(
        s.requests(),
        vec![row("create", "configmaps", 1)],
        "one create (the claim), answered AlreadyExists, then the caches"
    );
}

#[tokio::test]
async fn foreign_service_with_caches_is_409_and_the_rollback_leaves_nothing() {
    let s = CachedApp::start().await;
    let body = request("foreign-dep", &[]);
    let built = built(&body);
    let service_name = built.objects[1]["metadata"]["name"].as_str().unwrap();
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": service_name},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    let foreign = Api::<Service>::namespaced(s.t.client(), "default")
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let answer = s.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "DRIVER_POD_ALREADY_EXISTS");
    s.t.assert_nothing_left(&built).await;
    let service = Api::<Service>::namespaced(s.t.client(), "default")
        .get(service_name)
        .await
        .unwrap();
    assert_eq!(
        service.metadata.uid, foreign.metadata.uid,
        "not ours to touch"
    );
    // Once the foreign Service is gone, the same submission goes through.
    Api::<Service>::namespaced(s.t.client(), "default")
        .delete(service_name, &Default::default())
        .await
        .unwrap();
    let answer = s.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    s.t.assert_complete(&built).await;
}

#[tokio::test]
async fn foreign_pod_the_caches_cannot_see_is_409_without_writing_past_it() {
    // The caches watch labelled objects only: an unlabelled pod holding the driver's name is
    // news to them, which the pod's POST brings.
    let s = CachedApp::start_with(Duration::from_millis(200)).await;
    let body = request(
        "foreign-pod",
        &["--conf", "spark.kubernetes.driver.pod.name=taken-driver"],
    );
    let built = built(&body);
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": "taken-driver"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let foreign = Api::<Pod>::namespaced(s.t.client(), "default")
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let answer = s.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "DRIVER_POD_ALREADY_EXISTS");
    s.t.assert_nothing_left(&built).await;
    let journal = s.t.journal();
    assert!(creates(&journal, "services").is_empty(), "{journal:#?}");
    let pod = Api::<Pod>::namespaced(s.t.client(), "default")
        .get("taken-driver")
        .await
        .unwrap();
    assert_eq!(pod.metadata.uid, foreign.metadata.uid);
    assert!(pod.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn an_id_bound_to_another_driver_in_the_caches_is_refused_without_a_request() {
    let s = CachedApp::start().await;
    let first = request("bound-cached", &[]);
    assert_eq!(s.submit(&first).await.status, StatusCode::CREATED);
    s.wait_cached_complete(&built(&first)).await;
    s.t.cluster.control.reset_counts();
    let other = request("bound-cached", &["--name", "another-app"]);
    let answer = s.submit(&other).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "SUBMISSION_ID_CONFLICT");
    assert_eq!(s.requests(), vec![], "answered from the caches");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_submissions_keep_the_api_server_calls_in_flight_bounded() {
    let config = ServiceConfig {
        max_concurrency: 256,
        ..ServiceConfig::default()
    };
    let t = TestApp::start_with(config, Duration::from_secs(30)).await;
    // Creates take a while, so that the calls of concurrent submissions overlap.
    t.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("create".into()),
            resource: None,
            millis: 20,
        });
    t.cluster.control.reset_counts();
    let bodies: Vec<Value> = (0..200)
        .map(|i| request(&format!("bounded-{i}"), &[]))
        .collect();
    let answers = futures::future::join_all(
        bodies
            .iter()
            .map(|body| send(&t.app, submit_request(body, "", TESTER))),
    )
    .await;
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    let peak = t.cluster.control.peak_in_flight();
    assert!(
        peak <= submitter::kube_api::MAX_API_CALLS,
        "{peak} requests at once"
    );
    assert!(peak > 1, "the submissions overlapped");
}
