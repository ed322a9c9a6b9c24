//! Every call the service makes to the Kubernetes API server on a request's behalf goes through
//! [`KubeApi::call`]: one per-call timeout, one error type ([`CallError`]) matched on the API
//! server's status code and reason, never on message text. The submission's executor, the
//! status look-ups' live reads and the retention-record reads all use it; only the long-lived
//! watches (which have their own backoff) and the background sweeper and recorder call the
//! client directly.

use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, GetParams, ListParams, LogParams, Patch, PatchParams, PostParams,
    Preconditions, PropagationPolicy,
};
use kube::core::Request;
use serde_json::Value;
use submission::pointer::text;
use thiserror::Error;

mod head;

pub use head::Head;

/// The largest error answer of a log request read (a `Status` is a few hundred bytes).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The field manager our writes are recorded under.
pub const FIELD_MANAGER: &str = "spark-submitter";

/// Why one call to the API server failed.
#[derive(Debug, Error)]
pub enum CallError {
    #[error("the API server refused the request or could not be reached")]
    Request {
        #[source]
        source: kube::Error,
    },
    #[error("no answer from the API server within {after:?}")]
    TimedOut { after: Duration },
}

impl CallError {
    /// The API server's `Status`, when it answered with one.
    pub fn status(&self) -> Option<&kube::core::Status> {
        match self {
            CallError::Request {
                source: kube::Error::Api(status),
            } => Some(status),
            _ => None,
        }
    }

    /// The fields the API server's answer names as its causes (a 422 names the invalid ones).
    pub fn rejected_fields(&self) -> Vec<&str> {
        self.status()
            .into_iter()
            .filter_map(|status| status.details.as_ref())
            .flat_map(|details| &details.causes)
            .map(|cause| cause.field.as_str())
            .filter(|field| !field.is_empty())
            .collect()
    }

    /// HTTP code of the API server's answer, when it answered.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|status| status.code)
    }

    pub fn is_already_exists(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 409 && s.reason == "AlreadyExists")
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// A uid or resourceVersion precondition that did not hold (409 `Conflict`).
    pub fn is_conflict(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 409 && s.reason != "AlreadyExists")
    }

    /// Whether the request certainly had no effect: a 4xx answer other than timeouts and
    /// throttling. Everything else (5xx, 408, 429, no answer) may have been applied.
    pub fn is_definite(&self) -> bool {
        self.code()
            .is_some_and(|code| (400..500).contains(&code) && code != 408 && code != 429)
    }

    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Request { .. } => "request",
            CallError::TimedOut { .. } => "timed_out",
        }
    }
}

/// Requests the service has in flight to the API server at once on requests' behalf. The
/// Kubernetes client opens a connection per concurrent request, each with its buffers on both
/// sides; bounded, a thousand concurrent submissions cost the API server this many connections
/// (the watches have their own), and the calls beyond wait their turn within their timeout.
pub const MAX_API_CALLS: usize = 32;

/// The client, the per-call timeout and the bound on calls in flight.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
    call_timeout: Duration,
    calls: std::sync::Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi")
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    pub fn new(client: kube::Client, call_timeout: Duration) -> KubeApi {
        KubeApi {
            client,
            call_timeout,
            calls: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_API_CALLS)),
        }
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The requests of a kind the submitter creates, in `namespace`; `None` for any other.
    /// Requests are built and answered as raw JSON: the built objects are JSON already, and
    /// what is read back is a few fields (see [`Head`]), not a whole `DynamicObject`.
    pub fn api_for(&self, object: &Value, namespace: &str) -> Option<Request> {
        let kind = text(object, "/kind");
        let plural = match kind {
            "Pod" => "pods",
            "ConfigMap" => "configmaps",
            "Service" => "services",
            "PersistentVolumeClaim" => "persistentvolumeclaims",
            "NetworkPolicy" => "networkpolicies",
            _ => return None,
        };
        let api_version = text(object, "/apiVersion");
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        Some(Request::new(format!(
            "{base}/namespaces/{namespace}/{plural}"
        )))
    }

    /// Runs one request under the call timeout, waiting for a free slot first (the wait counts
    /// towards the timeout).
    pub async fn call<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, CallError> {
        let bounded = async {
            // Never closed: the semaphore lives as long as `self`.
            let _slot = self.calls.acquire().await;
            request.await
        };
        match tokio::time::timeout(self.call_timeout, bounded).await {
            Ok(result) => result.map_err(|source| CallError::Request { source }),
            Err(_) => Err(CallError::TimedOut {
                after: self.call_timeout,
            }),
        }
    }

    /// Sends a built request under the call timeout; the answer's body as text.
    async fn send_text(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<String, CallError> {
        let request = request.map_err(|source| CallError::Request {
            source: kube::Error::BuildRequest(source),
        })?;
        self.call(self.client.request_text(request)).await
    }

    /// Sends a built request under the call timeout; the answer's body as `T`.
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<T, CallError> {
        let text = self.send_text(request).await?;
        serde_json::from_str(&text).map_err(answer_error)
    }

    pub async fn get(&self, api: &Request, name: &str) -> Result<Option<Value>, CallError> {
        match self.send(api.get(name, &GetParams::default())).await {
            Ok(object) => Ok(Some(object)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// POSTs `object`; the API server's answer whole (what a dry run shows).
    pub async fn create(
        &self,
        api: &Request,
        object: &Value,
        dry_run: bool,
    ) -> Result<Value, CallError> {
        self.send(api.create(&post_params(dry_run), to_vec(object)?))
            .await
    }

    /// POSTs `object`; of the answer only what a submission reads ([`Head`]).
    pub async fn create_head(
        &self,
        api: &Request,
        object: &impl serde::Serialize,
    ) -> Result<Head, CallError> {
        let answer = self
            .send_text(api.create(&post_params(false), to_vec(object)?))
            .await?;
        head::read(&answer).map_err(answer_error)
    }

    /// Merge-patches `metadata.ownerReferences` only (ConfigMaps are immutable in data).
    pub async fn patch_owner(
        &self,
        api: &Request,
        name: &str,
        owner: &Value,
    ) -> Result<(), CallError> {
        let patch = OwnerPatch {
            metadata: OwnerMeta {
                owner_references: owner,
            },
        };
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        // A success answer is the whole patched object, which nothing reads: it is not parsed.
        self.send_text(api.patch(name, &params, &Patch::Merge(&patch)))
            .await?;
        Ok(())
    }

    /// Deletes `name` if it still has `uid`; gone already is success.
    pub async fn delete(&self, api: &Request, name: &str, uid: &str) -> Result<(), CallError> {
        // Nothing of ours ran in it worth a graceful stop; a retry must not find it lingering.
        let params = delete_params(uid, Some(0));
        let answer: Result<serde::de::IgnoredAny, CallError> =
            self.send(api.delete(name, &params)).await;
        match answer {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// A pod by name, live.
    pub async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, CallError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        self.call(api.get_opt(name)).await
    }

    /// Pods in every namespace carrying `label_selector`, live.
    pub async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, CallError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let list = self
            .call(api.list(&ListParams::default().labels(label_selector)))
            .await?;
        Ok(list.items)
    }

    /// A ConfigMap by name, live.
    pub async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, CallError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        self.call(api.get_opt(name)).await
    }

    /// ConfigMaps in `namespace` carrying `label_selector`, live.
    pub async fn list_config_maps(
        &self,
        namespace: &str,
        label_selector: &str,
    ) -> Result<Vec<ConfigMap>, CallError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let list = self
            .call(api.list(&ListParams::default().labels(label_selector)))
            .await?;
        Ok(list.items)
    }

    /// Deletes the pod `name` if it still has `uid`, as `spark-submit --kill` deletes a driver:
    /// with `grace_period_seconds` when given (else the pod's own grace period), its dependents
    /// (executors, ConfigMaps, Service) left to the garbage collector. Gone already, or replaced
    /// by a pod of another uid, is success: the pod meant is gone either way.
    pub async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period_seconds: Option<u32>,
    ) -> Result<(), CallError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = delete_params(uid, grace_period_seconds);
        match self.call(api.delete(name, &params)).await {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() || error.is_conflict() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Creates `cm` in `namespace`; of the answer only what is read ([`Head`]), not a typed
    /// ConfigMap with its managedFields.
    pub async fn create_config_map(
        &self,
        namespace: &str,
        cm: &ConfigMap,
    ) -> Result<Head, CallError> {
        let api = Request::new(format!("/api/v1/namespaces/{namespace}/configmaps"));
        self.create_head(&api, cm).await
    }

    /// Replaces the ConfigMap `name` with `cm`, whose resourceVersion is the precondition.
    pub async fn replace_config_map(
        &self,
        namespace: &str,
        name: &str,
        cm: &ConfigMap,
    ) -> Result<ConfigMap, CallError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        self.call(api.replace(name, &post_params(false), cm)).await
    }

    /// Deletes the ConfigMap `name` if it still has `uid`; gone already is success.
    pub async fn delete_config_map(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), CallError> {
        let api = Request::new(format!("/api/v1/namespaces/{namespace}/configmaps"));
        self.delete(&api, name, uid).await
    }

    /// Opens the log of a container of pod `name`: the API server's answer once its head is in
    /// (under the call timeout, in a call slot), its body still streaming. The body holds the
    /// connection to the API server, not a call slot: a followed log may stream for hours.
    pub async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        params: &LogParams,
    ) -> Result<http::Response<kube::client::Body>, CallError> {
        let request = Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
            .logs(name, params)
            .map_err(|source| CallError::Request {
                source: kube::Error::BuildRequest(source),
            })?;
        let response = self
            .call(self.client.send(request.map(kube::client::Body::from)))
            .await?;
        if response.status().is_success() {
            return Ok(response);
        }
        // An error answer is a small `Status`; read it (bounded) as every other call's is.
        let code = response.status().as_u16();
        let body = http_body_util::Limited::new(response.into_body(), MAX_ERROR_BODY_BYTES);
        let bytes = tokio::time::timeout(self.call_timeout, body.collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        let status = serde_json::from_slice::<kube::core::Status>(&bytes).unwrap_or_else(|_| {
            kube::core::Status::failure(&String::from_utf8_lossy(&bytes), "").with_code(code)
        });
        Err(CallError::Request {
            source: kube::Error::Api(status.boxed()),
        })
    }

    /// Whether the API server answers (`GET /version`).
    pub async fn reachable(&self) -> Result<(), CallError> {
        self.call(self.client.apiserver_version()).await.map(|_| ())
    }
}

/// A delete of the object with `uid` only (a newer one of the same name stays), its dependents
/// left to the garbage collector.
fn delete_params(uid: &str, grace_period_seconds: Option<u32>) -> DeleteParams {
    DeleteParams {
        grace_period_seconds,
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

fn post_params(dry_run: bool) -> PostParams {
    PostParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

/// An answer that is not the JSON expected, as the client library reports it.
fn answer_error(source: serde_json::Error) -> CallError {
    CallError::Request {
        source: kube::Error::SerdeError(source),
    }
}

/// What a request body starts with room for: a driver pod's JSON is a few KiB, so the buffer
/// is not grown (and copied) five times on its way there.
const BODY_CAPACITY: usize = 4096;

fn to_vec(object: &impl serde::Serialize) -> Result<Vec<u8>, CallError> {
    let mut body = Vec::with_capacity(BODY_CAPACITY);
    serde_json::to_writer(&mut body, object).map_err(|source| CallError::Request {
        source: kube::Error::SerdeError(source),
    })?;
    Ok(body)
}

/// A merge patch of `metadata.ownerReferences`, written from the references without a copy.
#[derive(serde::Serialize)]
struct OwnerPatch<'a> {
    metadata: OwnerMeta<'a>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnerMeta<'a> {
    owner_references: &'a Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_patch_sets_the_owner_references_and_nothing_else() {
        let owner = serde_json::json!([{"kind": "Pod", "name": "d", "uid": "u-1"}]);
        let patch = OwnerPatch {
            metadata: OwnerMeta {
                owner_references: &owner,
            },
        };
        let body = to_vec(&patch).expect("a patch serializes");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).expect("JSON"),
            serde_json::json!({"metadata": {"ownerReferences": owner}})
        );
    }
}
