//! A repeat of a submission whose driver the synced watch caches show complete, answered
//! without building its objects: the driver's names follow from the submission id and the
//! arguments ([`DriverNames`]), the caches tell whether the driver is there.
//!
//! Only a 200 (the existing driver) is ever decided here. Anything else goes the full way,
//! which answers as a fresh submission would: a request that does not parse, a client the
//! policy refuses the namespace or a service account of the request, an id bound to another
//! driver or to a retention record, a driver the caches do not show complete. What the full
//! way checks and this one does not: the builder's checks beyond the argument grammar and the
//! pod security of the pods the request would create (both judge objects to be created, and a
//! repeat creates none); the existing driver is answered as it is.

use serde_json::Value;
use submission::api::SubmitRequest;
use submission::builder::{DriverNames, ParsedSubmission};

use super::execute::{self, Submitted};
use super::{DRIVER_SERVICE_ACCOUNT, executor_service_accounts};
use crate::caches::WatchCaches;
use crate::policy::Access;
use crate::record;
use crate::tls::PeerIdentity;

/// A complete driver of the request's submission, found in the caches.
#[derive(Debug)]
pub struct Repeat {
    pub names: DriverNames,
    pub submitted: Submitted,
}

/// The request's complete driver as the caches show it, if this is a repeat the policy allows
/// `peer`; `None`: the full way decides. `parsed` is the request's id and arguments, read once
/// for this check and the build alike.
pub fn find(
    caches: &WatchCaches,
    access: &Access,
    peer: Option<&PeerIdentity>,
    request: &SubmitRequest,
    parsed: &ParsedSubmission,
) -> Option<Repeat> {
    let id = &parsed.id;
    let names = parsed.names();
    let conf = &parsed.submission.conf;
    let mut accounts = vec![driver_service_account(
        conf.get(DRIVER_SERVICE_ACCOUNT),
        request.driver_pod_template.as_ref(),
    )];
    accounts.extend(executor_service_accounts(
        conf,
        request.executor_pod_template.as_ref(),
    ));
    access.may_submit(peer, &names.namespace, &accounts).ok()?;
    let id_text = id.as_str();
    // Bound to another driver (409) or to a retention record (answered from it): the full way.
    let ours = (names.namespace.as_str(), names.pod_name.as_str());
    if caches
        .pod_index
        .get(id_text)
        .iter()
        .any(|(namespace, pod)| (namespace.as_str(), pod.as_str()) != ours)
        || !caches
            .record_index
            .get(&record::submission_key(id_text))
            .is_empty()
    {
        return None;
    }
    let config_maps = names.config_maps(id, request.executor_pod_template.is_some());
    let submitted = execute::complete_in_cache_named(
        caches,
        &names.namespace,
        id_text,
        &names.pod_name,
        &config_maps,
    )?;
    Some(Repeat { names, submitted })
}

/// The account the built driver pod runs as, by Spark's `DriverKubernetesCredentialsFeatureStep`
/// over the template: `spark.kubernetes.authenticate.driver.serviceAccountName` when set (an
/// empty one clears it), else the driver template's `serviceAccountName`, else its deprecated
/// `serviceAccount` (the first present counts, even empty); `None` is `default`. What [`super::driver_service_account`] reads of the
/// built pod (a test holds the two together).
fn driver_service_account<'a>(
    configured: Option<&'a str>,
    template: Option<&'a Value>,
) -> Option<&'a str> {
    let account = match configured {
        Some(account) => Some(account),
        None => template
            .and_then(|template| template.get("spec"))
            .and_then(|spec| {
                // The template's nulls are dropped when it is loaded.
                let field = |name: &str| spec.get(name).filter(|value| !value.is_null());
                field("serviceAccountName").or_else(|| field("serviceAccount"))
            })
            .and_then(Value::as_str),
    };
    account.filter(|account| !account.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A cluster-mode submission of `name` with `confs`, as a CI pipeline sends it.
    fn spark_pi_args(name: &str, confs: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--master",
            "k8s://https://kubernetes.default.svc",
            "--deploy-mode",
            "cluster",
            "--class",
            "org.example.Main",
            "--name",
            name,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for conf in confs {
            args.extend(["--conf".to_owned(), (*conf).to_owned()]);
        }
        args.push("local:///opt/app.jar".to_owned());
        args
    }

    #[test]
    fn a_repeat_is_authorised_for_the_driver_account_the_build_gives_the_pod() {
        let args = |extra: &[&str]| -> Vec<String> {
            let mut confs = vec!["spark.kubernetes.container.image=spark:4.3.0"];
            confs.extend_from_slice(extra);
            spark_pi_args("accounts", &confs)
        };
        let conf = |account: &str| format!("{DRIVER_SERVICE_ACCOUNT}={account}");
        let template = |spec: Value| json!({"spec": spec});
        let cases: Vec<(Vec<String>, Option<Value>)> = vec![
            (args(&[]), None),
            (args(&[&conf("spark")]), None),
            (args(&[&conf("")]), None),
            (
                args(&[]),
                Some(template(json!({"serviceAccountName": "t"}))),
            ),
            (args(&[]), Some(template(json!({"serviceAccount": "old"})))),
            (
                args(&[]),
                Some(template(
                    json!({"serviceAccountName": "", "serviceAccount": "old"}),
                )),
            ),
            (
                args(&[]),
                Some(template(
                    json!({"serviceAccountName": "new", "serviceAccount": "old"}),
                )),
            ),
            (
                args(&[]),
                Some(template(
                    json!({"serviceAccountName": null, "serviceAccount": "old"}),
                )),
            ),
            (
                args(&[&conf("spark")]),
                Some(template(json!({"serviceAccountName": "t"}))),
            ),
            (
                args(&[&conf("")]),
                Some(template(json!({"serviceAccountName": "t"}))),
            ),
        ];
        for (args, template) in cases {
            let built = submission::builder::build_from_argv(
                &args,
                template.as_ref(),
                None,
                "accounts-1",
                0,
                "user",
            )
            .unwrap();
            let parsed = submission::argv::parse(&args).unwrap();
            let submission = submission::conf::Submission::from_args(&parsed);
            assert_eq!(
                driver_service_account(
                    submission.conf.get(DRIVER_SERVICE_ACCOUNT),
                    template.as_ref()
                ),
                super::super::driver_service_account(&built),
                "{args:?} {template:?}"
            );
        }
    }

    #[test]
    fn the_names_of_a_repeat_are_the_names_of_the_built_objects() {
        let args = spark_pi_args(
            "Names Of A Repeat",
            &[
                "spark.kubernetes.namespace=jobs",
                "spark.kubernetes.container.image=spark:4.3.0",
            ],
        );
        let executor = json!({"spec": {"containers": [{"name": "spark-kubernetes-executor"}]}});
        for (executor_template, named_pod) in [(None, false), (Some(&executor), true)] {
            let mut args = args.clone();
            if named_pod {
                args.splice(
                    0..0,
                    [
                        "--conf".to_owned(),
                        "spark.kubernetes.driver.pod.name=chosen".to_owned(),
                    ],
                );
            }
            let built = submission::builder::build_from_argv(
                &args,
                None,
                executor_template,
                "names-1",
                0,
                "user",
            )
            .unwrap();
            let parsed = ParsedSubmission::parse(&args, "names-1").unwrap();
            let names = parsed.names();
            assert_eq!(names.pod_name, built.identity.driver_pod_name);
            assert_eq!(names.namespace, built.identity.namespace);
            assert_eq!(names.app_name, built.identity.app_name);
            assert_eq!(names.app_id, built.identity.app_id);
            let built_config_maps: Vec<&str> = built
                .objects
                .iter()
                .filter(|object| object["kind"] == "ConfigMap")
                .map(|object| object["metadata"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                names.config_maps(&parsed.id, executor_template.is_some()),
                built_config_maps
            );
        }
    }
}
