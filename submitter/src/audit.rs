//! The audit log: one structured line per submission attempt, status look-up, list, log read and
//! kill, saying who asked (the client certificate's identity), about what (namespace, submission
//! id, driver pod and uid), and how it ended (HTTP status, outcome code, duplicate flag,
//! latency).
//!
//! Lines are `tracing` events of target [`TARGET`] at INFO, so they go wherever the service's
//! logs go, or, with `submitter serve --audit-log FILE`, to that file alone (JSON, one event a
//! line, appended; see [`open_file`]).
//!
//! How the line is assembled: [`record`] is a middleware outside every other layer of the API
//! routes that can answer (identity budget, load shedding, timeout, body limit, identity check),
//! so attempts refused there are audited too. It gives the request a task-local [`Details`]
//! that the code below fills in as it learns things (`note_*`: the submission id once the body
//! is read, namespace and pod once the submission is built, the driver's uid once it exists,
//! the envelope's code when the answer is an error) and writes the line when the answer is
//! ready. Outside a request (tests, the sweeper) the `note_*` functions do nothing.
//!
//! Secrets never appear (decided): a line holds names and codes only, never the arguments, a
//! conf value, a template or a message; every field is either from the path, from the client
//! certificate, from what the API server returned (names and uids), or one of a fixed set of
//! codes. The service's other logs follow the same rule where client input could reach them:
//! a failed creation is logged with `SubmitDriverError::loggable_cause`, without the API
//! server's message.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use submission::api::{DRIVERS_PATH, DriverStatus, LOG_SEGMENT, SUBMIT_PATH, SubmitResponse};

use crate::fairness::charged_identity;
use crate::tls::PeerIdentity;

/// The `tracing` target of audit lines.
pub const TARGET: &str = "submitter::audit";

/// What an audited request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `POST /api/v1/spark-submit`.
    Submit,
    /// `GET /api/v1/spark-submit`.
    List,
    /// `GET /api/v1/spark-submit/{submission_id}`.
    StatusBySubmission,
    /// `GET /api/v1/drivers/{namespace}/{pod}`.
    StatusByDriver,
    /// `GET /api/v1/spark-submit/{submission_id}/log`.
    LogBySubmission,
    /// `GET /api/v1/drivers/{namespace}/{pod}/log`.
    LogByDriver,
    /// `DELETE /api/v1/spark-submit/{submission_id}`.
    KillBySubmission,
    /// `DELETE /api/v1/drivers/{namespace}/{pod}`.
    KillByDriver,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Submit => "submit",
            Action::List => "list",
            Action::StatusBySubmission => "status_by_submission",
            Action::StatusByDriver => "status_by_driver",
            Action::LogBySubmission => "log_by_submission",
            Action::LogByDriver => "log_by_driver",
            Action::KillBySubmission => "kill_by_submission",
            Action::KillByDriver => "kill_by_driver",
        }
    }
}

/// What is known about an audited request; filled in while it is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    pub submission_id: String,
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub duplicate: bool,
    pub dry_run: bool,
    /// The outcome code: the envelope's error code, or one of ours for a success.
    pub outcome: Option<&'static str>,
}

tokio::task_local! {
    static CURRENT: Arc<Mutex<Details>>;
}

fn note(fill: impl FnOnce(&mut Details)) {
    // Outside an audited request there is nothing to fill in.
    let _ = CURRENT.try_with(|details| {
        fill(&mut details.lock().unwrap_or_else(PoisonError::into_inner));
    });
}

/// The request's submission id (read from its body).
pub fn note_submission_id(id: &str) {
    note(|details| details.submission_id = id.to_owned());
}

/// The driver a submission targets, once built.
pub fn note_target(namespace: &str, pod: &str, dry_run: bool) {
    note(|details| {
        details.namespace = namespace.to_owned();
        details.pod = pod.to_owned();
        details.dry_run = dry_run;
    });
}

/// The driver a submission was answered with.
pub fn note_driver(answer: &SubmitResponse) {
    note(|details| {
        details.namespace = answer.namespace.clone();
        details.pod = answer.driver_pod_name.clone();
        details.uid = answer.driver_pod_uid.clone();
        details.duplicate = answer.duplicate_submission;
        details.outcome = Some(if answer.duplicate_submission {
            "DUPLICATE"
        } else {
            "CREATED"
        });
    });
}

/// A dry run's success.
pub fn note_dry_run() {
    note(|details| {
        details.dry_run = true;
        details.outcome = Some("DRY_RUN");
    });
}

/// The driver a status look-up found.
pub fn note_status(status: &DriverStatus) {
    note(|details| {
        if let Some(id) = &status.submission_id {
            details.submission_id = id.clone();
        }
        details.namespace = status.namespace.clone();
        details.pod = status.driver_pod_name.clone();
        details.uid = status.driver_pod_uid.clone();
        details.outcome = Some("FOUND");
    });
}

/// How a request that found its driver ended, when not as a plain look-up (`LOG`, `KILLED`).
pub fn note_outcome(outcome: &'static str) {
    note(|details| details.outcome = Some(outcome));
}

/// A list's namespace filter, when it has one.
pub fn note_namespace(namespace: &str) {
    note(|details| details.namespace = namespace.to_owned());
}

/// An error answer in the envelope: its code, and its submission id when none is known yet.
pub fn note_error(code: &'static str, submission_id: &str) {
    note(|details| {
        details.outcome = Some(code);
        if details.submission_id.is_empty() {
            details.submission_id = submission_id.to_owned();
        }
    });
}

/// Which audited action `method` on `path` is, with what its path names.
pub fn action(method: &Method, path: &str) -> Option<(Action, Details)> {
    let mut details = Details::default();
    let (get, delete) = (method == Method::GET, method == Method::DELETE);
    if path == SUBMIT_PATH {
        return match *method {
            Method::POST => Some((Action::Submit, details)),
            Method::GET => Some((Action::List, details)),
            _ => None,
        };
    }
    if !(get || delete) {
        return None;
    }
    let log_suffix = format!("/{LOG_SEGMENT}");
    if let Some(rest) = path
        .strip_prefix(SUBMIT_PATH)
        .and_then(|rest| rest.strip_prefix('/'))
    {
        let (id, log) = match rest.strip_suffix(&log_suffix) {
            Some(id) if get && !id.contains('/') => (id, true),
            _ if rest.contains('/') => return None,
            _ => (rest, false),
        };
        details.submission_id = id.to_owned();
        let action = match (log, delete) {
            (true, _) => Action::LogBySubmission,
            (false, true) => Action::KillBySubmission,
            (false, false) => Action::StatusBySubmission,
        };
        return Some((action, details));
    }
    let rest = path
        .strip_prefix(DRIVERS_PATH)
        .and_then(|rest| rest.strip_prefix('/'))?;
    let (rest, log) = match rest.strip_suffix(&log_suffix) {
        Some(driver) if get && driver.contains('/') => (driver, true),
        _ => (rest, false),
    };
    if let Some((namespace, pod)) = rest.split_once('/') {
        details.namespace = namespace.to_owned();
        details.pod = pod.to_owned();
    }
    let action = match (log, delete) {
        (true, _) => Action::LogByDriver,
        (false, true) => Action::KillByDriver,
        (false, false) => Action::StatusByDriver,
    };
    Some((action, details))
}

/// The middleware: serves the request with a task-local [`Details`], then writes its line.
pub async fn record(request: Request, next: Next) -> Response {
    let Some((action, details)) = action(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    let peer = request.extensions().get::<PeerIdentity>();
    let identity = charged_identity(peer).to_owned();
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let details = Arc::new(Mutex::new(details));
    let started = Instant::now();
    let response = CURRENT.scope(details.clone(), next.run(request)).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let details = details.lock().unwrap_or_else(PoisonError::into_inner);
    let status = response.status().as_u16();
    // Strings as `&str`, not `%` (Display): the JSON formatter writes a `&str` as it is, but
    // formats a Display value into a new `String` first.
    tracing::info!(
        target: TARGET,
        action = action.as_str(),
        identity = identity.as_str(),
        namespace = details.namespace.as_str(),
        submission_id = details.submission_id.as_str(),
        pod = details.pod.as_str(),
        uid = details.uid.as_str(),
        duplicate = details.duplicate,
        dry_run = details.dry_run,
        status,
        outcome = details.outcome.unwrap_or(if response.status().is_success() { "OK" } else { "UNKNOWN" }),
        latency_ms,
        request_id = request_id.as_str(),
        "audit"
    );
    response
}

/// Opens (creating, appending) the file audit lines go to with `--audit-log`.
pub fn open_file(path: &Path) -> io::Result<Mutex<File>> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Mutex::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audited_actions_are_every_api_route() {
        let cases = [
            (
                Method::POST,
                "/api/v1/spark-submit",
                Some(Action::Submit),
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/spark-submit",
                Some(Action::List),
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/spark-submit/abc",
                Some(Action::StatusBySubmission),
                "abc",
                "",
            ),
            (
                Method::DELETE,
                "/api/v1/spark-submit/abc",
                Some(Action::KillBySubmission),
                "abc",
                "",
            ),
            (
                Method::GET,
                "/api/v1/spark-submit/abc/log",
                Some(Action::LogBySubmission),
                "abc",
                "",
            ),
            (
                Method::GET,
                "/api/v1/drivers/ns/pod-1",
                Some(Action::StatusByDriver),
                "",
                "ns/pod-1",
            ),
            (
                Method::DELETE,
                "/api/v1/drivers/ns/pod-1",
                Some(Action::KillByDriver),
                "",
                "ns/pod-1",
            ),
            (
                Method::GET,
                "/api/v1/drivers/ns/pod-1/log",
                Some(Action::LogByDriver),
                "",
                "ns/pod-1",
            ),
            // Health and unknown routes are not audited.
            (Method::GET, "/healthz", None, "", ""),
            (Method::PUT, "/api/v1/spark-submit/abc", None, "", ""),
            (Method::GET, "/api/v1/spark-submit/abc/extra", None, "", ""),
        ];
        for (method, path, expected, id, driver) in cases {
            let found = action(&method, path);
            assert_eq!(found.as_ref().map(|(a, _)| *a), expected, "{method} {path}");
            if let Some((_, details)) = found {
                assert_eq!(details.submission_id, id, "{path}");
                let named = if details.namespace.is_empty() {
                    String::new()
                } else {
                    format!("{}/{}", details.namespace, details.pod)
                };
                assert_eq!(named, driver, "{path}");
            }
        }
    }

    #[tokio::test]
    async fn notes_fill_the_current_request_only() {
        note_submission_id("outside");
        let details = Arc::new(Mutex::new(Details::default()));
        CURRENT
            .scope(details.clone(), async {
                note_submission_id("s-1");
                note_target("ns", "pod", false);
                note_error("FORBIDDEN", "ignored: the id is known");
            })
            .await;
        let details = details.lock().unwrap().clone();
        assert_eq!(details.submission_id, "s-1");
        assert_eq!(details.namespace, "ns");
        assert_eq!(details.outcome, Some("FORBIDDEN"));
    }
}
