//! Reading the service's answers as the Go client reads them: a success as its type, an error
//! envelope as [`SubmitError::Rejected`], anything else as an unexpected answer.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::SubmitError;

/// Longest excerpt of an unexpected body kept in an error, as the Go client's.
const MAX_ERROR_BODY_CHARS: usize = 200;

/// The error envelope read leniently, as Go reads it: any code string, missing fields empty.
#[derive(Deserialize)]
struct LooseErrorResponse {
    #[serde(default)]
    submission_id: String,
    #[serde(default)]
    error_code: String,
    #[serde(default)]
    message: String,
}

/// Reads an answer as the Go client's `parseSubmitResponse` does.
pub(crate) fn decode<T: DeserializeOwned>(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    success: &[StatusCode],
) -> Result<T, SubmitError> {
    let code = status.as_u16();
    if success.contains(&status) {
        return serde_json::from_slice(body).map_err(|source| SubmitError::DecodeResponse {
            status: code,
            source,
        });
    }
    Err(refusal(status, headers, body))
}

/// A non-success answer as an error: the envelope when it is one, else an excerpt.
pub(crate) fn refusal(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> SubmitError {
    let code = status.as_u16();
    let retry_after = retry_after(headers);
    match serde_json::from_slice::<LooseErrorResponse>(body) {
        Ok(envelope) if !envelope.message.is_empty() => SubmitError::Rejected {
            status: code,
            code: envelope.error_code.parse().ok(),
            code_text: envelope.error_code,
            message: envelope.message,
            submission_id: envelope.submission_id,
            retry_after,
        },
        _ => {
            let text = String::from_utf8_lossy(body);
            let mut excerpt: String = text.chars().take(MAX_ERROR_BODY_CHARS).collect();
            if text.chars().count() > MAX_ERROR_BODY_CHARS {
                excerpt.push_str("...");
            }
            SubmitError::UnexpectedResponse {
                status: code,
                body: excerpt,
                retry_after,
            }
        }
    }
}

/// `Retry-After` in delta-seconds. The HTTP-date form is ignored: honouring it would need a
/// clock read, and our service sends seconds.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use submission::api::{ErrorCode, SubmitResponse};

    #[test]
    fn answers_decode_as_the_go_client_reads_them() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        let envelope = br#"{"submission_id":"s","status":503,"error_code":"SUBMITTER_OVERLOADED","message":"busy","timestamp":"t"}"#;
        let error = decode::<SubmitResponse>(
            StatusCode::SERVICE_UNAVAILABLE,
            &headers,
            envelope,
            &[StatusCode::OK],
        )
        .unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::SubmitterOverloaded));
        assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));

        let html = "<html>".repeat(100);
        let error = decode::<SubmitResponse>(
            StatusCode::BAD_GATEWAY,
            &HeaderMap::new(),
            html.as_bytes(),
            &[StatusCode::OK],
        )
        .unwrap_err();
        assert_eq!(error.kind(), "unexpected_response");
        let SubmitError::UnexpectedResponse { body, .. } = error else {
            unreachable!()
        };
        assert_eq!(body.chars().count(), MAX_ERROR_BODY_CHARS + 3);

        // An envelope without a message is not an envelope (Go's `errResp.Message != ""`).
        let error = decode::<SubmitResponse>(
            StatusCode::BAD_REQUEST,
            &HeaderMap::new(),
            b"{}",
            &[StatusCode::OK],
        )
        .unwrap_err();
        assert_eq!(error.kind(), "unexpected_response");

        let error = decode::<SubmitResponse>(
            StatusCode::CREATED,
            &HeaderMap::new(),
            b"nope",
            &[StatusCode::CREATED],
        )
        .unwrap_err();
        assert_eq!(error.kind(), "decode_response");
        assert!(error.retryable());
    }

    #[test]
    fn http_date_retry_after_is_ignored() {
        let mut headers = HeaderMap::new();
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
