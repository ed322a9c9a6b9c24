//! A client certificate and a CA bundle that follow their files: cert-manager (or any Secret
//! update) rotates the certificate and key in place, or replaces the CA, and a long-running client
//! must present the new pair and trust the new CA without a restart.
//!
//! As the service's `ReloadingTlsConfig` does for its side: no watcher task. rustls asks the
//! [`ReloadingClientCert`] for the certificate at every handshake that requests one; at most once
//! per check interval that call re-reads both PEM files and, when their bytes changed, parses
//! them into a new certified key. Comparing bytes rather than mtimes also catches a Secret
//! volume's atomic symlink swap. A pair that does not load (a rotation caught half-written, a key
//! that does not match its certificate) keeps the previous one, logs a warning, and is tried again
//! at the next check. Connections already open keep the certificate they were made with; new
//! ones (the pool opens them as it needs) present the new one.
//!
//! [`ReloadingServerVerifier`] does the same for the CA bundle that verifies the server: each
//! handshake's verification re-reads the bundle at most once per check interval and, when its
//! bytes changed, verifies against the new roots. During a CA rotation the bundle holds both CAs
//! for a while; once it holds only the new one, a server still presenting a certificate of the old
//! CA is refused.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, VerifierBuilderError, WebPkiServerVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use thiserror::Error;
use tracing::{info, warn};

use crate::pem::{
    ReadPemError, certificates_from_pem, crypto_provider, private_key_from_pem, read_file,
};

/// How often a handshake re-reads the files, unless configured.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Why a certificate and key could not be loaded.
#[derive(Debug, Error)]
pub enum LoadClientCertError {
    #[error("cannot load the client certificate")]
    Certificate(#[source] ReadPemError),
    #[error("cannot load the client key")]
    Key(#[source] ReadPemError),
    #[error("the client key does not fit its certificate")]
    Pair(#[source] rustls::Error),
}

impl LoadClientCertError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadClientCertError::Certificate(_) => "certificate",
            LoadClientCertError::Key(_) => "key",
            LoadClientCertError::Pair(_) => "pair",
        }
    }
}

/// The files' bytes and what they make.
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
    checked_at: Instant,
}

/// A client certificate and key read from files, re-read when they change.
pub struct ReloadingClientCert {
    cert: PathBuf,
    key: PathBuf,
    check_interval: Duration,
    state: Mutex<Loaded>,
}

impl std::fmt::Debug for ReloadingClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingClientCert")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("check_interval", &self.check_interval)
            .finish_non_exhaustive()
    }
}

/// Parses a certificate chain and key read from `cert` and `key`.
fn certified_key(
    (cert, cert_pem): (&Path, &[u8]),
    (key, key_pem): (&Path, &[u8]),
) -> Result<Arc<CertifiedKey>, LoadClientCertError> {
    let chain = certificates_from_pem(cert, cert_pem).map_err(LoadClientCertError::Certificate)?;
    let private = private_key_from_pem(key, key_pem).map_err(LoadClientCertError::Key)?;
    CertifiedKey::from_der(chain, private, &crypto_provider())
        .map(Arc::new)
        .map_err(LoadClientCertError::Pair)
}

impl ReloadingClientCert {
    /// Loads the pair once; fails if it does not load (start-up must not limp on).
    pub fn new(
        cert: PathBuf,
        key: PathBuf,
        check_interval: Duration,
    ) -> Result<ReloadingClientCert, LoadClientCertError> {
        let cert_pem = read_file(&cert).map_err(LoadClientCertError::Certificate)?;
        let key_pem = read_file(&key).map_err(LoadClientCertError::Key)?;
        let loaded = certified_key((&cert, &cert_pem), (&key, &key_pem))?;
        Ok(ReloadingClientCert {
            cert,
            key,
            check_interval,
            state: Mutex::new(Loaded {
                cert_pem,
                key_pem,
                key: loaded,
                checked_at: Instant::now(),
            }),
        })
    }

    /// The pair for the next handshake, re-read first when the check interval has passed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock only means a panic elsewhere while holding it; the state is whole.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked_at.elapsed() >= self.check_interval {
            state.checked_at = Instant::now();
            if let Err(error) = self.reload(&mut state) {
                warn!(
                    kind = error.kind(),
                    error = %submission::error_chain::error_chain(&error),
                    "client certificate files changed but cannot be used; keeping the previous ones"
                );
            }
        }
        state.key.clone()
    }

    fn reload(&self, state: &mut Loaded) -> Result<(), LoadClientCertError> {
        let cert_pem = read_file(&self.cert).map_err(LoadClientCertError::Certificate)?;
        let key_pem = read_file(&self.key).map_err(LoadClientCertError::Key)?;
        if cert_pem == state.cert_pem && key_pem == state.key_pem {
            return Ok(());
        }
        state.key = certified_key((&self.cert, &cert_pem), (&self.key, &key_pem))?;
        state.cert_pem = cert_pem;
        state.key_pem = key_pem;
        info!(cert = %self.cert.display(), "reloaded the client certificate");
        Ok(())
    }
}

impl ResolvesClientCert for ReloadingClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Why a CA bundle could not be turned into a server verifier.
#[derive(Debug, Error)]
pub enum LoadCaError {
    #[error("cannot load the CA bundle")]
    Read(#[source] ReadPemError),
    #[error("the CA bundle holds an unusable certificate")]
    Add(#[source] rustls::Error),
    #[error("cannot build a verifier from the CA bundle")]
    Build(#[source] VerifierBuilderError),
}

impl LoadCaError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadCaError::Read(_) => "read",
            LoadCaError::Add(_) => "add",
            LoadCaError::Build(_) => "build",
        }
    }
}

/// The bundle's bytes and the verifier they make.
struct Roots {
    pem: Vec<u8>,
    verifier: Arc<WebPkiServerVerifier>,
    checked_at: Instant,
}

/// Verifies the server against a CA bundle read from a file, re-read when it changes.
pub struct ReloadingServerVerifier {
    ca: PathBuf,
    check_interval: Duration,
    state: Mutex<Roots>,
}

impl std::fmt::Debug for ReloadingServerVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingServerVerifier")
            .field("ca", &self.ca)
            .field("check_interval", &self.check_interval)
            .finish_non_exhaustive()
    }
}

/// A verifier of server certificates that chain to the certificates of `pem`.
fn server_verifier(ca: &Path, pem: &[u8]) -> Result<Arc<WebPkiServerVerifier>, LoadCaError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates_from_pem(ca, pem).map_err(LoadCaError::Read)? {
        roots.add(certificate).map_err(LoadCaError::Add)?;
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
        .build()
        .map_err(LoadCaError::Build)
}

impl ReloadingServerVerifier {
    /// Loads the bundle once; fails if it does not load (start-up must not limp on).
    pub fn new(
        ca: PathBuf,
        check_interval: Duration,
    ) -> Result<ReloadingServerVerifier, LoadCaError> {
        let pem = read_file(&ca).map_err(LoadCaError::Read)?;
        let verifier = server_verifier(&ca, &pem)?;
        Ok(ReloadingServerVerifier {
            ca,
            check_interval,
            state: Mutex::new(Roots {
                pem,
                verifier,
                checked_at: Instant::now(),
            }),
        })
    }

    /// The verifier for this handshake, rebuilt first when the interval has passed and the
    /// bundle changed. A bundle that does not load keeps the previous roots.
    fn current(&self) -> Arc<WebPkiServerVerifier> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked_at.elapsed() >= self.check_interval {
            state.checked_at = Instant::now();
            if let Err(error) = self.reload(&mut state) {
                warn!(
                    kind = error.kind(),
                    error = %submission::error_chain::error_chain(&error),
                    "CA bundle changed but cannot be used; keeping the previous one"
                );
            }
        }
        state.verifier.clone()
    }

    fn reload(&self, state: &mut Roots) -> Result<(), LoadCaError> {
        let pem = read_file(&self.ca).map_err(LoadCaError::Read)?;
        if pem == state.pem {
            return Ok(());
        }
        state.verifier = server_verifier(&self.ca, &pem)?;
        state.pem = pem;
        info!(ca = %self.ca.display(), "reloaded the CA bundle that verifies the submitter");
        Ok(())
    }
}

impl ServerCertVerifier for ReloadingServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.current().verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    // Handshake signatures do not depend on the roots: the verifier as it is now checks them.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .verifier
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .verifier
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .verifier
            .supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_do_not_make_a_pair_are_refused_at_start() {
        let dir = std::env::temp_dir().join(format!("reload-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert, "not pem").unwrap();
        std::fs::write(&key, "not pem").unwrap();
        let error = ReloadingClientCert::new(cert, key, DEFAULT_CHECK_INTERVAL).unwrap_err();
        assert_eq!(error.kind(), "certificate");
        let missing = ReloadingClientCert::new(
            dir.join("absent.pem"),
            dir.join("absent.key"),
            DEFAULT_CHECK_INTERVAL,
        )
        .unwrap_err();
        assert_eq!(missing.kind(), "certificate");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_ca_bundle_without_certificates_is_refused_at_start() {
        let dir = std::env::temp_dir().join(format!("reload-ca-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not pem").unwrap();
        let error = ReloadingServerVerifier::new(ca, DEFAULT_CHECK_INTERVAL).unwrap_err();
        assert_eq!(error.kind(), "read");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
