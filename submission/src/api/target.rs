//! How a request names a submission: by the id its client chose, or by its driver's
//! `namespace:pod` (what `submit` answers and orchestrators keep). Both route to the same driver.

use super::{DRIVERS_PATH, SUBMIT_PATH};

/// The submission a status, log or kill request is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// `/api/v1/spark-submit/{submission_id}`.
    Submission(String),
    /// `/api/v1/drivers/{namespace}/{pod}`.
    Driver { namespace: String, pod: String },
}

impl Target {
    /// The submission id, when the request names one.
    pub fn submission_id(&self) -> Option<&str> {
        match self {
            Target::Submission(id) => Some(id),
            Target::Driver { .. } => None,
        }
    }

    /// The target's route (status and kill), its segments percent-encoded.
    pub fn path(&self) -> String {
        match self {
            Target::Submission(id) => format!("{SUBMIT_PATH}/{}", path_segment(id)),
            Target::Driver { namespace, pod } => format!(
                "{DRIVERS_PATH}/{}/{}",
                path_segment(namespace),
                path_segment(pod)
            ),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Submission(id) => write!(f, "submission {id}"),
            Target::Driver { namespace, pod } => write!(f, "driver {namespace}:{pod}"),
        }
    }
}

/// Percent-encodes one path segment (everything but RFC 3986 unreserved characters).
pub fn path_segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(path_segment("abc-1.2_x~"), "abc-1.2_x~");
        assert_eq!(path_segment("a/b c:d"), "a%2Fb%20c%3Ad");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    #[test]
    fn targets_route_to_their_paths() {
        assert_eq!(
            Target::Submission("run 1".into()).path(),
            "/api/v1/spark-submit/run%201"
        );
        let driver = Target::Driver {
            namespace: "spark".into(),
            pod: "pi-driver".into(),
        };
        assert_eq!(driver.path(), "/api/v1/drivers/spark/pi-driver");
        assert_eq!(driver.to_string(), "driver spark:pi-driver");
    }
}
