//! mTLS for the service, with rustls (ring provider, like kube's client): server certificate and
//! key, a client CA, client certificates asked for (and verified when presented) but not
//! required at the TLS layer by default, and rotation without restart. A client without one
//! reaches HTTP with no identity, where every API route answers 401 in the envelope; a client
//! whose certificate does not verify is refused at the handshake.
//!
//! Reloading, decided: no watcher task and no `notify`. Each accepted connection asks
//! [`ReloadingTlsConfig::current`] for the config to handshake with; at most once per
//! `check_interval` (1 s by default) that call re-reads the three PEM files and, when their bytes
//! changed, builds a new `ServerConfig`. Comparing bytes rather than mtimes also catches a
//! Kubernetes Secret volume's atomic symlink swap and copies that keep mtimes. A rebuild that
//! fails (a rotation caught half-written, a key that does not match) keeps the previous config,
//! logs a warning, and is tried again at the next check. Because the CA lives in the same
//! `ServerConfig` (in its client verifier), CA rotation is covered by the same mechanism, which a
//! `ResolvesServerCert` could not do.
//!
//! Revocation: an optional CRL file (`--client-crl`, PEM, one or more CRLs) is read and reloaded
//! with the same files, and its CRLs go into the client verifier, so a revoked client certificate
//! fails its next handshake. A connection opened before the revocation would keep serving it
//! (HTTP/1 keep-alive), so each request first asks [`ReloadingTlsConfig::still_trusted`]: when the
//! config changed since the connection's certificate was last verified, the certificate is
//! verified again against the current verifier (CRLs, CA bundle, validity). One that no longer
//! verifies is served as anonymous (the API answers 401) and the connection is closed after that
//! answer. Between changes the check is one mutex and one integer comparison.
//!
//! Serving: [`serve`] accepts TCP connections and hands each to its own task, which does the TLS
//! handshake under a timeout (a slow or silent client never stalls `accept`), reads the peer's
//! identities (DNS SANs, URI SANs, CN) from its certificate, and serves the axum router over
//! hyper's HTTP/1 with a header read timeout, the identities as a [`PeerIdentity`] request
//! extension and the remote address as `ConnectInfo`. Plain HTTP exists only as
//! [`Transport::InsecureDev`], which logs a warning.

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
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tracing::{info, warn};

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

/// Whether a client must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// The handshake fails without a valid client certificate.
    Required,
    /// What `submitter serve` uses: a client without a certificate gets through with no
    /// identity (the HTTP layer then answers 401); a client with an invalid certificate is
    /// still refused.
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

/// A built config and the client verifier inside it (kept apart to verify open connections'
/// certificates again).
struct Built {
    config: Arc<ServerConfig>,
    verifier: Arc<dyn ClientCertVerifier>,
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
        let provider = crypto_provider();
        let mut verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
        if let (Some(path), Some(bytes)) = (client_crl, &self.client_crl) {
            // A certificate whose issuer has no CRL in the file is accepted: during a CA
            // rotation the bundle holds two CAs and the file may hold the CRL of one.
            verifier = verifier
                .with_crls(crls_from_pem(path, bytes)?)
                .allow_unknown_revocation_status();
        }
        let verifier = match auth {
            ClientAuth::Required => verifier,
            ClientAuth::Optional => verifier.allow_unauthenticated(),
        }
        .build()
        .map_err(LoadTlsError::BuildVerifier)?;
        // TLS 1.2 and 1.3 only (rustls has nothing older), AEAD suites with forward secrecy.
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(LoadTlsError::BuildConfig)?
            .with_client_cert_verifier(verifier.clone())
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

    /// [`Self::current`] and its generation.
    fn current_with_generation(&self) -> (Arc<ServerConfig>, u64) {
        let state = self.checked();
        (state.built.config.clone(), state.generation)
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

    /// Whether the client certificate `peer` of an open connection is still trusted by the
    /// current config (see the module docs); the files are re-read first when the check
    /// interval has passed. Verifies only when the config changed since the last verification.
    pub fn still_trusted(&self, peer: &VerifiedPeer) -> bool {
        let (generation, verifier) = {
            let state = self.checked();
            if state.generation == peer.generation.load(Ordering::Acquire) {
                return true;
            }
            (state.generation, state.built.verifier.clone())
        };
        let Some((leaf, intermediates)) = peer.chain.split_first() else {
            return true;
        };
        match verifier.verify_client_cert(leaf, intermediates, UnixTime::now()) {
            Ok(_) => {
                peer.generation.store(generation, Ordering::Release);
                true
            }
            Err(error) => {
                warn!(%error, "client certificate of an open connection is no longer trusted");
                false
            }
        }
    }
}

/// A client certificate chain verified at a handshake, and the config generation it was last
/// verified under.
#[derive(Debug)]
pub struct VerifiedPeer {
    chain: Vec<CertificateDer<'static>>,
    generation: AtomicU64,
}

/// The client's identities, as a request extension: its certificate's DNS SANs, URI SANs and
/// CN, in that order, without repeats. Empty for a client without a certificate (optional
/// client auth, or `InsecureDev`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub names: Vec<String>,
}

/// Why a peer certificate yielded no identities.
#[derive(Debug, Error)]
pub enum ReadPeerIdentityError {
    #[error("peer certificate is not valid X.509")]
    ParseCertificate(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("peer certificate has an invalid subjectAltName extension")]
    ParseSubjectAltName(#[source] x509_parser::error::X509Error),
}

impl ReadPeerIdentityError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadPeerIdentityError::ParseCertificate(_) => "parse_certificate",
            ReadPeerIdentityError::ParseSubjectAltName(_) => "parse_subject_alt_name",
        }
    }
}

/// The identities named by a DER certificate: DNS SANs, URI SANs, then the subject CN.
pub fn peer_identity(certificate: &[u8]) -> Result<PeerIdentity, ReadPeerIdentityError> {
    let (_, certificate) = x509_parser::parse_x509_certificate(certificate)
        .map_err(ReadPeerIdentityError::ParseCertificate)?;
    let mut names: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        if !name.is_empty() && !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
    };
    let sans = certificate
        .subject_alternative_name()
        .map_err(ReadPeerIdentityError::ParseSubjectAltName)?;
    if let Some(sans) = sans {
        use x509_parser::extensions::GeneralName;
        let general_names = &sans.value.general_names;
        for name in general_names {
            if let GeneralName::DNSName(dns) = name {
                push(dns);
            }
        }
        for name in general_names {
            if let GeneralName::URI(uri) = name {
                push(uri);
            }
        }
    }
    for common_name in certificate.subject().iter_common_name() {
        // A CN that is not a string type carries no name we could match.
        if let Ok(text) = common_name.as_str() {
            push(text);
        }
    }
    Ok(PeerIdentity { names })
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
                self.serve_http(stream, PeerIdentity::default(), None, watcher)
                    .await;
                return;
            }
            Transport::Tls(tls) => tls.clone(),
        };
        let (tls, generation) = reloading.current_with_generation();
        let remote = self.remote;
        let handshake = TlsAcceptor::from(tls).accept(stream);
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
        let chain: Vec<CertificateDer<'static>> = stream
            .get_ref()
            .1
            .peer_certificates()
            .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        let identity = match chain.first().map(|leaf| peer_identity(leaf)) {
            None => PeerIdentity::default(),
            Some(Ok(identity)) => identity,
            Some(Err(error)) => {
                // rustls verified the chain, so this is a certificate x509-parser cannot read;
                // refusing is safer than serving it as anonymous.
                warn!(%remote, error = %error_chain(&error), "cannot read the client certificate");
                return;
            }
        };
        let peer = (!chain.is_empty()).then(|| Recheck {
            tls: reloading,
            peer: VerifiedPeer {
                chain,
                generation: AtomicU64::new(generation),
            },
        });
        self.serve_http(stream, identity, peer.map(Arc::new), watcher)
            .await;
    }

    async fn serve_http<S>(
        self,
        stream: S,
        identity: PeerIdentity,
        recheck: Option<Arc<Recheck>>,
        watcher: Watcher,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            app,
            options,
            remote,
            ..
        } = self;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            // A certificate revoked (or no longer trusted) since the handshake: this request is
            // anonymous, and its answer closes the connection.
            let trusted = recheck
                .as_ref()
                .is_none_or(|recheck| recheck.tls.still_trusted(&recheck.peer));
            if trusted {
                request.extensions_mut().insert(identity.clone());
            } else {
                warn!(%remote, identities = ?identity.names, "closing a connection whose client certificate is no longer trusted");
                request.extensions_mut().insert(PeerIdentity::default());
            }
            request.extensions_mut().insert(ConnectInfo(remote));
            let answer = app.clone().oneshot(request);
            async move {
                let mut response = answer.await?;
                if !trusted {
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

/// What a connection needs to verify its client's certificate again.
struct Recheck {
    tls: Arc<ReloadingTlsConfig>,
    peer: VerifiedPeer,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    fn certificate(sans: Vec<SanType>, common_name: Option<&str>) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans;
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(common_name) = common_name {
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn identities_are_dns_then_uri_sans_then_cn_without_repeats() {
        let der = certificate(
            vec![
                SanType::URI("spiffe://cluster.local/ns/a/sa/b".try_into().unwrap()),
                SanType::DnsName("op.spark.svc".try_into().unwrap()),
                SanType::IpAddress("127.0.0.1".parse().unwrap()),
                SanType::DnsName("op.spark.svc".try_into().unwrap()),
            ],
            Some("operator"),
        );
        assert_eq!(
            peer_identity(&der).unwrap().names,
            [
                "op.spark.svc",
                "spiffe://cluster.local/ns/a/sa/b",
                "operator"
            ]
        );
    }

    #[test]
    fn certificate_with_only_a_cn_yields_the_cn() {
        let der = certificate(vec![], Some("ci-runner"));
        assert_eq!(peer_identity(&der).unwrap().names, ["ci-runner"]);
    }

    #[test]
    fn garbage_is_not_a_certificate() {
        assert_eq!(
            peer_identity(b"nope").unwrap_err().kind(),
            "parse_certificate"
        );
    }

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
