//! kubesim's HTTPS: a certificate authority made at start, the API server's serving certificate,
//! the admin's client certificate, and the accept loop that serves the API over TLS.
//!
//! As in a kubeadm cluster, the kubeconfig user authenticates with a client certificate whose
//! common name is the user and whose organisations are its groups (`system:masters` for the
//! admin); the TLS layer asks every client for a certificate but serves those without one too,
//! so bearer tokens and anonymous requests reach the authenticator.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The DNS names the serving certificate carries besides `localhost`: the names in-cluster
/// clients use for the API server's Service.
pub const SERVICE_DNS_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The admin's user name in its client certificate (as kubeadm names it).
pub const ADMIN_USER: &str = "kubernetes-admin";

/// The group that bypasses authorization (as in Kubernetes).
pub const MASTERS_GROUP: &str = "system:masters";

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused a parameter or failed to sign.
    #[error("cannot make the {what} certificate")]
    Certificate {
        /// Which certificate.
        what: &'static str,
        /// The cause.
        source: rcgen::Error,
    },
    /// rustls refused the certificates.
    #[error("cannot build the TLS configuration")]
    Config(#[source] rustls::Error),
    /// The client verifier could not be built.
    #[error("cannot build the client certificate verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
}

impl PkiError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Certificate { .. } => "certificate",
            Self::Config(_) => "config",
            Self::Verifier(_) => "verifier",
        }
    }
}

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone)]
pub struct KeyPairPem {
    /// The certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
}

/// The cluster's certificates: its CA, the API server's serving certificate and the admin's
/// client certificate.
pub struct Pki {
    issuer: CertifiedIssuer<'static, KeyPair>,
    server: KeyPairPem,
    server_der: (CertificateDer<'static>, Vec<u8>),
    admin: KeyPairPem,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

fn cert_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Certificate { what, source }
}

impl Pki {
    /// A new CA, a serving certificate for 127.0.0.1, `localhost`, the Service names in
    /// [`SERVICE_DNS_NAMES`] and `service_ip` (the in-cluster address of `default/kubernetes`),
    /// and the admin's client certificate.
    pub fn generate(service_ip: IpAddr) -> Result<Self, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err("CA"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "kubesim-ca");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().map_err(cert_err("CA"))?;
        let issuer = CertifiedIssuer::self_signed(params, ca_key).map_err(cert_err("CA"))?;

        let mut sans = vec![
            SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
            SanType::IpAddress(service_ip),
        ];
        for name in std::iter::once("localhost").chain(SERVICE_DNS_NAMES) {
            sans.push(SanType::DnsName(
                name.try_into().map_err(cert_err("serving"))?,
            ));
        }
        let server_key = KeyPair::generate().map_err(cert_err("serving"))?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(cert_err("serving"))?;
        params.subject_alt_names = sans;
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = params
            .signed_by(&server_key, &issuer)
            .map_err(cert_err("serving"))?;
        let server_der = (server_cert.der().clone(), server_key.serialize_der());
        let server = KeyPairPem {
            cert: server_cert.pem(),
            key: server_key.serialize_pem(),
        };
        let mut pki = Self {
            issuer,
            server,
            server_der,
            admin: KeyPairPem {
                cert: String::new(),
                key: String::new(),
            },
        };
        pki.admin = pki.client_certificate(ADMIN_USER, &[MASTERS_GROUP])?;
        Ok(pki)
    }

    /// The CA certificate, PEM (what clients trust; `ca.crt` of service-account volumes).
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// The serving certificate and key.
    pub fn server(&self) -> &KeyPairPem {
        &self.server
    }

    /// The admin's client certificate (`kubernetes-admin`, group `system:masters`).
    pub fn admin(&self) -> &KeyPairPem {
        &self.admin
    }

    /// A client certificate for `user` in `groups`, signed by the cluster CA: the API server
    /// authenticates it as that user, as with certificates a real cluster's CA signs.
    pub fn client_certificate(&self, user: &str, groups: &[&str]) -> Result<KeyPairPem, PkiError> {
        let key = KeyPair::generate().map_err(cert_err("client"))?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(cert_err("client"))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(cert_err("client"))?;
        Ok(KeyPairPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// The rustls configuration of the API server: HTTP/1.1, client certificates requested and
    /// verified against the cluster CA but not required.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, PkiError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.issuer.der().clone())
            .map_err(PkiError::Config)?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(PkiError::Verifier)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_der.1.clone()));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(PkiError::Config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.server_der.0.clone()], key)
            .map_err(PkiError::Config)?;
        // kubesim serves HTTP/1.1 only; Go's client falls back to it when h2 is not offered.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Who a TLS client proved to be with its certificate (common name and organisations).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CertIdentity {
    /// The subject's common name: the user name.
    pub user: String,
    /// The subject's organisations: the groups.
    pub groups: Vec<String>,
}

/// How a request reached the API server, inserted into each request's extensions by the TLS
/// listener; requests without it came over the plain-HTTP listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secure {
    /// The verified client certificate's identity, if the client sent one.
    pub client: Option<CertIdentity>,
}

/// Reads the identity from a verified client certificate; `None` if it cannot be parsed.
fn identity_of(der: &[u8]) -> Option<CertIdentity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(CertIdentity { user, groups })
}

/// Serves `app` over TLS on `listener` until `shutdown` turns true; open connections are closed
/// then too.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<ServerConfig>,
    app: axum::Router,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (stream, remote) = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(error) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!(%error, "kubesim: accepting a TLS connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(s)) => s,
                Ok(Err(error)) => {
                    tracing::debug!(%remote, %error, "kubesim: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%remote, "kubesim: TLS handshake timed out");
                    return;
                }
            };
            let secure = Secure {
                client: tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|leaf| identity_of(leaf)),
            };
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(secure.clone());
                    tower::ServiceExt::oneshot(app.clone(), request)
                },
            );
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                // Watches over WebSocket (fabric8's) upgrade the connection.
                .with_upgrades();
            tokio::select! {
                served = connection => {
                    if let Err(error) = served {
                        tracing::debug!(%remote, %error, "kubesim: TLS connection ended with an error");
                    }
                }
                _ = stop.changed() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_certificates_carry_user_and_groups() {
        let pki = Pki::generate(IpAddr::from([198, 19, 0, 1])).expect("pki");
        let admin = pki.admin();
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(admin.cert.as_bytes())
            .map(|c: CertificateDer<'static>| c.to_vec())
            .expect("pem");
        assert_eq!(
            identity_of(&der),
            Some(CertIdentity {
                user: ADMIN_USER.into(),
                groups: vec![MASTERS_GROUP.into()]
            })
        );
        assert!(pki.server_config().is_ok());
    }

    #[test]
    fn the_serving_certificate_names_the_service_and_loopback() {
        let pki = Pki::generate(IpAddr::from([198, 19, 0, 1])).expect("pki");
        let der: CertificateDer<'static> =
            rustls_pki_types::pem::PemObject::from_pem_slice(pki.server().cert.as_bytes())
                .expect("pem");
        let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
        let san = cert
            .subject_alternative_name()
            .expect("ext")
            .expect("san")
            .value
            .general_names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",");
        for want in [
            "IPAddress(7f:00:00:01)",
            "IPAddress(c6:13:00:01)",
            "DNSName(localhost)",
            "DNSName(kubernetes)",
            "DNSName(kubernetes.default.svc.cluster.local)",
        ] {
            assert!(san.contains(want), "{want} missing from {san}");
        }
    }
}
