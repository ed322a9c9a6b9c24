//! PEM files of TLS material (certificate chains, CA bundles, private keys) and the one crypto
//! provider every rustls config of ours is built with. Shared by the client and the service.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

/// The crypto provider used for every config we build. Explicit rather than the process
/// default, which panics if two providers are compiled in.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a PEM file could not be read.
#[derive(Debug, Error)]
pub enum ReadPemError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse PEM in {path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("no certificate found in {path}")]
    NoCertificate { path: PathBuf },
}

impl ReadPemError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadPemError::Read { .. } => "read",
            ReadPemError::Parse { .. } => "parse",
            ReadPemError::NoCertificate { .. } => "no_certificate",
        }
    }
}

/// Reads every certificate of a PEM file (a chain or a CA bundle).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ReadPemError> {
    let bytes = read_file(path)?;
    certificates_from_pem(path, &bytes)
}

/// Reads the first private key of a PEM file.
pub fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, ReadPemError> {
    let bytes = read_file(path)?;
    private_key_from_pem(path, &bytes)
}

/// Reads a PEM file's bytes (parse them with [`certificates_from_pem`] or [`private_key_from_pem`]).
pub fn read_file(path: &Path) -> Result<Vec<u8>, ReadPemError> {
    std::fs::read(path).map_err(|source| ReadPemError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Every certificate of PEM `bytes` read from `path` (named in errors).
pub fn certificates_from_pem(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ReadPemError> {
    let certificates = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ReadPemError::Parse {
            path: path.to_owned(),
            source,
        })?;
    if certificates.is_empty() {
        return Err(ReadPemError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certificates)
}

/// The first private key of PEM `bytes` read from `path` (named in errors).
pub fn private_key_from_pem(
    path: &Path,
    bytes: &[u8],
) -> Result<PrivateKeyDer<'static>, ReadPemError> {
    PrivateKeyDer::from_pem_slice(bytes).map_err(|source| ReadPemError::Parse {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_without_certificates_is_refused() {
        let error = certificates_from_pem(Path::new("x"), b"hello").unwrap_err();
        assert_eq!(error.kind(), "no_certificate");
    }
}
