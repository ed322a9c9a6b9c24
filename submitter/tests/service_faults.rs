//! Kubernetes failing at every step of a submission (kubesim's `/sim/v1/faults` rules: errors
//! before the request takes effect, lost replies after it, and calls held past our call
//! timeout). Whatever happens, the client gets success or a retryable 500/503; a retry with the
//! same id converges to exactly one complete driver; nothing is left that cannot start (a pod
//! without its ConfigMaps) or that is never collected (an ownerless ConfigMap without pod, once
//! the sweeper's grace period, 0 here, has passed).
//!
//! A held call is abandoned by our call timeout, which hangs up its connection; kubesim then
//! drops the request unapplied (as an API server cancels a request whose client went away), so a
//! held call never takes effect later and nothing has to be waited for. "Applied, then the reply
//! was lost" is the `after` rules' case.

use crate::submit_support;

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};
use submission::builder::DriverObjects;
use submit_support::{TestApp, args, built, creates, metrics_text, request};
use submitter::service::ServiceConfig;

/// Short, so that a held call is a timeout for us.
const CALL_TIMEOUT: Duration = Duration::from_millis(300);
/// How long kubesim holds a call: far beyond the test, so the hold ends only by our hanging up.
const HOLD_MS: u64 = 60_000;

/// The steps of a submission, as (verb, resource).
const STEPS: [(&str, &str); 5] = [
    ("create", "configmaps"),
    ("create", "pods"),
    ("create", "services"),
    ("create", "networkpolicies"),
    ("patch", "configmaps"),
];

async fn start() -> TestApp {
    TestApp::start_with(ServiceConfig::default(), CALL_TIMEOUT).await
}

/// Nothing that cannot start: every pod of ours has all the ConfigMaps it mounts.
async fn assert_no_pod_without_config_maps(t: &TestApp, built: &DriverObjects) {
    let found = t.objects_of(built).await;
    let has_pod = found.iter().any(|(kind, _)| kind == "Pod");
    if !has_pod {
        return;
    }
    for object in built.objects.iter().filter(|o| o["kind"] == "ConfigMap") {
        let name = &object["metadata"]["name"];
        assert!(
            found
                .iter()
                .any(|(kind, o)| kind == "ConfigMap" && o["metadata"]["name"] == *name),
            "a pod exists without its ConfigMap {name}: {found:#?}"
        );
    }
}

/// Nothing never collected: every ConfigMap has an owner or a pod to wait for. Waits for the
/// sweeper and the garbage collector, both asynchronous.
async fn assert_no_orphans(t: &TestApp, built: &DriverObjects) {
    let mut found = Vec::new();
    for _ in 0..100 {
        found = t.objects_of(built).await;
        let has_pod = found.iter().any(|(kind, _)| kind == "Pod");
        let orphans = found.iter().any(|(kind, o)| {
            kind != "Pod" && o["metadata"].get("ownerReferences").is_none() && !has_pod
        });
        let dangling = found.iter().any(|(kind, o)| {
            kind != "Pod" && !has_pod && o["metadata"].get("ownerReferences").is_some()
        });
        if !orphans && !dangling {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("objects left that nothing collects: {found:#?}");
}

fn retryable_or_success(status: StatusCode, body: &Value) {
    assert!(
        matches!(status.as_u16(), 200 | 201 | 500 | 503),
        "{status} {body}"
    );
    if !status.is_success() {
        assert!(matches!(
            body["error_code"].as_str(),
            Some("INTERNAL_SERVER_ERROR" | "SUBMITTER_OVERLOADED")
        ));
        // 5xx bodies are generic: no API server text leaks.
        let message = body["message"].as_str().unwrap();
        assert!(
            !message.contains("kube") && !message.contains("injected"),
            "{message}"
        );
    }
}

/// One fault at one step, then retries: the driver ends complete, and the sweeper (grace 0)
/// leaves it alone.
async fn fault_then_retry(rule: Value, case: &str) {
    let t = start().await;
    let _sweeper = t.start_sweeper();
    let body = request(&format!("fault-{case}"), &args(&[]));
    let built = built(&body);
    t.fault(rule.clone());
    let first = t.submit(&body).await;
    eprintln!("{case}: first answer {}", first.status);
    retryable_or_success(first.status, &first.body);
    assert_no_pod_without_config_maps(&t, &built).await;
    let done = t.submit_until_success(&body).await;
    let uid = t.assert_complete(&built).await;
    assert_eq!(done.body["driver_pod_uid"], uid.as_str(), "{case}");
    if first.status.is_success() {
        assert_eq!(first.body["driver_pod_uid"], uid.as_str(), "{case}");
    }
    // The sweeper runs every 50 ms with no grace: after two whole passes that began once the
    // driver was complete, it still is.
    t.wait_sweep_passes(2).await;
    t.assert_complete(&built).await;
}

/// One fault at one step and no retry: whatever is left can start or will be collected.
async fn fault_without_retry(rule: Value, case: &str) {
    let t = start().await;
    let body = request(&format!("alone-{case}"), &args(&[]));
    let built = built(&body);
    t.fault(rule.clone());
    let first = t.submit(&body).await;
    retryable_or_success(first.status, &first.body);
    let _sweeper = t.start_sweeper();
    assert_no_pod_without_config_maps(&t, &built).await;
    if first.status.is_success() {
        t.assert_complete(&built).await;
    } else {
        assert_no_orphans(&t, &built).await;
    }
}

fn rules() -> Vec<(String, Value)> {
    let mut rules = Vec::new();
    for (verb, resource) in STEPS {
        for when in ["before", "after"] {
            rules.push((
                format!("{verb}-{resource}-500-{when}"),
                json!({"verb": verb, "resource": resource, "code": 500, "when": when}),
            ));
        }
        rules.push((
            format!("{verb}-{resource}-held"),
            json!({"verb": verb, "resource": resource, "code": 504, "delayMs": HOLD_MS}),
        ));
    }
    rules
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_at_every_step_converges_on_retry() {
    for (case, rule) in rules() {
        fault_then_retry(rule, &case).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_at_every_step_without_retry_leaves_nothing_uncollectable() {
    for (case, rule) in rules() {
        fault_without_retry(rule, &case).await;
    }
}

#[tokio::test]
async fn failure_after_the_pod_rolls_back_the_first_attempt() {
    let t = start().await;
    let body = request("rollback-1", &args(&[]));
    let built = built(&body);
    t.fault(json!({"verb": "create", "resource": "services", "code": 500}));
    let answer = t.submit(&body).await;
    assert_eq!(
        answer.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        answer.body
    );
    assert_eq!(answer.body["error_code"], "INTERNAL_SERVER_ERROR");
    assert_eq!(answer.body["submission_id"], "rollback-1");
    // The pod was deleted by uid, the ConfigMaps by uid, the rest by the garbage collector.
    t.assert_nothing_left(&built).await;
    let deletes: Vec<_> = t
        .journal()
        .into_iter()
        .filter(|e| e.method == "DELETE")
        .collect();
    assert!(
        deletes
            .iter()
            .all(|e| e.body["preconditions"]["uid"].is_string()),
        "{deletes:#?}"
    );
    let metrics = metrics_text(&t.app).await;
    assert!(metrics.contains("submitter_rollbacks_total 1"));
    let done = t.submit(&body).await;
    assert_eq!(done.status, StatusCode::CREATED, "{}", done.body);
    t.assert_complete(&built).await;
}

#[tokio::test]
async fn api_server_422_without_causes_on_a_templated_pod_is_invalid_pod_template_and_leaves_nothing()
 {
    let t = start().await;
    let mut body = request("invalid-1", &args(&[]));
    body["driver_pod_template"] =
        json!({"spec": {"containers": [{"name": "spark-kubernetes-driver"}]}});
    t.fault(json!({"verb": "create", "resource": "pods", "code": 422, "message": "spec.containers[0].image: Required value"}));
    let answer = t.submit(&body).await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        answer.body
    );
    assert_eq!(answer.body["error_code"], "INVALID_POD_TEMPLATE");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("Required value")
    );
    t.assert_nothing_left(&built(&body)).await;
}

#[tokio::test]
async fn ambiguous_pod_failure_leaves_config_maps_to_the_sweeper() {
    let t = start().await;
    let body = request("sweep-1", &args(&[]));
    let built = built(&body);
    t.fault(json!({"verb": "create", "resource": "pods", "code": 500}));
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    // A pod POST that may still land would mount them: kept until the sweeper's grace passes.
    let left = t.objects_of(&built).await;
    assert_eq!(
        left.iter().filter(|(kind, _)| kind == "ConfigMap").count(),
        2
    );
    let _sweeper = t.start_sweeper();
    t.assert_nothing_left(&built).await;
    let metrics = metrics_text(&t.app).await;
    assert!(metrics.contains("submitter_swept_config_maps_total 2"));
}

#[tokio::test]
async fn over_the_concurrency_limit_is_503_with_retry_after() {
    let config = ServiceConfig {
        max_concurrency: 1,
        ..ServiceConfig::default()
    };
    let t = TestApp::start_with(config, Duration::from_secs(5)).await;
    t.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("create".into()),
            resource: Some("pods".into()),
            millis: 500,
        });
    let a = request("busy-a", &args(&[]));
    let b = request("busy-b", &args(&[]));
    let (first, second) = tokio::join!(t.submit(&a), async {
        // The first holds the only permit once its pod POST is at kubesim (held 500 ms there).
        t.wait_for_journal(|journal| !creates(journal, "pods").is_empty())
            .await;
        t.submit(&b).await
    });
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(second.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(second.body["error_code"], "SUBMITTER_OVERLOADED");
    assert_eq!(second.headers["retry-after"], "1");
}

#[tokio::test]
async fn request_timeout_is_503_and_the_creation_finishes_in_the_background() {
    let config = ServiceConfig {
        request_timeout: Duration::from_millis(200),
        ..ServiceConfig::default()
    };
    let t = TestApp::start_with(config, Duration::from_secs(5)).await;
    t.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("create".into()),
            resource: Some("pods".into()),
            millis: 600,
        });
    let body = request("slow-1", &args(&[]));
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.headers.contains_key("retry-after"));
    t.cluster.control.clear_latency();
    // The creation goes on without the request; it ends when the in-flight task does.
    t.wait_in_flight_done().await;
    let again = t.submit(&body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    t.assert_complete(&built(&body)).await;
}
