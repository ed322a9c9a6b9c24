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
