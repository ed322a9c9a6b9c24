//! The HTTP face of kubesim: the Kubernetes REST API over the store, plus the `/sim/v1` control API.

mod discovery;
mod filter;
mod openapi;
mod patching;
mod path;
mod pod_log;
mod query;
mod reviews;
mod scale;
mod sim;
mod watch;
mod websocket;
mod with_managed_fields;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::auth::{Authenticator, UserInfo};
use crate::control::{Control, FaultTiming, JournalEntry, RequestInfo};
use crate::kubelet::Kubelet;
use crate::meta;
use crate::meta::At;
use crate::patch;
use crate::resources::ResourceType;
use crate::selector::FieldSelector;
use crate::store::{DeleteOpts, ListOpts, Part, Store, WriteOpts};

pub use filter::Filter;
pub(crate) use patching::patch_error;
use patching::patch_object;
pub use path::{ObjectPath, Route};
use pod_log::pod_log;
use query::Query;
use with_managed_fields::WithManagedFields;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    /// The object store.
    pub store: Arc<Store>,
    /// Counters and fault rules.
    pub control: Arc<Control>,
    /// The kubelet (logs, kills, partitions).
    pub kubelet: Arc<Kubelet>,
    /// Interval between watch bookmarks.
    pub bookmark_interval: std::time::Duration,
    /// Who requests come from (client certificates, service-account and node tokens).
    pub auth: Arc<Authenticator>,
}

/// The whole API as one axum router.
pub fn router(state: AppState) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(state)
}

async fn handle(
    state: State<AppState>,
    secure: Option<axum::Extension<crate::tls::Secure>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    upgrade: websocket::Upgrade,
    body: Bytes,
) -> Response {
    let format = negotiate(&headers);
    let response = serve(state, secure, method, uri, headers, upgrade, body).await;
    match format {
        Format::Protobuf => to_protobuf(response).await,
        Format::Json => response,
    }
}

/// What a client asked to get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

/// The first media type of `Accept` that kubesim serves: protobuf (for built-in types) or
/// JSON (`application/json`, `*/*`, YAML and anything else, as before). Entries asking for
/// another shape (`as=Table`) are skipped, as the API server does when it cannot serve them.
fn negotiate(headers: &HeaderMap) -> Format {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Format::Json;
    };
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        if parts.any(|p| p.starts_with("as=")) {
            continue;
        }
        if media == crate::protobuf::MEDIA_TYPE {
            return Format::Protobuf;
        }
        if !media.is_empty() {
            return Format::Json;
        }
    }
    Format::Json
}

/// Marks a streaming (watch) response, which carries its own format.
#[derive(Debug, Clone, Copy)]
struct Streaming;

/// Re-encodes a JSON answer as protobuf when its kind has a protobuf form (custom resources and
/// discovery documents stay JSON, as the API server answers them).
async fn to_protobuf(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if !is_json || response.extensions().get::<Streaming>().is_some() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "body lost").into_response();
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(|v| {
            let av = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
            crate::protobuf::supports(av, kind)
        })
        .map(|v| crate::protobuf::encode(&v));
    match encoded {
        Some(Ok(pb)) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(crate::protobuf::MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(pb))
        }
        Some(Err(e)) => {
            // The client also accepts JSON (client-go sends `*/*` after protobuf).
            tracing::warn!(error = %e, "kubesim: cannot encode an answer as protobuf; answering JSON");
            Response::from_parts(parts, Body::from(bytes))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// Turns a protobuf request body into the JSON the handlers read (built-in types only: a
/// custom resource sent as protobuf is a 415, as in Kubernetes).
fn decode_protobuf_body(
    state: &AppState,
    route: Option<&Route>,
    headers: &mut HeaderMap,
    body: &mut Bytes,
) -> Result<(), ApiError> {
    if content_type(headers) != crate::protobuf::MEDIA_TYPE {
        return Ok(());
    }
    if let Some(Route::Object(op)) = route
        && state
            .store
            .registry()
            .find(&op.group, &op.version, &op.resource)
            .is_some_and(|rt| rt.custom)
    {
        return Err(ApiError::unsupported_media_type(
            crate::protobuf::MEDIA_TYPE,
        ));
    }
    let value = crate::protobuf::decode(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as protobuf: {e}"
        ))
    })?;
    *body = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(DECODED_FROM_PROTOBUF, http::HeaderValue::from_static("1"));
    Ok(())
}

/// Set on a request whose protobuf body was turned into JSON, so the journal still says how
/// the client sent it (the body it records is the decoded JSON).
const DECODED_FROM_PROTOBUF: &str = "x-kubesim-decoded-from-protobuf";

async fn serve(
    State(state): State<AppState>,
    secure: Option<axum::Extension<crate::tls::Secure>>,
    method: Method,
    uri: Uri,
    mut headers: HeaderMap,
    upgrade: websocket::Upgrade,
    mut body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = Query::parse(uri.query().unwrap_or(""));
    if let Some(rest) = path.strip_prefix("/sim/v1") {
        return sim::handle(&state, &method, rest, &body).await;
    }
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    // A partition cuts a node's processes off before the API server sees their requests.
    if let Some(node) = state.auth.origin_node(authorization) {
        wait_while_partitioned(&state, &node).await;
    }
    let user = match state
        .auth
        .authenticate(authorization, secure.as_ref().map(|s| &s.0))
    {
        Ok(u) => u,
        Err(e) => return error_response(&e),
    };
    let user = match impersonate(&state, user, &headers) {
        Ok(u) => u,
        Err(e) => return error_response(&e),
    };
    if let Some(node) = &user.node {
        wait_while_partitioned(&state, node).await;
    }
    if let Err(e) = authorize(&state, &user, &method, &path, &query) {
        return error_response(&e);
    }
    let route = path::parse(&path);
    if let Err(e) = decode_protobuf_body(&state, route.as_ref(), &mut headers, &mut body) {
        return error_response(&e);
    }
    match route {
        None => error_response(&ApiError::no_route(&path)),
        Some(Route::Health) => (StatusCode::OK, "ok").into_response(),
        Some(Route::OpenApiIndex) => json_response(
            StatusCode::OK,
            &openapi::index(&state.store.registry(), &state.store),
        ),
        Some(Route::OpenApi { group, version }) => {
            match openapi::document(&state.store.registry(), &state.store, &group, &version) {
                Some(v) => json_response(StatusCode::OK, &v),
                None => error_response(&ApiError::no_route(&path)),
            }
        }
        Some(Route::Version) => json_response(StatusCode::OK, &discovery::version()),
        Some(Route::CoreVersions) => json_response(StatusCode::OK, &discovery::core_versions()),
        Some(Route::Groups) => {
            json_response(StatusCode::OK, &discovery::groups(&state.store.registry()))
        }
        Some(Route::Group(g)) => match discovery::group(&state.store.registry(), &g) {
            Some(v) => json_response(StatusCode::OK, &v),
            None => error_response(&ApiError::no_route(&path)),
        },
        Some(Route::Resources { group, version }) => {
            match discovery::resources(&state.store.registry(), &group, &version) {
                Some(v) => json_response(StatusCode::OK, &v),
                None => error_response(&ApiError::no_route(&path)),
            }
        }
        Some(Route::Object(op)) => {
            let pq = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
            // A watch asked for over WebSocket (fabric8's way) is answered over one.
            let ws = websocket::handshake(&headers).map(|accept| (upgrade, accept));
            object_request(&state, &user, method, op, pq, &query, &headers, body, ws)
                .await
                .unwrap_or_else(|e| error_response(&e))
        }
    }
}

/// Acts as another user when the request says so (`Impersonate-User`, `Impersonate-Group`,
/// `Impersonate-Uid`: `kubectl --as`), if the requester may `impersonate` each of them; as the
/// API server does, a service account's user name brings its groups and every impersonated
/// user but `system:anonymous` is in `system:authenticated`.
fn impersonate(
    state: &AppState,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect()
    };
    let target = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let Some(target) = target else {
        if !groups.is_empty() || uid.is_some() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups or a uid without impersonating a user",
            ));
        }
        return Ok(user);
    };
    let sa = target
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut checks: Vec<crate::rbac::RequestAttributes> = Vec::new();
    let attrs =
        |group: &str, resource: &str, namespace: &str, name: &str| crate::rbac::RequestAttributes {
            verb: "impersonate".into(),
            resource_request: true,
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        };
    match sa {
        Some((ns, name)) => checks.push(attrs("", "serviceaccounts", ns, name)),
        None => checks.push(attrs("", "users", "", &target)),
    }
    for g in &groups {
        checks.push(attrs("", "groups", "", g));
    }
    if let Some(u) = &uid {
        checks.push(attrs("authentication.k8s.io", "uids", "", u));
    }
    for a in &checks {
        let d = crate::rbac::authorize(&state.store, &user, a);
        state.control.record_authz(
            &user.name,
            &a.verb,
            &a.api_group,
            &a.resource,
            &a.namespace,
            d.allowed,
        );
        if !d.allowed {
            return Err(crate::rbac::forbidden(&user, a, &d.reason));
        }
    }
    let mut out = match sa {
        Some((ns, name)) if groups.is_empty() => UserInfo::service_account(ns, name, ""),
        _ => UserInfo {
            name: target.clone(),
            groups,
            ..UserInfo::default()
        },
    };
    out.uid = uid.unwrap_or(out.uid);
    if target != "system:anonymous" && !out.groups.iter().any(|g| g == crate::auth::AUTHENTICATED) {
        out.groups.push(crate::auth::AUTHENTICATED.into());
    }
    Ok(out)
}

/// Authorizes a request (RBAC; `system:masters` bypass it) and records the decision in the
/// authorization journal.
fn authorize(
    state: &AppState,
    user: &UserInfo,
    method: &Method,
    path: &str,
    q: &Query,
) -> Result<(), ApiError> {
    let field_name = q
        .get("fieldSelector")
        .and_then(|f| FieldSelector::parse(f).ok())
        .and_then(|f| f.equals_value("metadata.name").map(str::to_string));
    let attrs = crate::rbac::request_attributes(
        method.as_str(),
        path,
        q.flag("watch"),
        field_name.as_deref(),
    );
    let decision = crate::rbac::authorize(&state.store, user, &attrs);
    let resource = if attrs.resource_request {
        attrs.combined_resource()
    } else {
        attrs.path.clone()
    };
    state.control.record_authz(
        &user.name,
        &attrs.verb,
        &attrs.api_group,
        &resource,
        &attrs.namespace,
        decision.allowed,
    );
    if decision.allowed {
        Ok(())
    } else {
        Err(crate::rbac::forbidden(user, &attrs, &decision.reason))
    }
}

/// A process on a partitioned node cannot reach the control plane: its requests (those whose
/// credentials name its node: node tokens, pod-bound service-account tokens) get no answer
/// while the partition lasts, as when the network drops their packets, and are served once the
/// node heals, as TCP would deliver them then. Clients see what they see in a real partition:
/// their own timeouts, not an error status they might retry on.
async fn wait_while_partitioned(state: &AppState, node: &str) {
    if !state.kubelet.is_partitioned(node) {
        return;
    }
    let _held = state.control.hold(node);
    while state.kubelet.is_partitioned(node) {
        tokio::time::sleep(PARTITION_POLL).await;
    }
}

/// How often a held request looks whether its node healed.
const PARTITION_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Which operation a method and path ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    fn audit(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

fn verb_of(method: &Method, op: &ObjectPath, q: &Query) -> Result<Verb, ApiError> {
    let named = op.name.is_some();
    Ok(match (method.as_str(), named) {
        ("GET", true) => Verb::Get,
        ("GET", false) if q.flag("watch") => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        // Subresources created on an object (`serviceaccounts/NAME/token`).
        ("POST", true) if op.subresource.is_some() => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        (m, _) => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({m})"
            )));
        }
    })
}

#[allow(clippy::too_many_arguments)]
async fn object_request(
    state: &AppState,
    user: &UserInfo,
    method: Method,
    op: ObjectPath,
    path_and_query: &str,
    q: &Query,
    headers: &HeaderMap,
    body: Bytes,
    websocket: Option<(websocket::Upgrade, String)>,
) -> Result<Response, ApiError> {
    let registry = state.store.registry();
    let rt = registry
        .find(&op.group, &op.version, &op.resource)
        .ok_or_else(|| ApiError::no_route(&format!("{}/{}", op.group, op.resource)))?;
    let verb = verb_of(&method, &op, q)?;
    let info = RequestInfo {
        verb: verb.audit(),
        group: rt.group.clone(),
        resource: match &op.subresource {
            Some(s) => format!("{}/{s}", rt.plural),
            None => rt.plural.clone(),
        },
        namespace: op.namespace.clone().unwrap_or_default(),
        name: op.name.clone().unwrap_or_default(),
        watch: verb == Verb::Watch,
    };
    let (fired, delay) = state.control.observe(&info);
    let _serving = (verb != Verb::Watch).then(|| state.control.serving());
    if !matches!(verb, Verb::Get | Verb::List | Verb::Watch) {
        state.control.record(
            JournalEntry {
                method: method.to_string(),
                path: path_and_query.to_string(),
                content_type: if headers.contains_key(DECODED_FROM_PROTOBUF) {
                    crate::protobuf::MEDIA_TYPE.to_string()
                } else {
                    content_type(headers)
                },
                body: Value::Null,
            },
            body.clone(),
        );
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(f) = &fired {
        if !f.delay.is_zero() {
            tokio::time::sleep(f.delay).await;
        }
        if f.when == FaultTiming::Before {
            return Err(ApiError::injected(f.code, f.message.clone()));
        }
    }
    if rt.namespaced && op.namespace.is_none() && !matches!(verb, Verb::List | Verb::Watch) {
        return Err(ApiError::no_route(&format!(
            "{} requires a namespace in the path",
            rt.plural
        )));
    }
    if !rt.namespaced && op.namespace.is_some() {
        return Err(ApiError::no_route(&format!(
            "{} is not namespaced",
            rt.plural
        )));
    }
    let ns = op.namespace.clone().unwrap_or_default();
    let result = if crate::resources::is_review(&rt) {
        reviews::create(state, user, &rt, verb, &ns, headers, &body)
    } else {
        execute(state, &rt, verb, &op, &ns, q, headers, body, websocket).await
    };
    match fired {
        Some(f) if f.when == FaultTiming::After => Err(ApiError::injected(f.code, f.message)),
        _ => result,
    }
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    state: &AppState,
    rt: &Arc<ResourceType>,
    verb: Verb,
    op: &ObjectPath,
    ns: &str,
    q: &Query,
    headers: &HeaderMap,
    body: Bytes,
    websocket: Option<(websocket::Upgrade, String)>,
) -> Result<Response, ApiError> {
    let store = &state.store;
    let name = op.name.clone().unwrap_or_default();
    let sub = op.subresource.as_deref();
    let part = match sub {
        None => Part::Main,
        Some("status") if rt.status_subresource => Part::Status,
        Some("finalize") if rt.group.is_empty() && rt.plural == "namespaces" => Part::Main,
        Some("log") if rt.group.is_empty() && rt.plural == "pods" && verb == Verb::Get => {
            return pod_log(state, ns, &name, q);
        }
        Some("token") if rt.group.is_empty() && rt.plural == "serviceaccounts" => {
            return match verb {
                Verb::Create => reviews::token_request(state, ns, &name, headers, &body),
                _ => Err(method_not_allowed(verb)),
            };
        }
        Some("scale")
            if rt.group == "apps"
                && matches!(rt.plural.as_str(), "deployments" | "replicasets") =>
        {
            let write = WriteOpts {
                dry_run: q.dry_run()?,
            };
            return match verb {
                Verb::Get => scale::get(store, rt, ns, &name),
                Verb::Update => scale::update(store, rt, ns, &name, headers, &body, &write),
                Verb::Patch => scale::patch(store, rt, ns, &name, headers, &body, &write),
                _ => Err(method_not_allowed(verb)),
            };
        }
        Some(s) => {
            return Err(ApiError::no_route(&format!("{}/{s}", rt.plural)));
        }
    };
    let write = WriteOpts {
        dry_run: q.dry_run()?,
    };
    match verb {
        Verb::Get => Ok(json_response(StatusCode::OK, &store.get(rt, ns, &name)?)),
        Verb::List => {
            let filter = Filter::from_query(rt, q)?;
            let opts = ListOpts {
                limit: q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
                continue_token: q
                    .get("continue")
                    .filter(|c| !c.is_empty())
                    .map(str::to_string),
                count_remaining: filter.is_empty(),
            };
            let ns_filter = op.namespace.as_deref();
            let page = store.list(rt, ns_filter, &|o| filter.matches(o), &opts)?;
            let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
            if let Some(c) = page.continue_token {
                metadata["continue"] = json!(c);
            }
            if let Some(remaining) = page.remaining {
                metadata["remainingItemCount"] = json!(remaining);
            }
            Ok(serialized_response(
                StatusCode::OK,
                &ListAnswer {
                    api_version: rt.api_version(),
                    items: page.items.iter().map(|o| o.as_ref()).collect(),
                    kind: format!("{}List", rt.kind),
                    metadata,
                },
            ))
        }
        Verb::Watch => {
            let filter = Filter::from_query(rt, q)?;
            let protobuf = negotiate(headers) == Format::Protobuf && !rt.custom;
            let mut response = watch::serve(
                state,
                rt.clone(),
                op.namespace.clone(),
                filter,
                q,
                protobuf,
                websocket,
            );
            response.extensions_mut().insert(Streaming);
            Ok(response)
        }
        Verb::Create => {
            let mut obj = parse_body(headers, &body)?;
            let warnings = check_fields(rt, q, &mut obj, false)?;
            let created = store.create_shared(rt, ns, obj, &write)?;
            let now = meta::now_rfc3339();
            let response = match q.get("fieldManager") {
                None => json_response(StatusCode::CREATED, &created),
                Some(manager) => match patch::created_fields(&created, manager, &now) {
                    Some(entries) => serialized_response(
                        StatusCode::CREATED,
                        &WithManagedFields {
                            object: &created,
                            entries: &entries,
                        },
                    ),
                    None => json_response(
                        StatusCode::CREATED,
                        &patch::record_update(None, &created, manager, &now),
                    ),
                },
            };
            Ok(with_warnings(response, &warnings))
        }
        Verb::Update => {
            let mut obj = parse_body(headers, &body)?;
            let warnings = check_fields(rt, q, &mut obj, false)?;
            let out = store.modify_shared(rt, ns, &name, part, &write, |cur| {
                Ok(match q.get("fieldManager") {
                    Some(m) => patch::record_update(Some(cur), &obj, m, &meta::now_rfc3339()),
                    None => keep_managed_fields(cur, obj),
                })
            })?;
            Ok(with_warnings(
                json_response(StatusCode::OK, &out),
                &warnings,
            ))
        }
        Verb::Patch => patch_object(state, rt, ns, &name, part, q, headers, &body, &write),
        Verb::Delete => {
            let opts = delete_opts(q, &body)?;
            let out = store.delete(rt, ns, &name, &opts)?;
            let (group, plural) = store.storage_key(rt);
            let still_there = store
                .get_raw(&group, &plural, if rt.namespaced { ns } else { "" }, &name)
                .is_some_and(|o| meta::uid(&o) == meta::uid(&out));
            if still_there || opts.dry_run || returns_deleted_object(rt) {
                Ok(json_response(StatusCode::OK, &out))
            } else {
                Ok(json_response(StatusCode::OK, &deleted_status(rt, &out)))
            }
        }
        Verb::DeleteCollection => {
            let filter = Filter::from_query(rt, q)?;
            let opts = delete_opts(q, &body)?;
            let page = store.list(
                rt,
                op.namespace.as_deref(),
                &|o| filter.matches(o),
                &ListOpts::default(),
            )?;
            let mut deleted = Vec::new();
            for item in page.items {
                let item_ns = meta::meta_str(&item, "namespace").to_string();
                match store.delete(rt, &item_ns, meta::name(&item), &opts) {
                    Ok(o) => deleted.push(o),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(json_response(
                StatusCode::OK,
                &json!({
                    "kind": format!("{}List", rt.kind),
                    "apiVersion": rt.api_version(),
                    "metadata": {"resourceVersion": store.resource_version().to_string()},
                    "items": deleted,
                }),
            ))
        }
    }
}

/// Server-side field validation (`?fieldValidation=`) of a body for a built-in type: fields its
/// Go type does not have are an error with `Strict`, warnings (`Warning: 299`) with `Warn` (the
/// default) and nothing with `Ignore`; either way they are dropped, as decoding drops them.
/// Custom resources are not checked. `patch` bodies may carry strategic-merge directives.
fn check_fields(
    rt: &ResourceType,
    q: &Query,
    body: &mut Value,
    patch: bool,
) -> Result<Vec<String>, ApiError> {
    let directive = q.get("fieldValidation").unwrap_or("Warn");
    if rt.custom || directive.eq_ignore_ascii_case("Ignore") {
        return Ok(Vec::new());
    }
    // Without pruning the walk changes nothing: the body is read where it is.
    let Some(unknown) =
        crate::protobuf::unknown_fields_as(&rt.api_version(), &rt.kind, body, false)
    else {
        return Ok(Vec::new());
    };
    let unknown: Vec<String> = unknown
        .into_iter()
        .filter(|f| {
            !(patch
                && f.rsplit('.')
                    .next()
                    .is_some_and(|last| last.starts_with('$')))
        })
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if unknown.is_empty() {
        return Ok(unknown);
    }
    if directive.eq_ignore_ascii_case("Strict") {
        let err = format!("strict decoding error: {}", unknown.join(", "));
        return Err(ApiError::bad_request(if patch {
            err
        } else {
            format!(
                "{} in version \"{}\" cannot be handled as a {}: {err}",
                rt.kind, rt.version, rt.kind
            )
        }));
    }
    Ok(unknown)
}

/// Adds `Warning: 299 - "..."` headers, as the API server reports what it ignored.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) =
            http::HeaderValue::from_str(&format!("299 - {}", serde_json::Value::from(w.as_str())))
        {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

fn method_not_allowed(verb: Verb) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({})",
        verb.audit()
    ))
}

/// Types whose registry returns the deleted object rather than a `Status` (the API server's
/// `ReturnDeletedObject`).
fn returns_deleted_object(rt: &ResourceType) -> bool {
    rt.custom
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "pods") | ("", "services") | ("", "namespaces") | ("apiextensions.k8s.io", _)
        )
}

/// The `Status` a completed deletion answers with.
fn deleted_status(rt: &ResourceType, obj: &Value) -> Value {
    let mut details = json!({"name": meta::name(obj), "kind": rt.plural, "uid": meta::uid(obj)});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// A PUT without managedFields keeps the ones recorded so far (as the API server does).
fn keep_managed_fields(cur: &Value, mut obj: Value) -> Value {
    if obj.at("/metadata/managedFields").is_none()
        && let Some(mf) = cur.at("/metadata/managedFields")
    {
        meta::metadata_mut(&mut obj).insert("managedFields".into(), mf.clone());
    }
    obj
}

pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Decodes a create/update body: JSON, or YAML when sent as `application/yaml`.
pub(crate) fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let value: Value = match ct.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("json: cannot decode request body: {e}")))?,
        "application/yaml" => parse_yaml_or_json(body)?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a single object",
        ));
    }
    Ok(value)
}

fn parse_yaml_or_json(body: &Bytes) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    yaml_serde::from_slice::<Value>(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

fn delete_opts(q: &Query, body: &Bytes) -> Result<DeleteOpts, ApiError> {
    let mut opts = DeleteOpts {
        dry_run: q.dry_run()?,
        propagation: q.get("propagationPolicy").map(str::to_string),
        grace_period: q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()),
        ..DeleteOpts::default()
    };
    if !body.is_empty() {
        let b: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("json: cannot decode DeleteOptions: {e}"))
        })?;
        if let Some(p) = b.get("propagationPolicy").and_then(Value::as_str) {
            opts.propagation = Some(p.to_string());
        }
        if b.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.propagation = Some("Orphan".into());
        }
        if let Some(g) = b.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace_period = Some(g);
        }
        if let Some(uid) = b.at("/preconditions/uid").and_then(Value::as_str) {
            opts.uid = Some(uid.to_string());
        }
        if let Some(rv) = b
            .at("/preconditions/resourceVersion")
            .and_then(Value::as_str)
        {
            opts.resource_version = Some(rv.to_string());
        }
        if b.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"))
        {
            opts.dry_run = true;
        }
    }
    if let Some(p) = &opts.propagation
        && !matches!(p.as_str(), "Background" | "Foreground" | "Orphan")
    {
        return Err(ApiError::bad_request(format!(
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
        )));
    }
    Ok(opts)
}

/// A list answer, its items serialised from the store's shared versions (`json!` would copy
/// each of them, twice); fields in the order `json!` writes them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListAnswer<'a> {
    api_version: String,
    items: Vec<&'a Value>,
    kind: String,
    metadata: Value,
}

/// A JSON answer.
pub fn json_response(code: StatusCode, value: &Value) -> Response {
    serialized_response(code, value)
}

/// A JSON answer of anything serialisable (an object written without being copied first).
fn serialized_response(code: StatusCode, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}

/// A `Status` answer for an error.
pub fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(code, &e.to_status());
    if let Some(s) = e.retry_after
        && let Ok(v) = s.to_string().parse()
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}
