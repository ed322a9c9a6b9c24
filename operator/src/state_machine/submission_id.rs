//! Submission ids: `<app uid>-<n>`, the next one a function of the stored status, so an operator
//! that dies before recording an answer sends the same id again.

use crate::crd::SparkApplicationStatus;

/// The id of the next submission: `<uid>-<n+1>` after `<uid>-<n>`, else `<uid>-1`. The same
/// persisted status always gives the same id.
pub fn next_submission_id(uid: &str, current: &str) -> String {
    format!(
        "{uid}-{}",
        submission_number(uid, current).saturating_add(1)
    )
}

/// Which submission of the application `id` is (1 for the first), 0 for an id not of this form.
fn submission_number(uid: &str, id: &str) -> u64 {
    id.strip_prefix(uid)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
}

/// The id the next `Submit` of an application with status `stored` sends: the stored pending id,
/// else the next one. A function of the stored status, so an operator that dies before recording
/// the answer sends the same id again.
pub fn sending_id(uid: &str, stored: &SparkApplicationStatus) -> String {
    if stored.submission_pending {
        stored.submission_id.clone()
    } else {
        next_submission_id(uid, &stored.submission_id)
    }
}

/// The attempt of its run the next `Submit` of an application with status `stored` is (1 for the
/// first): the stored one while pending, else the next.
pub fn submission_attempt(stored: &SparkApplicationStatus) -> i32 {
    if stored.submission_pending {
        stored.submission_attempts
    } else {
        stored.submission_attempts.saturating_add(1)
    }
}
