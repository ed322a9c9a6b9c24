//! How a chaos user retries one REST call: every answer is checked against the REST contract
//! and counted; a refusal that is not retryable ends the call; between attempts the user waits
//! what the answer's `Retry-After` asks, capped at five pauses, as a CI pipeline would.

use std::future::Future;

use submitter_client::SubmitError;

use super::submissions::Users;
use super::{ATTEMPTS, RETRY_PAUSE, error_name};
use crate::chaos::invariants;

/// Calls `call` up to [`ATTEMPTS`] times until it answers. `label` names the call in the
/// operation counts (`{label}_error_{kind}` per failure, `{label}_gave_up` when every attempt
/// failed); `what` names it in a contract violation (`kill ID`, `submit ID`).
pub async fn with_retries<T, F, Fut>(
    users: &Users,
    label: &str,
    what: &str,
    mut call: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SubmitError>>,
{
    let tally = &users.tally;
    for _ in 0..ATTEMPTS {
        match call().await {
            Ok(answer) => {
                tally.check(invariants::REST_CONTRACT, None);
                return Some(answer);
            }
            Err(error) => {
                tally.check(
                    invariants::REST_CONTRACT,
                    invariants::rest_answer(&error).map(|d| format!("{what}: {d}")),
                );
                tally.operation(&format!("{label}_error_{}", error_name(&error)));
                tracing::debug!(%error, what, "REST call failed");
                if !error.retryable() {
                    return None;
                }
                let pause = error
                    .retry_after()
                    .unwrap_or(RETRY_PAUSE)
                    .min(RETRY_PAUSE * 5);
                tokio::time::sleep(pause).await;
            }
        }
    }
    tally.operation(&format!("{label}_gave_up"));
    None
}
