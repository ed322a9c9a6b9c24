//! The `error_code` table: the contract's eight codes and the ones we add in the same shape.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// A machine-readable error code. The contract's codes keep its HTTP statuses and retry rules;
/// the added ones (401, 403, 404, 409 `SUBMISSION_ID_CONFLICT` and
/// `DRIVER_OWNED_BY_APPLICATION`, 410, 413, 429 `TOO_MANY_LOG_STREAMS` and `QUOTA_EXCEEDED`) cover
/// cases its table has no row for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: malformed JSON or missing required fields.
    BadRequest,
    /// 400: `spark_submit_args` failed Spark argument parsing.
    InvalidSparkSubmitArgs,
    /// 405: a method the route does not serve (the Go client's readiness probe is a GET).
    MethodNotAllowed,
    /// 415: `Content-Type` is not `application/json`.
    UnsupportedMediaType,
    /// 409: the driver pod exists for a different submission id.
    DriverPodAlreadyExists,
    /// 409 (added): this submission id is bound to another driver (`namespace:pod`); another
    /// driver needs another id.
    SubmissionIdConflict,
    /// 422: a pod template is structurally invalid.
    InvalidPodTemplate,
    /// 500: unexpected failure; retry.
    InternalServerError,
    /// 503: at capacity; back off (`Retry-After`) and retry.
    SubmitterOverloaded,
    /// 401 (added): no client identity (no client certificate).
    Unauthenticated,
    /// 403 (added): the identity may not use this namespace or service account.
    Forbidden,
    /// 404 (added): unknown route, submission or driver.
    NotFound,
    /// 413 (added): the body exceeds the limit (1 MiB).
    PayloadTooLarge,
    /// 410 (added): the submission is known (its retention record) but its driver pod is gone,
    /// so there is no log to read.
    DriverGone,
    /// 409 (added): the driver belongs to a `SparkApplication`, whose operator would only start
    /// it again; delete or suspend the application instead.
    DriverOwnedByApplication,
    /// 429 (added): the identity has as many log streams open as it may; retry after
    /// `Retry-After`, or close one.
    TooManyLogStreams,
    /// 429 (added): a ResourceQuota of the namespace has no room for the driver's objects;
    /// nothing was left behind, and the same submission succeeds once the quota has room
    /// (`Retry-After`). Not retried by client libraries on their own: the wait is the cluster's,
    /// not the service's, so the caller decides (the operator counts it as a submission failure).
    QuotaExceeded,
}

impl ErrorCode {
    /// Every code, contract codes first, for tables and tests.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::BadRequest,
        ErrorCode::InvalidSparkSubmitArgs,
        ErrorCode::MethodNotAllowed,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::DriverPodAlreadyExists,
        ErrorCode::InvalidPodTemplate,
        ErrorCode::InternalServerError,
        ErrorCode::SubmitterOverloaded,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::PayloadTooLarge,
        ErrorCode::SubmissionIdConflict,
        ErrorCode::DriverGone,
        ErrorCode::DriverOwnedByApplication,
        ErrorCode::TooManyLogStreams,
        ErrorCode::QuotaExceeded,
    ];

    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::InvalidSparkSubmitArgs => "INVALID_SPARK_SUBMIT_ARGS",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            ErrorCode::DriverPodAlreadyExists => "DRIVER_POD_ALREADY_EXISTS",
            ErrorCode::InvalidPodTemplate => "INVALID_POD_TEMPLATE",
            ErrorCode::InternalServerError => "INTERNAL_SERVER_ERROR",
            ErrorCode::SubmitterOverloaded => "SUBMITTER_OVERLOADED",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::SubmissionIdConflict => "SUBMISSION_ID_CONFLICT",
            ErrorCode::DriverGone => "DRIVER_GONE",
            ErrorCode::DriverOwnedByApplication => "DRIVER_OWNED_BY_APPLICATION",
            ErrorCode::TooManyLogStreams => "TOO_MANY_LOG_STREAMS",
            ErrorCode::QuotaExceeded => "QUOTA_EXCEEDED",
        }
    }

    /// The HTTP status answered with this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest | ErrorCode::InvalidSparkSubmitArgs => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::DriverPodAlreadyExists
            | ErrorCode::SubmissionIdConflict
            | ErrorCode::DriverOwnedByApplication => 409,
            ErrorCode::DriverGone => 410,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::InvalidPodTemplate => 422,
            ErrorCode::TooManyLogStreams => 429,
            ErrorCode::QuotaExceeded => 429,
            ErrorCode::InternalServerError => 500,
            ErrorCode::SubmitterOverloaded => 503,
        }
    }

    /// Whether a client should retry, as the Go client's `IsRetryable` decides: only on the two
    /// server-side conditions (a 401 among the rest: without a certificate, a retry cannot
    /// succeed), on a log stream refused for the moment (the Go client never opens one); a 429
    /// `QUOTA_EXCEEDED` is for the caller to retry later, after `Retry-After`.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::InternalServerError
                | ErrorCode::SubmitterOverloaded
                | ErrorCode::TooManyLogStreams
        )
    }

    /// Whether the answer carries `Retry-After`: the refusals that pass with time.
    pub fn sends_retry_after(self) -> bool {
        matches!(
            self,
            ErrorCode::SubmitterOverloaded
                | ErrorCode::TooManyLogStreams
                | ErrorCode::QuotaExceeded
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wire code this build does not know (a newer server, or another service's answer).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown error code {0:?}")]
pub struct UnknownErrorCode(pub String);

impl FromStr for ErrorCode {
    type Err = UnknownErrorCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == s)
            .ok_or_else(|| UnknownErrorCode(s.to_owned()))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract's table, row by row: code, status, retry.
    const CONTRACT: [(&str, u16, bool); 8] = [
        ("BAD_REQUEST", 400, false),
        ("INVALID_SPARK_SUBMIT_ARGS", 400, false),
        ("METHOD_NOT_ALLOWED", 405, false),
        ("UNSUPPORTED_MEDIA_TYPE", 415, false),
        ("DRIVER_POD_ALREADY_EXISTS", 409, false),
        ("INVALID_POD_TEMPLATE", 422, false),
        ("INTERNAL_SERVER_ERROR", 500, true),
        ("SUBMITTER_OVERLOADED", 503, true),
    ];

    #[test]
    fn contract_table_rows_hold() {
        for (text, status, retry) in CONTRACT {
            let code: ErrorCode = text.parse().unwrap();
            assert_eq!(code.as_str(), text);
            assert_eq!(code.http_status(), status, "{text}");
            assert_eq!(code.retryable(), retry, "{text}");
        }
    }

    #[test]
    fn added_codes_have_their_statuses_and_are_not_retryable() {
        let added = [
            ("UNAUTHENTICATED", 401),
            ("FORBIDDEN", 403),
            ("NOT_FOUND", 404),
            ("PAYLOAD_TOO_LARGE", 413),
            ("SUBMISSION_ID_CONFLICT", 409),
            ("DRIVER_GONE", 410),
            ("DRIVER_OWNED_BY_APPLICATION", 409),
            ("QUOTA_EXCEEDED", 429),
        ];
        for (text, status) in added {
            let code: ErrorCode = text.parse().unwrap();
            assert_eq!(code.http_status(), status);
            assert!(!code.retryable());
        }
    }

    #[test]
    fn a_refused_log_stream_is_retried_after_the_time_it_names() {
        let code: ErrorCode = "TOO_MANY_LOG_STREAMS".parse().unwrap();
        assert_eq!(code.http_status(), 429);
        assert!(code.retryable());
        assert!(code.sends_retry_after());
        assert!(!ErrorCode::InternalServerError.sends_retry_after());
    }

    #[test]
    fn every_code_round_trips_through_json() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{code}\""));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
        }
    }

    #[test]
    fn the_prose_example_code_is_not_ours() {
        // The seed's prose shows POD_TEMPLATE_INVALID; its constants (and we) say otherwise.
        assert!("POD_TEMPLATE_INVALID".parse::<ErrorCode>().is_err());
    }
}
