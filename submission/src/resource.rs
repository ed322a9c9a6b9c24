//! Where a resource URI points, judged the way Spark judges it: `Utils.resolveURI` turns anything
//! `java.net.URI` cannot parse, or that has no scheme, into a client file; `file:` is a client
//! file too (`KubernetesUtils.isLocalDependency`); `local:` is inside the image. And what the
//! primary resource's name makes of the application: Java, Python or R, or a shell.

/// Java's `String.trim`: strips every char up to U+0020, which `str::trim` does not match.
pub(crate) fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Entries of a comma-separated resource list as `Utils.stringToSeq` yields them: trimmed,
/// empty ones dropped.
pub(crate) fn list_entries(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(java_trim).filter(|e| !e.is_empty())
}

/// Entries of a list given as an option value: `Utils.resolveURIs` drops blank entries but does
/// not trim the others, so `" https://x"` is not a URI and becomes a client file.
pub(crate) fn option_entries(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|e| !java_trim(e).is_empty())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location<'a> {
    /// On the submitting machine's disk: Spark would upload it.
    Client,
    /// `local://`: already in the image.
    Image,
    /// Fetched by the driver from elsewhere.
    Remote { scheme: &'a str },
}

pub(crate) fn locate(uri: &str) -> Location<'_> {
    match uri_scheme(uri) {
        Ok(Some(scheme)) if scheme.eq_ignore_ascii_case("local") => Location::Image,
        Ok(Some(scheme)) if !scheme.eq_ignore_ascii_case("file") => Location::Remote { scheme },
        _ => Location::Client,
    }
}

/// Spark's `DependencyUtils.resolveGlobPaths` leaves `local`, `http`, `https` and `ftp` URIs
/// alone but asks any other file system (hdfs, s3a, gs...) to expand globs and qualify the path
/// at submit time. The answer equals the input only for a fully qualified path without
/// wildcards, so only those can be passed through unchanged.
pub(crate) fn needs_submit_time_resolution(uri: &str) -> bool {
    let Ok(Some(scheme)) = uri_scheme(uri) else {
        return false;
    };
    if ["local", "http", "https", "ftp", "file"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
    {
        return false;
    }
    let without_fragment = uri.split_once('#').map_or(uri, |(base, _)| base);
    let rest = without_fragment.get(scheme.len() + 1..).unwrap_or_default();
    let Some(after_slashes) = rest.strip_prefix("//") else {
        return true;
    };
    let (authority, path) = after_slashes.split_once('/').unwrap_or((after_slashes, ""));
    authority.is_empty()
        || path.is_empty()
        || path.ends_with('/')
        || path.contains("//")
        || path.split('/').any(|seg| seg == "." || seg == "..")
        || path.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// The scheme of `s` as `java.net.URI` parses it, `Ok(None)` for a relative reference, `Err`
/// where `new URI(s)` would throw.
pub(crate) fn uri_scheme(s: &str) -> Result<Option<&str>, ()> {
    let (before_fragment, fragment) = match s.split_once('#') {
        Some((base, fragment)) => (base, Some(fragment)),
        None => (s, None),
    };
    if !fragment.is_none_or(|f| f.chars().all(is_uri_char) && valid_escapes(f)) {
        return Err(());
    }
    let scheme = match before_fragment.find([':', '/', '?']) {
        Some(colon) if before_fragment[colon..].starts_with(':') => {
            let scheme = &before_fragment[..colon];
            let mut chars = scheme.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !valid || colon + 1 == before_fragment.len() {
                return Err(());
            }
            Some(scheme)
        }
        _ => None,
    };
    let rest = scheme.map_or(before_fragment, |sch| &before_fragment[sch.len() + 1..]);
    let (authority, tail) = match rest.strip_prefix("//") {
        Some(after) => after.split_at(after.find(['/', '?']).unwrap_or(after.len())),
        None => ("", rest),
    };
    // Brackets are only legal around an IPv6 literal host.
    let authority_ok = authority
        .chars()
        .all(|c| is_uri_char(c) || c == '[' || c == ']');
    if !authority_ok || !tail.chars().all(is_uri_char) || !valid_escapes(before_fragment) {
        return Err(());
    }
    Ok(scheme)
}

fn is_uri_char(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || "_-!.~'()*,;:$&+=?/@%".contains(c)
    } else {
        // Java's "other" category: any non-ASCII char that is neither a control nor a space char.
        !c.is_control() && !c.is_whitespace()
    }
}

fn valid_escapes(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// The kind of application, by the primary resource's name as `SparkSubmit.isPython`/`isR` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Java,
    Python,
    R,
}

impl ResourceType {
    pub fn of(primary_resource: &str) -> ResourceType {
        if primary_resource.ends_with(".py") || primary_resource == "pyspark-shell" {
            ResourceType::Python
        } else if primary_resource.ends_with(".R")
            || primary_resource.ends_with(".r")
            || primary_resource == "sparkr-shell"
        {
            ResourceType::R
        } else {
            ResourceType::Java
        }
    }

    /// The value of `spark.kubernetes.resource.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::Java => "java",
            ResourceType::Python => "python",
            ResourceType::R => "r",
        }
    }
}

/// `SparkSubmit.isShell`.
pub(crate) fn is_shell(primary: &str) -> bool {
    matches!(
        primary,
        "spark-shell" | "pyspark-shell" | "sparkr-shell" | "connect-shell"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_spark() {
        let cases: &[(&str, Location)] = &[
            ("local:///opt/app.jar", Location::Image),
            ("LOCAL:///opt/app.jar", Location::Image),
            ("file:///tmp/app.jar", Location::Client),
            ("file:/tmp/app.jar", Location::Client),
            ("app.jar", Location::Client),
            ("/abs/app.py", Location::Client),
            ("./rel/app.py", Location::Client),
            ("dir/with:colon.py", Location::Client),
            (" https://x/a.jar", Location::Client),
            ("https://x/a b.jar", Location::Client),
            ("1abc:x", Location::Client),
            ("https:", Location::Client),
            ("C:\\app.jar", Location::Client),
            ("https://x/%zz.jar", Location::Client),
            ("https://x/a.jar#a#b", Location::Client),
            ("https://x/a.jar", Location::Remote { scheme: "https" }),
            (
                "https://x/env.tar.gz#env",
                Location::Remote { scheme: "https" },
            ),
            ("s3a://bucket/a.jar", Location::Remote { scheme: "s3a" }),
            ("hdfs:///a.jar", Location::Remote { scheme: "hdfs" }),
            (
                "https://[::1]:8080/a.jar",
                Location::Remote { scheme: "https" },
            ),
            ("https://x/日本.jar", Location::Remote { scheme: "https" }),
        ];
        for (uri, expected) in cases {
            assert_eq!(locate(uri), *expected, "{uri}");
        }
    }

    #[test]
    fn only_qualified_plain_paths_skip_submit_time_resolution() {
        let cases: &[(&str, bool)] = &[
            ("https://x/*.jar", false),
            ("ftp://x/a.jar", false),
            ("local:///opt/*.jar", false),
            ("s3a://bucket/a.jar", false),
            ("hdfs://nn:8020/apps/a.jar#x", false),
            ("hdfs:///apps/a.jar", true),
            ("hdfs:/apps/a.jar", true),
            ("s3a://bucket/", true),
            ("s3a://bucket/lib/*.jar", true),
            ("s3a://bucket/lib//a.jar", true),
            ("s3a://bucket/lib/../a.jar", true),
            ("s3a://bucket", true),
        ];
        for (uri, expected) in cases {
            assert_eq!(needs_submit_time_resolution(uri), *expected, "{uri}");
        }
    }

    #[test]
    fn lists_split_like_spark() {
        assert_eq!(
            list_entries(" a , ,b,,").collect::<Vec<_>>(),
            vec!["a", "b"]
        );
        assert_eq!(
            option_entries(" a , ,b,,").collect::<Vec<_>>(),
            vec![" a ", "b"]
        );
    }
}
