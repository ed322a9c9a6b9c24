//! Killing a driver through the service, as `spark-submit --kill` does: the driver stops, its
//! status says it was killed, a second kill answers the same, a repeated POST of its id starts
//! nothing, a grace period is honoured, and a driver a SparkApplication owns is refused.

use crate::operate_support;
use crate::submit_support;

use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use operate_support::{LINES_IMAGE, Operated, TICKER_IMAGE, driver_of};
use serde_json::{Value, json};
use submission::api::DriverPhase;
use submission::meta::labels;
use submit_support::{TESTER, metrics_text};

/// The fields a kill's answers must agree on, whoever asks and whenever.
fn outcome(status: &Value) -> Value {
    json!([
        status["submission_id"],
        status["namespace"],
        status["driver_pod_name"],
        status["driver_pod_uid"],
        status["phase"],
        status["reason"],
        status["finished_at"],
        status["action"]
    ])
}

/// Pods in `default` carrying the submission label.
async fn pods_of_ours(s: &Operated) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(s.cluster.client().unwrap(), "default");
    api.list(&ListParams::default().labels(labels::SUBMISSION_ID_HASH))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_kill_stops_a_running_driver_and_neither_its_repeat_nor_a_repost_starts_anything() {
    let s = Operated::start().await;
    let submitted = s.submit_image("kill-1", TICKER_IMAGE, &[]).await;
    s.wait_for_phase(&submitted, DriverPhase::Running).await;

    let killed = s.delete("/api/v1/spark-submit/kill-1", TESTER).await;
    assert_eq!(killed.status, StatusCode::ACCEPTED, "{}", killed.body);
    assert_eq!(killed.body["phase"], "Failed");
    assert_eq!(killed.body["reason"], "Killed");
    assert_eq!(killed.body["driver_pod_uid"], submitted["driver_pod_uid"]);
    s.wait_gone(&submitted).await;

    // Asked again, by id and by driver, once the pod is gone: the same answer.
    let (namespace, pod) = driver_of(&submitted);
    for path in [
        "/api/v1/spark-submit/kill-1".to_owned(),
        format!("/api/v1/drivers/{namespace}/{pod}"),
    ] {
        let again = s.delete(&path, TESTER).await;
        assert_eq!(again.status, StatusCode::ACCEPTED, "{path}: {}", again.body);
        assert_eq!(outcome(&again.body), outcome(&killed.body), "{path}");
        let status = s.get(&path, TESTER).await;
        assert_eq!(status.status, StatusCode::OK, "{path}");
        assert_eq!(outcome(&status.body), outcome(&killed.body), "{path}");
    }

    // The id stays bound to the killed driver: a repeated POST answers it and creates nothing.
    let repost = s
        .submit(&operate_support::request("kill-1", TICKER_IMAGE, &[]))
        .await;
    assert_eq!(repost.status, StatusCode::OK, "{}", repost.body);
    assert_eq!(repost.body["duplicate_submission"], true);
    assert_eq!(repost.body["driver_pod_uid"], submitted["driver_pod_uid"]);
    assert!(
        repost.body["message"].as_str().unwrap().contains("killed"),
        "{}",
        repost.body
    );
    assert!(
        pods_of_ours(&s).await.is_empty(),
        "a killed id started a driver"
    );
    let metrics = metrics_text(&s.app).await;
    assert!(metrics.contains("submitter_kills_total 1"), "{metrics}");
}

#[tokio::test]
async fn a_kill_by_driver_passes_the_grace_period_and_refuses_other_identities() {
    let s = Operated::start().await;
    let submitted = s.submit_image("kill-grace", TICKER_IMAGE, &[]).await;
    s.wait_for_phase(&submitted, DriverPhase::Running).await;
    let (namespace, pod) = driver_of(&submitted);
    let by_driver = format!("/api/v1/drivers/{namespace}/{pod}");
    for path in ["/api/v1/spark-submit/kill-grace", by_driver.as_str()] {
        let refused = s.delete(path, "team-a").await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            refused.body
        );
    }
    let refused = s
        .delete(&format!("{by_driver}?grace_period_seconds=-1"), TESTER)
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        pods_of_ours(&s).await.len() == 1,
        "a refused kill deleted the driver"
    );

    let killed = s
        .delete(&format!("{by_driver}?grace_period_seconds=7"), TESTER)
        .await;
    assert_eq!(killed.status, StatusCode::ACCEPTED, "{}", killed.body);
    let deletes: Vec<Value> = s
        .cluster
        .control
        .journal()
        .into_iter()
        .filter(|e| e.method == "DELETE" && e.path.contains(&format!("/pods/{pod}")))
        .map(|e| e.body)
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:#?}");
    assert_eq!(deletes[0]["gracePeriodSeconds"], 7);
    assert_eq!(
        deletes[0]["preconditions"]["uid"],
        submitted["driver_pod_uid"]
    );

    let unknown = s.delete("/api/v1/spark-submit/never-was", TESTER).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
}

#[tokio::test]
async fn a_finished_driver_is_answered_as_it_is_and_keeps_its_pod() {
    let s = Operated::start().await;
    let submitted = s.submit_image("kill-done", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&submitted, DriverPhase::Succeeded).await;
    let answer = s.delete("/api/v1/spark-submit/kill-done", TESTER).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    assert_eq!(answer.body["phase"], "Succeeded");
    assert_eq!(
        pods_of_ours(&s).await.len(),
        1,
        "its pod, and its log, stay"
    );
}

#[tokio::test]
async fn a_driver_a_spark_application_owns_is_refused_naming_the_application() {
    let s = Operated::start().await;
    let client = s.cluster.client().unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "sparkapplications.sparkoperator.k8s.io"},
        "spec": {"group": "sparkoperator.k8s.io", "scope": "Namespaced",
            "names": {"plural": "sparkapplications", "kind": "SparkApplication"},
            "versions": [{"name": "v1beta2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let post = |path: &str, body: &Value| {
        http::Request::post(path)
            .header("content-type", "application/json")
            .body(body.to_string().into_bytes())
            .unwrap()
    };
    let _: Value = client
        .request(post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        ))
        .await
        .unwrap();
    let app: Value = client
        .request(post(
            "/apis/sparkoperator.k8s.io/v1beta2/namespaces/default/sparkapplications",
            &json!({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                "metadata": {"name": "nightly-etl"}, "spec": {}}),
        ))
        .await
        .unwrap();
    let mut body = operate_support::request("kill-owned", TICKER_IMAGE, &[]);
    body["driver_pod_template"] = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "name": "nightly-etl", "uid": app["metadata"]["uid"], "controller": true
    }]}, "spec": {}});
    let submitted = s.submit(&body).await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);
    s.wait_for_phase(&submitted.body, DriverPhase::Running)
        .await;
    let refused = s.delete("/api/v1/spark-submit/kill-owned", TESTER).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert_eq!(refused.body["error_code"], "DRIVER_OWNED_BY_APPLICATION");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("default/nightly-etl"),
        "{}",
        refused.body
    );
    assert_eq!(pods_of_ours(&s).await.len(), 1, "the driver still runs");
}

/// The race a chaos run found: a retry that read its id's claim before a kill ended it (from
/// a cache behind the kill) and found the driver gone creates the driver again; its pod POST
/// lands after the claim has ended. The new pod must not stay: the retry answers the killed
/// driver, as a repost after the kill does, and no driver is left.
#[tokio::test]
async fn a_retry_whose_pod_post_lands_after_a_kill_ended_the_claim_leaves_no_driver() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::jiff::Timestamp;
    use kube::api::{DeleteParams, PostParams};
    use submitter::record;

    let s = Operated::start().await;
    let submitted = s.submit_image("race-1", TICKER_IMAGE, &[]).await;
    s.wait_for_phase(&submitted, DriverPhase::Running).await;
    let (namespace, pod_name) = driver_of(&submitted);
    let client = s.cluster.client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let driver = pods.get(&pod_name).await.unwrap();
    // The driver goes first, its claim still open: what a retry sees when its cache shows the
    // kill's delete but not yet the kill's end of the claim. The retry creates it again.
    pods.delete(&pod_name, &DeleteParams::default())
        .await
        .unwrap();
    s.wait_gone(&submitted).await;
    s.cluster.control.clear_journal();
    s.cluster
        .control
        .add_latency(kubesim::control::LatencyRule {
            verb: Some("create".into()),
            resource: Some("pods".into()),
            millis: 1000,
        });
    let repost = operate_support::request("race-1", TICKER_IMAGE, &[]);
    let retry = s.submit(&repost);
    let end_claim = async {
        // Once the retry's pod POST is held at the API server, the claim ends as a kill ends it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while !s.cluster.control.journal().iter().any(|entry| {
            let path = entry.path.split('?').next().unwrap_or_default();
            entry.method == "POST" && path.ends_with(&format!("/namespaces/{namespace}/pods"))
        }) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the retry never POSTed its pod"
            );
            tokio::task::yield_now().await;
        }
        let claims: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let name = record::claim_name("race-1");
        let claim = claims.get(&name).await.unwrap();
        let killed = record::for_kill(
            &driver,
            Timestamp::now(),
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
        let ended = record::over_claim(&claim, &killed).unwrap();
        claims
            .replace(&name, &PostParams::default(), &ended)
            .await
            .unwrap();
    };
    let (answer, ()) = tokio::join!(retry, end_claim);
    s.cluster.control.clear_latency();

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["duplicate_submission"], true, "{}", answer.body);
    assert!(
        answer.body["message"].as_str().unwrap().contains("killed"),
        "{}",
        answer.body
    );
    assert!(
        pods_of_ours(&s).await.is_empty(),
        "a driver outlived the kill that ended its claim"
    );
}
