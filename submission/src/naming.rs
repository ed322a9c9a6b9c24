//! Names and ids of the driver's objects, in Spark 4.3's shapes, but derived from the submission id
//! where Spark draws random numbers or reads the clock, so that a repeated request rebuilds the
//! very same objects.
//!
//! Spark's `KubernetesUtils.uniqueID()` is 3 `SecureRandom` bytes as 6 hex digits followed by
//! `currentTimeMillis & 0xFFFFFFFFFF` in hex (10 digits today); its app id is `spark-` plus a
//! dashless random UUID. Ours keep those shapes, and only those digits differ from Spark's.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::resource::java_trim;

/// Longest accepted submission id: the longest Kubernetes object name.
pub const MAX_SUBMISSION_ID_LEN: usize = 253;

/// Longest DNS label, the limit of a Service name and of a label value.
pub const MAX_DNS_LABEL_LEN: usize = 63;

/// A client-chosen submission id: non-empty, at most 253 characters, no control characters.
/// Equal and hashed by the id alone.
#[derive(Debug, Clone)]
pub struct SubmissionId {
    id: String,
    /// [`SubmissionId::label_value`], digested once: every object of a submission carries it.
    label: OnceLock<String>,
    /// The other digests, each made once: a build asks for most of them more than once, and
    /// each is a SHA-256.
    app_id: OnceLock<String>,
    unique_ids: [OnceLock<String>; MEMOISED_PURPOSES.len()],
}

/// The [`SubmissionId::unique_id`] purposes kept once made (the builder's; others are digested
/// at every call).
const MEMOISED_PURPOSES: [&str; 3] = [
    "resource-name-prefix",
    "driver-service-name",
    "spark-conf-map",
];

impl PartialEq for SubmissionId {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for SubmissionId {}

impl Hash for SubmissionId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

/// Why a submission id was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SubmissionIdError {
    #[error("submission id is empty")]
    Empty,
    #[error("submission id is {len} characters long, the limit is {MAX_SUBMISSION_ID_LEN}")]
    TooLong { len: usize },
    #[error("submission id contains a control character")]
    NotPrintable,
}

impl SubmissionIdError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SubmissionIdError::Empty => "empty",
            SubmissionIdError::TooLong { .. } => "too_long",
            SubmissionIdError::NotPrintable => "not_printable",
        }
    }
}

impl FromStr for SubmissionId {
    type Err = SubmissionIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(SubmissionIdError::Empty);
        }
        let len = s.chars().count();
        if len > MAX_SUBMISSION_ID_LEN {
            return Err(SubmissionIdError::TooLong { len });
        }
        if s.chars().any(char::is_control) {
            return Err(SubmissionIdError::NotPrintable);
        }
        Ok(SubmissionId {
            id: s.to_owned(),
            label: OnceLock::new(),
            app_id: OnceLock::new(),
            unique_ids: Default::default(),
        })
    }
}

impl SubmissionId {
    /// The id as the client sent it.
    pub fn as_str(&self) -> &str {
        &self.id
    }

    /// A label-safe digest of the id (label values allow 63 of `[A-Za-z0-9-_.]`, ids do not),
    /// for selecting every object of one submission.
    pub fn label_value(&self) -> String {
        self.label
            .get_or_init(|| hex(&self.digest("label")[..20]))
            .clone()
    }

    fn digest(&self, purpose: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        // The NUL keeps ("ab", "c") and ("a", "bc") apart; ids cannot contain control characters.
        hasher.update(self.id.as_bytes());
        hasher.update([0]);
        hasher.update(purpose.as_bytes());
        hasher.finalize().into()
    }

    /// Spark's `uniqueID()` shape, 16 lowercase hex digits: 6 "random" then 10 "time" digits.
    /// The time part's top bit is set so it always has Spark's 10 digits.
    pub fn unique_id(&self, purpose: &str) -> String {
        let make = || {
            let d = self.digest(purpose);
            let time = u64::from_be_bytes([0, 0, 0, d[3], d[4], d[5], d[6], d[7]]) | (1 << 39);
            format!("{}{time:010x}", hex(&d[..3]))
        };
        match MEMOISED_PURPOSES.iter().position(|p| *p == purpose) {
            Some(i) => self.unique_ids[i].get_or_init(make).clone(),
            None => make(),
        }
    }

    /// `spark.app.id`: `spark-` and 32 hex digits, like Spark's dashless random UUID.
    pub fn app_id(&self) -> String {
        self.app_id
            .get_or_init(|| format!("spark-{}", hex(&self.digest("app-id")[..16])))
            .clone()
    }

    /// A version-4-shaped UUID for the driver's local directory (`/var/data/spark-<uuid>`).
    pub fn local_dir_uuid(&self) -> String {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.digest("local-dir")[..16]);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex(&b);
        format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }
}

impl fmt::Display for SubmissionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

/// Lowercase hex, two digits a byte; by table, not `write!` per byte (a fresh submission
/// writes some 160 bytes this way).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// Lower-cases like Java's `toLowerCase(Locale.ROOT)` and turns every char outside
/// `[a-z0-9-]` into `-`, then collapses runs of `-`.
fn dns_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.to_lowercase().chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// `KubernetesConf.getResourceNamePrefix`: `"$appName-$uniqueID"`, trimmed, lower-cased,
/// `[^a-z0-9-]` to `-`, runs of `-` collapsed, one leading `-` dropped, and a leading digit
/// becomes `x`. Spark does not truncate it.
pub fn resource_name_prefix(app_name: &str, unique_id: &str) -> String {
    let joined = format!("{app_name}-{unique_id}");
    let mut prefix = dns_chars(java_trim(&joined));
    if prefix.starts_with('-') {
        prefix.remove(0);
    }
    if prefix.starts_with(|c: char| c.is_ascii_digit()) {
        prefix.replace_range(..1, "x");
    }
    prefix
}

/// `KubernetesConf.getAppNameLabel`: trimmed, lower-cased, `[^a-z0-9-]` to `-`, runs collapsed,
/// cut to 63 characters, then one leading and one trailing `-` dropped (possibly empty).
pub fn app_name_label(app_name: &str) -> String {
    let mut label = dns_chars(java_trim(app_name));
    // Only ASCII is left, so byte and char positions agree.
    label.truncate(MAX_DNS_LABEL_LEN);
    let label = label.strip_prefix('-').unwrap_or(&label);
    let label = label.strip_suffix('-').unwrap_or(label);
    label.to_owned()
}

/// `DriverServiceFeatureStep`: `{prefix}-driver-svc` when that fits a DNS label, else
/// `spark-{uniqueID}-driver-svc` with a fresh id.
pub fn driver_service_name(prefix: &str, fallback_unique_id: &str) -> String {
    let preferred = format!("{prefix}-driver-svc");
    if preferred.len() <= MAX_DNS_LABEL_LEN {
        preferred
    } else {
        format!("spark-{fallback_unique_id}-driver-svc")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SubmissionId {
        s.parse().unwrap()
    }

    #[test]
    fn hex_writes_two_lowercase_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }

    #[test]
    fn ids_are_validated() {
        assert_eq!("".parse::<SubmissionId>().unwrap_err().kind(), "empty");
        assert_eq!(
            "a".repeat(254).parse::<SubmissionId>().unwrap_err().kind(),
            "too_long"
        );
        assert_eq!(
            "a\nb".parse::<SubmissionId>().unwrap_err().kind(),
            "not_printable"
        );
        assert!("a".repeat(253).parse::<SubmissionId>().is_ok());
        assert!(
            "550e8400-e29b-41d4-a716-446655440000 ü"
                .parse::<SubmissionId>()
                .is_ok()
        );
    }

    #[test]
    fn derived_ids_have_sparks_shapes_and_repeat() {
        let a = id("sub-1");
        let unique = a.unique_id("prefix");
        assert_eq!(unique.len(), 16);
        assert!(
            unique
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(unique, id("sub-1").unique_id("prefix"));
        assert_ne!(unique, a.unique_id("conf-map"));
        assert_ne!(unique, id("sub-2").unique_id("prefix"));
        let app = a.app_id();
        assert!(app.starts_with("spark-") && app.len() == 38, "{app}");
        let uuid = a.local_dir_uuid();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
        assert!(a.label_value().len() <= MAX_DNS_LABEL_LEN);
    }

    #[test]
    fn prefixes_follow_spark() {
        let cases = [
            (
                "My_App!! (Test) #1 ÄÖ.v2 日本",
                "my-app-test-1-v2-0123456789abcdef",
            ),
            (
                "--123.Start.With.DIGITS--",
                "x23-start-with-digits-0123456789abcdef",
            ),
            ("!!!", "0123456789abcdef"),
            ("spark-pi", "spark-pi-0123456789abcdef"),
            ("  lead", "lead-0123456789abcdef"),
        ];
        for (name, expected) in cases {
            let got = resource_name_prefix(name, "0123456789abcdef");
            if name == "!!!" {
                assert_eq!(got, "x123456789abcdef");
            } else {
                assert_eq!(got, expected, "{name}");
            }
        }
    }

    #[test]
    fn app_name_labels_follow_spark() {
        assert_eq!(
            app_name_label("123-start-with-digits"),
            "123-start-with-digits"
        );
        assert_eq!(
            app_name_label("My_App!! (Test) #1 ÄÖ.v2 日本"),
            "my-app-test-1-v2"
        );
        assert_eq!(app_name_label("!!!"), "");
        let long = format!("{}-b", "a".repeat(62));
        assert_eq!(app_name_label(&long), "a".repeat(62));
    }

    #[test]
    fn long_prefixes_fall_back_to_a_short_service_name() {
        let id = "0123456789abcdef";
        let prefix35 = resource_name_prefix(&"a".repeat(35), id);
        assert_eq!(driver_service_name(&prefix35, "f").len(), 63);
        let prefix36 = resource_name_prefix(&"a".repeat(36), id);
        assert_eq!(
            driver_service_name(&prefix36, "fedcba9876543210"),
            "spark-fedcba9876543210-driver-svc"
        );
    }
}
