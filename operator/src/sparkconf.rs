//! `spec.sparkConf` keys the operator refuses, as the widely used operator's validating webhook
//! does: keys that would take the driver out of the operator's control. A refused key is
//! reported in a status condition and a Warning event, and the application fails before anything
//! is submitted (see `state_machine`); fixing the spec reruns it.
//!
//! - `spark.kubernetes.namespace`, unless it is the application's own: the driver and its objects
//!   live in the application's namespace, where the operator looks for them and where the
//!   submitter's policy for the operator applies;
//! - every `spark.kubernetes.authenticate.*` key: the service accounts (set
//!   `spec.driver.serviceAccount` / `spec.executor.serviceAccount`, which the submitter's policy
//!   checks) and the credentials of the submission and the driver (tokens, token files, client
//!   certificates) are not the application's to choose;
//! - `spark.master` and `spark.kubernetes.driver.master`: the operator sets the master
//!   (`spec.driver.kubernetesMaster` for the driver's);
//! - the container-image keys: set `spec.image`, `spec.driver.image`, `spec.executor.image`.

use crate::crd::SparkApplicationSpec;

/// The status condition type listing refused keys.
pub const CONDITION_TYPE: &str = "SparkConfRefused";

/// The reason of the condition and of the Warning event.
pub const REASON: &str = "SparkConfRefused";

/// The namespace key, allowed only with the application's own namespace.
const NAMESPACE: &str = "spark.kubernetes.namespace";

/// Identity and credentials: every key under this prefix.
const AUTHENTICATE_PREFIX: &str = "spark.kubernetes.authenticate.";

/// The service-account keys (the rest of the prefix is credentials).
const SERVICE_ACCOUNTS: [&str; 2] = [
    "spark.kubernetes.authenticate.driver.serviceAccountName",
    "spark.kubernetes.authenticate.executor.serviceAccountName",
];

/// Exact keys and why each is refused.
const REFUSED: [(&str, &str); 5] = [
    ("spark.master", "the operator sets the master"),
    (
        "spark.kubernetes.driver.master",
        "the operator sets the master; use spec.driver.kubernetesMaster",
    ),
    (
        "spark.kubernetes.container.image",
        "use spec.image, spec.driver.image or spec.executor.image",
    ),
    (
        "spark.kubernetes.driver.container.image",
        "use spec.driver.image or spec.image",
    ),
    (
        "spark.kubernetes.executor.container.image",
        "use spec.executor.image or spec.image",
    ),
];

/// One refused key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedKey {
    /// The `sparkConf` key.
    pub key: String,
    /// Why, in words a user can act on.
    pub reason: &'static str,
}

/// The keys of `spec.sparkConf` the operator refuses for an application in `namespace`, in key
/// order.
pub fn refused_keys(spec: &SparkApplicationSpec, namespace: &str) -> Vec<RefusedKey> {
    spec.spark_conf
        .iter()
        .filter_map(|(key, value)| {
            let reason = refusal(key, value, namespace)?;
            Some(RefusedKey {
                key: key.clone(),
                reason,
            })
        })
        .collect()
}

fn refusal(key: &str, value: &str, namespace: &str) -> Option<&'static str> {
    if key == NAMESPACE {
        return (value != namespace)
            .then_some("the driver runs in the application's own namespace");
    }
    if SERVICE_ACCOUNTS.contains(&key) {
        return Some("use spec.driver.serviceAccount or spec.executor.serviceAccount");
    }
    if key.starts_with(AUTHENTICATE_PREFIX) {
        return Some("credentials are the operator's and the submitter's, not the application's");
    }
    REFUSED
        .iter()
        .find(|(refused, _)| *refused == key)
        .map(|(_, reason)| *reason)
}

/// `key (reason); key (reason)`, the condition's message.
pub fn message(refused: &[RefusedKey]) -> String {
    refused
        .iter()
        .map(|r| format!("{} ({})", r.key, r.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(conf: &[(&str, &str)]) -> SparkApplicationSpec {
        let conf: serde_json::Map<String, serde_json::Value> = conf
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        serde_json::from_value(serde_json::json!({
            "type": "Scala", "sparkVersion": "4.0.0", "mainApplicationFile": "local:///a.jar",
            "driver": {}, "executor": {}, "sparkConf": conf,
        }))
        .unwrap()
    }

    #[test]
    fn keys_that_escape_the_operator_are_refused_and_others_pass() {
        let refused = [
            ("spark.kubernetes.namespace", "elsewhere"),
            (
                "spark.kubernetes.authenticate.driver.serviceAccountName",
                "admin",
            ),
            (
                "spark.kubernetes.authenticate.executor.serviceAccountName",
                "admin",
            ),
            ("spark.kubernetes.authenticate.submission.oauthToken", "t"),
            ("spark.kubernetes.authenticate.oauthTokenFile", "/x"),
            (
                "spark.kubernetes.authenticate.driver.mounted.oauthTokenFile",
                "/x",
            ),
            ("spark.kubernetes.authenticate.driver.clientKeyFile", "/x"),
            ("spark.kubernetes.authenticate.executor.oauthToken", "t"),
            ("spark.master", "local[*]"),
            ("spark.kubernetes.driver.master", "https://other:6443"),
            ("spark.kubernetes.container.image", "evil:1"),
            ("spark.kubernetes.driver.container.image", "evil:1"),
            ("spark.kubernetes.executor.container.image", "evil:1"),
        ];
        for (key, value) in refused {
            let found = refused_keys(&spec_with(&[(key, value)]), "team");
            assert_eq!(
                found.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
                [key],
                "{key}"
            );
        }
        let allowed = [
            ("spark.kubernetes.namespace", "team"),
            ("spark.executor.memory", "2g"),
            ("spark.kubernetes.driver.label.team", "a"),
            ("spark.kubernetes.container.image.pullPolicy", "Always"),
            ("spark.kubernetes.driver.pod.name", "p"),
        ];
        for (key, value) in allowed {
            assert!(
                refused_keys(&spec_with(&[(key, value)]), "team").is_empty(),
                "{key}"
            );
        }
    }

    #[test]
    fn the_message_names_every_refused_key_in_order() {
        let spec = spec_with(&[
            ("spark.master", "local"),
            ("spark.kubernetes.namespace", "x"),
        ]);
        let found = refused_keys(&spec, "team");
        assert_eq!(
            message(&found),
            "spark.kubernetes.namespace (the driver runs in the application's own namespace); spark.master (the operator sets the master)"
        );
    }
}
