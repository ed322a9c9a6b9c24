//! When to try again and how long to wait: pure, no clock and no randomness (jitter is an
//! input).

use std::time::Duration;

use crate::SubmitError;

/// Ceiling of the exponential backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Ceiling on an honoured `Retry-After`, so a wrong header cannot park a client for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Whether to try again after `attempt` (0-based) failed with `error`, given `max_attempts`.
pub fn should_retry(attempt: u32, max_attempts: u32, error: &SubmitError) -> bool {
    attempt.saturating_add(1) < max_attempts.max(1) && error.retryable()
}

/// The pause after failed attempt `attempt` (0-based): `backoff · 2^attempt`, capped at
/// [`MAX_BACKOFF`], scaled into [½, 1] by `jitter_fraction` ∈ [0, 1] (equal jitter), then raised
/// to the server's `retry_after` (capped at [`MAX_RETRY_AFTER`]). Pure: no clock, no randomness.
pub fn next_delay(
    attempt: u32,
    backoff: Duration,
    retry_after: Option<Duration>,
    jitter_fraction: f64,
) -> Duration {
    let factor = 2u32.saturating_pow(attempt.min(31));
    let exponential = backoff.saturating_mul(factor).min(MAX_BACKOFF);
    let jitter = if jitter_fraction.is_nan() {
        0.0
    } else {
        jitter_fraction.clamp(0.0, 1.0)
    };
    let jittered = exponential.mul_f64(0.5 + jitter / 2.0);
    match retry_after {
        Some(asked) => jittered.max(asked.min(MAX_RETRY_AFTER)),
        None => jittered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submission::api::ErrorCode;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn backoff_doubles_from_half_to_full_with_jitter() {
        let backoff = MS(100);
        assert_eq!(next_delay(0, backoff, None, 0.0), MS(50));
        assert_eq!(next_delay(0, backoff, None, 1.0), MS(100));
        assert_eq!(next_delay(1, backoff, None, 1.0), MS(200));
        assert_eq!(next_delay(3, backoff, None, 0.5), MS(600));
    }

    #[test]
    fn backoff_is_capped_and_never_overflows() {
        assert_eq!(next_delay(40, MS(100), None, 1.0), MAX_BACKOFF);
        assert_eq!(next_delay(u32::MAX, Duration::MAX, None, 1.0), MAX_BACKOFF);
    }

    #[test]
    fn retry_after_raises_but_never_lowers_the_delay() {
        assert_eq!(
            next_delay(0, MS(100), Some(Duration::from_secs(2)), 0.0),
            Duration::from_secs(2)
        );
        assert_eq!(next_delay(5, MS(100), Some(MS(10)), 1.0), MS(3200));
        assert_eq!(
            next_delay(0, MS(1), Some(Duration::from_secs(86_400)), 0.0),
            MAX_RETRY_AFTER
        );
    }

    #[test]
    fn odd_jitter_values_are_clamped() {
        assert_eq!(next_delay(0, MS(100), None, f64::NAN), MS(50));
        assert_eq!(next_delay(0, MS(100), None, -3.0), MS(50));
        assert_eq!(next_delay(0, MS(100), None, 7.0), MS(100));
    }

    fn rejected(code: ErrorCode) -> SubmitError {
        SubmitError::Rejected {
            status: code.http_status(),
            code: Some(code),
            code_text: code.as_str().into(),
            message: "m".into(),
            submission_id: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn retries_only_retryable_codes_and_only_while_attempts_remain() {
        for code in ErrorCode::ALL {
            assert_eq!(
                should_retry(0, 3, &rejected(code)),
                code.retryable(),
                "{code}"
            );
        }
        let overloaded = rejected(ErrorCode::SubmitterOverloaded);
        assert!(should_retry(1, 3, &overloaded));
        assert!(!should_retry(2, 3, &overloaded));
        assert!(!should_retry(0, 0, &overloaded));
        assert!(should_retry(0, 3, &SubmitError::TimedOut { after: MS(1) }));
    }

    #[test]
    fn unknown_codes_and_non_envelope_answers_follow_their_rules() {
        let unknown = SubmitError::Rejected {
            status: 500,
            code: None,
            code_text: "NEW_CODE".into(),
            message: "m".into(),
            submission_id: String::new(),
            retry_after: None,
        };
        assert!(!unknown.retryable());
        let page = |status| SubmitError::UnexpectedResponse {
            status,
            body: String::new(),
            retry_after: None,
        };
        assert!(page(502).retryable());
        assert!(page(429).retryable());
        assert!(!page(404).retryable());
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Every delay lies in [b/2, b] for the capped exponential b, and never below the
            /// (capped) Retry-After.
            #[test]
            fn delay_stays_within_its_bounds(
                attempt in 0u32..80,
                backoff_ms in 0u64..10_000,
                retry_after_s in prop::option::of(0u64..1_000),
                jitter in -1.0f64..2.0,
            ) {
                let backoff = MS(backoff_ms);
                let retry_after = retry_after_s.map(Duration::from_secs);
                let delay = next_delay(attempt, backoff, retry_after, jitter);
                let ceiling = backoff.saturating_mul(2u32.saturating_pow(attempt.min(31))).min(MAX_BACKOFF);
                let floor = retry_after.map_or(Duration::ZERO, |asked| asked.min(MAX_RETRY_AFTER));
                prop_assert!(delay >= (ceiling / 2).max(floor));
                prop_assert!(delay <= ceiling.max(floor));
            }

            /// More failures never mean a shorter pause (same jitter, no Retry-After).
            #[test]
            fn delay_never_shrinks(attempt in 0u32..80, backoff_ms in 0u64..10_000, jitter in 0.0f64..=1.0) {
                let backoff = MS(backoff_ms);
                prop_assert!(next_delay(attempt + 1, backoff, None, jitter) >= next_delay(attempt, backoff, None, jitter));
            }
        }
    }
}
