//! A throwaway certificate authority for the sandbox's mTLS: the submitter's server certificate
//! and the operator's client certificate, made at start and never written outside the sandbox.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: String,
    pub key: String,
}

/// A self-signed CA that issues leaf certificates.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<Ca, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ok(Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
        })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn issue(
        &self,
        sans: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Issued, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = sans;
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Result<Issued, rcgen::Error> {
        self.issue(
            vec![
                SanType::DnsName("localhost".try_into()?),
                SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate whose identity is the DNS name `dns`.
    pub fn client(&self, dns: &str) -> Result<Issued, rcgen::Error> {
        self.issue(
            vec![SanType::DnsName(dns.try_into()?)],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}

/// The files of a whole mTLS set-up for `submitter serve` and one client, written to a
/// directory: what the benchmarks hand to the release binaries they start.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    pub ca: std::path::PathBuf,
    pub server_cert: std::path::PathBuf,
    pub server_key: std::path::PathBuf,
    pub client_cert: std::path::PathBuf,
    pub client_key: std::path::PathBuf,
    /// A policy letting the client's `identity` submit anywhere.
    pub policy: std::path::PathBuf,
}

impl PkiFiles {
    /// A new CA named `ca_name`, a server certificate and a client certificate for `identity`,
    /// written under `dir`.
    pub fn write(dir: &std::path::Path, ca_name: &str, identity: &str) -> anyhow::Result<PkiFiles> {
        let ca = Ca::new(ca_name)?;
        let server = ca.server()?;
        let client = ca.client(identity)?;
        let write = |name: &str, text: &str| -> anyhow::Result<std::path::PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            Ok(path)
        };
        Ok(PkiFiles {
            ca: write("ca.crt", &ca.pem())?,
            server_cert: write("tls.crt", &server.cert)?,
            server_key: write("tls.key", &server.key)?,
            client_cert: write("client.crt", &client.cert)?,
            client_key: write("client.key", &client.key)?,
            policy: write(
                "policy.yaml",
                &format!(
                    "clients:\n  - identity: {identity}\n    namespaces: [\"*\"]\n    serviceAccounts: [\"*\"]\n"
                ),
            )?,
        })
    }
}
