//! mTLS for the service, with rustls (ring provider, like kube's client): server certificate and
//! key, a client CA, client certificates asked for but not required at the TLS layer by default,
//! and rotation without restart. The handshake checks only that a client holds its
//! certificate's key; the certificate itself is verified right after the handshake
//! ([`client_certificate`]), so a client without one, or with one that does not verify, reaches
//! HTTP without identity, where every API route answers 401 in the envelope (naming the check
//! that failed) instead of a handshake failure that clients would retry forever.
//!
//! Reloading, decided: no watcher task and no `notify`. Each accepted connection asks
//! [`ReloadingTlsConfig::current`] for the config to handshake with; at most once per
//! `check_interval` (1 s by default) that call re-reads the three PEM files and, when their bytes
//! changed, builds a new `ServerConfig`. Comparing bytes rather than mtimes also catches a
//! Kubernetes Secret volume's atomic symlink swap and copies that keep mtimes. A rebuild that
//! fails (a rotation caught half-written, a key that does not match) keeps the previous config,
//! logs a warning, and is tried again at the next check. The client CAs and CRLs live in the same
//! build (in its [`ClientCertificateVerifier`]), so CA rotation is covered by the same mechanism.
//!
//! Revocation: an optional CRL file (`--client-crl`, PEM, one or more CRLs) is read and reloaded
//! with the same files, and its CRLs go into the client verifier, so a revoked client certificate
//! gets 401s from its next connection on. A connection opened before the revocation would keep
//! serving it (HTTP/1 keep-alive), so each request first asks the connection's [`Peer`] whether
//! it is still trusted: when the config changed since the certificate was last verified, or a
//! certificate of its chain has expired since, the chain is verified again against the current
//! verifier (CRLs, CA bundle, validity, usage). One that no longer verifies makes the request
//! anonymous (the API answers 401) and the connection is closed after that answer. Between changes
//! the check is one mutex, one integer comparison and a clock read.
//!
//! Serving: [`serve`] accepts TCP connections and hands each to its own task, which does the TLS
//! handshake under a timeout (a slow or silent client never stalls `accept`), verifies the
//! peer's certificate, and serves the axum router over hyper's HTTP/1 with a header read timeout,
//! the verified identities as a [`PeerIdentity`] request extension (or, for a certificate that
//! failed, its [`CertificateRejection`]) and the remote address as `ConnectInfo`. Plain HTTP
//! exists only as [`Transport::InsecureDev`], which logs a warning.

pub mod client_certificate;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use submission::error_chain::error_chain;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::{RootCertStore, ServerConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tracing::{info, warn};

pub use client_certificate::{
    CertificateRejection, ClientCertificateVerifier, PeerIdentity, VerifiedClient,
};
pub use submitter_client::pem::{
    ReadPemError, certificates_from_pem, crypto_provider, private_key_from_pem, read_certificates,
    read_file, read_private_key,
};

/// How often, at most, the certificate files are re-read.
pub const DEFAULT_RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Pause after a failed `accept` (e.g. out of file descriptors), so it is not retried in a
/// tight loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Where the service's TLS material lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Server certificate chain, PEM, leaf first.
    pub cert: PathBuf,
    /// Server private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA bundle that client certificates must chain to, PEM.
    pub client_ca: PathBuf,
}

/// Whether a client must present a certificate. Either way a presented certificate is verified
/// after the handshake, and one that fails leaves its requests without identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// The handshake fails without a client certificate.
    Required,
    /// What `submitter serve` uses: a client without a certificate gets through with no
    /// identity (the HTTP layer then answers 401).
    #[default]
    Optional,
}

/// Why a server TLS config could not be built.
#[derive(Debug, Error)]
pub enum LoadTlsError {
    #[error("cannot load the server certificate")]
    LoadCertificate(#[source] ReadPemError),
    #[error("cannot load the server key")]
    LoadKey(#[source] ReadPemError),
    #[error("cannot load the client CA")]
    LoadClientCa(#[source] ReadPemError),
    #[error("cannot load the client CRL")]
    LoadClientCrl(#[source] ReadPemError),
    #[error("cannot parse the client CRL {path}")]
    ParseClientCrl {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("client CRL {path} holds no CRL")]
    EmptyClientCrl { path: PathBuf },
    #[error("client CA {path} holds an unusable certificate")]
    AddClientCa {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot build the client certificate verifier")]
    BuildVerifier(#[source] rustls::server::VerifierBuilderError),
    #[error("server certificate and key do not form a usable identity")]
    BuildConfig(#[source] rustls::Error),
}

impl LoadTlsError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadTlsError::LoadCertificate(_) => "load_certificate",
            LoadTlsError::LoadKey(_) => "load_key",
            LoadTlsError::LoadClientCa(_) => "load_client_ca",
            LoadTlsError::LoadClientCrl(_) => "load_client_crl",
            LoadTlsError::ParseClientCrl { .. } => "parse_client_crl",
            LoadTlsError::EmptyClientCrl { .. } => "empty_client_crl",
            LoadTlsError::AddClientCa { .. } => "add_client_ca",
            LoadTlsError::BuildVerifier(_) => "build_verifier",
            LoadTlsError::BuildConfig(_) => "build_config",
        }
    }
}

/// The bytes a config was built from, to tell whether the files changed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Vec<u8>,
    /// The CRL file's bytes, when one is configured.
    client_crl: Option<Vec<u8>>,
}

/// A built config and the client certificate verifier that goes with it (the handshake only
/// checks possession of the key; this verifies the certificate).
struct Built {
    config: Arc<ServerConfig>,
    verifier: ClientCertificateVerifier,
}

impl Material {
    fn read(files: &TlsFiles, client_crl: Option<&Path>) -> Result<Material, LoadTlsError> {
        Ok(Material {
            cert: read_file(&files.cert).map_err(LoadTlsError::LoadCertificate)?,
            key: read_file(&files.key).map_err(LoadTlsError::LoadKey)?,
            client_ca: read_file(&files.client_ca).map_err(LoadTlsError::LoadClientCa)?,
            client_crl: client_crl
                .map(|path| read_file(path).map_err(LoadTlsError::LoadClientCrl))
                .transpose()?,
        })
    }

    fn build(
        &self,
        files: &TlsFiles,
        client_crl: Option<&Path>,
        auth: ClientAuth,
    ) -> Result<Built, LoadTlsError> {
        let chain = certificates_from_pem(&files.cert, &self.cert)
            .map_err(LoadTlsError::LoadCertificate)?;
        let key = private_key_from_pem(&files.key, &self.key).map_err(LoadTlsError::LoadKey)?;
        let cas = certificates_from_pem(&files.client_ca, &self.client_ca)
            .map_err(LoadTlsError::LoadClientCa)?;
        let mut roots = RootCertStore::empty();
        for ca in cas {
            roots.add(ca).map_err(|source| LoadTlsError::AddClientCa {
                path: files.client_ca.clone(),
                source,
            })?;
        }
        let crls = match (client_crl, &self.client_crl) {
            (Some(path), Some(bytes)) => crls_from_pem(path, bytes)?,
            _ => Vec::new(),
        };
        let verifier = ClientCertificateVerifier::new(Arc::new(roots), crls)
            .map_err(LoadTlsError::BuildVerifier)?;
        // TLS 1.2 and 1.3 only (rustls has nothing older), AEAD suites with forward secrecy.
        let mut config = ServerConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(LoadTlsError::BuildConfig)?
            .with_client_cert_verifier(verifier.handshake(auth == ClientAuth::Required))
            .with_single_cert(chain, key)
            .map_err(LoadTlsError::BuildConfig)?;
        // We serve HTTP/1.1 only (hyper's http1), so say so in ALPN.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Built {
            config: Arc::new(config),
            verifier,
        })
    }
}

/// Every CRL of PEM `bytes` read from `path`; none at all is an error, so that a file caught
/// half-written never lifts every revocation.
fn crls_from_pem(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateRevocationListDer<'static>>, LoadTlsError> {
    let crls = CertificateRevocationListDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| LoadTlsError::ParseClientCrl {
            path: path.to_owned(),
            source,
        })?;
    if crls.is_empty() {
        return Err(LoadTlsError::EmptyClientCrl {
            path: path.to_owned(),
        });
    }
    Ok(crls)
}

struct ReloadState {
    built: Built,
    material: Material,
    checked_at: Instant,
    /// Counts the configs built so far; a connection compares it with the one its client
    /// certificate was last verified under.
    generation: u64,
}

/// A server TLS config that follows its files on disk; see the module docs.
pub struct ReloadingTlsConfig {
    files: TlsFiles,
    client_crl: Option<PathBuf>,
    auth: ClientAuth,
    check_interval: Duration,
    state: Mutex<ReloadState>,
}

impl std::fmt::Debug for ReloadingTlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingTlsConfig")
            .field("files", &self.files)
            .field("client_crl", &self.client_crl)
            .field("auth", &self.auth)
            .field("check_interval", &self.check_interval)
            .finish_non_exhaustive()
    }
}

impl ReloadingTlsConfig {
    /// Loads the files once; fails if they do not make a config (startup must not limp on).
    pub fn new(files: TlsFiles, auth: ClientAuth) -> Result<ReloadingTlsConfig, LoadTlsError> {
        ReloadingTlsConfig::with_client_crl(files, None, auth)
    }

    /// The same, also refusing the client certificates that a CRL in `client_crl` (PEM) revokes.
    pub fn with_client_crl(
        files: TlsFiles,
        client_crl: Option<PathBuf>,
        auth: ClientAuth,
    ) -> Result<ReloadingTlsConfig, LoadTlsError> {
        let material = Material::read(&files, client_crl.as_deref())?;
        let built = material.build(&files, client_crl.as_deref(), auth)?;
        Ok(ReloadingTlsConfig {
            files,
            client_crl,
            auth,
            check_interval: DEFAULT_RELOAD_CHECK_INTERVAL,
            state: Mutex::new(ReloadState {
                built,
                material,
                checked_at: Instant::now(),
                generation: 0,
            }),
        })
    }

    /// The same, re-reading the files at most every `interval` (zero: on every connection).
    pub fn with_check_interval(mut self, interval: Duration) -> ReloadingTlsConfig {
        self.check_interval = interval;
        self
    }

    /// The config for the next handshake, rebuilt first if the files changed since the last
    /// check and the check interval has passed.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.checked().built.config.clone()
    }

    /// The state, after reloading the files if the check interval has passed.
    fn checked(&self) -> std::sync::MutexGuard<'_, ReloadState> {
        // A poisoned lock only means a panic elsewhere while holding it; the state is whole.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked_at.elapsed() >= self.check_interval {
            state.checked_at = Instant::now();
            if let Err(error) = self.reload(&mut state) {
                warn!(
                    error = %error_chain(&error),
                    kind = error.kind(),
                    "TLS files changed but cannot be used; keeping the previous certificate"
                );
            }
        }
        state
    }

    /// Re-reads the files now, whatever the interval; `Ok(true)` if the config changed.
    pub fn reload_now(&self) -> Result<bool, LoadTlsError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.checked_at = Instant::now();
        self.reload(&mut state)
    }

    fn reload(&self, state: &mut ReloadState) -> Result<bool, LoadTlsError> {
        let material = Material::read(&self.files, self.client_crl.as_deref())?;
        if material == state.material {
            return Ok(false);
        }
        state.built = material.build(&self.files, self.client_crl.as_deref(), self.auth)?;
        state.material = material;
        state.generation += 1;
        info!(cert = %self.files.cert.display(), "reloaded TLS certificate files");
        Ok(true)
    }

    /// Verifies the client certificate `chain` of a new connection against the current config
    /// (the files re-read first when the check interval has passed).
    pub fn verify_client(
        &self,
        chain: &[CertificateDer<'_>],
    ) -> Result<Peer, CertificateRejection> {
        let (generation, verifier) = {
            let state = self.checked();
            (state.generation, state.built.verifier.clone())
        };
        let client = verifier.verify(chain, UnixTime::now())?;
        Ok(Peer {
            client,
            generation: AtomicU64::new(generation),
        })
    }

    /// Whether the client certificate of an open connection (`peer`) is still trusted (see the
    /// module docs); the files are re-read first when the check interval has passed. Verifies
    /// again only when the config changed, or a certificate of the chain expired, since the
    /// last verification.
    pub fn still_trusted(&self, peer: &Peer) -> Result<(), CertificateRejection> {
        let now = UnixTime::now();
        let (generation, verifier) = {
            let state = self.checked();
            if state.generation == peer.generation.load(Ordering::Acquire)
                && !peer.client.expired(now)
            {
                return Ok(());
            }
            (state.generation, state.built.verifier.clone())
        };
        verifier.verify(peer.client.chain(), now)?;
        peer.generation.store(generation, Ordering::Release);
        Ok(())
    }
}

/// A connection's verified client certificate, and the config generation it was last verified
/// under.
#[derive(Debug)]
pub struct Peer {
    client: VerifiedClient,
    generation: AtomicU64,
}

impl Peer {
    /// The identity the verified certificate names.
    pub fn identity(&self) -> &PeerIdentity {
        self.client.identity()
    }
}

/// How connections are secured.
#[derive(Debug, Clone)]
pub enum Transport {
    Tls(Arc<ReloadingTlsConfig>),
    /// Plain HTTP, no identities: development only (`--insecure-dev`).
    InsecureDev,
}

/// Connection-level limits.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A TLS handshake must finish within this.
    pub handshake_timeout: Duration,
    /// Request headers must arrive within this (slowloris guard).
    pub header_read_timeout: Duration,
    /// After shutdown is signalled, open connections get this long to finish.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then lets open connections finish
/// (up to `drain_timeout`). Each connection's handshake and HTTP run in their own task.
pub async fn serve(
    listener: TcpListener,
    transport: Transport,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    if matches!(transport, Transport::InsecureDev) {
        warn!("serving plain HTTP without TLS or client identities: development only");
    }
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    warn!(%error, "accepting a connection failed; pausing before the next accept");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        let connection = Connection {
            transport: transport.clone(),
            app: app.clone(),
            options: options.clone(),
            remote,
        };
        tokio::spawn(connection.run(stream, graceful.watcher()));
    }
    drop(listener);
    if tokio::time::timeout(options.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("connections still open after the drain timeout; closing");
    }
}

struct Connection {
    transport: Transport,
    app: Router,
    options: ServeOptions,
    remote: SocketAddr,
}

impl Connection {
    async fn run(self, stream: TcpStream, watcher: Watcher) {
        // Small requests and answers: do not wait for Nagle.
        let _ = stream.set_nodelay(true);
        let reloading = match &self.transport {
            Transport::InsecureDev => {
                self.serve_http(stream, Client::Anonymous, watcher).await;
                return;
            }
            Transport::Tls(tls) => tls.clone(),
        };
        let remote = self.remote;
        let handshake = TlsAcceptor::from(reloading.current()).accept(stream);
        let stream = match tokio::time::timeout(self.options.handshake_timeout, handshake).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                warn!(%remote, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                warn!(%remote, "TLS handshake timed out");
                return;
            }
        };
        let client = match stream.get_ref().1.peer_certificates() {
            None | Some([]) => Client::Anonymous,
            Some(chain) => match reloading.verify_client(chain) {
                Ok(peer) => Client::Verified {
                    tls: reloading,
                    peer,
                },
                Err(rejection) => {
                    // Logged once per connection; every API request on it gets the 401.
                    warn!(%remote, kind = rejection.kind(), "client certificate not accepted");
                    Client::Rejected(rejection)
                }
            },
        };
        self.serve_http(stream, client, watcher).await;
    }

    async fn serve_http<S>(self, stream: S, client: Client, watcher: Watcher)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            app,
            options,
            remote,
            ..
        } = self;
        let client = Arc::new(client);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let (identity, rejection, close) = client.for_request(remote);
            if let Some(identity) = identity {
                request.extensions_mut().insert(identity);
            }
            if let Some(rejection) = rejection {
                request.extensions_mut().insert(rejection);
            }
            request.extensions_mut().insert(ConnectInfo(remote));
            let answer = app.clone().oneshot(request);
            async move {
                let mut response = answer.await?;
                if close {
                    response.headers_mut().insert(
                        http::header::CONNECTION,
                        http::HeaderValue::from_static("close"),
                    );
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read_timeout);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        if let Err(error) = watcher.watch(connection).await {
            // Client resets and header timeouts land here; they are the client's business.
            tracing::debug!(%remote, %error, "connection ended with an error");
        }
    }
}

/// A connection's client, as its certificate was judged.
enum Client {
    /// No certificate (or plain HTTP).
    Anonymous,
    /// A certificate that did not verify: no identity, and the reason for the 401.
    Rejected(CertificateRejection),
    /// A verified certificate, checked again before each request.
    Verified {
        tls: Arc<ReloadingTlsConfig>,
        peer: Peer,
    },
}

impl Client {
    /// What a request on this connection carries: the identity, or why there is none; and
    /// whether the connection closes after the answer (a certificate no longer trusted since
    /// the handshake).
    fn for_request(
        &self,
        remote: SocketAddr,
    ) -> (Option<PeerIdentity>, Option<CertificateRejection>, bool) {
        match self {
            Client::Anonymous => (None, None, false),
            Client::Rejected(rejection) => (None, Some(*rejection), false),
            Client::Verified { tls, peer } => match tls.still_trusted(peer) {
                Ok(()) => (Some(peer.identity().clone()), None, false),
                Err(rejection) => {
                    warn!(%remote, kind = rejection.kind(),
                        "closing a connection whose client certificate is no longer trusted");
                    (None, Some(rejection), true)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_fail_with_their_kind() {
        let files = TlsFiles {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
            client_ca: "/nonexistent/ca.crt".into(),
        };
        let error = ReloadingTlsConfig::new(files, ClientAuth::Required).unwrap_err();
        assert_eq!(error.kind(), "load_certificate");
    }
}
