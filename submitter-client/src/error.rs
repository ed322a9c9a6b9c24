//! What can go wrong: making a client, one call, and waiting for the service.

use std::time::Duration;

use submission::api::ErrorCode;
use thiserror::Error;

use crate::pem::ReadPemError;

/// Why a client could not be made.
#[derive(Debug, Error)]
pub enum NewClientError {
    #[error("submitter url {url:?} is not a valid URL")]
    ParseUrl {
        url: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("submitter url {url:?} must be http or https")]
    UnsupportedScheme { url: String },
    #[error("submitter url {url:?} must include an explicit port")]
    MissingPort { url: String },
    #[error("an https submitter url needs a CA file to verify the server")]
    MissingCa,
    #[error("client certificate and key must be given together")]
    CertificateWithoutKey,
    #[error("TLS files were given for a plain http url")]
    TlsFilesForPlainHttp,
    #[error("cannot load the CA file")]
    LoadCa(#[source] ReadPemError),
    #[error("CA file holds an unusable certificate")]
    AddCa(#[source] rustls::Error),
    #[error("cannot build a verifier from the CA file")]
    BuildVerifier(#[source] rustls::client::VerifierBuilderError),
    #[error("cannot load the client certificate")]
    LoadClientCertificate(#[source] ReadPemError),
    #[error("cannot load the client key")]
    LoadClientKey(#[source] ReadPemError),
    #[error("cannot build the TLS client config")]
    BuildTls(#[source] rustls::Error),
    #[error("the client key does not fit its certificate")]
    ClientKeyMismatch(#[source] rustls::Error),
}

impl NewClientError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            NewClientError::ParseUrl { .. } => "parse_url",
            NewClientError::UnsupportedScheme { .. } => "unsupported_scheme",
            NewClientError::MissingPort { .. } => "missing_port",
            NewClientError::MissingCa => "missing_ca",
            NewClientError::CertificateWithoutKey => "certificate_without_key",
            NewClientError::TlsFilesForPlainHttp => "tls_files_for_plain_http",
            NewClientError::LoadCa(_) => "load_ca",
            NewClientError::AddCa(_) => "add_ca",
            NewClientError::BuildVerifier(_) => "build_verifier",
            NewClientError::LoadClientCertificate(_) => "load_client_certificate",
            NewClientError::LoadClientKey(_) => "load_client_key",
            NewClientError::BuildTls(_) => "build_tls",
            NewClientError::ClientKeyMismatch(_) => "client_key_mismatch",
        }
    }
}

/// A call to the submitter (a submission or a status look-up) failed.
#[derive(Debug, Error)]
pub enum SubmitError {
    #[error("cannot encode the request")]
    EncodeRequest(#[source] serde_json::Error),
    #[error("cannot build the request to {uri}")]
    BuildRequest {
        uri: String,
        #[source]
        source: http::Error,
    },
    /// Connect, TLS or send failure: retryable.
    #[error("cannot reach the submitter at {uri}")]
    SendRequest {
        uri: String,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// No complete answer within the request timeout: retryable.
    #[error("no answer from the submitter within {after:?}")]
    TimedOut { after: Duration },
    /// The answer's body broke off or exceeded the limit: retryable.
    #[error("cannot read the submitter's answer (HTTP {status})")]
    ReadResponse {
        status: u16,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A success status whose body is not the expected JSON: retryable, since a repeat with the
    /// same submission id is idempotent and answers readably.
    #[error("cannot decode the submitter's answer (HTTP {status})")]
    DecodeResponse {
        status: u16,
        #[source]
        source: serde_json::Error,
    },
    /// The service refused with an error envelope. `code` is `None` for a code this build does
    /// not know (`code_text` has it); such answers are not retried, as in the Go client.
    #[error("submitter refused: {message} (HTTP {status}, error code {code_text})")]
    Rejected {
        status: u16,
        code: Option<ErrorCode>,
        code_text: String,
        message: String,
        submission_id: String,
        retry_after: Option<Duration>,
    },
    /// An answer without the envelope (a proxy page, say); retried for 5xx and 429 only.
    #[error("unexpected answer from the submitter (HTTP {status}): {body}")]
    UnexpectedResponse {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
}

impl SubmitError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SubmitError::EncodeRequest(_) => "encode_request",
            SubmitError::BuildRequest { .. } => "build_request",
            SubmitError::SendRequest { .. } => "send_request",
            SubmitError::TimedOut { .. } => "timed_out",
            SubmitError::ReadResponse { .. } => "read_response",
            SubmitError::DecodeResponse { .. } => "decode_response",
            SubmitError::Rejected { .. } => "rejected",
            SubmitError::UnexpectedResponse { .. } => "unexpected_response",
        }
    }

    /// The envelope's error code, when the service answered with a known one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            SubmitError::Rejected { code, .. } => *code,
            _ => None,
        }
    }

    /// The HTTP status, when there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            SubmitError::ReadResponse { status, .. }
            | SubmitError::DecodeResponse { status, .. }
            | SubmitError::Rejected { status, .. }
            | SubmitError::UnexpectedResponse { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether another attempt may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            SubmitError::EncodeRequest(_) | SubmitError::BuildRequest { .. } => false,
            SubmitError::SendRequest { .. }
            | SubmitError::TimedOut { .. }
            | SubmitError::ReadResponse { .. }
            | SubmitError::DecodeResponse { .. } => true,
            SubmitError::Rejected { code, .. } => code.is_some_and(ErrorCode::retryable),
            SubmitError::UnexpectedResponse { status, .. } => *status >= 500 || *status == 429,
        }
    }

    /// The server's `Retry-After`, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SubmitError::Rejected { retry_after, .. }
            | SubmitError::UnexpectedResponse { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// `wait_for_connection` gave up.
#[derive(Debug, Error)]
#[error("submitter at {addr} did not answer within {timeout:?}")]
pub struct WaitForConnectionError {
    pub addr: String,
    pub timeout: Duration,
    /// The last probe's failure, if a probe finished.
    #[source]
    pub last: Option<SubmitError>,
}

impl WaitForConnectionError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        "timed_out"
    }
}
