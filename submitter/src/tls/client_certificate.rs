//! Client certificates: what the handshake checks, what is verified after it, and the only way
//! to a [`PeerIdentity`].
//!
//! Decided: the handshake accepts any client certificate whose holder proves possession of its
//! key (rustls still checks the CertificateVerify signature with the certificate's public key),
//! and nothing more ([`ClientCertificateVerifier::handshake`]). The real verification runs right
//! after the handshake, before any request is read ([`ClientCertificateVerifier::verify`]): the
//! chain to the client CAs, the validity period of every certificate in it, the CRLs, the
//! extended key usage `clientAuth` (when the extension is present) and the key usage
//! `digitalSignature` (when the extension is present; the handshake signature is made with the
//! key). A certificate that fails gets a [`CertificateRejection`], which the HTTP layer answers
//! with 401 `UNAUTHENTICATED` naming the check that failed; a handshake failure would instead look
//! like a transport error, which clients (the contract's Go client among them) retry forever.
//!
//! No identity without verification, by construction: [`PeerIdentity`] has no public
//! constructor and no `Default`; the only way to one is [`VerifiedClient::identity`], and the only
//! way to a [`VerifiedClient`] is a chain that [`ClientCertificateVerifier::verify`] accepted.
//!
//! Which check is named when several fail: the first that fails, in webpki's order (validity
//! period, extended key usage, issuer, revocation), then the key usage. A certificate from an
//! untrusted CA that has also expired is thus "expired": both are true, and neither tells more
//! than the client knows of its own certificate.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
};
use thiserror::Error;
use x509_parser::certificate::X509Certificate;

use super::crypto_provider;

/// Verifies client certificates after the handshake (see the module docs), and gives the
/// handshake its possession-only verifier.
#[derive(Debug, Clone)]
pub struct ClientCertificateVerifier {
    /// rustls's webpki verifier over the client CAs and CRLs: chain, validity, revocation and
    /// extended key usage.
    webpki: Arc<dyn ClientCertVerifier>,
}

impl ClientCertificateVerifier {
    /// A verifier for certificates chaining to `roots`, refusing those a CRL in `crls` revokes. A
    /// certificate whose issuer has no CRL among `crls` is accepted: during a CA rotation the
    /// bundle holds two CAs and the CRL file may hold the list of one.
    pub fn new(
        roots: Arc<RootCertStore>,
        crls: Vec<CertificateRevocationListDer<'static>>,
    ) -> Result<ClientCertificateVerifier, VerifierBuilderError> {
        let mut builder = WebPkiClientVerifier::builder_with_provider(roots, crypto_provider());
        if !crls.is_empty() {
            builder = builder.with_crls(crls).allow_unknown_revocation_status();
        }
        Ok(ClientCertificateVerifier {
            webpki: builder.build()?,
        })
    }

    /// Verifies `chain` (leaf first, as presented) at `now`.
    pub fn verify(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<VerifiedClient, CertificateRejection> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(CertificateRejection::Invalid);
        };
        self.webpki
            .verify_client_cert(leaf, intermediates, now)
            .map_err(|error| CertificateRejection::of(&error))?;
        let (_, parsed) =
            x509_parser::parse_x509_certificate(leaf).map_err(|_| CertificateRejection::Invalid)?;
        if !signs(&parsed)? {
            return Err(CertificateRejection::WrongUsage);
        }
        let identity = PeerIdentity {
            names: names_of(&parsed).map_err(|_| CertificateRejection::Invalid)?,
        };
        let valid_until = std::iter::once(Ok(not_after(&parsed)))
            .chain(intermediates.iter().map(|der| {
                x509_parser::parse_x509_certificate(der).map(|(_, cert)| not_after(&cert))
            }))
            .try_fold(u64::MAX, |earliest, end| end.map(|end| earliest.min(end)))
            .map_err(|_| CertificateRejection::Invalid)?;
        Ok(VerifiedClient {
            chain: chain.iter().map(|c| c.clone().into_owned()).collect(),
            identity,
            valid_until,
        })
    }

    /// The verifier the handshake uses: asks for a certificate (naming the client CAs, so a
    /// client holding several can pick), requires one only with `mandatory`, and checks only
    /// that the client holds the certificate's key.
    pub fn handshake(&self, mandatory: bool) -> Arc<dyn ClientCertVerifier> {
        Arc::new(PossessionOnly {
            webpki: self.webpki.clone(),
            mandatory,
        })
    }
}

/// Whether the key usage extension, when present, allows signing (`digitalSignature`): the
/// client signs the handshake with its key.
fn signs(certificate: &X509Certificate<'_>) -> Result<bool, CertificateRejection> {
    let usage = certificate
        .key_usage()
        .map_err(|_| CertificateRejection::Invalid)?;
    Ok(usage.is_none_or(|usage| usage.value.digital_signature()))
}

/// `notAfter` in seconds since the epoch (0 for a date before it, which has long passed).
fn not_after(certificate: &X509Certificate<'_>) -> u64 {
    u64::try_from(certificate.validity().not_after.timestamp()).unwrap_or(0)
}

/// The handshake's client verifier: proof of possession only (see the module docs).
#[derive(Debug)]
struct PossessionOnly {
    webpki: Arc<dyn ClientCertVerifier>,
    mandatory: bool,
}

impl ClientCertVerifier for PossessionOnly {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Verified after the handshake, so that a bad certificate gets a 401 and not a
        // handshake failure; nothing is taken from it before (module docs).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A client certificate chain that passed [`ClientCertificateVerifier::verify`], and the
/// identity it names.
#[derive(Debug)]
pub struct VerifiedClient {
    chain: Vec<CertificateDer<'static>>,
    identity: PeerIdentity,
    /// The earliest `notAfter` of the presented chain, in seconds since the epoch: past it, the
    /// chain must be verified again.
    valid_until: u64,
}

impl VerifiedClient {
    /// The identities the verified certificate names.
    pub fn identity(&self) -> &PeerIdentity {
        &self.identity
    }

    /// The chain as presented, leaf first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// Whether a certificate of the chain has expired by `now`.
    pub fn expired(&self, now: UnixTime) -> bool {
        now.as_secs() > self.valid_until
    }
}

/// Why a presented client certificate was not accepted. Its `Display` is what the client is
/// told: which check failed, and nothing about the certificate (no names, serials or chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CertificateRejection {
    #[error("the client certificate is not issued by a certificate authority this service trusts")]
    UntrustedIssuer,
    #[error("the client certificate has expired")]
    Expired,
    #[error("the client certificate is not valid yet")]
    NotYetValid,
    #[error("the client certificate has been revoked")]
    Revoked,
    #[error(
        "the client certificate may not be used for client authentication (its key usage or \
         extended key usage)"
    )]
    WrongUsage,
    #[error("the client certificate is not a valid certificate")]
    Invalid,
}

impl CertificateRejection {
    /// A stable name for metrics, logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            CertificateRejection::UntrustedIssuer => "untrusted_issuer",
            CertificateRejection::Expired => "expired",
            CertificateRejection::NotYetValid => "not_yet_valid",
            CertificateRejection::Revoked => "revoked",
            CertificateRejection::WrongUsage => "wrong_usage",
            CertificateRejection::Invalid => "invalid",
        }
    }

    /// The rejection a verification error of rustls stands for.
    fn of(error: &rustls::Error) -> CertificateRejection {
        let rustls::Error::InvalidCertificate(error) = error else {
            return CertificateRejection::Invalid;
        };
        #[allow(deprecated)] // matched so that an older rustls path still maps
        match error {
            CertificateError::UnknownIssuer
            | CertificateError::BadSignature
            | CertificateError::UnsupportedSignatureAlgorithm
            | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
            | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
                CertificateRejection::UntrustedIssuer
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                CertificateRejection::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                CertificateRejection::NotYetValid
            }
            CertificateError::Revoked => CertificateRejection::Revoked,
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                CertificateRejection::WrongUsage
            }
            _ => CertificateRejection::Invalid,
        }
    }
}

/// The client's identities: its verified certificate's DNS SANs, URI SANs and CN, in that
/// order, without repeats. Only a [`VerifiedClient`] has one; a request without one is
/// anonymous.
///
/// Not to be made from names, by hand:
///
/// ```compile_fail,E0451
/// let forged = submitter::tls::PeerIdentity { names: vec!["admin".to_owned()] };
/// ```
///
/// nor out of nothing:
///
/// ```compile_fail,E0599
/// let forged = submitter::tls::PeerIdentity::default();
/// ```
///
/// and a verified client is no easier to forge:
///
/// ```compile_fail,E0451
/// use submitter::tls::{PeerIdentity, VerifiedClient};
/// fn forge(identity: PeerIdentity) -> VerifiedClient {
///     VerifiedClient { chain: Vec::new(), identity, valid_until: u64::MAX }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    names: Vec<String>,
}

impl PeerIdentity {
    /// The names, DNS SANs first; the first is the one budgets and audit lines use.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// Why a certificate's names could not be read.
#[derive(Debug, Error)]
pub enum ReadPeerIdentityError {
    #[error("peer certificate has an invalid subjectAltName extension")]
    ParseSubjectAltName(#[source] x509_parser::error::X509Error),
}

impl ReadPeerIdentityError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadPeerIdentityError::ParseSubjectAltName(_) => "parse_subject_alt_name",
        }
    }
}

/// The identities a certificate names: DNS SANs, URI SANs, then the subject CN.
fn names_of(certificate: &X509Certificate<'_>) -> Result<Vec<String>, ReadPeerIdentityError> {
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
    Ok(names)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Verified identities for the crate's unit tests, made the only way there is: a
    //! certificate of a throwaway CA, verified.

    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType,
    };

    /// The identity of a verified certificate whose CN is `common_name`, with `dns` SANs.
    pub(crate) fn identity(dns: &[&str], common_name: &str) -> PeerIdentity {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
        leaf.subject_alt_names = dns
            .iter()
            .map(|name| SanType::DnsName((*name).try_into().unwrap()))
            .collect();
        leaf.distinguished_name
            .push(DnType::CommonName, common_name);
        let leaf = leaf.signed_by(&KeyPair::generate().unwrap(), &ca).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let verifier = ClientCertificateVerifier::new(Arc::new(roots), Vec::new()).unwrap();
        verifier
            .verify(&[leaf.der().clone()], UnixTime::now())
            .unwrap()
            .identity()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose, SanType,
    };

    struct Ca {
        issuer: CertifiedIssuer<'static, KeyPair>,
    }

    impl Ca {
        fn new() -> Ca {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, "ca");
            Ca {
                issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
            }
        }

        fn verifier(
            &self,
            crls: Vec<CertificateRevocationListDer<'static>>,
        ) -> ClientCertificateVerifier {
            let mut roots = RootCertStore::empty();
            roots.add(self.issuer.der().clone()).unwrap();
            ClientCertificateVerifier::new(Arc::new(roots), crls).unwrap()
        }

        fn leaf(&self, shape: impl FnOnce(&mut CertificateParams)) -> CertificateDer<'static> {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, "client");
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            shape(&mut params);
            params
                .signed_by(&KeyPair::generate().unwrap(), &self.issuer)
                .unwrap()
                .der()
                .clone()
        }
    }

    fn days(n: i64) -> time::Duration {
        time::Duration::days(n)
    }

    #[test]
    fn each_failed_check_is_named() {
        let ca = Ca::new();
        let now = time::OffsetDateTime::now_utc();
        let cases: [(&str, CertificateDer<'static>, Option<CertificateRejection>); 7] = [
            ("good", ca.leaf(|_| {}), None),
            (
                "another CA",
                Ca::new().leaf(|_| {}),
                Some(CertificateRejection::UntrustedIssuer),
            ),
            (
                "expired",
                ca.leaf(|p| {
                    p.not_before = now - days(30);
                    p.not_after = now - days(1);
                }),
                Some(CertificateRejection::Expired),
            ),
            (
                "not yet valid",
                ca.leaf(|p| {
                    p.not_before = now + days(1);
                    p.not_after = now + days(30);
                }),
                Some(CertificateRejection::NotYetValid),
            ),
            (
                "server auth only",
                ca.leaf(|p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth]),
                Some(CertificateRejection::WrongUsage),
            ),
            (
                "key usage without digitalSignature",
                ca.leaf(|p| p.key_usages = vec![KeyUsagePurpose::KeyEncipherment]),
                Some(CertificateRejection::WrongUsage),
            ),
            (
                "no extended key usage at all",
                ca.leaf(|p| p.extended_key_usages = Vec::new()),
                None,
            ),
        ];
        let verifier = ca.verifier(Vec::new());
        for (case, leaf, expected) in cases {
            let verified = verifier.verify(&[leaf], UnixTime::now());
            assert_eq!(verified.err(), expected, "{case}");
        }
    }

    #[test]
    fn a_revoked_certificate_is_named_revoked() {
        use rcgen::{
            CertificateRevocationListParams, KeyIdMethod, RevocationReason, RevokedCertParams,
            SerialNumber,
        };
        let ca = Ca::new();
        let serial = SerialNumber::from(42u64);
        let revoked = ca.leaf(|p| p.serial_number = Some(serial.clone()));
        let kept = ca.leaf(|p| p.serial_number = Some(SerialNumber::from(43u64)));
        let now = time::OffsetDateTime::now_utc();
        let crl = CertificateRevocationListParams {
            this_update: now - days(1),
            next_update: now + days(1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![RevokedCertParams {
                serial_number: serial,
                revocation_time: now,
                reason_code: Some(RevocationReason::KeyCompromise),
                invalidity_date: None,
            }],
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&ca.issuer)
        .unwrap();
        let verifier = ca.verifier(vec![crl.der().clone()]);
        assert_eq!(
            verifier.verify(&[revoked], UnixTime::now()).err(),
            Some(CertificateRejection::Revoked)
        );
        assert!(verifier.verify(&[kept], UnixTime::now()).is_ok());
    }

    #[test]
    fn identities_are_dns_then_uri_sans_then_cn_without_repeats() {
        let ca = Ca::new();
        let leaf = ca.leaf(|p| {
            p.subject_alt_names = vec![
                SanType::URI("spiffe://cluster.local/ns/a/sa/b".try_into().unwrap()),
                SanType::DnsName("op.spark.svc".try_into().unwrap()),
                SanType::IpAddress("127.0.0.1".parse().unwrap()),
                SanType::DnsName("op.spark.svc".try_into().unwrap()),
            ];
            p.distinguished_name = rcgen::DistinguishedName::new();
            p.distinguished_name.push(DnType::CommonName, "operator");
        });
        let verified = ca
            .verifier(Vec::new())
            .verify(&[leaf], UnixTime::now())
            .unwrap();
        assert_eq!(
            verified.identity().names(),
            [
                "op.spark.svc",
                "spiffe://cluster.local/ns/a/sa/b",
                "operator"
            ]
        );
    }

    #[test]
    fn a_verified_chain_expires_with_its_certificate() {
        let ca = Ca::new();
        let now = time::OffsetDateTime::now_utc();
        let end = now + days(2);
        let leaf = ca.leaf(|p| p.not_after = end);
        let verified = ca
            .verifier(Vec::new())
            .verify(&[leaf], UnixTime::now())
            .unwrap();
        let at = |t: time::OffsetDateTime| {
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                u64::try_from(t.unix_timestamp()).unwrap(),
            ))
        };
        assert!(!verified.expired(at(now)));
        assert!(!verified.expired(at(end)));
        assert!(verified.expired(at(end + time::Duration::seconds(1))));
    }

    #[test]
    fn garbage_and_empty_chains_are_invalid() {
        let verifier = Ca::new().verifier(Vec::new());
        assert_eq!(
            verifier.verify(&[], UnixTime::now()).err(),
            Some(CertificateRejection::Invalid)
        );
        assert_eq!(
            verifier
                .verify(&[CertificateDer::from(b"nope".to_vec())], UnixTime::now())
                .err(),
            Some(CertificateRejection::Invalid)
        );
    }
}
