//! API errors as Kubernetes `Status` objects, with the reasons and codes a real API server uses.

use serde_json::{Value, json};

/// One entry of `details.causes` (a field that failed validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
    /// The field path (`metadata.name`).
    pub field: String,
}

/// A failed API request, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The `reason` field (`NotFound`, `AlreadyExists`, ...).
    pub reason: &'static str,
    /// Human-readable message, worded as Kubernetes words it.
    pub message: String,
    /// `details.name`, `details.group`, `details.kind`.
    pub details: Option<Box<(String, String, String)>>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` (e.g. for injected 429/503 faults).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(Box::new((name.into(), group.into(), kind.into())));
        self
    }

    /// 404 for a named object: `pods "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(name, group, plural)
    }

    /// 404 for a URL that names no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 on create of an existing name.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(name, group, plural)
    }

    /// 409 on a stale resourceVersion or a failed precondition.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .with_details(name, group, plural)
    }

    /// 409 for the usual stale-write case.
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with field causes.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>()
            .join(", ");
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {summary}"),
        )
        .with_details(name, group, kind);
        e.causes = causes;
        e
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 for a request whose credentials are not valid (the API server says only
    /// "Unauthorized").
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 with the details the API server gives (object name, group, resource plural).
    pub fn forbidden_details(
        message: impl Into<String>,
        name: &str,
        group: &str,
        resource: &str,
    ) -> Self {
        Self::new(403, "Forbidden", message).with_details(name, group, resource)
    }

    /// 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; got {content_type:?}"
            ),
        )
    }

    /// 410 when a watch or continue token is older than the retained history.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 500 with no reason (`StatusReasonUnknown`, omitted from the body): what the API server
    /// answers for a failure no storage layer classified, such as a kubelet it cannot dial.
    pub fn unclassified(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// An injected failure with any code, reason picked as Kubernetes would.
    pub fn injected(code: u16, message: Option<String>) -> Self {
        let reason = reason_for(code);
        let mut e = Self::new(
            code,
            reason,
            message.unwrap_or_else(|| format!("kubesim injected fault ({code})")),
        );
        if code == 429 || code == 503 {
            e.retry_after = Some(1);
        }
        e
    }

    /// Adds causes to an error (e.g. a 409 apply conflict).
    pub fn with_causes(mut self, causes: Vec<Cause>) -> Self {
        self.causes = causes;
        self
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // Go's `omitempty`: an unknown reason is not sent.
            if let Some(o) = status.as_object_mut() {
                o.remove("reason");
            }
        }
        let mut details = serde_json::Map::new();
        if let Some((name, group, kind)) = self.details.as_deref() {
            // Empty fields are omitted, as Go's `omitempty` does.
            for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
                if !value.is_empty() {
                    details.insert(key.into(), json!(value));
                }
            }
        }
        if !self.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    self.causes
                        .iter()
                        .map(
                            |c| json!({"reason": c.reason, "message": c.message, "field": c.field}),
                        )
                        .collect(),
                ),
            );
        }
        if let Some(s) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `Failure` reasons by code, as `k8s.io/apimachinery` picks them.
pub fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// Shorthand for building a cause.
pub fn cause(reason: &'static str, field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause {
        reason,
        message: message.into(),
        field: field.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_status_matches_kubernetes_shape() {
        let s = ApiError::not_found("", "pods", "x").to_status();
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["message"], "pods \"x\" not found");
        assert_eq!(s["details"]["kind"], "pods");
    }

    #[test]
    fn invalid_lists_causes() {
        let e = ApiError::invalid(
            "",
            "Pod",
            "Bad_Name",
            vec![cause("FieldValueInvalid", "metadata.name", "Invalid value")],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    }
}
