//! The workload, what users of the stack do while the faults come: SparkApplications of every
//! restart policy (`applications`), and direct REST submissions with repeats, look-ups and
//! followed logs (`submissions`), each REST call retried by one rule (`retries`). Both clean up after themselves as users do, so a soak of an
//! hour keeps a cluster of the same size throughout.

use std::time::Duration;

pub mod applications;
pub mod retries;
pub mod submissions;

/// The job namespaces: the sandbox's, where the applications run, and a second one REST
/// submissions also use (one new id is sometimes sent into both at once).
pub const JOB_NAMESPACES: [&str; 2] = [crate::NAMESPACE, "chaos-jobs"];

/// How long a finished application or REST driver stays before its user deletes it: long
/// enough for the monitor to see it and for the retention record to be written.
pub const RETIRE_AFTER: Duration = Duration::from_secs(30);

/// How many attempts one REST call makes before the workload gives up on it.
pub const ATTEMPTS: u32 = 12;
/// The pause between two attempts when the answer names none.
pub const RETRY_PAUSE: Duration = Duration::from_millis(400);

/// The error's kind, with the envelope's code when the service refused.
pub fn error_name(error: &submitter_client::SubmitError) -> String {
    match error {
        submitter_client::SubmitError::Rejected { code_text, .. } => {
            format!("rejected_{}", code_text.to_lowercase())
        }
        other => other.kind().to_owned(),
    }
}
