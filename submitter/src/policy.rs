//! Which client identity may submit into which namespace, with which service account.
//!
//! The file is YAML:
//!
//! ```yaml
//! clients:
//!   - identity: spark-operator.spark-system.svc   # a DNS or URI SAN of the client cert, or its CN
//!     namespaces: ["spark-jobs", "team-a"]        # or ["*"]
//!     serviceAccounts: ["spark"]                  # or ["*"]
//!     podSecurity:                                # optional; absent: baseline
//!       level: baseline                           # or privileged: no check at all
//!       allow: [hostPath]                         # baseline controls lifted for this entry
//!       capabilities: [NET_ADMIN]                 # capabilities allowed beyond baseline's
//! ```
//!
//! Pod security ([`crate::pod_security`]): the pods a submission makes must pass the baseline Pod
//! Security Standard, except for what the entries that authorise it relax. Entries add up per
//! service account, and a relaxation holds only if it holds for every service account the
//! submission's pods run as (an entry for `admin` that allows `hostPath` does not let a
//! submission running as `spark` use one).
//!
//! Decisions: identities match exactly (no wildcards in identities: a typo must not open the
//! door); namespace and service account must be allowed by the **same** entry; an identity may
//! appear in several entries, which add up; unknown keys and missing lists are load errors, since
//! a misspelt `serviceAccount` would otherwise silently deny, or worse, mean something else.
//! A submission without a service account runs as `default`, as Spark's driver does.
//!
//! [`Access`] is what the service checks per request: the policy (or `--insecure-dev`) applied
//! to the client's certificate identities, for submitting (namespace and service accounts) and
//! for reading (namespace only).
//!
//! Pure: parsing and deciding. `Policy::load` is the only I/O.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use thiserror::Error;

use crate::pod_security::{self, Control, Exceptions};
use crate::tls::PeerIdentity;

/// The identity an `--insecure-dev` client gets (no certificates there): a policy entry for
/// `"*"` says what such clients may do.
pub const INSECURE_DEV_IDENTITY: &str = "*";

/// The service account Kubernetes gives a pod that names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The wildcard that allows every namespace or service account.
pub const ANY: &str = "*";

/// A parsed, validated policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

/// One `clients` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub identity: String,
    pub namespaces: Scope,
    pub service_accounts: Scope,
    /// What the pods of submissions this entry authorises may ask for beyond baseline.
    pub pod_security: Exceptions,
}

/// The names an entry allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `"*"` was listed.
    Any,
    Only(BTreeSet<String>),
}

impl Scope {
    fn allows(&self, name: &str) -> bool {
        match self {
            Scope::Any => true,
            Scope::Only(names) => names.contains(name),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    clients: Vec<ClientEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClientEntry {
    identity: String,
    namespaces: Vec<String>,
    service_accounts: Vec<String>,
    #[serde(default)]
    pod_security: Option<PodSecurityEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodSecurityEntry {
    #[serde(default)]
    level: Level,
    #[serde(default)]
    allow: Vec<Control>,
    #[serde(default)]
    capabilities: Vec<String>,
}

/// The Pod Security Standard level an entry starts from.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
enum Level {
    #[default]
    Baseline,
    Privileged,
}

impl PodSecurityEntry {
    fn exceptions(self) -> Result<Exceptions, String> {
        if let Some(bad) = self
            .capabilities
            .iter()
            .find(|c| c.is_empty() || !c.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        {
            return Err(format!(
                "capability {bad:?} is not a capability name like NET_ADMIN"
            ));
        }
        if self.level == Level::Privileged {
            if !self.allow.is_empty() || !self.capabilities.is_empty() {
                return Err(
                    "level privileged already allows everything; drop allow and capabilities"
                        .into(),
                );
            }
            return Ok(Exceptions::privileged());
        }
        Ok(Exceptions {
            controls: self.allow.into_iter().collect(),
            capabilities: self.capabilities.into_iter().collect(),
        })
    }
}

/// Why a policy could not be loaded.
#[derive(Debug, Error)]
pub enum LoadPolicyError {
    #[error("cannot read policy file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("policy is not valid YAML of the expected shape")]
    Parse {
        #[source]
        source: yaml_serde::Error,
    },
    #[error("client entry {index}: {reason}")]
    Invalid { index: usize, reason: String },
}

impl LoadPolicyError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadPolicyError::Read { .. } => "read",
            LoadPolicyError::Parse { .. } => "parse",
            LoadPolicyError::Invalid { .. } => "invalid",
        }
    }
}

/// Why a submission was not authorised.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// No identity at all (no client certificate): 401.
    #[error("no client identity was presented")]
    NoIdentity,
    /// None of the client's identities is in the policy: 403.
    #[error("client identity is not known to the policy")]
    UnknownIdentity,
    /// Allowed to submit, but the pods ask for what pod security denies this client: 403.
    #[error("the submission's pods ask for what this client may not: {}", violations.join("; "))]
    PodSecurity { violations: Vec<String> },
    /// Known, but no entry allows the namespace: 403.
    #[error("client may not submit into namespace {namespace:?}")]
    NamespaceDenied { namespace: String },
    /// An entry allows the namespace, but none allows it with this service account: 403.
    #[error("client may not use service account {service_account:?} in namespace {namespace:?}")]
    ServiceAccountDenied {
        namespace: String,
        service_account: String,
    },
}

impl PolicyError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyError::NoIdentity => "no_identity",
            PolicyError::UnknownIdentity => "unknown_identity",
            PolicyError::NamespaceDenied { .. } => "namespace_denied",
            PolicyError::ServiceAccountDenied { .. } => "service_account_denied",
            PolicyError::PodSecurity { .. } => "pod_security",
        }
    }
}

impl Policy {
    /// Reads and parses a policy file.
    pub fn load(path: &Path) -> Result<Policy, LoadPolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadPolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&text)
    }

    /// Parses and validates policy YAML.
    pub fn parse(text: &str) -> Result<Policy, LoadPolicyError> {
        let file: PolicyFile =
            yaml_serde::from_str(text).map_err(|source| LoadPolicyError::Parse { source })?;
        let rules = file
            .clients
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let invalid = |reason: String| LoadPolicyError::Invalid { index, reason };
                let identity = entry.identity.trim();
                if identity.is_empty() {
                    return Err(invalid("identity is empty".into()));
                }
                if identity != entry.identity {
                    return Err(invalid("identity has surrounding whitespace".into()));
                }
                let namespaces = scope(entry.namespaces, is_dns_label)
                    .map_err(|reason| invalid(format!("namespaces: {reason}")))?;
                let service_accounts = scope(entry.service_accounts, is_dns_subdomain)
                    .map_err(|reason| invalid(format!("serviceAccounts: {reason}")))?;
                let pod_security = entry
                    .pod_security
                    .map(PodSecurityEntry::exceptions)
                    .transpose()
                    .map_err(|reason| invalid(format!("podSecurity: {reason}")))?
                    .unwrap_or_default();
                Ok(Rule {
                    identity: entry.identity,
                    namespaces,
                    service_accounts,
                    pod_security,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Policy { rules })
    }

    /// The entries, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether a client presenting `identities` (its certificate's DNS SANs, URI SANs and CN) may
    /// submit into `namespace` as `service_account` (`None`: `default`).
    pub fn authorize(
        &self,
        identities: &[String],
        namespace: &str,
        service_account: Option<&str>,
    ) -> Result<(), PolicyError> {
        if identities.is_empty() {
            return Err(PolicyError::NoIdentity);
        }
        let service_account = service_account.unwrap_or(DEFAULT_SERVICE_ACCOUNT);
        let mut known = false;
        let mut namespace_allowed = false;
        for rule in self
            .rules
            .iter()
            .filter(|rule| identities.contains(&rule.identity))
        {
            known = true;
            if !rule.namespaces.allows(namespace) {
                continue;
            }
            namespace_allowed = true;
            if rule.service_accounts.allows(service_account) {
                return Ok(());
            }
        }
        Err(if namespace_allowed {
            PolicyError::ServiceAccountDenied {
                namespace: namespace.to_owned(),
                service_account: service_account.to_owned(),
            }
        } else if known {
            PolicyError::NamespaceDenied {
                namespace: namespace.to_owned(),
            }
        } else {
            PolicyError::UnknownIdentity
        })
    }
}

impl Policy {
    /// What the pods of a submission by `identities` into `namespace`, running as
    /// `service_accounts` (`None`: `default`; none: `default`), may ask for beyond baseline:
    /// for each account, what the entries allowing it add up to; across accounts, what they all
    /// allow.
    pub fn pod_security(
        &self,
        identities: &[String],
        namespace: &str,
        service_accounts: &[Option<&str>],
    ) -> Exceptions {
        let default_account = [None];
        let accounts = if service_accounts.is_empty() {
            &default_account[..]
        } else {
            service_accounts
        };
        let per_account = accounts.iter().map(|account| {
            let account = account.unwrap_or(DEFAULT_SERVICE_ACCOUNT);
            self.rules
                .iter()
                .filter(|rule| {
                    identities.contains(&rule.identity)
                        && rule.namespaces.allows(namespace)
                        && rule.service_accounts.allows(account)
                })
                .fold(Exceptions::baseline(), |sum, rule| {
                    sum.union(&rule.pod_security)
                })
        });
        per_account
            .reduce(|all, next| all.intersection(&next))
            .unwrap_or_default()
    }

    /// Whether a client presenting `identities` may read about drivers in `namespace` (status
    /// look-ups): some entry of one of its identities allows the namespace, whatever its
    /// service accounts, since reading runs nothing as anyone.
    pub fn authorize_namespace(
        &self,
        identities: &[String],
        namespace: &str,
    ) -> Result<(), PolicyError> {
        if identities.is_empty() {
            return Err(PolicyError::NoIdentity);
        }
        let mut known = false;
        for rule in self
            .rules
            .iter()
            .filter(|rule| identities.contains(&rule.identity))
        {
            known = true;
            if rule.namespaces.allows(namespace) {
                return Ok(());
            }
        }
        Err(if known {
            PolicyError::NamespaceDenied {
                namespace: namespace.to_owned(),
            }
        } else {
            PolicyError::UnknownIdentity
        })
    }
}

impl Policy {
    /// Whether the policy has an entry for one of `identities` at all.
    pub fn knows(&self, identities: &[String]) -> Result<(), PolicyError> {
        if identities.is_empty() {
            return Err(PolicyError::NoIdentity);
        }
        if self
            .rules
            .iter()
            .any(|rule| identities.contains(&rule.identity))
        {
            Ok(())
        } else {
            Err(PolicyError::UnknownIdentity)
        }
    }
}

/// Who may submit what, per request.
#[derive(Debug, Clone)]
pub enum Access {
    /// mTLS: the client certificate's identities against the policy.
    Policy(Arc<Policy>),
    /// `--insecure-dev`: no certificates; every client is [`INSECURE_DEV_IDENTITY`], checked
    /// against the policy if one was given, else allowed everything.
    InsecureDev(Option<Arc<Policy>>),
}

impl Access {
    /// The policy and the identities it judges, or `None` when everything is allowed.
    fn judged(&self, peer: Option<&PeerIdentity>) -> Option<(&Policy, Vec<String>)> {
        match self {
            Access::Policy(policy) => {
                Some((policy, peer.map(|p| p.names().to_vec()).unwrap_or_default()))
            }
            Access::InsecureDev(None) => None,
            Access::InsecureDev(Some(policy)) => {
                Some((policy, vec![INSECURE_DEV_IDENTITY.to_owned()]))
            }
        }
    }

    /// Whether the request carries an identity at all (`--insecure-dev` always does: `"*"`).
    pub fn identified(&self, peer: Option<&PeerIdentity>) -> Result<(), PolicyError> {
        match self {
            Access::Policy(_) if peer.is_none_or(|p| p.names().is_empty()) => {
                Err(PolicyError::NoIdentity)
            }
            _ => Ok(()),
        }
    }

    /// Whether `peer` may submit into `namespace` with every one of `service_accounts` (the
    /// driver's and the executors' effective accounts; `None` is `default`).
    pub fn may_submit(
        &self,
        peer: Option<&PeerIdentity>,
        namespace: &str,
        service_accounts: &[Option<&str>],
    ) -> Result<(), PolicyError> {
        let Some((policy, identities)) = self.judged(peer) else {
            return Ok(());
        };
        if service_accounts.is_empty() {
            return policy.authorize(&identities, namespace, None);
        }
        service_accounts
            .iter()
            .try_for_each(|account| policy.authorize(&identities, namespace, *account))
    }

    /// Whether the pods a submission makes (`pods`: what they are, the pod) and its conf pass pod
    /// security for `peer` in `namespace` as `service_accounts`; call after [`Self::may_submit`].
    pub fn may_run<'a>(
        &self,
        peer: Option<&PeerIdentity>,
        namespace: &str,
        service_accounts: &[Option<&str>],
        pods: &[(&str, &serde_json::Value)],
        conf: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), PolicyError> {
        // Without a policy (`--insecure-dev` alone) everything is allowed, pods included.
        let Some((policy, identities)) = self.judged(peer) else {
            return Ok(());
        };
        let exceptions = policy.pod_security(&identities, namespace, service_accounts);
        let mut violations: Vec<String> = pods
            .iter()
            .flat_map(|(what, pod)| pod_security::check_pod(what, pod, &exceptions))
            .chain(pod_security::check_conf(conf, &exceptions))
            .map(|violation| violation.to_string())
            .collect();
        if violations.is_empty() {
            return Ok(());
        }
        violations.dedup();
        Err(PolicyError::PodSecurity { violations })
    }

    /// Whether `peer` may list submissions: an identity the policy knows, which then sees the
    /// namespaces its entries allow ([`Self::may_read`] per item).
    pub fn may_list(&self, peer: Option<&PeerIdentity>) -> Result<(), PolicyError> {
        let Some((policy, identities)) = self.judged(peer) else {
            return Ok(());
        };
        policy.knows(&identities)
    }

    /// Whether `peer` may read about drivers in `namespace` (status look-ups).
    pub fn may_read(
        &self,
        peer: Option<&PeerIdentity>,
        namespace: &str,
    ) -> Result<(), PolicyError> {
        let Some((policy, identities)) = self.judged(peer) else {
            return Ok(());
        };
        policy.authorize_namespace(&identities, namespace)
    }
}

fn scope(names: Vec<String>, valid: fn(&str) -> bool) -> Result<Scope, String> {
    if names.is_empty() {
        return Err("empty list allows nothing; list names or \"*\"".into());
    }
    if let Some(bad) = names.iter().find(|name| *name != ANY && !valid(name)) {
        return Err(format!("{bad:?} is not a valid name"));
    }
    if names.iter().any(|name| name == ANY) {
        return Ok(Scope::Any);
    }
    Ok(Scope::Only(names.into_iter().collect()))
}

/// RFC 1123 label: what a namespace name must be.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// RFC 1123 subdomain: what a service account name must be.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
clients:
  - identity: spark-operator.spark-system.svc
    namespaces: ["spark-jobs", "team-a"]
    serviceAccounts: ["spark"]
  - identity: spiffe://cluster.local/ns/ci/sa/runner
    namespaces: ["*"]
    serviceAccounts: ["default", "ci"]
  - identity: admin
    namespaces: ["*"]
    serviceAccounts: ["*"]
  - identity: spark-operator.spark-system.svc
    namespaces: ["team-b"]
    serviceAccounts: ["*"]
"#;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn kind(result: Result<(), PolicyError>) -> &'static str {
        result.err().map_or("ok", |error| error.kind())
    }

    #[test]
    fn authorisation_table() {
        let policy = Policy::parse(POLICY).unwrap();
        let operator = ids(&["spark-operator.spark-system.svc"]);
        let ci = ids(&["runner-cn", "spiffe://cluster.local/ns/ci/sa/runner"]);
        let cases: &[(&[String], &str, Option<&str>, &str)] = &[
            (&operator, "spark-jobs", Some("spark"), "ok"),
            (&operator, "team-a", Some("spark"), "ok"),
            (&operator, "team-a", None, "service_account_denied"),
            (&operator, "team-a", Some("admin"), "service_account_denied"),
            (&operator, "prod", Some("spark"), "namespace_denied"),
            // The fourth entry adds team-b with any service account, not to team-a.
            (&operator, "team-b", Some("anything"), "ok"),
            (&ci, "whatever", None, "ok"),
            (&ci, "whatever", Some("ci"), "ok"),
            (&ci, "whatever", Some("spark"), "service_account_denied"),
            (&ids(&["admin"]), "kube-system", Some("x"), "ok"),
            (
                &ids(&["stranger"]),
                "spark-jobs",
                Some("spark"),
                "unknown_identity",
            ),
            (&[], "spark-jobs", Some("spark"), "no_identity"),
        ];
        for (identities, namespace, account, expected) in cases {
            assert_eq!(
                kind(policy.authorize(identities, namespace, *account)),
                *expected,
                "{identities:?} {namespace} {account:?}"
            );
        }
    }

    #[test]
    fn identities_match_exactly() {
        let policy = Policy::parse(POLICY).unwrap();
        let near = ids(&["SPARK-OPERATOR.spark-system.svc", "spark-operator"]);
        assert_eq!(
            kind(policy.authorize(&near, "team-a", Some("spark"))),
            "unknown_identity"
        );
    }

    #[test]
    fn bad_files_are_refused_with_their_kind() {
        let cases = [
            ("clients: [{identity: a, namespaces: [x]}]", "parse"),
            (
                "clients: [{identity: a, namespaces: [x], serviceAccount: [y]}]",
                "parse",
            ),
            (
                "clients: [{identity: a, namespaces: [x], serviceAccounts: [y]}]\nextra: 1",
                "parse",
            ),
            (
                "clients: [{identity: '', namespaces: [x], serviceAccounts: [y]}]",
                "invalid",
            ),
            (
                "clients: [{identity: ' a', namespaces: [x], serviceAccounts: [y]}]",
                "invalid",
            ),
            (
                "clients: [{identity: a, namespaces: [], serviceAccounts: [y]}]",
                "invalid",
            ),
            (
                "clients: [{identity: a, namespaces: [Bad_NS], serviceAccounts: [y]}]",
                "invalid",
            ),
            (
                "clients: [{identity: a, namespaces: [x], serviceAccounts: ['-y']}]",
                "invalid",
            ),
            ("not yaml: [", "parse"),
        ];
        for (text, expected) in cases {
            let error = Policy::parse(text).unwrap_err();
            assert_eq!(error.kind(), expected, "{text}");
        }
    }

    #[test]
    fn empty_client_list_denies_everyone() {
        let policy = Policy::parse("clients: []").unwrap();
        assert_eq!(
            kind(policy.authorize(&ids(&["a"]), "ns", None)),
            "unknown_identity"
        );
    }

    #[test]
    fn dotted_service_account_names_are_valid() {
        let policy =
            Policy::parse("clients: [{identity: a, namespaces: [x], serviceAccounts: [a.b]}]")
                .unwrap();
        assert_eq!(kind(policy.authorize(&ids(&["a"]), "x", Some("a.b"))), "ok");
    }

    #[test]
    fn load_reports_a_missing_file_as_read() {
        let error = Policy::load(Path::new("/nonexistent/policy.yaml")).unwrap_err();
        assert_eq!(error.kind(), "read");
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        fn name() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["a", "b", "c", "spark", "default"]).prop_map(str::to_owned)
        }

        fn names() -> impl Strategy<Value = Vec<String>> {
            prop_oneof![
                prop::collection::vec(name(), 1..3),
                Just(vec![ANY.to_owned()]),
            ]
        }

        fn entries() -> impl Strategy<Value = Vec<(String, Vec<String>, Vec<String>)>> {
            prop::collection::vec(
                (
                    prop::sample::select(vec!["id1", "id2", "id3"]).prop_map(str::to_owned),
                    names(),
                    names(),
                ),
                0..5,
            )
        }

        fn yaml(entries: &[(String, Vec<String>, Vec<String>)]) -> String {
            let mut text = String::from("clients:\n");
            for (identity, namespaces, accounts) in entries {
                text.push_str(&format!(
                    "  - identity: {identity}\n    namespaces: {namespaces:?}\n    serviceAccounts: {accounts:?}\n"
                ));
            }
            text
        }

        proptest! {
            /// The parsed policy agrees with a direct reading of the entries.
            #[test]
            fn agrees_with_a_naive_model(
                entries in entries(),
                identities in prop::collection::vec(prop::sample::select(vec!["id1", "id2", "id9"]).prop_map(str::to_owned), 0..3),
                namespace in name(),
                account in prop::option::of(name()),
            ) {
                let policy = Policy::parse(&yaml(&entries)).unwrap();
                let effective = account.clone().unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned());
                let allows = |list: &Vec<String>, name: &String| list.contains(name) || list.iter().any(|n| n == ANY);
                let expected = !identities.is_empty() && entries.iter().any(|(identity, namespaces, accounts)| {
                    identities.contains(identity) && allows(namespaces, &namespace) && allows(accounts, &effective)
                });
                let result = policy.authorize(&identities, &namespace, account.as_deref());
                prop_assert_eq!(result.is_ok(), expected, "{:?}", result);
            }

            /// An identity that is in no entry is never let in.
            #[test]
            fn strangers_never_pass(entries in entries(), namespace in name(), account in prop::option::of(name())) {
                let policy = Policy::parse(&yaml(&entries)).unwrap();
                let result = policy.authorize(&["stranger".to_owned()], &namespace, account.as_deref());
                prop_assert_eq!(result, Err(PolicyError::UnknownIdentity));
            }
        }
    }
}
