//! A driver's log through the service, by submission id and by `namespace:pod`: its output as
//! `text/plain`, the driver container's and never a sidecar's unless named, the same access rule
//! as status, 404 for what nobody knows and 410 for a driver whose pod is gone, options checked,
//! and a limit on the streams one identity holds open.

use std::time::Duration;

use crate::operate_support;
use crate::submit_support;

use http::{StatusCode, header};
use http_body_util::BodyExt;
use operate_support::{LINES, LINES_IMAGE, Operated, SIDECAR_IMAGE, TICKER_IMAGE, driver_of};
use serde_json::json;
use submission::api::DriverPhase;
use submit_support::{TESTER, metrics_text};

fn expected_lines() -> String {
    (1..=LINES).map(|i| format!("driver line {i}\n")).collect()
}

#[tokio::test]
async fn the_log_of_a_finished_driver_is_its_output_by_id_and_by_driver() {
    let s = Operated::start().await;
    let answer = s.submit_image("log-1", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Succeeded).await;
    let (namespace, pod) = driver_of(&answer);
    for path in [
        "/api/v1/spark-submit/log-1/log".to_owned(),
        format!("/api/v1/drivers/{namespace}/{pod}/log"),
    ] {
        let log = s.get(&path, TESTER).await;
        assert_eq!(log.status, StatusCode::OK, "{path}: {}", log.body);
        assert_eq!(
            log.headers[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert_eq!(log.body.as_str().unwrap(), expected_lines(), "{path}");
    }
    let metrics = metrics_text(&s.app).await;
    let streamed = 2 * expected_lines().len();
    assert!(
        metrics.contains(&format!("submitter_log_bytes_streamed_total {streamed}")),
        "{metrics}"
    );
    assert!(
        metrics.contains("submitter_log_streams_open 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_default_container_is_the_driver_and_a_sidecar_is_read_only_when_named() {
    let s = Operated::start().await;
    // The sidecar first, and the driver container not under Spark's default name: the choice
    // is the driver-state rule's (the container Spark marks), not the first or a fixed name.
    let mut body = operate_support::request(
        "log-sidecar",
        LINES_IMAGE,
        &[
            "--conf",
            "spark.kubernetes.driver.podTemplateContainerName=main",
        ],
    );
    body["driver_pod_template"] = json!({"spec": {"containers": [
        {"name": "log-shipper", "image": SIDECAR_IMAGE},
        {"name": "main"}
    ]}});
    let answer = s.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    s.wait_for_phase(&answer.body, DriverPhase::Succeeded).await;
    let driver = s.get("/api/v1/spark-submit/log-sidecar/log", TESTER).await;
    assert_eq!(driver.status, StatusCode::OK, "{}", driver.body);
    assert_eq!(driver.body.as_str().unwrap(), expected_lines());
    let sidecar = s
        .get(
            "/api/v1/spark-submit/log-sidecar/log?container=log-shipper",
            TESTER,
        )
        .await;
    assert_eq!(sidecar.status, StatusCode::OK, "{}", sidecar.body);
    assert_eq!(sidecar.body.as_str().unwrap(), "sidecar line\n");
}

#[tokio::test]
async fn unknown_is_404_a_gone_driver_is_410_and_another_identity_is_refused() {
    let s = Operated::start().await;
    let unknown = s.get("/api/v1/spark-submit/never-was/log", TESTER).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    assert_eq!(unknown.body["error_code"], "NOT_FOUND");
    assert_eq!(unknown.body["submission_id"], "never-was");
    let unknown = s.get("/api/v1/drivers/default/never-was/log", TESTER).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    let answer = s.submit_image("log-gone", TICKER_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Running).await;
    // team-a may read team-a only; the driver runs in default.
    let (namespace, pod) = driver_of(&answer);
    for path in [
        "/api/v1/spark-submit/log-gone/log".to_owned(),
        format!("/api/v1/drivers/{namespace}/{pod}/log"),
    ] {
        let refused = s.get(&path, "team-a").await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            refused.body
        );
        assert_eq!(refused.body["error_code"], "FORBIDDEN");
    }
    let killed = s
        .delete(
            "/api/v1/spark-submit/log-gone?grace_period_seconds=0",
            TESTER,
        )
        .await;
    assert_eq!(killed.status, StatusCode::ACCEPTED, "{}", killed.body);
    s.wait_gone(&answer).await;
    let gone = s.get("/api/v1/spark-submit/log-gone/log", TESTER).await;
    assert_eq!(gone.status, StatusCode::GONE, "{}", gone.body);
    assert_eq!(gone.body["error_code"], "DRIVER_GONE");
    let gone = s
        .get(&format!("/api/v1/drivers/{namespace}/{pod}/log"), TESTER)
        .await;
    assert_eq!(gone.status, StatusCode::GONE, "{}", gone.body);
}

#[tokio::test]
async fn bad_options_are_400_naming_what_is_wrong() {
    let s = Operated::start().await;
    let answer = s.submit_image("log-options", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Succeeded).await;
    for (query, names) in [
        ("tail_lines=-1", "tail_lines"),
        ("since_seconds=0", "since_seconds"),
        ("limit_bytes=0", "limit_bytes"),
        ("follow=yes", "follow"),
        ("tail_lines=ten", "tail_lines"),
        // The API server's spelling is not ours: refused, not silently ignored.
        ("tailLines=5", "tailLines"),
    ] {
        let refused = s
            .get(
                &format!("/api/v1/spark-submit/log-options/log?{query}"),
                TESTER,
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            refused.body
        );
        assert_eq!(refused.body["error_code"], "BAD_REQUEST");
        let message = refused.body["message"].as_str().unwrap();
        assert!(message.contains(names), "{query}: {message}");
    }
    // A container the pod does not have: the API server's refusal, passed on.
    let refused = s
        .get(
            "/api/v1/spark-submit/log-options/log?container=nope",
            TESTER,
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
}

/// Submits `id` with a node selector no node matches; (namespace, pod) of its driver.
async fn submit_unschedulable(s: &Operated, id: &str) -> (String, String) {
    let answer = s
        .submit_image(
            id,
            LINES_IMAGE,
            &["--conf", "spark.kubernetes.node.selector.pool=nowhere"],
        )
        .await;
    driver_of(&answer)
}

/// Each of `queries` on the log of `namespace/pod` is a 400 saying the pod is not scheduled.
async fn assert_not_scheduled(s: &Operated, namespace: &str, pod: &str, queries: &[&str]) {
    for query in queries {
        let refused = s
            .get(
                &format!("/api/v1/drivers/{namespace}/{pod}/log{query}"),
                TESTER,
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            refused.body
        );
        let message = refused.body["message"].as_str().unwrap();
        assert!(
            message.contains("is not scheduled to a node yet"),
            "{query}: {message}"
        );
    }
}

#[tokio::test]
async fn a_driver_no_node_takes_is_400_not_an_empty_log_that_looks_ended() {
    // The API server answers an unbound pod's log with an empty 200: passed on, a followed log
    // would end at once, as if the driver had ended with no output.
    let s =
        Operated::start_with(|state| state.with_log_start_wait(Duration::from_millis(300))).await;
    let (namespace, pod) = submit_unschedulable(&s, "log-unscheduled").await;
    assert_not_scheduled(
        &s,
        &namespace,
        &pod,
        &["", "?follow=true", "?container=spark-kubernetes-driver"],
    )
    .await;
}

#[tokio::test]
async fn an_unbound_driver_the_lagging_cache_has_not_shown_is_400_too() {
    // The driver is read live (the cache has not shown it): its absence from the cache must
    // not pass for "bound", or the API server's empty 200 would look like a log that ended.
    let s =
        Operated::start_with(|state| state.with_log_start_wait(Duration::from_millis(300))).await;
    // Every re-watch is held for a minute, longer than the test: the caches stay as they were.
    submit_support::hold_rewatches(&s.cluster, Duration::from_secs(60)).await;
    let (namespace, pod) = submit_unschedulable(&s, "log-unscheduled-unseen").await;
    assert!(s.caches.pod(&namespace, &pod).is_none(), "the cache lags");
    assert_not_scheduled(&s, &namespace, &pod, &["", "?follow=true"]).await;
}

#[tokio::test]
async fn an_identity_over_its_stream_limit_gets_429_until_one_of_its_streams_closes() {
    let s = Operated::start_with(|state| state.with_log_streams(2)).await;
    let answer = s.submit_image("log-limit", LINES_IMAGE, &[]).await;
    s.wait_for_phase(&answer, DriverPhase::Succeeded).await;
    let path = "/api/v1/spark-submit/log-limit/log";
    // Two answers whose bodies are not read yet: two streams held open.
    let first = s.open(path, TESTER).await;
    let second = s.open(path, TESTER).await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let refused = s.get(path, TESTER).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.body
    );
    assert_eq!(refused.body["error_code"], "TOO_MANY_LOG_STREAMS");
    assert_eq!(refused.headers[header::RETRY_AFTER], "5");
    // Another identity has its own streams.
    assert_eq!(s.get(path, "spark-only").await.status, StatusCode::OK);
    assert!(
        metrics_text(&s.app)
            .await
            .contains("submitter_log_streams_open 2")
    );
    // Reading one to its end closes it, and its slot is free again.
    let text = first.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(text, expected_lines());
    let third = s.get(path, TESTER).await;
    assert_eq!(third.status, StatusCode::OK, "{}", third.body);
    drop(second);
}
