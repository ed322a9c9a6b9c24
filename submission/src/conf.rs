//! The Spark configuration a submission produces, and typed reads of it.

mod app;
mod submit;

use std::collections::HashMap;

use thiserror::Error;

use crate::resource::java_trim;
use crate::size::{self, ByteUnit, ParseByteStringError};

pub use crate::resource::ResourceType;
pub use app::Submission;

/// Key → value, iterated in insertion order so output is deterministic. Spark's own SparkConf is
/// a hash map, so equality ignores order. Setting an existing key keeps its position.
#[derive(Debug, Clone, Default)]
pub struct SparkConf {
    entries: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl PartialEq for SparkConf {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for SparkConf {}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for SparkConf {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut conf = SparkConf::new();
        for (k, v) in iter {
            conf.set(k, v);
        }
        conf
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReadConfError {
    #[error("{key} should be boolean, but was {value:?}")]
    NotBoolean { key: String, value: String },
    #[error("{key} should be an int, but was {value:?}")]
    NotInt { key: String, value: String },
    #[error("{key} should be a byte size, but was {value:?}")]
    NotByteSize {
        key: String,
        value: String,
        #[source]
        source: ParseByteStringError,
    },
}

impl ReadConfError {
    pub fn kind(&self) -> &'static str {
        match self {
            ReadConfError::NotBoolean { .. } => "not_boolean",
            ReadConfError::NotInt { .. } => "not_int",
            ReadConfError::NotByteSize { .. } => "not_byte_size",
        }
    }
}

impl SparkConf {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
            }
        }
    }

    pub fn set_if_missing(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        if !self.contains(&key) {
            self.set(key, value);
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(value)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.index.get(key).map(|&i| self.entries[i].1.as_str())
    }

    pub fn get_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `(rest of key, value)` for every key under `prefix`, e.g. the label names of
    /// `spark.kubernetes.driver.label.`.
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.iter()
            .filter_map(move |(k, v)| k.strip_prefix(prefix).map(|rest| (rest, v)))
    }

    /// Spark's `booleanConf`: trimmed, case-insensitive `true`/`false`, anything else an error.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, ReadConfError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let trimmed = java_trim(value);
        if trimmed.eq_ignore_ascii_case("true") {
            Ok(Some(true))
        } else if trimmed.eq_ignore_ascii_case("false") {
            Ok(Some(false))
        } else {
            Err(ReadConfError::NotBoolean {
                key: key.to_owned(),
                value: value.to_owned(),
            })
        }
    }

    pub fn get_bool_or(&self, key: &str, default: bool) -> Result<bool, ReadConfError> {
        Ok(self.get_bool(key)?.unwrap_or(default))
    }

    /// Spark's `intConf`: a trimmed 32-bit integer.
    pub fn get_int(&self, key: &str) -> Result<Option<i32>, ReadConfError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        java_trim(value)
            .parse()
            .map(Some)
            .map_err(|_| ReadConfError::NotInt {
                key: key.to_owned(),
                value: value.to_owned(),
            })
    }

    /// A `bytesConf(ByteUnit.MiB)` entry such as `spark.driver.memory`: bare numbers are MiB.
    pub fn get_size_mib(&self, key: &str) -> Result<Option<i64>, ReadConfError> {
        self.get_size(key, ByteUnit::MiB)
    }

    /// A `bytesConf(ByteUnit.BYTE)` entry: bare numbers are bytes.
    pub fn get_size_bytes(&self, key: &str) -> Result<Option<i64>, ReadConfError> {
        self.get_size(key, ByteUnit::Byte)
    }

    /// Spark's `byteFromString`, which unlike `JavaUtils` accepts one leading `-`.
    fn get_size(&self, key: &str, unit: ByteUnit) -> Result<Option<i64>, ReadConfError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let (digits, sign) = match value.strip_prefix('-') {
            Some(rest) => (rest, -1),
            None => (value, 1),
        };
        let magnitude =
            size::parse_byte_string(digits, unit).map_err(|source| ReadConfError::NotByteSize {
                key: key.to_owned(),
                value: value.to_owned(),
                source,
            })?;
        // parse_byte_string never exceeds i64::MAX, so the conversion is lossless.
        let magnitude = i64::try_from(magnitude).unwrap_or(i64::MAX);
        Ok(Some(sign * magnitude))
    }
}

#[cfg(test)]
mod tests;
