//! Byte strings as Spark reads them (`JavaUtils.byteStringAs`): `512`, `1500m`, `2gb`, `1G`.
//!
//! Spark's rules, kept exactly because the same string must give the same pod memory:
//! the input is trimmed and lower-cased, then must be ASCII digits with an optional suffix
//! among `b k kb m mb g gb t tb p pb`; a bare number is in the caller's default unit;
//! converting to a smaller unit fails on `i64` overflow, converting to a larger one truncates.

use thiserror::Error;

/// Binary units; Spark's `k`/`m`/`g` are powers of 1024.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteUnit {
    Byte,
    KiB,
    MiB,
    GiB,
    TiB,
    PiB,
}

impl ByteUnit {
    fn multiplier(self) -> u64 {
        match self {
            ByteUnit::Byte => 1,
            ByteUnit::KiB => 1 << 10,
            ByteUnit::MiB => 1 << 20,
            ByteUnit::GiB => 1 << 30,
            ByteUnit::TiB => 1 << 40,
            ByteUnit::PiB => 1 << 50,
        }
    }

    fn from_suffix(suffix: &str) -> Option<ByteUnit> {
        match suffix {
            "b" => Some(ByteUnit::Byte),
            "k" | "kb" => Some(ByteUnit::KiB),
            "m" | "mb" => Some(ByteUnit::MiB),
            "g" | "gb" => Some(ByteUnit::GiB),
            "t" | "tb" => Some(ByteUnit::TiB),
            "p" | "pb" => Some(ByteUnit::PiB),
            _ => None,
        }
    }

    /// `value` of `self` expressed in `target`, with Java's `long` range as the limit.
    fn convert(self, value: u64, target: ByteUnit) -> Option<u64> {
        let (from, to) = (self.multiplier(), target.multiplier());
        if from > to {
            let converted = value.checked_mul(from / to)?;
            (converted <= i64::MAX as u64).then_some(converted)
        } else {
            Some(value / (to / from))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseByteStringError {
    #[error(
        "{input:?} is not a byte size: expected digits with an optional unit (b, k, m, g, t, p)"
    )]
    Malformed { input: String },
    #[error("{input:?} is fractional: byte sizes must be whole numbers (use 1536m, not 1.5g)")]
    Fractional { input: String },
    #[error("{input:?} has an unknown unit {suffix:?}: use b, k, kb, m, mb, g, gb, t, tb, p or pb")]
    UnknownUnit { input: String, suffix: String },
    #[error("{input:?} exceeds the largest size Spark can represent")]
    Overflow { input: String },
}

impl ParseByteStringError {
    pub fn kind(&self) -> &'static str {
        match self {
            ParseByteStringError::Malformed { .. } => "malformed",
            ParseByteStringError::Fractional { .. } => "fractional",
            ParseByteStringError::UnknownUnit { .. } => "unknown_unit",
            ParseByteStringError::Overflow { .. } => "overflow",
        }
    }
}

/// `input` in `unit`, a bare number being taken as `unit` already (`JavaUtils.byteStringAs`).
pub fn parse_byte_string(input: &str, unit: ByteUnit) -> Result<u64, ParseByteStringError> {
    // Java's String.trim strips every char up to U+0020, not just whitespace.
    let lower = input.trim_matches(|c: char| c <= ' ').to_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, suffix) = lower.split_at(digits_end);
    let malformed = || ParseByteStringError::Malformed {
        input: input.to_owned(),
    };
    if digits.is_empty() {
        return Err(malformed());
    }
    if let Some(fraction) = suffix.strip_prefix('.') {
        let fraction_digits = fraction
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(fraction.len());
        let rest = &fraction[fraction_digits..];
        if fraction_digits > 0 && rest.chars().all(|c| c.is_ascii_lowercase()) {
            return Err(ParseByteStringError::Fractional {
                input: input.to_owned(),
            });
        }
        return Err(malformed());
    }
    if !suffix.chars().all(|c| c.is_ascii_lowercase()) {
        return Err(malformed());
    }
    let overflow = || ParseByteStringError::Overflow {
        input: input.to_owned(),
    };
    // Long.parseLong: more digits than an i64 holds is an error, not a wrap.
    let value: u64 = digits.parse().map_err(|_| overflow())?;
    if value > i64::MAX as u64 {
        return Err(overflow());
    }
    let given = if suffix.is_empty() {
        unit
    } else {
        ByteUnit::from_suffix(suffix).ok_or_else(|| ParseByteStringError::UnknownUnit {
            input: input.to_owned(),
            suffix: suffix.to_owned(),
        })?
    };
    given.convert(value, unit).ok_or_else(overflow)
}

/// Bytes, bare numbers being bytes (`JavaUtils.byteStringAsBytes`).
pub fn to_bytes(input: &str) -> Result<u64, ParseByteStringError> {
    parse_byte_string(input, ByteUnit::Byte)
}

/// MiB, bare numbers being MiB (`JavaUtils.byteStringAsMb`, how `spark.driver.memory` is read).
pub fn to_mib(input: &str) -> Result<u64, ParseByteStringError> {
    parse_byte_string(input, ByteUnit::MiB)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_match_java_utils() {
        let cases: &[(&str, ByteUnit, u64)] = &[
            ("1g", ByteUnit::MiB, 1024),
            ("1G", ByteUnit::MiB, 1024),
            ("2gb", ByteUnit::MiB, 2048),
            ("1500m", ByteUnit::MiB, 1500),
            ("512", ByteUnit::MiB, 512),
            ("512", ByteUnit::Byte, 512),
            (" 4g\t", ByteUnit::MiB, 4096),
            ("1500k", ByteUnit::MiB, 1),
            ("1023k", ByteUnit::MiB, 0),
            ("1b", ByteUnit::Byte, 1),
            ("1k", ByteUnit::Byte, 1024),
            ("1kb", ByteUnit::Byte, 1024),
            ("1t", ByteUnit::GiB, 1024),
            ("1tb", ByteUnit::MiB, 1 << 20),
            ("1p", ByteUnit::TiB, 1024),
            ("1pb", ByteUnit::Byte, 1 << 50),
            ("0", ByteUnit::Byte, 0),
            ("007m", ByteUnit::MiB, 7),
        ];
        for (input, unit, expected) in cases {
            assert_eq!(parse_byte_string(input, *unit), Ok(*expected), "{input}");
        }
    }

    #[test]
    fn malformed_sizes_are_rejected_with_their_kind() {
        let cases: &[(&str, &str)] = &[
            ("abc", "malformed"),
            ("", "malformed"),
            ("-1g", "malformed"),
            ("+1g", "malformed"),
            ("1 g", "malformed"),
            ("1g2", "malformed"),
            ("1.5g", "fractional"),
            ("1.5", "fractional"),
            ("1.g", "malformed"),
            ("1x", "unknown_unit"),
            ("1gib", "unknown_unit"),
            ("1mi", "unknown_unit"),
            ("99999999999999999999", "overflow"),
            ("9223372036854775807k", "overflow"),
            ("8192p", "overflow"),
            ("١", "malformed"),
        ];
        for (input, kind) in cases {
            let err = to_bytes(input).expect_err(input);
            assert_eq!(err.kind(), *kind, "{input}");
        }
    }

    #[test]
    fn to_mib_reads_bare_numbers_as_mib() {
        assert_eq!(to_mib("2048"), Ok(2048));
        assert_eq!(to_bytes("2048"), Ok(2048));
    }

    proptest! {
        #[test]
        fn parse_never_panics(input in ".*") {
            let _ = to_bytes(&input);
            let _ = to_mib(&input);
        }

        #[test]
        fn whole_mebibytes_round_trip(n in 0u64..(1 << 40)) {
            prop_assert_eq!(to_mib(&format!("{n}m")), Ok(n));
            prop_assert_eq!(to_mib(&format!("{n}M")), Ok(n));
            prop_assert_eq!(to_bytes(&format!("{n}k")), Ok(n * 1024));
        }
    }
}
