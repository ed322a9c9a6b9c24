//! `POST /api/v1/spark-submit` against an in-process kubesim, through `app()` with `oneshot`:
//! creation order and ownership, idempotency, conflicts, concurrency, dry runs, authorisation
//! and the envelope for bad requests.

use crate::submit_support;

use axum::body::Body;
use http::{Request, StatusCode, header};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use submit_support::{TestApp, args, as_tester, built, creates, request, send, submit_request};
use submitter::service::ServiceConfig;

#[tokio::test]
async fn first_submission_creates_config_maps_before_the_pod_and_owns_every_dependent() {
    let t = TestApp::start().await;
    let body = request("first-1", &args(&[]));
    let built = built(&body);
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["duplicate_submission"], false);
    assert_eq!(answer.body["submission_id"], "first-1");
    assert_eq!(answer.body["app_name"], "spark-pi");
    assert_eq!(answer.body["namespace"], "default");
    assert_eq!(
        answer.body["driver_pod_name"],
        built.identity.driver_pod_name.as_str()
    );
    assert_eq!(answer.body["spark_app_id"], built.identity.app_id.as_str());
    assert!(answer.body["submitted_at"].as_str().unwrap().ends_with('Z'));

    let uid = t.assert_complete(&built).await;
    assert_eq!(answer.body["driver_pod_uid"], uid.as_str());
    // First the claim of the id, then two ConfigMaps (spark conf and executor template), both
    // before the pod.
    let journal = t.journal();
    let (claims, config_maps): (Vec<usize>, Vec<usize>) =
        creates(&journal, "configmaps").into_iter().partition(|at| {
            journal[*at].body["metadata"]["labels"]
                .get(submission::meta::labels::RECORD)
                .is_some()
        });
    let pods = creates(&journal, "pods");
    assert_eq!(claims.len(), 1, "{journal:#?}");
    assert_eq!(config_maps.len(), 2);
    assert_eq!(pods.len(), 1);
    assert!(
        config_maps
            .iter()
            .all(|cm| claims[0] < *cm && *cm < pods[0]),
        "{journal:#?}"
    );
    // The pod was sent without owner; the ConfigMaps got theirs by a metadata-only merge patch.
    let patches: Vec<_> = journal.iter().filter(|e| e.method == "PATCH").collect();
    assert_eq!(patches.len(), 2);
    for patch in patches {
        assert!(patch.path.contains("/configmaps/"));
        assert_eq!(patch.content_type, "application/merge-patch+json");
        assert_eq!(
            patch.body.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["metadata"]
        );
    }
}

#[tokio::test]
async fn repeat_submission_returns_the_existing_pod_and_creates_nothing() {
    let t = TestApp::start().await;
    let body = request("repeat-1", &args(&[]));
    let first = t.submit(&body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let writes = t.journal().len();
    let again = t.submit(&body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true);
    assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
    assert_eq!(again.body["submitted_at"], first.body["submitted_at"]);
    assert_eq!(
        t.journal().len(),
        writes,
        "a complete duplicate writes nothing"
    );
}

#[tokio::test]
async fn other_submission_on_the_same_pod_name_is_409_and_changes_nothing() {
    let t = TestApp::start().await;
    let first = request(
        "owner-1",
        &args(&["--conf", "spark.kubernetes.driver.pod.name=fixed-driver"]),
    );
    assert_eq!(t.submit(&first).await.status, StatusCode::CREATED);
    let writes = t.journal().len();
    let other = request(
        "other-2",
        &args(&["--conf", "spark.kubernetes.driver.pod.name=fixed-driver"]),
    );
    let answer = t.submit(&other).await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    assert_eq!(answer.body["error_code"], "DRIVER_POD_ALREADY_EXISTS");
    assert_eq!(answer.body["submission_id"], "other-2");
    assert_eq!(t.journal().len(), writes, "nothing created for the loser");
    t.assert_complete(&built(&first)).await;
}

/// Every pod in the cluster carrying `submission_id`, as (namespace, name).
async fn pods_of(t: &TestApp, submission_id: &str) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::all(t.client());
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|pod| {
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("spark-submitter.io/submission-id"))
                .is_some_and(|id| id == submission_id)
        })
        .map(|pod| (pod.metadata.namespace.unwrap(), pod.metadata.name.unwrap()))
        .collect()
}

async fn create_namespace(t: &TestApp, name: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(t.client())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

#[tokio::test]
async fn same_submission_id_naming_another_driver_is_409_bound_and_creates_nothing() {
    let t = TestApp::start().await;
    create_namespace(&t, "team-a").await;
    let first = t.submit(&request("bound-1", &args(&[]))).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let bound = format!(
        "default:{}",
        first.body["driver_pod_name"].as_str().unwrap()
    );
    let writes = t.journal().len();
    for other in [
        args(&["--name", "another-app"]),
        args(&["--conf", "spark.kubernetes.driver.pod.name=another-driver"]),
        args(&["--conf", "spark.kubernetes.namespace=team-a"]),
    ] {
        let answer = t.submit(&request("bound-1", &other)).await;
        assert_eq!(
            answer.status,
            StatusCode::CONFLICT,
            "{other:?}: {}",
            answer.body
        );
        assert_eq!(answer.body["error_code"], "SUBMISSION_ID_CONFLICT");
        assert_eq!(answer.body["submission_id"], "bound-1");
        assert!(
            answer.body["message"].as_str().unwrap().contains(&bound),
            "{}",
            answer.body
        );
    }
    let created: Vec<_> = t.journal()[writes..]
        .iter()
        .filter(|e| e.method == "POST")
        .cloned()
        .collect();
    assert!(created.is_empty(), "nothing is created: {created:#?}");
    assert_eq!(pods_of(&t, "bound-1").await.len(), 1);
    // The driver it is bound to is untouched, and the id still answers for it.
    let again = t.submit(&request("bound-1", &args(&[]))).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
}

#[tokio::test]
async fn two_replicas_racing_one_id_for_two_drivers_make_one_driver() {
    let t = TestApp::start().await;
    let other = t.replica(&ServiceConfig::default());
    let a = request("race-bound", &args(&[]));
    let b = request("race-bound", &args(&["--name", "another-app"]));
    let (first, second) = tokio::join!(
        t.submit(&a),
        send(&other, submit_request(&b, "", submit_support::TESTER))
    );
    let mut statuses = [first.status.as_u16(), second.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{} / {}", first.body, second.body);
    assert_eq!(pods_of(&t, "race-bound").await.len(), 1);
}

#[tokio::test]
async fn dependent_of_another_owner_is_409_and_nothing_is_created() {
    let t = TestApp::start().await;
    let body = request("dep-1", &args(&[]));
    let built = built(&body);
    let service_name = built.objects[1]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let services: Api<Service> = Api::namespaced(t.client(), "default");
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": service_name},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let writes = t.journal().len();
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "DRIVER_POD_ALREADY_EXISTS");
    assert_eq!(t.journal().len(), writes);
}

#[tokio::test]
async fn twenty_concurrent_duplicates_make_one_pod_one_201_and_nineteen_200() {
    let t = TestApp::start().await;
    let body = request("burst-1", &args(&[]));
    let answers = futures::future::join_all((0..20).map(|_| t.submit(&body))).await;
    let created = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .count();
    let duplicates = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK)
        .count();
    assert_eq!((created, duplicates), (1, 19));
    let uid = t.assert_complete(&built(&body)).await;
    assert!(
        answers
            .iter()
            .all(|a| a.body["driver_pod_uid"] == uid.as_str())
    );
    assert_eq!(
        creates(&t.journal(), "pods").len(),
        1,
        "one pod POST in one replica"
    );
}

#[tokio::test]
async fn two_replicas_racing_make_one_pod() {
    let t = TestApp::start().await;
    let other = t.replica(&ServiceConfig::default());
    let body = request("race-1", &args(&[]));
    let send_to = |app: axum::Router| {
        let body = body.clone();
        async move { send(&app, submit_request(&body, "", submit_support::TESTER)).await }
    };
    let racers = (0..6).map(|i| {
        let app = if i % 2 == 0 {
            t.app.clone()
        } else {
            other.clone()
        };
        send_to(app)
    });
    let answers = futures::future::join_all(racers).await;
    for answer in &answers {
        assert!(
            answer.status.is_success(),
            "{} {}",
            answer.status,
            answer.body
        );
    }
    let created = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1);
    let uid = t.assert_complete(&built(&body)).await;
    assert!(
        answers
            .iter()
            .all(|a| a.body["driver_pod_uid"] == uid.as_str())
    );
}

#[tokio::test]
async fn dry_run_validates_with_the_api_server_and_creates_nothing() {
    let t = TestApp::start().await;
    let body = request("dry-1", &args(&[]));
    let built = built(&body);
    let answer = t.dry_run(&body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["kind"], "List");
    let items = answer.body["items"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    let expected: Vec<&str> = built
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, expected, "Spark's order");
    // The API server's answers: defaults filled in, and the dependents owned by the pod.
    let pod_uid = items[0]["metadata"]["uid"].as_str().unwrap();
    for item in &items[1..] {
        assert_eq!(item["metadata"]["ownerReferences"][0]["uid"], pod_uid);
    }
    let journal = t.journal();
    assert_eq!(journal.len(), built.objects.len());
    assert!(
        journal.iter().all(|e| e.path.contains("dryRun=All")),
        "{journal:#?}"
    );
    t.assert_nothing_left(&built).await;
}

#[tokio::test]
async fn policy_refusal_is_403_and_touches_nothing() {
    let t = TestApp::start().await;
    let body = request("denied-1", &args(&[]));
    let answer = t.submit_as(&body, "team-a").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "FORBIDDEN");
    assert_eq!(answer.body["submission_id"], "denied-1");
    let answer = t.submit_as(&body, "stranger").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(t.journal().is_empty());
    assert!(
        t.cluster
            .control
            .counts()
            .iter()
            .all(|c| c.resource != "pods" && c.resource != "configmaps"),
        "not even a GET before authorisation"
    );
}

#[tokio::test]
async fn policy_is_checked_against_the_namespace_and_service_account_of_the_built_pod() {
    let t = TestApp::start().await;
    let body = request(
        "team-a-1",
        &args(&["--conf", "spark.kubernetes.namespace=team-a"]),
    );
    // Allowed by the policy, but the namespace does not exist: the API server's 404.
    let answer = t.submit_as(&body, "team-a").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "INVALID_SPARK_SUBMIT_ARGS");
}

#[tokio::test]
async fn executors_effective_service_account_is_checked_like_the_drivers() {
    let t = TestApp::start().await;
    for name in ["spark", "admin"] {
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        Api::<ServiceAccount>::namespaced(t.client(), "default")
            .create(&PostParams::default(), &account)
            .await
            .unwrap();
    }
    let driver_spark = "spark.kubernetes.authenticate.driver.serviceAccountName=spark";
    let executor_admin = "spark.kubernetes.authenticate.executor.serviceAccountName=admin";
    let executor_spark = "spark.kubernetes.authenticate.executor.serviceAccountName=spark";
    let template = |field: &str| json!({"spec": {field: "admin", "containers": [{"name": "spark-kubernetes-executor"}]}});
    // (case, extra args, executor template, allowed)
    let cases = [
        (
            "executor conf",
            vec!["--conf", driver_spark, "--conf", executor_admin],
            None,
            false,
        ),
        (
            "executor template",
            vec!["--conf", driver_spark],
            Some(template("serviceAccountName")),
            false,
        ),
        (
            "deprecated template field",
            vec!["--conf", driver_spark],
            Some(template("serviceAccount")),
            false,
        ),
        // No executor account anywhere: executors run as the driver's conf account.
        (
            "default, the driver's",
            vec!["--conf", driver_spark],
            None,
            true,
        ),
        (
            "executor conf spark",
            vec!["--conf", driver_spark, "--conf", executor_spark],
            None,
            true,
        ),
    ];
    for (case, extra, executor_template, allowed) in cases {
        let id = format!("executor-sa-{}", case.replace([' ', ','], "-"));
        let mut body = request(&id, &args(&extra));
        if let Some(template) = executor_template {
            body["executor_pod_template"] = template;
        }
        let writes = t.journal().len();
        let answer = t.submit_as(&body, "spark-only").await;
        if allowed {
            assert_eq!(
                answer.status,
                StatusCode::CREATED,
                "{case}: {}",
                answer.body
            );
        } else {
            assert_eq!(
                answer.status,
                StatusCode::FORBIDDEN,
                "{case}: {}",
                answer.body
            );
            assert_eq!(answer.body["error_code"], "FORBIDDEN");
            assert!(
                answer.body["message"].as_str().unwrap().contains("admin"),
                "{case}: {}",
                answer.body
            );
            assert_eq!(t.journal().len(), writes, "{case}: nothing is created");
        }
    }
}

#[tokio::test]
async fn missing_service_account_is_the_api_servers_403_and_leaves_nothing() {
    let t = TestApp::start().await;
    let body = request(
        "sa-1",
        &args(&[
            "--conf",
            "spark.kubernetes.authenticate.driver.serviceAccountName=nobody",
        ]),
    );
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "FORBIDDEN");
    t.assert_nothing_left(&built(&body)).await;
}

#[tokio::test]
async fn config_map_left_by_a_crash_is_reused_and_adopted() {
    let t = TestApp::start().await;
    let body = request("crash-1", &args(&[]));
    let built = built(&body);
    let conf_map = built.objects.last().unwrap().clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let left: ConfigMap = serde_json::from_value(conf_map).unwrap();
    let left = config_maps
        .create(&PostParams::default(), &left)
        .await
        .unwrap();
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    t.assert_complete(&built).await;
    let now = config_maps
        .get(left.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(now.metadata.uid, left.metadata.uid, "reused, not recreated");
}

#[tokio::test]
async fn repeat_after_a_partial_creation_repairs_what_is_missing() {
    let t = TestApp::start().await;
    let body = request("repair-1", &args(&[]));
    let built = built(&body);
    let first = t.submit(&body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    // As if the first attempt had crashed: no Service, a ConfigMap without owner.
    let services: Api<Service> = Api::namespaced(t.client(), "default");
    services
        .delete(
            built.objects[1]["metadata"]["name"].as_str().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let cm_name = built.objects.last().unwrap()["metadata"]["name"]
        .as_str()
        .unwrap();
    config_maps
        .patch(
            cm_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
        )
        .await
        .unwrap();
    let again = t.submit(&body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["duplicate_submission"], true);
    assert_eq!(again.body["driver_pod_uid"], first.body["driver_pod_uid"]);
    t.assert_complete(&built).await;
}

#[tokio::test]
async fn invalid_arguments_are_400_and_leave_nothing() {
    let t = TestApp::start().await;
    let body = request("bad-args-1", &args(&["--driver-memory", "lots"]));
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["error_code"], "INVALID_SPARK_SUBMIT_ARGS");
    assert_eq!(answer.body["submission_id"], "bad-args-1");
    let body = json!({"submission_id": "bad-template-1", "spark_submit_args": args(&[]),
        "driver_pod_template": {"kind": "Deployment"}});
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer.body["error_code"], "INVALID_POD_TEMPLATE");
    assert!(t.journal().is_empty());
}

#[tokio::test]
async fn argument_with_a_nul_byte_is_invalid_spark_submit_args_and_creates_nothing() {
    let t = TestApp::start().await;
    for (id, extra) in [
        (
            "nul-conf",
            ["--conf", "spark.kubernetes.driver.label.team=a\u{0}b"],
        ),
        ("nul-name", ["--conf", "spark.app.name=pi\u{0}"]),
    ] {
        let answer = t.submit(&request(id, &args(&extra))).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        assert_eq!(answer.body["error_code"], "INVALID_SPARK_SUBMIT_ARGS");
        assert_eq!(answer.body["submission_id"], id);
    }
    let mut app_arg = args(&[]);
    app_arg.push("100\u{0}".into());
    let answer = t.submit(&request("nul-app-arg", &app_arg)).await;
    assert_eq!(
        answer.body["error_code"], "INVALID_SPARK_SUBMIT_ARGS",
        "{}",
        answer.body
    );
    assert!(t.journal().is_empty(), "{:#?}", t.journal());
}

#[tokio::test]
async fn api_server_rejecting_a_field_from_the_arguments_is_invalid_spark_submit_args() {
    let t = TestApp::start().await;
    let body = request(
        "bad-label-1",
        &args(&["--conf", "spark.kubernetes.driver.label.team=not a label!"]),
    );
    let answer = t.submit(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.body["error_code"], "INVALID_SPARK_SUBMIT_ARGS");
    assert_eq!(answer.body["submission_id"], "bad-label-1");
    t.assert_nothing_left(&built(&body)).await;
}

#[tokio::test]
async fn api_server_rejecting_a_field_from_the_template_stays_invalid_pod_template() {
    let t = TestApp::start().await;
    let mut body = request(
        "bad-template-label-1",
        &args(&["--conf", "spark.kubernetes.driver.label.team=fine"]),
    );
    body["driver_pod_template"] = json!({
        "metadata": {"labels": {"owner": "not a label!"}},
        "spec": {"containers": [{"name": "spark-kubernetes-driver"}]}
    });
    let answer = t.submit(&body).await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        answer.body
    );
    assert_eq!(answer.body["error_code"], "INVALID_POD_TEMPLATE");
    t.assert_nothing_left(&built(&body)).await;
}

#[tokio::test]
async fn wrong_content_type_is_415_echoing_the_submission_id_of_a_readable_body() {
    let t = TestApp::start().await;
    let mut request = submit_request(&request("typed-1", &args(&[])), "", submit_support::TESTER);
    request
        .headers_mut()
        .insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    let answer = send(&t.app, request).await;
    assert_envelope(
        &answer.body,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    assert_eq!(answer.body["submission_id"], "typed-1");
    assert!(t.journal().is_empty());
}

fn assert_envelope(body: &Value, status: StatusCode, code: &str) {
    assert_eq!(body["status"], status.as_u16(), "{body}");
    assert_eq!(body["error_code"], code);
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
}

#[tokio::test]
async fn bad_requests_get_the_envelope() {
    let t = TestApp::start().await;
    let post = |content_type: &str, body: Body| {
        as_tester(
            Request::post("/api/v1/spark-submit")
                .header(header::CONTENT_TYPE, content_type)
                .body(body)
                .unwrap(),
        )
    };
    let answer = send(&t.app, post("application/json", Body::from("{not json"))).await;
    assert_envelope(&answer.body, StatusCode::BAD_REQUEST, "BAD_REQUEST");
    let answer = send(&t.app, post("text/plain", Body::from("{}"))).await;
    assert_envelope(
        &answer.body,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    let big = json!({"submission_id": "big", "spark_submit_args": ["x".repeat(1024 * 1024)]});
    let answer = send(
        &t.app,
        post("application/json", Body::from(big.to_string())),
    )
    .await;
    assert_envelope(
        &answer.body,
        StatusCode::PAYLOAD_TOO_LARGE,
        "PAYLOAD_TOO_LARGE",
    );
    // GET on the submit route is the list; a method no route serves is a 405.
    let put = Request::put("/api/v1/spark-submit")
        .body(Body::empty())
        .unwrap();
    let answer = send(&t.app, as_tester(put)).await;
    assert_envelope(
        &answer.body,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    );
    let answer = send(
        &t.app,
        as_tester(Request::get("/nope").body(Body::empty()).unwrap()),
    )
    .await;
    assert_envelope(&answer.body, StatusCode::NOT_FOUND, "NOT_FOUND");
    let answer = send(
        &t.app,
        submit_request(&request("q", &args(&[])), "?dryRun=maybe", "x"),
    )
    .await;
    assert_envelope(&answer.body, StatusCode::BAD_REQUEST, "BAD_REQUEST");
    // Every answer carries a request id.
    assert!(answer.headers.contains_key("x-request-id"));
    assert!(t.journal().is_empty());
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let t = TestApp::start().await;
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    assert_eq!(send(&t.app, get("/healthz")).await.status, StatusCode::OK);
    assert_eq!(send(&t.app, get("/readyz")).await.status, StatusCode::OK);
    let body = request("metrics-1", &args(&[]));
    assert_eq!(t.submit(&body).await.status, StatusCode::CREATED);
    assert_eq!(t.submit(&body).await.status, StatusCode::OK);
    let metrics = send(&t.app, as_tester(get("/metrics"))).await;
    let text = metrics.body.as_str().unwrap();
    assert!(
        text.contains(
            r#"submitter_http_requests_total{route="submit",method="POST",code="201"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"submitter_http_requests_total{route="submit",method="POST",code="200"} 1"#
        )
    );
    assert!(text.contains("submitter_duplicate_submissions_total 1"));
    assert!(text.contains("submitter_http_request_duration_seconds_bucket"));
    assert!(text.contains("submitter_http_requests_in_flight 0"));
    // Probes are not counted.
    assert!(!text.contains("healthz"));
}
