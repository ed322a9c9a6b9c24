//! Watch streams: newline-delimited JSON events served from the store's event log (or the same
//! events as WebSocket messages, [`super::websocket`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::{AppState, Filter, query::Query};
use crate::api_error::ApiError;
use crate::resources::ResourceType;
use crate::store::{Event, EventType, WatchFrom};

/// Starts a watch and returns its streaming response: newline-delimited JSON, or one message
/// per event when the request asks for a WebSocket (`accept` is then its handshake answer).
///
/// Errors that arise once the watch is accepted (an expired resourceVersion) are sent as an
/// `ERROR` event inside a 200 response, as the real API server does.
pub fn serve(
    state: &AppState,
    rt: Arc<ResourceType>,
    ns: Option<String>,
    filter: Filter,
    q: &Query,
    protobuf: bool,
    websocket: Option<(super::websocket::Upgrade, String)>,
) -> Response {
    let enc = Encoding { protobuf };
    let rx = match start(state, rt, ns, filter, q, enc) {
        Ok(rx) => rx,
        Err(response) => return response,
    };
    if let Some((upgrade, accept)) = websocket {
        return super::websocket::serve(upgrade, accept, rx);
    }
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let body = Body::from_stream(futures::StreamExt::map(
        stream,
        Ok::<_, std::convert::Infallible>,
    ));
    let content_type = if protobuf {
        crate::protobuf::WATCH_MEDIA_TYPE
    } else {
        "application/json"
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Starts the watch's task; its events (each one JSON line, or protobuf frame) arrive on the
/// receiver, which closes when the watch ends.
#[allow(clippy::result_large_err)]
fn start(
    state: &AppState,
    rt: Arc<ResourceType>,
    ns: Option<String>,
    filter: Filter,
    q: &Query,
    enc: Encoding,
) -> Result<mpsc::Receiver<Bytes>, Response> {
    let initial_events = q.flag("sendInitialEvents");
    let from = match q.get("resourceVersion") {
        None | Some("" | "0") => WatchFrom::Now,
        _ if initial_events => WatchFrom::Now,
        Some(rv) => match rv.parse() {
            Ok(n) => WatchFrom::After(n),
            Err(_) => {
                return Err(super::error_response(&ApiError::bad_request(format!(
                    "invalid resource version: {rv}"
                ))));
            }
        },
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    // A view's objects are stored (and logged) as another type's: a watch on either sees every
    // write through both.
    let (scope_group, scope_plural) = state.store.storage_key(&rt);
    let stored_type = (scope_group.clone(), scope_plural.clone());
    let scope_ns = ns.clone();
    let in_scope = move |g: &str, p: &str, n: &str| {
        g == scope_group && p == scope_plural && scope_ns.as_deref().is_none_or(|s| s == n)
    };
    let view = rt.view();
    let sub = state
        .store
        .subscribe_type(&stored_type.0, &stored_type.1, &in_scope, from);
    let bookmark_every = state.bookmark_interval;
    tokio::spawn(async move {
        let mut sub = match sub {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(enc.line("ERROR", &e.to_status())).await;
                return;
            }
        };
        let mut last_rv = sub.at;
        for ev in std::mem::take(&mut sub.replay) {
            if let Some(b) = render(enc, &ev, &filter, view)
                && tx.send(b).await.is_err()
            {
                return;
            }
        }
        if initial_events {
            let b = bookmark(enc, &rt, last_rv, true);
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.reset();
        loop {
            let expired = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = sub.live.recv() => match ev {
                    Ok(ev) => {
                        last_rv = ev.rv;
                        if !in_scope(&ev.group, &ev.plural, &ev.namespace) {
                            continue;
                        }
                        if let Some(b) = render(enc, &ev, &filter, view)
                            && tx.send(b).await.is_err()
                        {
                            return;
                        }
                    }
                    // A watcher that fell behind is closed; the client resumes from its last rv.
                    Err(RecvError::Lagged(missed)) => {
                        // A warning, as the API server's cacher logs one for each watcher
                        // it closes for not keeping up.
                        tracing::warn!(
                            resource = %rt.plural,
                            last_rv,
                            missed,
                            "kubesim: closing a watch that fell behind the live events"
                        );
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = sub.dropped.changed() => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(bookmark(enc, &rt, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
                _ = expired => return,
            }
        }
    });
    Ok(rx)
}

/// How watch events are written: newline-delimited JSON, or length-prefixed protobuf
/// `WatchEvent` frames when the client asked for protobuf.
#[derive(Debug, Clone, Copy)]
struct Encoding {
    protobuf: bool,
}

impl Encoding {
    fn line(self, kind: &str, object: &Value) -> Bytes {
        if self.protobuf {
            match crate::protobuf::watch_frame(kind, object) {
                Ok(frame) => return Bytes::from(frame),
                Err(e) => {
                    // Only objects the store holds get here, and they are built-in types.
                    tracing::warn!(error = %e, "kubesim: cannot encode a watch event as protobuf");
                    return Bytes::new();
                }
            }
        }
        // Written by hand: `type` first, as the API server writes it (clients that read the
        // tag first decode the object directly instead of buffering it), and the object
        // serialised in place rather than copied into a wrapper first.
        let mut v = Vec::with_capacity(4096);
        v.extend_from_slice(b"{\"type\":\"");
        v.extend_from_slice(kind.as_bytes());
        v.extend_from_slice(b"\",\"object\":");
        if serde_json::to_writer(&mut v, object).is_err() {
            return Bytes::new();
        }
        v.extend_from_slice(b"}\n");
        Bytes::from(v)
    }
}

fn bookmark(enc: Encoding, rt: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    enc.line(
        "BOOKMARK",
        &json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": metadata}),
    )
}

/// Turns a store event into the watch event a selective watcher sees, if any: an object that
/// leaves the selection is DELETED for that watcher, one that enters it is ADDED. Selectors
/// apply to the stored form (field selectors name the stored type's fields, as the API
/// server's do); a view's watcher gets the object as the view serves it.
fn render(
    enc: Encoding,
    ev: &Event,
    filter: &Filter,
    view: Option<&'static crate::resources::View>,
) -> Option<Bytes> {
    let now = filter.matches(&ev.object);
    let kind = match ev.kind {
        EventType::Added => now.then_some("ADDED"),
        EventType::Deleted => now.then_some("DELETED"),
        EventType::Modified => {
            let before = ev.previous.as_ref().is_none_or(|p| filter.matches(p));
            match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
    }?;
    match view {
        Some(v) => Some(enc.line(kind, &(v.from_storage)(Value::clone(&ev.object)))),
        None => Some(enc.line(kind, &ev.object)),
    }
}
