//! Query-string parameters of API requests.

use crate::api_error::ApiError;

/// Decoded query parameters (last value wins for repeated keys, except `dryRun`).
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `a=b&c=d` with percent-decoding (`+` is a space, as in forms).
    pub fn parse(raw: &str) -> Self {
        let pairs = raw
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect();
        Self { pairs }
    }

    /// The last value of a parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean flag (`true` or `1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// `dryRun`: absent, or `All`; anything else is a 400 as in Kubernetes.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        let mut dry = false;
        for (k, v) in self.pairs.iter().filter(|(k, _)| k == "dryRun") {
            match v.as_str() {
                "All" => dry = true,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "Invalid {k} value: \"{other}\": supported values: \"All\""
                    )));
                }
            }
        }
        Ok(dry)
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_selectors_and_flags() {
        let q = Query::parse("labelSelector=spark-role%3Ddriver%2Capp+in+(a)&watch=1&dryRun=All");
        assert_eq!(q.get("labelSelector"), Some("spark-role=driver,app in (a)"));
        assert!(q.flag("watch"));
        assert_eq!(q.dry_run().ok(), Some(true));
        assert!(Query::parse("dryRun=Some").dry_run().is_err());
        assert_eq!(Query::parse("a=%4").get("a"), Some("%4"));
        assert_eq!(Query::parse("a=%41").get("a"), Some("A"));
    }
}
