//! Authentication: who a request comes from.
//!
//! - A client certificate signed by the cluster CA (HTTPS): its common name is the user, its
//!   organisations the groups (the kubeconfig's admin is `kubernetes-admin` in
//!   `system:masters`).
//! - A service-account token: a JWT kubesim signed (HS256), naming
//!   `system:serviceaccount:NS:NAME` with groups `system:serviceaccounts`,
//!   `system:serviceaccounts:NS`, `system:authenticated`. It is valid while it has not expired,
//!   names one of the API server's audiences, its ServiceAccount still exists with the same uid
//!   and, for a token bound to a pod, that pod still exists with the same uid (as the real API
//!   server checks).
//! - A node token (`kubesim-node/NODE/NS/POD`, [`crate::node_token`]): kubesim's own credential
//!   for the kubeconfig it hands pods' processes. It stays privileged (`system:masters`) so
//!   processes written before RBAC keep working; RBAC applies to service-account tokens.
//! - No credentials: `system:anonymous` over HTTPS; over the plain-HTTP listener (the old
//!   insecure port) `system:unsecured` in `system:masters`, as Kubernetes' insecure port was.
//!
//! Any other bearer token is refused with 401, as the API server does.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::meta;
use crate::meta::At;
use crate::store::Store;
use crate::tls::{MASTERS_GROUP, Secure};

/// The issuer (and default audience) of service-account tokens, as kubeadm configures it.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Anonymous requests are in this group.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";

/// The shortest lifetime a TokenRequest may ask for (the API server's minimum).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The lifetime of a TokenRequest that names none.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The lifetime the kubelet asks for a pod's projected token (an hour and 7 s: the API
/// server's marker for "a kubelet's default token").
pub const KUBELET_EXPIRATION_SECONDS: i64 = 3607;
/// How long a token asked for with [`KUBELET_EXPIRATION_SECONDS`] really lives: the API server
/// (`--service-account-extend-token-expiration`, on by default) extends pod-bound kubelet
/// tokens for the API server's own audience to a year and marks the requested expiry as
/// `kubernetes.io/warnafter`, so clients that never reread the file keep working while the
/// kubelet still rotates the token hourly.
pub const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:ns:sa`, `kubernetes-admin`, ...).
    pub name: String,
    /// Uid (the ServiceAccount's for service-account tokens), may be empty.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// The node the credential belongs to (node tokens and pod-bound tokens): requests from a
    /// partitioned node's processes are held.
    pub node: Option<String>,
    /// Claims a bound token carries (`authentication.kubernetes.io/pod-name`, ...), as
    /// `UserInfo.extra`.
    pub extra: Vec<(String, String)>,
}

impl UserInfo {
    /// Whether authorization is bypassed (`system:masters`).
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS_GROUP)
    }

    /// The unauthenticated user.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// The user of the plain-HTTP listener.
    pub fn unsecured() -> Self {
        Self {
            name: "system:unsecured".into(),
            groups: vec![MASTERS_GROUP.into(), AUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// The identity of a service account (what its tokens authenticate as).
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            name: service_account_user(namespace, name),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
            ..Self::default()
        }
    }

    /// As `UserInfo` in a TokenReview or SelfSubjectReview status.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            let extra: serde_json::Map<String, Value> = self
                .extra
                .iter()
                .map(|(k, val)| (k.clone(), json!([val])))
                .collect();
            v["extra"] = Value::Object(extra);
        }
        v
    }
}

/// `system:serviceaccount:NS:NAME`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The object a token is bound to (`TokenRequest.spec.boundObjectRef`): a pod, with the node
/// it runs on when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// The node's name, if the pod is scheduled.
    pub node: Option<String>,
}

/// What to issue a service-account token for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub service_account: String,
    /// Audiences (empty: the API server's own).
    pub audiences: Vec<String>,
    /// Lifetime in seconds (at least [`MIN_EXPIRATION_SECONDS`]).
    pub expiration_seconds: i64,
    /// The pod the token is bound to, if any: the token dies with the pod.
    pub bound_pod: Option<BoundPod>,
}

/// A token and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The bearer token.
    pub token: String,
    /// Its expiry, RFC 3339 (`TokenRequest.status.expirationTimestamp`).
    pub expiration_timestamp: String,
}

/// Why a token could not be issued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    /// The ServiceAccount does not exist.
    #[error("serviceaccounts \"{name}\" not found")]
    ServiceAccountNotFound {
        /// Its name.
        name: String,
    },
    /// The requested lifetime is shorter than the minimum.
    #[error("may not specify a duration less than 10 minutes (asked for {seconds} s)")]
    TooShort {
        /// What was asked for.
        seconds: i64,
    },
}

impl IssueError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ServiceAccountNotFound { .. } => "service_account_not_found",
            Self::TooShort { .. } => "too_short",
        }
    }
}

/// Issues and checks credentials.
pub struct Authenticator {
    key: ring::hmac::Key,
    store: Arc<Store>,
    verified: std::sync::Mutex<std::collections::HashMap<String, Arc<Claims>>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Authenticator {
    /// An authenticator with a fresh signing key, checking tokens against `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .expect("the system random source works");
        Self {
            key,
            store,
            verified: std::sync::Mutex::default(),
        }
    }

    /// Issues a service-account token (what TokenRequest and the kubelet's projected token
    /// volume return).
    pub fn issue(&self, spec: &TokenSpec) -> Result<IssuedToken, IssueError> {
        self.issue_at(spec, now_unix())
    }

    fn issue_at(&self, spec: &TokenSpec, now: i64) -> Result<IssuedToken, IssueError> {
        if spec.expiration_seconds < MIN_EXPIRATION_SECONDS {
            return Err(IssueError::TooShort {
                seconds: spec.expiration_seconds,
            });
        }
        let sa = self
            .store
            .get_raw(
                "",
                "serviceaccounts",
                &spec.namespace,
                &spec.service_account,
            )
            .ok_or_else(|| IssueError::ServiceAccountNotFound {
                name: spec.service_account.clone(),
            })?;
        let audiences = if spec.audiences.is_empty() {
            vec![ISSUER.to_string()]
        } else {
            spec.audiences.clone()
        };
        let extended = spec.bound_pod.is_some()
            && spec.expiration_seconds == KUBELET_EXPIRATION_SECONDS
            && audiences.iter().all(|a| a == ISSUER);
        // What the answer says (the requested lifetime) and what the token carries.
        let reported_exp = now + spec.expiration_seconds;
        let exp = if extended {
            now + EXTENDED_EXPIRATION_SECONDS
        } else {
            reported_exp
        };
        let mut k8s = json!({
            "namespace": spec.namespace,
            "serviceaccount": {"name": spec.service_account, "uid": meta::uid(&sa)},
        });
        if let Some(pod) = &spec.bound_pod {
            k8s["pod"] = json!({"name": pod.name, "uid": pod.uid});
            if let Some(node) = &pod.node {
                k8s["node"] = json!({"name": node});
            }
        }
        if extended {
            k8s["warnafter"] = json!(reported_exp);
        }
        let claims = json!({
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "nbf": now,
            "iss": ISSUER,
            "jti": meta::new_uid(),
            "kubernetes.io": k8s,
            "sub": service_account_user(&spec.namespace, &spec.service_account),
        });
        let header = b64url(br#"{"alg":"HS256","kid":"kubesim","typ":"JWT"}"#);
        let body = b64url(claims.to_string().as_bytes());
        let signing_input = format!("{header}.{body}");
        let sig = ring::hmac::sign(&self.key, signing_input.as_bytes());
        Ok(IssuedToken {
            token: format!("{signing_input}.{}", b64url(sig.as_ref())),
            expiration_timestamp: meta::format_unix(reported_exp),
        })
    }

    /// Who a request comes from: its bearer token, else its client certificate, else
    /// anonymous (HTTPS) or the unsecured admin (plain HTTP). A bearer token that is not
    /// valid is a 401.
    pub fn authenticate(
        &self,
        authorization: Option<&[u8]>,
        secure: Option<&Secure>,
    ) -> Result<UserInfo, ApiError> {
        if let Some(value) = authorization {
            if let Some(node) = crate::node_token::node_of_authorization(value) {
                return Ok(UserInfo {
                    name: format!("system:node:{node}"),
                    groups: vec![
                        "system:nodes".into(),
                        MASTERS_GROUP.into(),
                        AUTHENTICATED.into(),
                    ],
                    node: Some(node.to_string()),
                    ..UserInfo::default()
                });
            }
            let token = bearer(value).ok_or_else(ApiError::unauthorized)?;
            return self
                .review(token, &[ISSUER.to_string()])
                .ok_or_else(ApiError::unauthorized);
        }
        Ok(match secure {
            None => UserInfo::unsecured(),
            Some(Secure {
                client: Some(identity),
            }) => {
                let mut groups = identity.groups.clone();
                groups.push(AUTHENTICATED.into());
                UserInfo {
                    name: identity.user.clone(),
                    groups,
                    ..UserInfo::default()
                }
            }
            Some(Secure { client: None }) => UserInfo::anonymous(),
        })
    }

    /// The node a request comes from, by its credentials alone: a node token's node, or the
    /// node a pod-bound service-account token was issued for (its signed claims, whether or
    /// not the pod still exists). What a network partition decides on, before the API server
    /// could authenticate anything: a zombie's request is lost in the partition, not refused.
    pub fn origin_node(&self, authorization: Option<&[u8]>) -> Option<String> {
        let value = authorization?;
        if let Some(node) = crate::node_token::node_of_authorization(value) {
            return Some(node.to_string());
        }
        self.verified(bearer(value)?)?.node.clone()
    }

    /// Checks a service-account token for one of `audiences` (a TokenReview); `None` when it
    /// is not valid.
    pub fn review(&self, token: &str, audiences: &[String]) -> Option<UserInfo> {
        self.review_at(token, audiences, now_unix())
    }

    fn review_at(&self, token: &str, audiences: &[String], now: i64) -> Option<UserInfo> {
        let claims = self.verified(token)?;
        if now >= claims.exp || now < claims.nbf {
            return None;
        }
        if !audiences.iter().any(|a| claims.audiences.contains(a)) {
            return None;
        }
        let ns = claims.namespace.as_str();
        let sa = self
            .store
            .get_shared("", "serviceaccounts", ns, &claims.service_account)?;
        if meta::uid(&sa) != claims.service_account_uid {
            return None;
        }
        let mut user =
            UserInfo::service_account(ns, &claims.service_account, &claims.service_account_uid);
        if let Some((name, uid)) = &claims.pod {
            let live = self.store.get_shared("", "pods", ns, name)?;
            if meta::uid(&live) != uid {
                return None;
            }
            user.extra
                .push(("authentication.kubernetes.io/pod-name".into(), name.clone()));
            user.extra
                .push(("authentication.kubernetes.io/pod-uid".into(), uid.clone()));
            user.node = live
                .at("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string);
        }
        if let Some(node) = &claims.node {
            user.extra.push((
                "authentication.kubernetes.io/node-name".into(),
                node.clone(),
            ));
        }
        if !claims.jti.is_empty() {
            user.extra.push((
                "authentication.kubernetes.io/credential-id".into(),
                format!("JTI={}", claims.jti),
            ));
        }
        Some(user)
    }

    /// The claims of a token whose signature is ours. Verified tokens are remembered (clients
    /// send the same token on every request); what can change (expiry, the service account,
    /// the pod) is checked on every use.
    fn verified(&self, token: &str) -> Option<Arc<Claims>> {
        let mut cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(token) {
            return Some(c.clone());
        }
        let (signing_input, sig) = token.rsplit_once('.')?;
        let sig = unb64url(sig)?;
        ring::hmac::verify(&self.key, signing_input.as_bytes(), &sig).ok()?;
        let (_, body) = signing_input.split_once('.')?;
        let claims: Value = serde_json::from_slice(&unb64url(body)?).ok()?;
        let k8s = claims.get("kubernetes.io")?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let parsed = Arc::new(Claims {
            exp: claims.get("exp")?.as_i64()?,
            nbf: claims.get("nbf").and_then(Value::as_i64).unwrap_or(0),
            audiences: claims
                .get("aud")?
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            namespace: text(k8s.get("namespace"))?,
            service_account: text(k8s.at("/serviceaccount/name"))?,
            service_account_uid: text(k8s.at("/serviceaccount/uid"))?,
            pod: match k8s.get("pod") {
                Some(p) => Some((text(p.get("name"))?, text(p.get("uid"))?)),
                None => None,
            },
            node: text(k8s.at("/node/name")),
            jti: text(claims.get("jti")).unwrap_or_default(),
        });
        if cache.len() >= VERIFIED_CAPACITY {
            cache.clear();
        }
        cache.insert(token.to_string(), parsed.clone());
        Some(parsed)
    }
}

/// How many verified tokens are remembered (all are forgotten when it fills: a bound, not an
/// eviction policy; tokens are re-verified on their next use).
const VERIFIED_CAPACITY: usize = 10_000;

/// What a verified service-account token says.
#[derive(Debug)]
struct Claims {
    exp: i64,
    nbf: i64,
    audiences: Vec<String>,
    namespace: String,
    service_account: String,
    service_account_uid: String,
    pod: Option<(String, String)>,
    node: Option<String>,
    jti: String,
}

/// The token of a `Bearer` authorization header value.
fn bearer(value: &[u8]) -> Option<&str> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = std::str::from_utf8(rest).ok()?.trim();
    (!token.is_empty()).then_some(token)
}

fn b64url(bytes: &[u8]) -> String {
    crate::base64::encode(bytes)
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect()
}

fn unb64url(s: &str) -> Option<Vec<u8>> {
    if s.contains(['+', '/', '=']) {
        return None;
    }
    let mut std: String = s
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !std.len().is_multiple_of(4) {
        std.push('=');
    }
    crate::base64::decode(&std)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WriteOpts;

    fn store_with_sa() -> (Arc<Store>, String) {
        let store = Store::new(100);
        let reg = store.registry();
        let rt = |p: &str| reg.find("", "v1", p).expect("type");
        store
            .create(
                &rt("namespaces"),
                "",
                json!({"metadata": {"name": "ns"}}),
                &WriteOpts::default(),
            )
            .expect("ns");
        let sa = store
            .create(
                &rt("serviceaccounts"),
                "ns",
                json!({"metadata": {"name": "sa"}}),
                &WriteOpts::default(),
            )
            .expect("sa");
        let uid = meta::uid(&sa).to_string();
        (store, uid)
    }

    fn spec() -> TokenSpec {
        TokenSpec {
            namespace: "ns".into(),
            service_account: "sa".into(),
            audiences: vec![],
            expiration_seconds: 3600,
            bound_pod: None,
        }
    }

    #[test]
    fn an_issued_token_authenticates_as_its_service_account() {
        let (store, uid) = store_with_sa();
        let auth = Authenticator::new(store);
        let t = auth.issue(&spec()).expect("issued");
        let header = format!("Bearer {}", t.token);
        let user = auth
            .authenticate(Some(header.as_bytes()), None)
            .expect("valid");
        assert_eq!(user.name, "system:serviceaccount:ns:sa");
        assert_eq!(user.uid, uid);
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                AUTHENTICATED
            ]
        );
        assert!(!user.is_privileged());
    }

    #[test]
    fn tampered_expired_foreign_and_orphaned_tokens_are_refused() {
        let (store, _) = store_with_sa();
        let auth = Authenticator::new(store.clone());
        let now = now_unix();
        let t = auth.issue_at(&spec(), now).expect("issued").token;
        let api = [ISSUER.to_string()];
        assert!(auth.review_at(&t, &api, now).is_some());
        assert!(auth.review_at(&t, &api, now + 3600).is_none(), "expired");
        // Change the first character of the signature (the last one may only carry padding
        // bits, which decoding drops).
        let sig_start = t.rfind('.').expect("three parts") + 1;
        let first = t.as_bytes()[sig_start];
        let mut forged = t.clone();
        forged.replace_range(sig_start..=sig_start, if first == b'A' { "B" } else { "A" });
        assert!(
            auth.review_at(&forged, &api, now).is_none(),
            "bad signature"
        );
        let other = Authenticator::new(store.clone());
        assert!(
            other.review_at(&t, &api, now).is_none(),
            "another cluster's key"
        );
        let vault = TokenSpec {
            audiences: vec!["vault".into()],
            ..spec()
        };
        let v = auth.issue_at(&vault, now).expect("issued").token;
        assert!(auth.review_at(&v, &api, now).is_none(), "other audience");
        let rt = store
            .registry()
            .find("", "v1", "serviceaccounts")
            .expect("sa");
        store
            .delete(&rt, "ns", "sa", &crate::store::DeleteOpts::default())
            .expect("delete");
        assert!(
            auth.review_at(&t, &api, now).is_none(),
            "service account gone"
        );
        let err = auth.authenticate(Some(format!("Bearer {t}").as_bytes()), None);
        assert_eq!(err.map_err(|e| e.code), Err(401));
    }

    #[test]
    fn credentials_name_their_users() {
        let (store, _) = store_with_sa();
        let auth = Authenticator::new(store);
        let node = auth
            .authenticate(Some(b"Bearer kubesim-node/n1/ns/p"), None)
            .expect("node");
        assert!(node.is_privileged());
        assert_eq!(node.node.as_deref(), Some("n1"));
        assert!(
            auth.authenticate(None, None)
                .expect("plain")
                .is_privileged()
        );
        let anon = auth
            .authenticate(None, Some(&Secure { client: None }))
            .expect("anon");
        assert_eq!(anon.name, "system:anonymous");
        assert_eq!(
            auth.authenticate(Some(b"Bearer nonsense"), None)
                .map_err(|e| e.code),
            Err(401)
        );
        assert_eq!(
            auth.authenticate(Some(b"Basic dTpw"), None)
                .map_err(|e| e.code),
            Err(401)
        );
    }

    #[test]
    fn a_kubelets_pod_token_outlives_the_hour_it_reports() {
        let (store, _) = store_with_sa();
        let rt = |p: &str| store.registry().find("", "v1", p).expect("type");
        let pod = store
            .create(
                &rt("pods"),
                "ns",
                json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "sa",
                       "containers": [{"name": "c", "image": "i"}]}}),
                &WriteOpts::default(),
            )
            .expect("pod");
        let auth = Authenticator::new(store.clone());
        let now = now_unix();
        let bound = |seconds| TokenSpec {
            expiration_seconds: seconds,
            bound_pod: Some(BoundPod {
                name: "p".into(),
                uid: meta::uid(&pod).to_string(),
                node: Some("n1".into()),
            }),
            ..spec()
        };
        let api = [ISSUER.to_string()];
        let kubelet = auth
            .issue_at(&bound(KUBELET_EXPIRATION_SECONDS), now)
            .expect("issued");
        // The answer reports what was asked; the token itself outlives it, as the API
        // server's extension makes it.
        assert_eq!(
            kubelet.expiration_timestamp,
            meta::format_unix(now + KUBELET_EXPIRATION_SECONDS)
        );
        let later = now + 7 * 24 * 3600;
        let user = auth
            .review_at(&kubelet.token, &api, later)
            .expect("still valid");
        assert_eq!(user.node.as_deref(), None, "the pod is not scheduled");
        assert!(
            auth.review_at(&kubelet.token, &api, now + EXTENDED_EXPIRATION_SECONDS)
                .is_none()
        );
        let claims = auth.verified(&kubelet.token).expect("ours");
        assert_eq!(claims.node.as_deref(), Some("n1"));
        // Any other lifetime is what it says.
        let plain = auth.issue_at(&bound(3600), now).expect("issued");
        assert!(auth.review_at(&plain.token, &api, now + 3600).is_none());
        // A pod-bound token names its node before anything else is checked (partitions).
        let header = format!("Bearer {}", kubelet.token);
        assert_eq!(
            auth.origin_node(Some(header.as_bytes())).as_deref(),
            Some("n1")
        );
        assert_eq!(
            auth.origin_node(Some(b"Bearer kubesim-node/n2/ns/p"))
                .as_deref(),
            Some("n2")
        );
        assert_eq!(auth.origin_node(Some(b"Bearer nonsense")), None);
    }

    #[test]
    fn short_lifetimes_and_missing_accounts_are_refused() {
        let (store, _) = store_with_sa();
        let auth = Authenticator::new(store);
        let short = TokenSpec {
            expiration_seconds: 60,
            ..spec()
        };
        assert_eq!(auth.issue(&short).map_err(|e| e.kind()), Err("too_short"));
        let missing = TokenSpec {
            service_account: "nope".into(),
            ..spec()
        };
        assert_eq!(
            auth.issue(&missing).map_err(|e| e.kind()),
            Err("service_account_not_found")
        );
    }
}
