//! The Rust client of the submitter, with the Go client's semantics (`shared/seeds/004_…`):
//! an explicit port in the URL, optional mTLS (certificate and key both or neither), a
//! per-request timeout, retries with exponential backoff on retryable error codes and transport
//! failures only, 200 and 201 both success, and `wait_for_connection` that takes any HTTP answer
//! to a GET on the submit route as "ready".
//!
//! Where we differ from the Go client, deliberately:
//! - backoff has jitter (equal jitter: each delay is drawn from [b/2, b]) so that a fleet of
//!   operators does not retry in lockstep, and a `Retry-After` (seconds) raises the delay to at
//!   least what the server asked for;
//! - a non-envelope answer (a proxy's HTML page) is retried only for 5xx and 429, where Go
//!   retries every such answer;
//! - `https` needs a CA file: there is no system trust store in this tree, and the service is
//!   always behind a private CA.
//!
//! The retry decision is pure ([`next_delay`], [`should_retry`]); jitter and sleep are injected
//! ([`SubmitterClient::with_jitter`], [`SubmitterClient::with_sleep`]) so tests run without a clock.

/// PEM files of TLS material and the crypto provider, shared with the service.
pub mod pem;

/// A client certificate re-read when its files change (rotation without a restart).
pub mod reload;

/// The Kubernetes API client of the submitter and the operator (TCP_NODELAY on).
pub mod kube_connect;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use thiserror::Error;
use tracing::{debug, info};

use crate::pem::{ReadPemError, crypto_provider};
use submission::api::{
    DRIVERS_PATH, DriverStatus, ErrorCode, SUBMIT_PATH, SubmitRequest, SubmitResponse, path_segment,
};

/// Largest response body read, as the Go client's `maxResponseBodySizeBytes`.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Longest excerpt of an unexpected body kept in an error, as the Go client's.
const MAX_ERROR_BODY_CHARS: usize = 200;

/// Ceiling of the exponential backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Ceiling on an honoured `Retry-After`, so a wrong header cannot park a client for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Pause between `wait_for_connection` probes, as the Go client's `startupPollInterval`.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Client settings, mirroring the Go client's `RestSparkSubmitterConfig`.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `https://host:port` (or `http://` against `--insecure-dev`), with an explicit port.
    /// The submit route may be included, as the Go client's config does; it is stripped to find
    /// the other routes. Any other path is kept as a prefix (a proxy mount point).
    pub url: String,
    /// CA bundle that verifies the server; required for `https`. Re-read when it changes, at
    /// most every `cert_check_interval`.
    pub ca: Option<PathBuf>,
    /// Client certificate for mTLS; with `key`, or neither. Re-read when the files change (see
    /// [`reload`]), at most every `cert_check_interval`.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// How often a new connection re-reads the client certificate files and the CA bundle.
    pub cert_check_interval: Duration,
    /// Limit for one exchange: connect, send, and read the answer.
    pub request_timeout: Duration,
    /// Total attempts, counted as the Go client's `RetryMaxRetries` counts them (its loop runs
    /// `attempt < maxRetries`); 0 is taken as 1 where Go would not try at all.
    pub max_retries: u32,
    /// Delay before the first retry; doubled each further retry (see [`next_delay`]).
    pub initial_backoff: Duration,
}

impl ClientConfig {
    /// Defaults for everything but where to connect.
    pub fn new(url: impl Into<String>) -> ClientConfig {
        ClientConfig {
            url: url.into(),
            ca: None,
            cert: None,
            key: None,
            cert_check_interval: reload::DEFAULT_CHECK_INTERVAL,
            request_timeout: Duration::from_secs(30),
            max_retries: 5,
            initial_backoff: Duration::from_millis(500),
        }
    }
}

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

/// A pause, injectable so tests can record delays instead of waiting.
pub type SleepFn = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A source of jitter fractions in [0, 1].
pub type JitterFn = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The submitter's client. Cheap to clone (connections are pooled and shared).
#[derive(Clone)]
pub struct SubmitterClient {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `scheme://authority` plus any path prefix, without a trailing slash.
    base: String,
    authority: String,
    request_timeout: Duration,
    max_attempts: u32,
    initial_backoff: Duration,
    sleep: SleepFn,
    jitter: JitterFn,
}

impl std::fmt::Debug for SubmitterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitterClient")
            .field("base", &self.base)
            .field("request_timeout", &self.request_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("initial_backoff", &self.initial_backoff)
            .finish_non_exhaustive()
    }
}

impl SubmitterClient {
    /// Checks the URL and loads the TLS files, as the Go client's constructor does.
    pub fn new(config: ClientConfig) -> Result<SubmitterClient, NewClientError> {
        let url = config.url.trim().to_owned();
        let uri: Uri = url.parse().map_err(|source| NewClientError::ParseUrl {
            url: url.clone(),
            source,
        })?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(NewClientError::UnsupportedScheme { url }),
        };
        let Some(authority) = uri
            .authority()
            .filter(|authority| authority.port().is_some())
        else {
            return Err(NewClientError::MissingPort { url });
        };
        let authority = authority.as_str().to_owned();
        let path = uri.path().trim_end_matches('/');
        let prefix = path.strip_suffix(SUBMIT_PATH).unwrap_or(path);
        let scheme = if https { "https" } else { "http" };
        let base = format!("{scheme}://{authority}{prefix}");

        let tls = tls_config(&config, https)?;
        let mut connector = HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(config.request_timeout));
        connector.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = HyperClient::builder(TokioExecutor::new()).build(connector);
        Ok(SubmitterClient {
            http,
            base,
            authority,
            request_timeout: config.request_timeout,
            max_attempts: config.max_retries.max(1),
            initial_backoff: config.initial_backoff,
            sleep: Arc::new(|delay| Box::pin(tokio::time::sleep(delay))),
            jitter: Arc::new(fastrand::f64),
        })
    }

    /// Replaces how the client pauses between attempts (tests record instead of waiting).
    pub fn with_sleep(mut self, sleep: SleepFn) -> SubmitterClient {
        self.sleep = sleep;
        self
    }

    /// Replaces the jitter source (tests fix it).
    pub fn with_jitter(mut self, jitter: JitterFn) -> SubmitterClient {
        self.jitter = jitter;
        self
    }

    /// The URL submissions go to.
    pub fn submit_url(&self) -> String {
        format!("{}{SUBMIT_PATH}", self.base)
    }

    /// Submits, retrying retryable failures. 201 and 200 (`duplicate_submission`) are both
    /// success; after the last attempt the last failure is returned.
    pub async fn submit(&self, request: &SubmitRequest) -> Result<SubmitResponse, SubmitError> {
        let body = Bytes::from(serde_json::to_vec(request).map_err(SubmitError::EncodeRequest)?);
        let uri = self.submit_url();
        let response: SubmitResponse = self
            .with_retries("submit", || {
                self.call(
                    Method::POST,
                    &uri,
                    Some(body.clone()),
                    &[StatusCode::CREATED, StatusCode::OK],
                )
            })
            .await?;
        if response.duplicate_submission {
            info!(submission_id = %response.submission_id, driver = %response.driver_ref(),
                "duplicate submission, existing driver returned");
        } else {
            info!(submission_id = %response.submission_id, driver = %response.driver_ref(),
                "submitted");
        }
        Ok(response)
    }

    /// A dry run (`?dryRun=true`): the objects a submission would create, validated by the API
    /// server and returned as a `v1` `List`; nothing is created. Retried like [`Self::submit`].
    pub async fn dry_run(&self, request: &SubmitRequest) -> Result<serde_json::Value, SubmitError> {
        let body = Bytes::from(serde_json::to_vec(request).map_err(SubmitError::EncodeRequest)?);
        let uri = format!("{}?dryRun=true", self.submit_url());
        self.with_retries("dry_run", || {
            self.call(Method::POST, &uri, Some(body.clone()), &[StatusCode::OK])
        })
        .await
    }

    /// The driver's state by `namespace` and pod name.
    pub async fn driver_status(
        &self,
        namespace: &str,
        pod: &str,
    ) -> Result<DriverStatus, SubmitError> {
        let uri = format!(
            "{}{DRIVERS_PATH}/{}/{}",
            self.base,
            path_segment(namespace),
            path_segment(pod)
        );
        self.with_retries("driver_status", || {
            self.call(Method::GET, &uri, None, &[StatusCode::OK])
        })
        .await
    }

    /// The driver's state by submission id.
    pub async fn submission_status(
        &self,
        submission_id: &str,
    ) -> Result<DriverStatus, SubmitError> {
        let uri = format!("{}{SUBMIT_PATH}/{}", self.base, path_segment(submission_id));
        self.with_retries("submission_status", || {
            self.call(Method::GET, &uri, None, &[StatusCode::OK])
        })
        .await
    }

    /// Probes the submit route with a GET every second until any HTTP answer arrives (the
    /// service answers 405), proving network and TLS work, or `timeout` passes.
    pub async fn wait_for_connection(
        &self,
        timeout: Duration,
    ) -> Result<(), WaitForConnectionError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let uri = self.submit_url();
        let mut last = None;
        loop {
            let probe = self.exchange(Method::GET, &uri, None);
            match tokio::time::timeout_at(deadline, probe).await {
                Ok(Ok(_)) => {
                    info!(addr = %self.authority, "submitter is ready");
                    return Ok(());
                }
                Ok(Err(error)) => {
                    debug!(addr = %self.authority, error = %error, "submitter not ready yet");
                    last = Some(error);
                }
                Err(_) => break,
            }
            if tokio::time::Instant::now() + PROBE_INTERVAL >= deadline {
                break;
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
        Err(WaitForConnectionError {
            addr: self.authority.clone(),
            timeout,
            last,
        })
    }

    async fn with_retries<T, F, Fut>(
        &self,
        operation: &'static str,
        mut attempt_once: F,
    ) -> Result<T, SubmitError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SubmitError>>,
    {
        let mut attempt = 0;
        loop {
            let error = match attempt_once().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            if !should_retry(attempt, self.max_attempts, &error) {
                return Err(error);
            }
            let delay = next_delay(
                attempt,
                self.initial_backoff,
                error.retry_after(),
                (self.jitter)(),
            );
            debug!(operation, attempt = attempt + 1, max_attempts = self.max_attempts,
                delay_ms = delay.as_millis() as u64, kind = error.kind(), error = %error, "retrying");
            (self.sleep)(delay).await;
            attempt += 1;
        }
    }

    /// One exchange, decoded: `success` statuses as `T`, anything else as an error.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        uri: &str,
        body: Option<Bytes>,
        success: &[StatusCode],
    ) -> Result<T, SubmitError> {
        let (status, headers, body) = self.exchange(method, uri, body).await?;
        decode(status, &headers, &body, success)
    }

    /// One HTTP exchange under the request timeout, the answer's body read whole (bounded).
    async fn exchange(
        &self,
        method: Method,
        uri: &str,
        body: Option<Bytes>,
    ) -> Result<(StatusCode, HeaderMap, Bytes), SubmitError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(ACCEPT, "application/json");
        if body.is_some() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        let request = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|source| SubmitError::BuildRequest {
                uri: uri.to_owned(),
                source,
            })?;
        let exchange =
            async {
                let response = self.http.request(request).await.map_err(|source| {
                    SubmitError::SendRequest {
                        uri: uri.to_owned(),
                        source,
                    }
                })?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_RESPONSE_BYTES)
                    .collect()
                    .await
                    .map_err(|source| SubmitError::ReadResponse {
                        status: parts.status.as_u16(),
                        source,
                    })?
                    .to_bytes();
                Ok((parts.status, parts.headers, body))
            };
        tokio::time::timeout(self.request_timeout, exchange)
            .await
            .map_err(|_| SubmitError::TimedOut {
                after: self.request_timeout,
            })?
    }
}

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
fn decode<T: DeserializeOwned>(
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
    let retry_after = retry_after(headers);
    match serde_json::from_slice::<LooseErrorResponse>(body) {
        Ok(envelope) if !envelope.message.is_empty() => Err(SubmitError::Rejected {
            status: code,
            code: envelope.error_code.parse().ok(),
            code_text: envelope.error_code,
            message: envelope.message,
            submission_id: envelope.submission_id,
            retry_after,
        }),
        _ => {
            let text = String::from_utf8_lossy(body);
            let mut excerpt: String = text.chars().take(MAX_ERROR_BODY_CHARS).collect();
            if text.chars().count() > MAX_ERROR_BODY_CHARS {
                excerpt.push_str("...");
            }
            Err(SubmitError::UnexpectedResponse {
                status: code,
                body: excerpt,
                retry_after,
            })
        }
    }
}

/// `Retry-After` in delta-seconds. The HTTP-date form is ignored: honouring it would need a
/// clock read, and our service sends seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

fn tls_config(config: &ClientConfig, https: bool) -> Result<rustls::ClientConfig, NewClientError> {
    let provider = crypto_provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(NewClientError::BuildTls)?;
    let identity = match (&config.cert, &config.key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(NewClientError::CertificateWithoutKey),
    };
    if !https {
        if identity.is_some() || config.ca.is_some() {
            return Err(NewClientError::TlsFilesForPlainHttp);
        }
        // The connector wants a TLS config even when every URL is plain http; it is never used.
        return Ok(builder
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth());
    }
    let ca = config.ca.as_ref().ok_or(NewClientError::MissingCa)?;
    // The CA bundle is re-read when it changes, like the client certificate: a rotated CA is
    // trusted without a restart.
    let verifier = reload::ReloadingServerVerifier::new(ca.clone(), config.cert_check_interval)
        .map_err(|error| match error {
            reload::LoadCaError::Read(e) => NewClientError::LoadCa(e),
            reload::LoadCaError::Add(e) => NewClientError::AddCa(e),
            reload::LoadCaError::Build(e) => NewClientError::BuildVerifier(e),
        })?;
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let resolver = reload::ReloadingClientCert::new(
                cert.clone(),
                key.clone(),
                config.cert_check_interval,
            )
            .map_err(|error| match error {
                reload::LoadClientCertError::Certificate(e) => {
                    NewClientError::LoadClientCertificate(e)
                }
                reload::LoadClientCertError::Key(e) => NewClientError::LoadClientKey(e),
                reload::LoadClientCertError::Pair(e) => NewClientError::ClientKeyMismatch(e),
            })?;
            Ok(builder.with_client_cert_resolver(Arc::new(resolver)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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

    fn new(url: &str) -> Result<SubmitterClient, NewClientError> {
        SubmitterClient::new(ClientConfig::new(url))
    }

    #[test]
    fn urls_need_a_scheme_and_an_explicit_port() {
        assert_eq!(new("http://submitter").unwrap_err().kind(), "missing_port");
        assert_eq!(
            new("ftp://submitter:21").unwrap_err().kind(),
            "unsupported_scheme"
        );
        assert_eq!(
            new("submitter:8443").unwrap_err().kind(),
            "unsupported_scheme"
        );
        assert_eq!(
            new("https://submitter:8443").unwrap_err().kind(),
            "missing_ca"
        );
        assert_eq!(new("http://a b").unwrap_err().kind(), "parse_url");
    }

    #[tokio::test]
    async fn the_submit_route_in_the_url_is_optional() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/api/v1/spark-submit",
        ] {
            assert_eq!(
                new(url).unwrap().submit_url(),
                "http://127.0.0.1:8080/api/v1/spark-submit"
            );
        }
        assert_eq!(
            new("http://127.0.0.1:8080/proxy/").unwrap().submit_url(),
            "http://127.0.0.1:8080/proxy/api/v1/spark-submit"
        );
    }

    #[test]
    fn certificate_and_key_go_together() {
        let mut config = ClientConfig::new("https://submitter:8443");
        config.ca = Some("/ca.pem".into());
        config.cert = Some("/tls.crt".into());
        assert_eq!(
            SubmitterClient::new(config).unwrap_err().kind(),
            "certificate_without_key"
        );
        let mut config = ClientConfig::new("http://submitter:8080");
        config.ca = Some("/ca.pem".into());
        assert_eq!(
            SubmitterClient::new(config).unwrap_err().kind(),
            "tls_files_for_plain_http"
        );
    }
}
