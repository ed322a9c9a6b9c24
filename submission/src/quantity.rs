//! Resource quantities (`500m`, `2`, `1.5Gi`, `1e3`) as the API server holds them: exact (in
//! nano-units, so milli-cpu and binary and decimal memory suffixes compare and add without
//! rounding), and written back in Go's canonical form (`resource.Quantity.String()`: `1000m` is
//! `1`, `0.5` is `500m`, `1024Mi` is `1Gi`, `1536Mi` stays `1536Mi`).

use std::cmp::Ordering;
use std::fmt;

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;

/// How a quantity was written, which decides how it is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `m`, `k`, `M`, `G`, ... or no suffix.
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`, ...
    BinarySI,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity, exactly.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseQuantityError {
    /// Not of the form number + suffix.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// Too large to hold.
    #[error("quantity is too large")]
    TooLarge,
}

impl ParseQuantityError {
    /// A stable name for the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Format => "Format",
            Self::TooLarge => "TooLarge",
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Quantity {
    /// Zero.
    pub const ZERO: Self = Self {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// A whole number of units (a count).
    pub fn units(n: i64) -> Self {
        Self {
            nanos: i128::from(n) * NANO,
            format: Format::DecimalSI,
        }
    }

    /// Parses a quantity as `resource.ParseQuantity` does; digits finer than a nano-unit round
    /// up.
    pub fn parse(text: &str) -> Result<Self, ParseQuantityError> {
        let s = text.trim();
        let (negative, s) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(ParseQuantityError::Format);
        }
        let (format, base, exponent) = suffix_scale(suffix)?;
        let digits: i128 = format!("{whole}{fraction}")
            .trim_start_matches('0')
            .parse()
            .or_else(|e: std::num::ParseIntError| {
                if whole.chars().chain(fraction.chars()).all(|c| c == '0') {
                    Ok(0)
                } else if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) {
                    Err(ParseQuantityError::TooLarge)
                } else {
                    Err(ParseQuantityError::Format)
                }
            })?;
        // value = digits * base^exponent / 10^fraction_len, in nano-units.
        let scale = |n: i128, base: i128, times: u32| -> Option<i128> {
            (0..times).try_fold(n, |acc, _| acc.checked_mul(base))
        };
        let frac_len = i32::try_from(fraction.len()).map_err(|_| ParseQuantityError::Format)?;
        let mut numerator = digits
            .checked_mul(NANO)
            .ok_or(ParseQuantityError::TooLarge)?;
        let mut denominator: i128 = 1;
        let ten_exp = if base == 10 {
            exponent - frac_len
        } else {
            -frac_len
        };
        if base == 1024 {
            numerator = scale(numerator, 1024, exponent.unsigned_abs())
                .ok_or(ParseQuantityError::TooLarge)?;
        }
        if ten_exp >= 0 {
            numerator =
                scale(numerator, 10, ten_exp.unsigned_abs()).ok_or(ParseQuantityError::TooLarge)?;
        } else {
            denominator =
                scale(1, 10, ten_exp.unsigned_abs()).ok_or(ParseQuantityError::TooLarge)?;
        }
        let nanos = numerator / denominator + i128::from(numerator % denominator != 0);
        Ok(Self {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether it is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// `nanos` written as `self` was, or as `other` when `self` is zero.
    fn with(self, nanos: i128, other: Self) -> Self {
        let format = if self.is_zero() {
            other.format
        } else {
            self.format
        };
        Self { nanos, format }
    }

    /// The quantity in milli-units, rounded up (what the API server compares some values by).
    pub fn milli(&self) -> i128 {
        let m = NANO / 1000;
        self.nanos / m + i128::from(self.nanos % m > 0)
    }
}

impl std::ops::Add for Quantity {
    type Output = Self;

    /// The sum, written as the first of the two that is not zero was (Go's `Quantity.Add`).
    fn add(self, other: Self) -> Self {
        self.with(self.nanos.saturating_add(other.nanos), other)
    }
}

impl std::ops::Sub for Quantity {
    type Output = Self;

    /// The difference, written as `self` was unless it is zero.
    fn sub(self, other: Self) -> Self {
        self.with(self.nanos.saturating_sub(other.nanos), other)
    }
}

/// The format, base and exponent a suffix stands for.
fn suffix_scale(suffix: &str) -> Result<(Format, i128, i32), ParseQuantityError> {
    let decimal = |e| Ok((Format::DecimalSI, 10, e));
    let binary = |e| Ok((Format::BinarySI, 1024, e));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or(ParseQuantityError::Format)?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ParseQuantityError::Format);
            }
            let e: i32 = rest.parse().map_err(|_| ParseQuantityError::Format)?;
            Ok((Format::DecimalExponent, 10, e))
        }
    }
}

impl fmt::Display for Quantity {
    /// Go's canonical form (`CanonicalizeBytes`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let whole = self.nanos % NANO == 0;
        let binary = self.format == Format::BinarySI
            && whole
            && (self.nanos <= -1024 * NANO || self.nanos >= 1024 * NANO);
        if binary {
            let mut amount = self.nanos / NANO;
            let mut power = 0;
            while amount % 1024 == 0 && power < 6 {
                amount /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{amount}{suffix}");
        }
        // Decimal: the smallest mantissa, its exponent lowered to a multiple of three.
        let mut amount = self.nanos;
        let mut exponent: i32 = -9;
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            amount *= 10;
            exponent -= 1;
        }
        let si = match exponent {
            -9 => Some("n"),
            -6 => Some("u"),
            -3 => Some("m"),
            0 => Some(""),
            3 => Some("k"),
            6 => Some("M"),
            9 => Some("G"),
            12 => Some("T"),
            15 => Some("P"),
            18 => Some("E"),
            _ => None,
        };
        match (self.format, si) {
            (Format::DecimalExponent, _) if exponent == 0 => write!(f, "{amount}"),
            (Format::DecimalExponent, _) | (_, None) => write!(f, "{amount}e{exponent}"),
            (_, Some(suffix)) => write!(f, "{amount}{suffix}"),
        }
    }
}

#[cfg(test)]
mod tests;
