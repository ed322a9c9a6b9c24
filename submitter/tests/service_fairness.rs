//! Fairness per client identity, through the service's whole layer stack against kubesim: one
//! identity floods the submitter with submissions its API server answers slowly; its requests
//! beyond its budget get 503 `SUBMITTER_OVERLOADED` with `Retry-After` and create nothing, while
//! a steady client is served every time.

use crate::submit_support;

use std::time::Duration;

use http::StatusCode;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;
use submit_support::{TESTER, TestApp, args, built, request, send, submit_request};
use submitter::fairness::{BudgetConfig, Budgets};
use submitter::service::{ServiceConfig, app};

/// The flooding identity: allowed `team-a` only by the test policy.
const FLOODER: &str = "team-a";

#[tokio::test]
async fn flooding_identity_gets_503_while_a_steady_one_is_always_served() {
    let t = TestApp::start().await;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": FLOODER}})).unwrap();
    Api::<Namespace>::all(t.client())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    // Every write into the flooder's namespace hangs for a minute: its admitted submissions stay
    // in flight for the whole test.
    t.fault(json!({"verb": "create", "namespace": FLOODER, "count": 1000, "delayMs": 60_000}));
    let budgets = Budgets::new(BudgetConfig {
        max_in_flight: 2,
        rate: 0.0,
        burst: 0,
    });
    let state = t
        .state
        .clone()
        .with_call_timeout(Duration::from_secs(120))
        .with_fairness(budgets.clone());
    let config = ServiceConfig {
        max_concurrency: 4,
        request_timeout: Duration::from_secs(120),
        ..ServiceConfig::default()
    };
    let service = app(state, &config);
    let flood_request = |index: usize| {
        let extra = ["--conf", "spark.kubernetes.namespace=team-a"];
        request(&format!("flood-{index}"), &args(&extra))
    };

    // The flooder's first two submissions are admitted and hang.
    let held: Vec<_> = (0..2)
        .map(|index| {
            let service = service.clone();
            let body = flood_request(index);
            tokio::spawn(async move { send(&service, submit_request(&body, "", FLOODER)).await })
        })
        .collect();
    for _ in 0..500 {
        if budgets.in_flight(FLOODER) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(budgets.in_flight(FLOODER), 2);

    // The rest of the flood, all at once: every one refused, retryable, nothing created.
    let flood: Vec<_> = (2..32)
        .map(|index| {
            let service = service.clone();
            let body = flood_request(index);
            tokio::spawn(async move { send(&service, submit_request(&body, "", FLOODER)).await })
        })
        .collect();
    let mut refused = 0;
    for answer in flood {
        let answer = answer.await.unwrap();
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            answer.body
        );
        assert_eq!(answer.body["error_code"], "SUBMITTER_OVERLOADED");
        assert!(answer.headers.contains_key(http::header::RETRY_AFTER));
        refused += 1;
    }
    assert_eq!(refused, 30);
    // Its status look-ups share the budget.
    let mut lookup = http::Request::get("/api/v1/spark-submit/flood-0")
        .body(axum::body::Body::empty())
        .unwrap();
    lookup
        .extensions_mut()
        .insert(submit_support::verified_identity(FLOODER));
    assert_eq!(
        send(&service, lookup).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );

    // Meanwhile the steady client is served every time, two at once and one after another.
    let steady: Vec<_> = (0..2)
        .map(|index| {
            let service = service.clone();
            let body = request(&format!("steady-{index}"), &args(&[]));
            tokio::spawn(async move { send(&service, submit_request(&body, "", TESTER)).await })
        })
        .collect();
    for answer in steady {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    for index in 2..6 {
        let body = request(&format!("steady-{index}"), &args(&[]));
        let answer = send(&service, submit_request(&body, "", TESTER)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    assert_eq!(
        budgets.in_flight(FLOODER),
        2,
        "the held submissions finished early"
    );
    for index in 2..32 {
        assert!(t.objects_of(&built(&flood_request(index))).await.is_empty());
    }
    for task in held {
        task.abort();
    }
}
