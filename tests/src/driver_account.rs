//! The drivers' service account, as a platform team grants it (the chart's `spark` account and
//! Role): kubesim enforces RBAC on what pods do, so a Spark driver without it cannot ask for
//! executors, exactly as on a real cluster.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

/// The account's name (the chart's `spark.serviceAccount.name` default).
pub const NAME: &str = "spark";

/// Could not create the account, its Role or its RoleBinding.
#[derive(Debug, thiserror::Error)]
#[error("cannot create the drivers' {what} in {namespace}")]
pub struct GrantDriverAccountError {
    what: &'static str,
    namespace: String,
    #[source]
    source: kube::Error,
}

/// Creates the `spark` ServiceAccount in `namespace` and grants it what a Spark driver and its
/// recovery agent do (the chart's rules for `recovery.store=kubernetes`).
pub async fn grant(client: &Client, namespace: &str) -> Result<(), GrantDriverAccountError> {
    grant_named(client, namespace, NAME).await
}

/// As [`grant`], for an account named `name` (the widely used operator's examples name
/// `spark-operator-spark`, its chart's account).
pub async fn grant_named(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), GrantDriverAccountError> {
    let fail = |what: &'static str| {
        move |source| GrantDriverAccountError {
            what,
            namespace: namespace.to_owned(),
            source,
        }
    };
    let meta = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    };
    let rule = |resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let account = ServiceAccount {
        metadata: meta.clone(),
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![
            rule(
                "pods",
                &[
                    "get",
                    "list",
                    "watch",
                    "create",
                    "patch",
                    "delete",
                    "deletecollection",
                ],
            ),
            rule(
                "configmaps",
                &["get", "create", "update", "deletecollection"],
            ),
            rule(
                "persistentvolumeclaims",
                &["get", "list", "create", "delete", "deletecollection"],
            ),
            // The driver deletes its Service by label when it ends.
            rule("services", &["deletecollection"]),
        ]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    };
    let post = PostParams::default();
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(&post, &account)
        .await
        .map_err(fail("ServiceAccount"))?;
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&post, &role)
        .await
        .map_err(fail("Role"))?;
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&post, &binding)
        .await
        .map_err(fail("RoleBinding"))?;
    Ok(())
}
