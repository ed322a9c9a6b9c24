//! Shared by the `service_*` and `client_*` tests: a throwaway PKI made with rcgen, a TLS server
//! on 127.0.0.1:0 running `submitter::tls::serve`, and a raw TLS client for handshake tests.
#![allow(dead_code)] // each test crate uses a different part

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::ServerName;
use submitter::tls::{ClientAuth, ReloadingTlsConfig, ServeOptions, TlsFiles, Transport, serve};
use tempfile::TempDir;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and key.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn issue(&self, common_name: &str, sans: Vec<SanType>, usage: ExtendedKeyUsagePurpose) -> Leaf {
        self.issue_shaped(common_name, sans, |params| {
            params.extended_key_usages = vec![usage];
        })
    }

    /// A certificate named like [`Ca::issue`]'s, with `shape` applied to its parameters last
    /// (validity, usages).
    pub fn issue_shaped(
        &self,
        common_name: &str,
        sans: Vec<SanType>,
        shape: impl FnOnce(&mut CertificateParams),
    ) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        shape(&mut params);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A CRL of this CA, PEM, revoking the certificates `revoked` (PEM).
    pub fn crl(&self, revoked: &[&Leaf]) -> String {
        use rcgen::{
            CertificateRevocationListParams, KeyIdMethod, RevokedCertParams, SerialNumber,
        };
        let now = time::OffsetDateTime::now_utc();
        let revoked_certs = revoked
            .iter()
            .map(|leaf| RevokedCertParams {
                serial_number: SerialNumber::from_slice(&serial(&leaf.cert_pem)),
                revocation_time: now,
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect();
        let params = CertificateRevocationListParams {
            this_update: now - time::Duration::minutes(1),
            next_update: now + time::Duration::days(1),
            crl_number: SerialNumber::from(u64::try_from(revoked.len()).unwrap() + 1),
            issuing_distribution_point: None,
            revoked_certs,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        params.signed_by(&self.issuer).unwrap().pem().unwrap()
    }

    /// A server certificate for `localhost` and 127.0.0.1, with `common_name` to tell it apart.
    pub fn server(&self, common_name: &str) -> Leaf {
        self.issue(
            common_name,
            vec![
                SanType::DnsName("localhost".try_into().unwrap()),
                SanType::IpAddress("127.0.0.1".parse().unwrap()),
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate with a DNS SAN, a URI SAN and a CN.
    pub fn client(&self, dns: &str, uri: &str, common_name: &str) -> Leaf {
        self.issue(
            common_name,
            vec![
                SanType::DnsName(dns.try_into().unwrap()),
                SanType::URI(uri.try_into().unwrap()),
            ],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}

/// Files in a temporary folder.
pub struct Dir {
    pub dir: TempDir,
}

impl Dir {
    pub fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes the server's files and returns where they are.
    pub fn server_files(&self, ca: &Ca, server: &Leaf) -> TlsFiles {
        TlsFiles {
            cert: self.write("tls.crt", &server.cert_pem),
            key: self.write("tls.key", &server.key_pem),
            client_ca: self.write("ca.crt", &ca.pem()),
        }
    }

    /// Writes a client's files: (ca, cert, key).
    pub fn client_files(&self, name: &str, ca: &Ca, client: &Leaf) -> (PathBuf, PathBuf, PathBuf) {
        (
            self.write(&format!("{name}-ca.crt"), &ca.pem()),
            self.write(&format!("{name}.crt"), &client.cert_pem),
            self.write(&format!("{name}.key"), &client.key_pem),
        )
    }
}

/// A running server; dropping it stops it.
pub struct Server {
    pub addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

/// Serves `app` over `transport` on 127.0.0.1:0.
pub async fn start(app: Router, transport: Transport) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let options = ServeOptions {
        handshake_timeout: std::time::Duration::from_secs(2),
        ..ServeOptions::default()
    };
    tokio::spawn(serve(listener, transport, app, options, async {
        let _ = stopped.await;
    }));
    Server { addr, _stop: stop }
}

/// A TLS transport for `files` that re-reads them on every connection.
pub fn tls(files: TlsFiles, auth: ClientAuth) -> (Transport, Arc<ReloadingTlsConfig>) {
    let config = Arc::new(
        ReloadingTlsConfig::new(files, auth)
            .unwrap()
            .with_check_interval(std::time::Duration::ZERO),
    );
    (Transport::Tls(config.clone()), config)
}

/// A rustls client config trusting `ca`, presenting `identity` if given.
pub fn client_config(ca: &Ca, identity: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(submitter::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    Arc::new(config)
}

/// What a raw GET saw.
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// The server's leaf certificate, DER.
    pub server_cert: Vec<u8>,
}

/// One GET over a fresh TLS connection.
pub async fn get(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<Answer, BoxError> {
    send(addr, config, http::Method::GET, path, None).await
}

/// One request over a fresh TLS connection; a body is sent as JSON.
pub async fn send(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: http::Method,
    path: &str,
    body: Option<String>,
) -> Result<Answer, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost")?.to_owned();
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    let server_cert = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| cert.to_vec())
        .unwrap_or_default();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::Full::new(Bytes::from(
            body.unwrap_or_default(),
        )))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
        server_cert,
    })
}

/// The serial number of a PEM certificate, big-endian without leading zeros.
pub fn serial(cert_pem: &str) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let raw = cert.tbs_certificate.raw_serial();
    let first = raw.iter().position(|b| *b != 0).unwrap_or(raw.len() - 1);
    raw[first..].to_vec()
}

/// The CN of a DER certificate (to tell rotated server certificates apart).
pub fn common_name(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Answers `GET /whoami` with what the accept loop attached to the request: `names`, the
/// verified identities (empty without), and `rejected`, the kind of the rejection of a presented
/// certificate that failed verification (null otherwise). `ConnectInfo` is asked for too:
/// extraction fails (500) if the accept loop did not set it.
pub fn whoami() -> Router {
    use axum::Extension;
    use axum::extract::ConnectInfo;
    use submitter::tls::{CertificateRejection, PeerIdentity};
    axum::Router::new().route(
        "/whoami",
        axum::routing::get(
            |identity: Option<Extension<PeerIdentity>>,
             rejection: Option<Extension<CertificateRejection>>,
             ConnectInfo(_remote): ConnectInfo<SocketAddr>| async move {
                axum::Json(serde_json::json!({
                    "names": identity.map(|Extension(i)| i.names().to_vec()).unwrap_or_default(),
                    "rejected": rejection.map(|Extension(r)| r.kind()),
                }))
            },
        ),
    )
}
