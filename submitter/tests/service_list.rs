//! The caller's submissions, a page at a time: from the caches (no LIST of the API server per
//! request), only what the identity may read, filtered by namespace and phase, and pages that
//! add up to the whole list while submissions come and go between them.

use crate::operate_support;
use crate::submit_support;

use std::collections::BTreeSet;

use http::StatusCode;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use operate_support::{Operated, TICKER_IMAGE};
use serde_json::{Value, json};
use submission::api::DriverPhase;
use submit_support::TESTER;

/// Submits `id` in `namespace` (a driver that runs until stopped) and waits until it runs.
async fn running(s: &Operated, id: &str, namespace: &str) -> Value {
    let namespace_conf = format!("spark.kubernetes.namespace={namespace}");
    let answer = s
        .submit_image(id, TICKER_IMAGE, &["--conf", &namespace_conf])
        .await;
    s.wait_for_phase(&answer, DriverPhase::Running).await;
    answer
}

/// Every page of `query` as `identity`, with `between` run after each page but the last;
/// the ids listed, in order.
async fn pages(
    s: &Operated,
    identity: &str,
    query: &str,
    mut between: impl AsyncFnMut(usize),
) -> Vec<String> {
    let mut listed = Vec::new();
    let mut token: Option<String> = None;
    for page in 0.. {
        assert!(page < 100, "the pages never end");
        let continue_param = token
            .as_ref()
            .map(|t| format!("&continue={t}"))
            .unwrap_or_default();
        let answer = s
            .get(
                &format!("/api/v1/spark-submit?{query}{continue_param}"),
                identity,
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        for item in answer.body["items"].as_array().unwrap() {
            listed.push(item["submission_id"].as_str().unwrap().to_owned());
        }
        match answer.body.get("continue").and_then(Value::as_str) {
            Some(next) => token = Some(next.to_owned()),
            None => break,
        }
        between(page).await;
    }
    listed
}

#[tokio::test]
async fn pages_add_up_to_the_whole_list_while_submissions_come_and_go() {
    let s = Operated::start().await;
    for i in 0..9 {
        running(&s, &format!("list-{i:02}"), "default").await;
    }
    let counts_before = s.cluster.control.counts();
    let pods: Api<Pod> = Api::namespaced(s.cluster.client().unwrap(), "default");
    let listed = pages(&s, TESTER, "limit=2", async |page| {
        if page == 0 {
            // After the first page: one is added before the position, one after it; one
            // listed already and one not listed yet go away.
            running(&s, "list-00a", "default").await;
            running(&s, "list-99", "default").await;
            for gone in ["list-01", "list-07"] {
                let status = s.get(&format!("/api/v1/spark-submit/{gone}"), TESTER).await;
                let name = status.body["driver_pod_name"].as_str().unwrap().to_owned();
                pods.delete(&name, &DeleteParams::default().grace_period(0))
                    .await
                    .unwrap();
                s.wait_for_pod("default", &name, "went away", |pod| pod.is_none())
                    .await;
            }
        }
    })
    .await;
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "an item repeated: {listed:?}");
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "pages in one stable order");
    // Present throughout: each on exactly one page. Added before the position: not listed;
    // added after it: listed. Gone after its page: listed once; gone before it: not listed.
    let expected: Vec<String> = [
        "list-00", "list-01", "list-02", "list-03", "list-04", "list-05", "list-06", "list-08",
        "list-99",
    ]
    .iter()
    .map(|id| (*id).to_owned())
    .collect();
    assert_eq!(listed, expected);
    // Served from the caches: no LIST reached the API server for it.
    let lists = |counts: &[kubesim::control::RequestCount]| -> u64 {
        counts
            .iter()
            .filter(|c| c.verb == "list" && !c.watch)
            .map(|c| c.count)
            .sum()
    };
    assert_eq!(lists(&s.cluster.control.counts()), lists(&counts_before));
}

#[tokio::test]
async fn an_identity_lists_only_what_it_may_read_and_filters_narrow_the_list() {
    let s = Operated::start().await;
    let namespaces: Api<Namespace> = Api::all(s.cluster.client().unwrap());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    running(&s, "mine-1", "team-a").await;
    running(&s, "theirs-1", "default").await;
    let done = s
        .submit_image("theirs-done", operate_support::LINES_IMAGE, &[])
        .await;
    s.wait_for_phase(&done, DriverPhase::Succeeded).await;

    let everything = pages(&s, TESTER, "", async |_| {}).await;
    // By namespace, then submission id.
    assert_eq!(everything, ["theirs-1", "theirs-done", "mine-1"]);
    assert_eq!(pages(&s, "team-a", "", async |_| {}).await, ["mine-1"]);
    assert_eq!(
        pages(&s, TESTER, "namespace=default&phase=Running", async |_| {}).await,
        ["theirs-1"]
    );
    let item = s
        .get("/api/v1/spark-submit?namespace=team-a", "team-a")
        .await;
    assert_eq!(item.body["items"][0]["phase"], "Running");
    assert_eq!(item.body["items"][0]["namespace"], "team-a");

    for (query, identity, status) in [
        ("namespace=default", "team-a", StatusCode::FORBIDDEN),
        ("", "stranger", StatusCode::FORBIDDEN),
        ("phase=Sleeping", TESTER, StatusCode::BAD_REQUEST),
        ("limit=0", TESTER, StatusCode::BAD_REQUEST),
        ("limit=1001", TESTER, StatusCode::BAD_REQUEST),
        ("continue=not-ours", TESTER, StatusCode::BAD_REQUEST),
        ("namespaces=default", TESTER, StatusCode::BAD_REQUEST),
    ] {
        let answer = s
            .get(&format!("/api/v1/spark-submit?{query}"), identity)
            .await;
        assert_eq!(
            answer.status, status,
            "{query} as {identity}: {}",
            answer.body
        );
        assert!(answer.body["error_code"].is_string(), "{}", answer.body);
    }
}

#[tokio::test]
async fn a_killed_submission_stays_on_the_list_as_killed() {
    let s = Operated::start().await;
    let answer = running(&s, "list-killed", "default").await;
    let killed = s
        .delete(
            "/api/v1/spark-submit/list-killed?grace_period_seconds=0",
            TESTER,
        )
        .await;
    assert_eq!(killed.status, StatusCode::ACCEPTED);
    s.wait_gone(&answer).await;
    let list = s.get("/api/v1/spark-submit", TESTER).await;
    let items = list.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{}", list.body);
    assert_eq!(items[0]["submission_id"], "list-killed");
    assert_eq!(items[0]["reason"], "Killed");
    assert_eq!(items[0]["pod_phase"], Value::Null);
}
