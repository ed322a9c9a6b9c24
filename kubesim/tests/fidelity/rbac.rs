//! HTTPS, authentication and RBAC as kube-rs sees them: the admin's client certificate, a
//! service account's token, anonymous requests, and the API server's own 403 text.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use kubesim::Cluster;
use serde_json::{Value, json};

use super::support::{Sim, eventually, start};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// An admin client over HTTPS, a namespace `team` with service account `runner`, and a Role
/// letting it read pods.
async fn team(sim: &Sim) -> Client {
    let admin = sim.cluster.https_client().await.expect("admin client");
    let nss: Api<Namespace> = Api::all(admin.clone());
    nss.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "team"}})),
    )
    .await
    .expect("namespace");
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    sas.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "runner"}})),
    )
    .await
    .expect("service account");
    let roles: Api<Role> = Api::namespaced(admin.clone(), "team");
    roles
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})),
        )
        .await
        .expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team");
    bindings
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "runner-reads-pods"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]})),
        )
        .await
        .expect("binding");
    admin
}

async fn token_client(sim: &Sim, token: &str) -> Client {
    Cluster::client_from_kubeconfig(&sim.cluster.token_kubeconfig(token, "team"))
        .await
        .expect("token client")
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_admin_certificate_works_over_https_and_is_cluster_admin() {
    let sim = start().await;
    assert!(sim.cluster.https_url.starts_with("https://127.0.0.1:"));
    let admin = sim.cluster.https_client().await.unwrap();
    let pods: Api<Pod> = Api::all(admin.clone());
    pods.list(&ListParams::default()).await.unwrap();
    let info = admin.apiserver_version().await.unwrap();
    assert_eq!(info.major, "1");
    // The kubeconfig carries the CA inline and the service's in-cluster address is signed.
    let kubeconfig: Value = yaml_serde::from_str(&sim.cluster.https_kubeconfig()).unwrap();
    assert!(
        kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let svc = sim
        .cluster
        .store
        .get_raw("", "services", "default", "kubernetes")
        .expect("default/kubernetes");
    assert_eq!(
        svc["spec"]["clusterIP"],
        kubesim::cluster::KUBERNETES_SERVICE_IP.to_string()
    );
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(
        svc["spec"]["ports"][0]["targetPort"],
        sim.cluster.https_addr.port()
    );
}

#[tokio::test]
async fn a_service_account_token_lists_what_its_role_grants_and_is_refused_the_rest() {
    let sim = start().await;
    let _admin = team(&sim).await;
    let token = sim.cluster.service_account_token("team", "runner").unwrap();
    let runner = token_client(&sim, &token).await;

    let pods: Api<Pod> = Api::namespaced(runner.clone(), "team");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let secrets: Api<Secret> = Api::namespaced(runner.clone(), "team");
    let (code, reason, message) =
        api_error(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        r#"secrets is forbidden: User "system:serviceaccount:team:runner" cannot list resource "secrets" in API group "" in the namespace "team""#
    );
    // The role is namespaced: the same read elsewhere is refused.
    let elsewhere: Api<Pod> = Api::namespaced(runner.clone(), "default");
    let (code, _, message) = api_error(elsewhere.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.ends_with(r#"in the namespace "default""#),
        "{message}"
    );
    // Writes are not granted.
    let (code, _, message) = api_error(
        pods.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.contains(r#"cannot create resource "pods""#),
        "{message}"
    );

    // The authorization journal names the identity, the verbs it used and what it got.
    let rows = sim.control("GET", "/authz", "").await;
    let of = |resource: &str, verb: &str, allowed: bool| {
        rows.as_array().unwrap().iter().any(|r| {
            r["user"] == "system:serviceaccount:team:runner"
                && r["resource"] == resource
                && r["verb"] == verb
                && r["allowed"] == allowed
        })
    };
    assert!(of("pods", "list", true));
    assert!(of("secrets", "list", false));
    assert!(of("pods", "create", false));
}

#[tokio::test]
async fn bad_and_missing_credentials_get_401_and_anonymous_403() {
    let sim = start().await;
    let _admin = team(&sim).await;
    let forged = token_client(&sim, "not-a-token").await;
    let pods: Api<Pod> = Api::namespaced(forged, "team");
    let (code, reason, _) = api_error(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (401, "Unauthorized"));

    // A token whose service account was deleted stops working.
    let token = sim.cluster.service_account_token("team", "runner").unwrap();
    let runner = token_client(&sim, &token).await;
    let admin = sim.cluster.https_client().await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin, "team");
    sas.delete("runner", &Default::default()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(runner, "team");
    let (code, _, _) = api_error(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 401);

    // No credentials over HTTPS: anonymous, allowed /version and nothing else.
    let mut kubeconfig: Value = yaml_serde::from_str(&sim.cluster.https_kubeconfig()).unwrap();
    kubeconfig["users"][0]["user"] = json!({});
    let anon = Cluster::client_from_kubeconfig(&yaml_serde::to_string(&kubeconfig).unwrap())
        .await
        .unwrap();
    anon.apiserver_version().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(anon, "team");
    let (code, _, message) = api_error(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(
        message,
        r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "team""#
    );
}

#[tokio::test]
async fn token_requests_and_access_reviews_answer_as_the_api_server() {
    let sim = start().await;
    let admin = team(&sim).await;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    let tr: TokenRequest = obj(
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3600}}),
    );
    let issued = sas
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "runner",
            &PostParams::default(),
            &tr,
        )
        .await
        .unwrap();
    let status = issued.status.expect("token issued");
    assert_eq!(status.token.split('.').count(), 3, "a JWT");

    let runner = token_client(&sim, &status.token).await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(runner);
    let can = |verb: &str, resource: &str| {
        obj::<SelfSubjectAccessReview>(json!({"spec": {"resourceAttributes":
            {"namespace": "team", "verb": verb, "resource": resource}}}))
    };
    let pods = reviews
        .create(&PostParams::default(), &can("list", "pods"))
        .await
        .unwrap();
    assert!(pods.status.unwrap().allowed);
    let secrets = reviews
        .create(&PostParams::default(), &can("get", "secrets"))
        .await
        .unwrap();
    assert!(!secrets.status.unwrap().allowed);

    // A binding to a role that does not exist says so in the refusal.
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team");
    bindings
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "dangling"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gone"},
                "subjects": [{"kind": "ServiceAccount", "name": "runner"}]})),
        )
        .await
        .unwrap();
    let runner = token_client(&sim, &status.token).await;
    let secrets: Api<Secret> = Api::namespaced(runner, "team");
    let (_, _, message) = api_error(secrets.get("s").await.unwrap_err());
    assert!(
        message.ends_with(r#": RBAC: role.rbac.authorization.k8s.io "gone" not found"#),
        "{message}"
    );
    assert!(
        message.starts_with(r#"secrets "s" is forbidden"#),
        "{message}"
    );
}

#[tokio::test]
async fn the_aggregated_view_role_reads_pods_but_not_secrets() {
    let sim = start().await;
    let admin = team(&sim).await;
    // The aggregation controller fills `view` from the roles labelled aggregate-to-view.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    eventually(10, || async {
        let view = roles.get("view").await.ok()?;
        view.rules.filter(|r| !r.is_empty()).map(|_| ())
    })
    .await;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    sas.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "viewer"}})),
    )
    .await
    .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team");
    bindings
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "viewer-views"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": "team"}]})),
        )
        .await
        .unwrap();
    let token = sim.cluster.service_account_token("team", "viewer").unwrap();
    let viewer = token_client(&sim, &token).await;
    let pods: Api<Pod> = Api::namespaced(viewer.clone(), "team");
    pods.list(&ListParams::default()).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(viewer, "team");
    assert_eq!(
        api_error(secrets.list(&ListParams::default()).await.unwrap_err()).0,
        403
    );
}

#[tokio::test]
async fn impersonation_acts_as_the_named_user_when_the_requester_may_impersonate() {
    let sim = start().await;
    let _admin = team(&sim).await;
    let as_runner = [("Impersonate-User", "system:serviceaccount:team:runner")];
    // The plain-HTTP listener's user is privileged: it may impersonate, and then is the runner.
    let pods = sim
        .request("GET", "/api/v1/namespaces/team/pods", &as_runner, b"")
        .await;
    assert_eq!(pods.code, 200);
    let secrets = sim
        .request("GET", "/api/v1/namespaces/team/secrets", &as_runner, b"")
        .await;
    assert_eq!(secrets.code, 403);
    let status: Value = serde_json::from_slice(&secrets.body).unwrap();
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains(r#"User "system:serviceaccount:team:runner" cannot list resource "secrets""#),
        "{status}"
    );
    // The runner itself may not impersonate anyone.
    let token = sim.cluster.service_account_token("team", "runner").unwrap();
    let bearer = format!("Bearer {token}");
    let refused = sim
        .request(
            "GET",
            "/api/v1/namespaces/team/pods",
            &[
                ("Authorization", bearer.as_str()),
                ("Impersonate-User", "kubernetes-admin"),
            ],
            b"",
        )
        .await;
    assert_eq!(refused.code, 403);
    let status: Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(
        status["message"],
        r#"users "kubernetes-admin" is forbidden: User "system:serviceaccount:team:runner" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
}
