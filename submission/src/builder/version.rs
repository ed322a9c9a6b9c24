//! Which Spark release the objects are built for. Spark's submission code changed between
//! releases (the `spark-version` label, ports, the NetworkPolicy, volume options, the Scala
//! collections that order volumes), and the driver image runs the Spark it was built with, so the
//! builder reproduces the `spark-submit` of the user's Spark, not always the newest.
//!
//! The version is, in this order:
//! 1. `spark.kubernetes.submitter.sparkVersion` (ours; the operator sets it from
//!    `spec.sparkVersion`): `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`, strictly;
//! 2. the tag of the driver image (`spark.kubernetes.driver.container.image`, then
//!    `spark.kubernetes.container.image`) when the image is a Spark image (its repository's last
//!    path segment contains `spark`) and the tag starts with a version: `3.5.1`, `v3.5.1`,
//!    `4.0.0-python3`, `3.5.3-scala2.12-java17-ubuntu`;
//! 3. otherwise the newest release line.
//!
//! A version outside the supported lines is refused (`INVALID_SPARK_SUBMIT_ARGS`), whether it
//! comes from the conf or from an image tag: building objects for another Spark than the one the
//! driver runs would be a silent difference. The conf overrides a tag that is refused.

use std::fmt;

use thiserror::Error;

use crate::conf::SparkConf;

/// Our conf for the Spark version, namespaced so it never collides with Spark's own.
pub const SPARK_VERSION_CONF: &str = "spark.kubernetes.submitter.sparkVersion";

/// A Spark release line (`MAJOR.MINOR`) whose `spark-submit` the builder reproduces. Patch
/// releases of a line build the same objects (see docs/submitter.md); only the label differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SparkLine {
    V3_5,
    V4_0,
    V4_1,
    V4_2,
    V4_3,
}

impl SparkLine {
    /// Every supported line, oldest first.
    pub const ALL: [SparkLine; 5] = [
        SparkLine::V3_5,
        SparkLine::V4_0,
        SparkLine::V4_1,
        SparkLine::V4_2,
        SparkLine::V4_3,
    ];
    /// The default when nothing names a version.
    pub const NEWEST: SparkLine = SparkLine::V4_3;

    /// `MAJOR.MINOR`.
    pub fn as_str(self) -> &'static str {
        match self {
            SparkLine::V3_5 => "3.5",
            SparkLine::V4_0 => "4.0",
            SparkLine::V4_1 => "4.1",
            SparkLine::V4_2 => "4.2",
            SparkLine::V4_3 => "4.3",
        }
    }

    /// The newest release of the line we know, whose real `spark-submit` the conformance corpus
    /// was captured with; the label of a version given without its patch number.
    pub fn newest_release(self) -> &'static str {
        match self {
            SparkLine::V3_5 => "3.5.9",
            SparkLine::V4_0 => "4.0.5",
            SparkLine::V4_1 => "4.1.4",
            SparkLine::V4_2 => "4.2.1",
            SparkLine::V4_3 => "4.3.0",
        }
    }

    fn of(major: u32, minor: u32) -> Option<SparkLine> {
        SparkLine::ALL
            .into_iter()
            .find(|line| line.as_str() == format!("{major}.{minor}"))
    }

    /// Spark 3.5 is built with Scala 2.12, whose collections iterate in another order than
    /// 2.13's (Spark 4.0 moved to 2.13).
    pub(crate) fn scala_2_12(self) -> bool {
        self == SparkLine::V3_5
    }
}

impl fmt::Display for SparkLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSource {
    /// `spark.kubernetes.submitter.sparkVersion`.
    Conf,
    /// The tag of the image under this conf key.
    ImageTag(&'static str),
    /// Nothing named one: the newest line.
    Default,
}

/// The Spark version a submission is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkVersion {
    line: SparkLine,
    /// `MAJOR.MINOR.PATCH`, the value of the `spark-version` label.
    release: String,
    source: VersionSource,
}

impl SparkVersion {
    /// The newest line's newest release, as if nothing named a version.
    pub fn newest() -> SparkVersion {
        SparkVersion::of_line(SparkLine::NEWEST, VersionSource::Default)
    }

    fn of_line(line: SparkLine, source: VersionSource) -> SparkVersion {
        SparkVersion {
            line,
            release: line.newest_release().to_owned(),
            source,
        }
    }

    pub fn line(&self) -> SparkLine {
        self.line
    }

    /// `MAJOR.MINOR.PATCH`, as Spark writes it into the `spark-version` label.
    pub fn release(&self) -> &str {
        &self.release
    }

    pub fn source(&self) -> VersionSource {
        self.source
    }

    /// The release's patch number (`9` of `3.5.9`): a few things changed in patch releases.
    pub fn patch(&self) -> u32 {
        self.release
            .rsplit('.')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }

    /// Chooses the version of a submission's conf (see the module documentation).
    pub fn select(conf: &SparkConf) -> Result<SparkVersion, SparkVersionError> {
        if let Some(value) = conf.get(SPARK_VERSION_CONF) {
            let parsed = parse_version(value.trim()).ok_or_else(|| SparkVersionError::Invalid {
                value: value.to_owned(),
            })?;
            return from_parsed(parsed, VersionSource::Conf).map_err(|version| {
                SparkVersionError::Unsupported {
                    version,
                    from: SPARK_VERSION_CONF.to_owned(),
                }
            });
        }
        for key in [DRIVER_IMAGE, IMAGE] {
            let Some(image) = conf.get(key) else {
                continue;
            };
            let Some(parsed) = spark_image_version(image) else {
                continue;
            };
            return from_parsed(parsed, VersionSource::ImageTag(key)).map_err(|version| {
                SparkVersionError::UnsupportedImage {
                    version,
                    image: image.to_owned(),
                }
            });
        }
        Ok(SparkVersion::newest())
    }
}

const DRIVER_IMAGE: &str = "spark.kubernetes.driver.container.image";
const IMAGE: &str = "spark.kubernetes.container.image";

/// The version is not one the builder reproduces.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SparkVersionError {
    #[error(
        "{SPARK_VERSION_CONF}={value:?} is not a Spark version (MAJOR.MINOR or MAJOR.MINOR.PATCH)"
    )]
    Invalid { value: String },
    #[error(
        "Spark {version} (from {from}) is not supported; supported: {}",
        supported()
    )]
    Unsupported { version: String, from: String },
    #[error(
        "the image {image} runs Spark {version}, which is not supported (supported: {}); set {SPARK_VERSION_CONF} to build for a supported version",
        supported()
    )]
    UnsupportedImage { version: String, image: String },
}

impl SparkVersionError {
    pub fn kind(&self) -> &'static str {
        match self {
            SparkVersionError::Invalid { .. } => "invalid_spark_version",
            SparkVersionError::Unsupported { .. } | SparkVersionError::UnsupportedImage { .. } => {
                "unsupported_spark_version"
            }
        }
    }
}

fn supported() -> String {
    SparkLine::ALL
        .iter()
        .map(|l| format!("{l}.x"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(major, minor, patch)` of a version, the patch optional.
type Parsed = (u32, u32, Option<u32>);

fn from_parsed(
    (major, minor, patch): Parsed,
    source: VersionSource,
) -> Result<SparkVersion, String> {
    let text = match patch {
        Some(p) => format!("{major}.{minor}.{p}"),
        None => format!("{major}.{minor}"),
    };
    let line = SparkLine::of(major, minor).ok_or(text)?;
    Ok(match patch {
        Some(p) => SparkVersion {
            line,
            release: format!("{major}.{minor}.{p}"),
            source,
        },
        None => SparkVersion::of_line(line, source),
    })
}

/// `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`, nothing else.
fn parse_version(text: &str) -> Option<Parsed> {
    let (parsed, rest) = leading_version(text)?;
    rest.is_empty().then_some(parsed)
}

/// A version at the start of `text` and what follows it.
fn leading_version(text: &str) -> Option<(Parsed, &str)> {
    let number = |s: &str| -> Option<(u32, usize)> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        // Leading zeros would make "3.05" equal "3.5"; no Spark release is spelled so.
        if digits == 0 || digits > 4 || (digits > 1 && s.starts_with('0')) {
            return None;
        }
        Some((s[..digits].parse().ok()?, digits))
    };
    let (major, n) = number(text)?;
    let rest = text[n..].strip_prefix('.')?;
    let (minor, n) = number(rest)?;
    let rest = &rest[n..];
    match rest
        .strip_prefix('.')
        .and_then(|r| number(r).map(|p| (p, r)))
    {
        Some(((patch, n), r)) => Some(((major, minor, Some(patch)), &r[n..])),
        None => Some(((major, minor, None), rest)),
    }
}

/// The Spark version an image reference names in its tag, if the image is a Spark image:
/// `[registry[:port]/]path/name[:tag][@digest]` whose `name` contains `spark` and whose tag is
/// a version, optionally after a `v` and before a `-`, `_` or `+` suffix.
pub fn spark_image_version(image: &str) -> Option<(u32, u32, Option<u32>)> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (name, tag) = last.split_once(':')?;
    if !name.to_ascii_lowercase().contains("spark") {
        return None;
    }
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let (parsed, rest) = leading_version(tag)?;
    (rest.is_empty() || rest.starts_with(['-', '_', '+'])).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> SparkConf {
        pairs.iter().copied().collect()
    }

    fn selected(pairs: &[(&str, &str)]) -> (SparkLine, String, VersionSource) {
        let v = SparkVersion::select(&conf(pairs)).expect("a supported version");
        (v.line(), v.release().to_owned(), v.source())
    }

    #[test]
    fn image_tags_name_the_version() {
        for (image, line, release) in [
            ("apache/spark:3.5.1", SparkLine::V3_5, "3.5.1"),
            ("apache/spark:4.0.0-python3", SparkLine::V4_0, "4.0.0"),
            (
                "spark:3.5.3-scala2.12-java17-ubuntu",
                SparkLine::V3_5,
                "3.5.3",
            ),
            ("docker.io/apache/spark:4.0.4", SparkLine::V4_0, "4.0.4"),
            (
                "registry.local:5000/team/spark-py:v4.1.0",
                SparkLine::V4_1,
                "4.1.0",
            ),
            ("spark:3.5", SparkLine::V3_5, "3.5.9"),
            (
                "{IMAGE_REGISTRY}/{IMAGE_REPOSITORY}/docker.io/apache/spark:4.0.4-gcs-prometheus",
                SparkLine::V4_0,
                "4.0.4",
            ),
            ("apache/spark:4.2.0@sha256:abcd", SparkLine::V4_2, "4.2.0"),
        ] {
            assert_eq!(
                selected(&[(IMAGE, image)]),
                (line, release.to_owned(), VersionSource::ImageTag(IMAGE)),
                "{image}"
            );
        }
    }

    #[test]
    fn images_without_a_spark_version_give_the_newest() {
        for image in [
            "apache/spark:latest",
            "apache/spark",
            "apache/spark@sha256:abcd",
            "registry.example.com/spark:custom",
            "myco/etl-job:3.5.1",
            "localhost:5000/spark",
            "spark:3.5.1.2",
            "spark:35",
        ] {
            assert_eq!(
                selected(&[(IMAGE, image)]),
                (SparkLine::V4_3, "4.3.0".to_owned(), VersionSource::Default),
                "{image}"
            );
        }
        assert_eq!(selected(&[]).0, SparkLine::NEWEST);
    }

    #[test]
    fn the_conf_wins_over_the_image_and_the_driver_image_over_the_common_one() {
        assert_eq!(
            selected(&[(IMAGE, "apache/spark:3.5.1"), (SPARK_VERSION_CONF, "4.0")]),
            (SparkLine::V4_0, "4.0.5".to_owned(), VersionSource::Conf)
        );
        assert_eq!(
            selected(&[
                (IMAGE, "apache/spark:3.5.1"),
                (DRIVER_IMAGE, "apache/spark:4.1.2")
            ]),
            (
                SparkLine::V4_1,
                "4.1.2".to_owned(),
                VersionSource::ImageTag(DRIVER_IMAGE)
            )
        );
        // A driver image without a version defers to the common image.
        assert_eq!(
            selected(&[
                (IMAGE, "apache/spark:3.5.1"),
                (DRIVER_IMAGE, "registry.example.com/spark:custom")
            ])
            .0,
            SparkLine::V3_5
        );
        // The conf overrides an image tag that would be refused.
        assert_eq!(
            selected(&[(IMAGE, "apache/spark:3.4.1"), (SPARK_VERSION_CONF, "3.5.0")]).1,
            "3.5.0"
        );
    }

    #[test]
    fn unsupported_or_malformed_versions_are_refused() {
        let kind = |pairs: &[(&str, &str)]| {
            SparkVersion::select(&conf(pairs))
                .expect_err("refused")
                .kind()
        };
        for bad in ["4", "four", "4.0.0-preview2", "4.0.", " ", "3.05"] {
            assert_eq!(
                kind(&[(SPARK_VERSION_CONF, bad)]),
                "invalid_spark_version",
                "{bad:?}"
            );
        }
        for old in ["3.4.1", "2.4", "5.0.0", "4.9"] {
            assert_eq!(
                kind(&[(SPARK_VERSION_CONF, old)]),
                "unsupported_spark_version",
                "{old}"
            );
        }
        for image in ["gcr.io/spark-operator/spark:v3.1.1", "apache/spark:4.4.0"] {
            assert_eq!(
                kind(&[(IMAGE, image)]),
                "unsupported_spark_version",
                "{image}"
            );
        }
    }
}
