//! The query parameters and bodies of the routes that operate a submission by its id: its
//! driver's log, its kill, and the list of what a client may see. The server reads each query
//! with serde (unknown parameters are refused, so a misspelt one never silently means nothing)
//! and checks it with `check`; the client writes it with `pairs`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{DriverPhase, DriverStatus};

/// The path segment that turns a driver's route into its log's.
pub const LOG_SEGMENT: &str = "log";

/// Most items on one page of the list.
pub const MAX_LIST_LIMIT: u32 = 1000;

/// Items on one page of the list when the client names no limit.
pub const DEFAULT_LIST_LIMIT: u32 = 100;

/// Why a query was refused (400 `BAD_REQUEST`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QueryError {
    #[error("{parameter} must be at least {minimum}, not {value}")]
    BelowMinimum {
        parameter: &'static str,
        minimum: i64,
        value: i64,
    },
    #[error("{parameter} must be at most {maximum}, not {value}")]
    AboveMaximum {
        parameter: &'static str,
        maximum: i64,
        value: i64,
    },
    #[error("{parameter} must not be empty")]
    Empty { parameter: &'static str },
}

impl QueryError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            QueryError::BelowMinimum { .. } => "below_minimum",
            QueryError::AboveMaximum { .. } => "above_maximum",
            QueryError::Empty { .. } => "empty",
        }
    }
}

fn at_least(parameter: &'static str, value: Option<i64>, minimum: i64) -> Result<(), QueryError> {
    match value {
        Some(value) if value < minimum => Err(QueryError::BelowMinimum {
            parameter,
            minimum,
            value,
        }),
        _ => Ok(()),
    }
}

fn not_empty(parameter: &'static str, value: Option<&str>) -> Result<(), QueryError> {
    match value {
        Some("") => Err(QueryError::Empty { parameter }),
        _ => Ok(()),
    }
}

fn push<T: ToString>(
    pairs: &mut Vec<(&'static str, String)>,
    key: &'static str,
    value: &Option<T>,
) {
    if let Some(value) = value {
        pairs.push((key, value.to_string()));
    }
}

/// `GET …/log`: the API server's pod log options, in our spelling. Absent: the API server's
/// default (the whole log of the current instance, no timestamps, not followed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// Stream new lines as the container writes them; the stream ends when it exits.
    pub follow: Option<bool>,
    /// Only the last N lines (0: none).
    pub tail_lines: Option<i64>,
    /// Only lines written in the last N seconds.
    pub since_seconds: Option<i64>,
    /// At most N bytes of log.
    pub limit_bytes: Option<i64>,
    /// Each line prefixed with the time it was written (RFC 3339).
    pub timestamps: Option<bool>,
    /// The previous instance of the container (after a restart).
    pub previous: Option<bool>,
    /// Which container; absent: the driver container (never a sidecar).
    pub container: Option<String>,
}

impl LogQuery {
    /// What the API server would refuse (422), refused here first with our parameter names.
    pub fn check(&self) -> Result<(), QueryError> {
        at_least("tail_lines", self.tail_lines, 0)?;
        at_least("since_seconds", self.since_seconds, 1)?;
        at_least("limit_bytes", self.limit_bytes, 1)?;
        not_empty("container", self.container.as_deref())
    }

    /// Whether the log is followed.
    pub fn follows(&self) -> bool {
        self.follow == Some(true)
    }

    /// The parameters set, for a query string (values not yet percent-encoded).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        push(&mut pairs, "follow", &self.follow);
        push(&mut pairs, "tail_lines", &self.tail_lines);
        push(&mut pairs, "since_seconds", &self.since_seconds);
        push(&mut pairs, "limit_bytes", &self.limit_bytes);
        push(&mut pairs, "timestamps", &self.timestamps);
        push(&mut pairs, "previous", &self.previous);
        push(&mut pairs, "container", &self.container);
        pairs
    }
}

/// `DELETE …`: how the driver is stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillQuery {
    /// Seconds the driver gets between SIGTERM and SIGKILL (0: at once); absent: the pod's own
    /// `terminationGracePeriodSeconds`, as `spark-submit --kill` without
    /// `spark.kubernetes.appKillPodDeletionGracePeriod` leaves it.
    pub grace_period_seconds: Option<i64>,
}

impl KillQuery {
    pub fn check(&self) -> Result<(), QueryError> {
        at_least("grace_period_seconds", self.grace_period_seconds, 0)
    }

    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        push(
            &mut pairs,
            "grace_period_seconds",
            &self.grace_period_seconds,
        );
        pairs
    }
}

/// `GET /api/v1/spark-submit`: which submissions, and where the page starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this namespace; absent: every namespace the caller may read.
    pub namespace: Option<String>,
    /// Only drivers in this phase.
    pub phase: Option<DriverPhase>,
    /// Items on the page, 1 to [`MAX_LIST_LIMIT`]; absent: [`DEFAULT_LIST_LIMIT`].
    pub limit: Option<u32>,
    /// The previous page's `continue`: the page starts after it.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

impl ListQuery {
    pub fn check(&self) -> Result<(), QueryError> {
        let limit = self.limit.map(i64::from);
        at_least("limit", limit, 1)?;
        if let Some(value) = limit.filter(|limit| *limit > i64::from(MAX_LIST_LIMIT)) {
            return Err(QueryError::AboveMaximum {
                parameter: "limit",
                maximum: i64::from(MAX_LIST_LIMIT),
                value,
            });
        }
        not_empty("namespace", self.namespace.as_deref())
    }

    /// The page size asked for.
    pub fn page_size(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIST_LIMIT) as usize
    }

    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        push(&mut pairs, "namespace", &self.namespace);
        if let Some(phase) = self.phase {
            pairs.push(("phase", format!("{phase:?}")));
        }
        push(&mut pairs, "limit", &self.limit);
        push(&mut pairs, "continue", &self.continue_token);
        pairs
    }
}

/// `GET /api/v1/spark-submit` body: one page of the caller's submissions, in a stable order
/// (namespace, then submission id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListResponse {
    pub items: Vec<DriverStatus>,
    /// Present when more items may follow: pass it as `continue` for the next page.
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_options_below_the_api_servers_minimums_are_refused_by_name() {
        let cases = [
            (LogQuery::default(), Ok(())),
            (
                LogQuery {
                    tail_lines: Some(0),
                    since_seconds: Some(1),
                    limit_bytes: Some(1),
                    ..LogQuery::default()
                },
                Ok(()),
            ),
            (
                LogQuery {
                    tail_lines: Some(-1),
                    ..LogQuery::default()
                },
                Err("tail_lines"),
            ),
            (
                LogQuery {
                    since_seconds: Some(0),
                    ..LogQuery::default()
                },
                Err("since_seconds"),
            ),
            (
                LogQuery {
                    limit_bytes: Some(0),
                    ..LogQuery::default()
                },
                Err("limit_bytes"),
            ),
            (
                LogQuery {
                    container: Some(String::new()),
                    ..LogQuery::default()
                },
                Err("container"),
            ),
        ];
        for (query, expected) in cases {
            let checked = query.check().map_err(|error| match error {
                QueryError::BelowMinimum { parameter, .. }
                | QueryError::AboveMaximum { parameter, .. }
                | QueryError::Empty { parameter } => parameter,
            });
            assert_eq!(checked, expected, "{query:?}");
        }
    }

    #[test]
    fn list_limits_run_from_one_to_the_maximum() {
        let limit = |limit| ListQuery {
            limit: Some(limit),
            ..ListQuery::default()
        };
        assert!(limit(1).check().is_ok());
        assert!(limit(MAX_LIST_LIMIT).check().is_ok());
        assert_eq!(limit(0).check().unwrap_err().kind(), "below_minimum");
        assert_eq!(
            limit(MAX_LIST_LIMIT + 1).check().unwrap_err().kind(),
            "above_maximum"
        );
        assert_eq!(ListQuery::default().page_size(), 100);
    }

    #[test]
    fn kill_grace_period_is_not_negative() {
        let grace = |seconds| KillQuery {
            grace_period_seconds: Some(seconds),
        };
        assert!(grace(0).check().is_ok());
        assert!(grace(-1).check().is_err());
    }

    #[test]
    fn list_page_without_more_has_no_continue() {
        let last = serde_json::to_value(ListResponse::default()).unwrap();
        assert_eq!(last, serde_json::json!({"items": []}));
        let more = ListResponse {
            items: Vec::new(),
            continue_token: Some("t".into()),
        };
        assert_eq!(
            serde_json::to_value(more).unwrap(),
            serde_json::json!({"items": [], "continue": "t"})
        );
    }

    #[test]
    fn pairs_name_only_what_is_set() {
        let query = LogQuery {
            follow: Some(true),
            tail_lines: Some(10),
            ..LogQuery::default()
        };
        assert_eq!(
            query.pairs(),
            [
                ("follow", "true".to_owned()),
                ("tail_lines", "10".to_owned())
            ]
        );
        let list = ListQuery {
            phase: Some(DriverPhase::Running),
            continue_token: Some("abc".into()),
            ..ListQuery::default()
        };
        assert_eq!(
            list.pairs(),
            [
                ("phase", "Running".to_owned()),
                ("continue", "abc".to_owned())
            ]
        );
    }
}
