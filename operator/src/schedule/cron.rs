//! The schedule grammar of `ScheduledSparkApplication.spec.schedule`, as the widely used operator
//! reads it (robfig/cron's standard parser): five fields `minute hour day-of-month month
//! day-of-week`, the descriptors `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/
//! `@midnight`, `@hourly` and `@every <duration>`, and an optional `CRON_TZ=<zone>` or
//! `TZ=<zone>` prefix that overrides `spec.timeZone`.
//!
//! Fields: `*` or `?`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from `a` to the
//! field's end), and comma-separated lists of these; months `JAN`–`DEC` and days `SUN`–`SAT` by
//! name, in any case. When both day fields are restricted, a day matching either runs (cron's
//! rule); when one is `*`, the other alone decides.
//!
//! Time: a schedule names wall-clock times in its zone. A wall-clock time that a daylight-saving
//! jump skips runs once, shifted forward by the jump (02:30 on a spring-forward night at 02:00
//! runs at 03:30); a wall-clock time that a fall-back repeats runs once, at its first
//! occurrence. `@every d` is a constant interval of whole seconds (at least one) from the time it
//! is measured from, whatever the zone.

use std::fmt;

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use thiserror::Error;

/// How far ahead a search for the next time looks before it declares the schedule empty
/// (`0 0 30 2 *`, February 30th, never comes).
const SEARCH_YEARS: i16 = 8;

/// A parsed schedule, bound to its time zone.
#[derive(Clone)]
pub struct CronSchedule {
    kind: Kind,
    zone: TimeZone,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("kind", &self.kind)
            .field("zone", &self.zone.iana_name())
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Fields(Fields),
    /// `@every`: whole seconds, at least one.
    Every(i64),
}

/// One bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    minute: u64,
    hour: u64,
    day_of_month: u64,
    month: u64,
    day_of_week: u64,
    /// The field was `*` or `?` (a step other than 1 makes it restricted).
    day_of_month_star: bool,
    day_of_week_star: bool,
}

/// Why a schedule or its zone was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParseScheduleError {
    #[error("the schedule is empty")]
    Empty,
    #[error("expected 5 fields (minute hour day-of-month month day-of-week), found {found}")]
    FieldCount { found: usize },
    #[error("unknown descriptor {descriptor:?}")]
    UnknownDescriptor { descriptor: String },
    #[error("invalid duration {text:?} after @every")]
    Duration { text: String },
    #[error("invalid {field} {text:?}")]
    Field { field: &'static str, text: String },
    #[error("{field} value {value} is outside {min}-{max}")]
    OutOfRange {
        field: &'static str,
        value: u32,
        min: u32,
        max: u32,
    },
    #[error("unknown time zone {zone:?}")]
    TimeZone { zone: String },
}

impl ParseScheduleError {
    /// A stable name for events and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ParseScheduleError::Empty => "empty",
            ParseScheduleError::FieldCount { .. } => "field_count",
            ParseScheduleError::UnknownDescriptor { .. } => "unknown_descriptor",
            ParseScheduleError::Duration { .. } => "duration",
            ParseScheduleError::Field { .. } => "field",
            ParseScheduleError::OutOfRange { .. } => "out_of_range",
            ParseScheduleError::TimeZone { .. } => "time_zone",
        }
    }
}

/// The zone `spec.timeZone` names: empty or `Local` is this process's zone (UTC in our images),
/// `UTC`, or an IANA name such as `America/New_York`.
pub fn time_zone(name: &str) -> Result<TimeZone, ParseScheduleError> {
    match name {
        "" | "Local" => Ok(TimeZone::system()),
        "UTC" => Ok(TimeZone::UTC),
        other => TimeZone::get(other).map_err(|_| ParseScheduleError::TimeZone {
            zone: other.to_owned(),
        }),
    }
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl CronSchedule {
    /// Parses `expression` in the zone `default_zone` names (see [`time_zone`]), unless the
    /// expression carries its own `CRON_TZ=`/`TZ=` prefix.
    pub fn parse(expression: &str, default_zone: &str) -> Result<CronSchedule, ParseScheduleError> {
        let expression = expression.trim();
        let (zone, rest) = match expression
            .strip_prefix("CRON_TZ=")
            .or_else(|| expression.strip_prefix("TZ="))
        {
            Some(prefixed) => {
                let (zone, rest) = prefixed
                    .split_once(char::is_whitespace)
                    .unwrap_or((prefixed, ""));
                (time_zone(zone)?, rest.trim())
            }
            None => (time_zone(default_zone)?, expression),
        };
        if rest.is_empty() {
            return Err(ParseScheduleError::Empty);
        }
        let kind = match rest.strip_prefix('@') {
            Some(descriptor) => parse_descriptor(descriptor)?,
            None => Kind::Fields(parse_fields(rest)?),
        };
        Ok(CronSchedule { kind, zone })
    }

    /// The first time strictly after `after` at which the schedule fires, or `None` if it never
    /// does within the next eight years (a date that does not exist, such as February 30th).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(seconds) => {
                // Whole seconds: the interval counts from the second `after` falls in.
                let base = Timestamp::from_second(after.as_second()).ok()?;
                base.checked_add(SignedDuration::from_secs(*seconds)).ok()
            }
            Kind::Fields(fields) => self.next_wall_clock(fields, after),
        }
    }

    fn next_wall_clock(&self, fields: &Fields, after: Timestamp) -> Option<Timestamp> {
        // Start at the minute after `after`, in wall-clock time.
        let start = after.to_zoned(self.zone.clone()).datetime();
        let mut dt = start
            .checked_add(SignedDuration::from_mins(1))
            .ok()?
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?;
        let limit_year = start.year().saturating_add(SEARCH_YEARS);
        while dt.year() <= limit_year {
            if !bit(fields.month, dt.month()) {
                dt = first_moment(dt.date().first_of_month().checked_add(one_month()).ok()?);
                continue;
            }
            if !day_matches(fields, dt.date()) {
                dt = first_moment(dt.date().tomorrow().ok()?);
                continue;
            }
            if !bit(fields.hour, dt.hour()) {
                dt = dt
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(SignedDuration::from_hours(1))
                    .ok()?;
                continue;
            }
            if !bit(fields.minute, dt.minute()) {
                dt = dt.checked_add(SignedDuration::from_mins(1)).ok()?;
                continue;
            }
            // A wall-clock time the zone skips is shifted forward; a repeated one is taken at
            // its first occurrence (compatible disambiguation).
            let instant = self
                .zone
                .to_ambiguous_zoned(dt)
                .compatible()
                .ok()?
                .timestamp();
            if instant > after {
                return Some(instant);
            }
            // The first occurrence of a repeated hour lies before `after`: keep looking.
            dt = dt.checked_add(SignedDuration::from_mins(1)).ok()?;
        }
        None
    }
}

fn one_month() -> jiff::Span {
    jiff::Span::new().months(1)
}

fn first_moment(date: Date) -> DateTime {
    date.to_datetime(jiff::civil::Time::midnight())
}

fn bit(set: u64, value: i8) -> bool {
    u32::try_from(value).is_ok_and(|v| set & (1 << v) != 0)
}

fn day_matches(fields: &Fields, date: Date) -> bool {
    let dom = bit(fields.day_of_month, date.day());
    let dow = bit(fields.day_of_week, date.weekday().to_sunday_zero_offset());
    if fields.day_of_month_star || fields.day_of_week_star {
        dom && dow
    } else {
        dom || dow
    }
}

fn parse_descriptor(descriptor: &str) -> Result<Kind, ParseScheduleError> {
    let fields = match descriptor {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        other => {
            let Some(duration) = other.strip_prefix("every ") else {
                return Err(ParseScheduleError::UnknownDescriptor {
                    descriptor: format!("@{other}"),
                });
            };
            let text = duration.trim();
            let nanos = parse_go_duration(text).ok_or_else(|| ParseScheduleError::Duration {
                text: text.to_owned(),
            })?;
            // Whole seconds, at least one, as robfig/cron's `Every` rounds.
            let seconds = i64::try_from(nanos / 1_000_000_000)
                .ok()
                .ok_or_else(|| ParseScheduleError::Duration {
                    text: text.to_owned(),
                })?
                .max(1);
            return Ok(Kind::Every(seconds));
        }
    };
    parse_fields(fields).map(Kind::Fields)
}

/// Go's `time.ParseDuration` for non-negative durations: decimal numbers with units `ns`, `us`
/// (`µs`), `ms`, `s`, `m`, `h`, concatenated (`1h30m`, `1.5h`, `90s`). Nanoseconds.
fn parse_go_duration(text: &str) -> Option<u128> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(scale)?;
        let mut place = scale;
        for digit in fraction.chars() {
            place /= 10;
            value += u128::from(digit.to_digit(10)?) * place;
        }
        total = total.checked_add(value)?;
        rest = after;
    }
    Some(total)
}

fn parse_fields(text: &str) -> Result<Fields, ParseScheduleError> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = parts.as_slice() else {
        return Err(ParseScheduleError::FieldCount { found: parts.len() });
    };
    let (day_of_month, day_of_month_star) = parse_field(dom, &DAY_OF_MONTH)?;
    let (day_of_week, day_of_week_star) = parse_field(dow, &DAY_OF_WEEK)?;
    Ok(Fields {
        minute: parse_field(minute, &MINUTE)?.0,
        hour: parse_field(hour, &HOUR)?.0,
        day_of_month,
        month: parse_field(month, &MONTH)?.0,
        day_of_week,
        day_of_month_star,
        day_of_week_star,
    })
}

/// One field: its bits, and whether it was an unrestricted `*`/`?`.
fn parse_field(text: &str, spec: &FieldSpec) -> Result<(u64, bool), ParseScheduleError> {
    let mut bits = 0;
    let mut star = false;
    for item in text.split(',') {
        let (range_bits, item_star) = parse_item(item, spec)?;
        bits |= range_bits;
        star |= item_star;
    }
    Ok((bits, star))
}

fn parse_item(item: &str, spec: &FieldSpec) -> Result<(u64, bool), ParseScheduleError> {
    let invalid = || ParseScheduleError::Field {
        field: spec.name,
        text: item.to_owned(),
    };
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => {
            let step: u32 = step.parse().map_err(|_| invalid())?;
            if step == 0 {
                return Err(invalid());
            }
            (range, Some(step))
        }
        None => (item, None),
    };
    let (start, end, star) = if range == "*" || range == "?" {
        (spec.min, spec.max, true)
    } else if let Some((low, high)) = range.split_once('-') {
        (value(low, spec)?, value(high, spec)?, false)
    } else {
        let single = value(range, spec)?;
        // `a/n` runs from `a` to the field's end.
        (
            single,
            if step.is_some() { spec.max } else { single },
            false,
        )
    };
    if end < start {
        return Err(invalid());
    }
    let step = step.unwrap_or(1);
    let mut bits = 0;
    let mut v = start;
    while v <= end {
        bits |= 1 << v;
        v += step;
    }
    Ok((bits, star && step == 1))
}

fn value(text: &str, spec: &FieldSpec) -> Result<u32, ParseScheduleError> {
    let lower = text.to_ascii_lowercase();
    let parsed = match spec.names.iter().position(|name| *name == lower) {
        // Month names count from 1, day names from 0: the field's minimum.
        Some(index) => u32::try_from(index).unwrap_or(u32::MAX) + spec.min,
        None => text.parse().map_err(|_| ParseScheduleError::Field {
            field: spec.name,
            text: text.to_owned(),
        })?,
    };
    if parsed < spec.min || parsed > spec.max {
        return Err(ParseScheduleError::OutOfRange {
            field: spec.name,
            value: parsed,
            min: spec.min,
            max: spec.max,
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests;
