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

/// What can go wrong: making a client, one call, waiting for the service.
mod error;

/// When to try again, and how long to wait (pure).
mod retry;

/// Reading the service's answers as the Go client reads them (pure).
mod answer;

/// Operating a submission by its id: its driver's log (a stream), its kill, the list.
mod operate;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

use crate::answer::decode;
use crate::pem::crypto_provider;
pub use error::{NewClientError, SubmitError, WaitForConnectionError};
pub use operate::LogStream;
pub use retry::{MAX_BACKOFF, MAX_RETRY_AFTER, next_delay, should_retry};
use submission::api::{
    DRIVERS_PATH, DriverStatus, SUBMIT_PATH, SubmitRequest, SubmitResponse, path_segment,
};

/// Largest response body read, as the Go client's `maxResponseBodySizeBytes`.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

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
        let exchange = async {
            let response = self.send(method, uri, body, "application/json").await?;
            read_whole(response).await
        };
        tokio::time::timeout(self.request_timeout, exchange)
            .await
            .map_err(|_| SubmitError::TimedOut {
                after: self.request_timeout,
            })?
    }

    /// Sends one request; the answer as soon as its head is in (no timeout of its own).
    async fn send(
        &self,
        method: Method,
        uri: &str,
        body: Option<Bytes>,
        accept: &'static str,
    ) -> Result<http::Response<hyper::body::Incoming>, SubmitError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(ACCEPT, accept);
        if body.is_some() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        let request = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|source| SubmitError::BuildRequest {
                uri: uri.to_owned(),
                source,
            })?;
        self.http
            .request(request)
            .await
            .map_err(|source| SubmitError::SendRequest {
                uri: uri.to_owned(),
                source,
            })
    }
}

/// An answer's status, headers and body, read whole (bounded by [`MAX_RESPONSE_BYTES`]).
async fn read_whole(
    response: http::Response<hyper::body::Incoming>,
) -> Result<(StatusCode, HeaderMap, Bytes), SubmitError> {
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
