//! Images kubesim runs as real processes: what a container of one runs (entrypoint, environment,
//! working directory, the files the image brings) and how an image name finds its mapping.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::ImageCommand;

/// What a container of a mapped image runs, as an image would define it.
#[derive(Debug, Clone, Copy)]
pub struct ImageRun<'a> {
    /// The entrypoint (a container's `command` replaces it; its `args` are appended).
    pub command: &'a [String],
    /// The image's environment (below the container's own).
    pub env: &'a BTreeMap<String, String>,
    /// The image's `WORKDIR` (a container's `workingDir` replaces it).
    pub working_dir: Option<&'a str>,
    /// The image's file system: (path in the container, host file or folder), laid as layers.
    pub files: &'a [(PathBuf, PathBuf)],
}

impl<'a> From<&'a ImageCommand> for ImageRun<'a> {
    fn from(c: &'a ImageCommand) -> Self {
        ImageRun {
            command: &c.command,
            env: &c.env,
            working_dir: None,
            files: &[],
        }
    }
}

/// The repository of an image reference: without tag or digest (`apache/spark:4.0.1` →
/// `apache/spark`, `registry:5000/spark@sha256:…` → `registry:5000/spark`).
pub fn repository(image: &str) -> &str {
    let repo = image.split('@').next().unwrap_or(image);
    match repo.rfind(':') {
        Some(i) if !repo[i..].contains('/') => &repo[..i],
        _ => repo,
    }
}

/// Whether `image` is one of `names`: an exact image, or a repository (any tag or digest).
/// Docker Hub's implicit prefixes count as the same repository (`docker.io/apache/spark` and
/// `docker.io/library/spark` are `apache/spark` and `spark`).
pub fn matches(names: &[String], image: &str) -> bool {
    let repo = repository(image);
    let short = repo
        .strip_prefix("docker.io/library/")
        .or_else(|| repo.strip_prefix("docker.io/"))
        .unwrap_or(repo);
    names.iter().any(|n| n == image || n == repo || n == short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_drop_tags_and_digests_but_not_registry_ports() {
        assert_eq!(repository("apache/spark:4.0.1"), "apache/spark");
        assert_eq!(repository("spark"), "spark");
        assert_eq!(repository("registry:5000/spark"), "registry:5000/spark");
        assert_eq!(
            repository("registry:5000/spark:4.3.0"),
            "registry:5000/spark"
        );
        assert_eq!(repository("spark@sha256:abc"), "spark");
    }

    #[test]
    fn an_image_matches_by_repository_exact_name_or_hub_prefix() {
        let names = vec!["apache/spark".to_owned(), "spark".to_owned()];
        for image in [
            "apache/spark:4.0.1",
            "spark:4.3.0",
            "spark",
            "docker.io/apache/spark:4.0.0",
            "docker.io/library/spark:4.0.0-python3",
        ] {
            assert!(matches(&names, image), "{image}");
        }
        for image in [
            "apache/spark-py:3.4",
            "myorg/spark:1",
            "sparkle:1",
            "quay.io/spark:1",
        ] {
            assert!(!matches(&names, image), "{image}");
        }
        assert!(matches(&["my/app:v1".to_owned()], "my/app:v1"));
        assert!(!matches(&["my/app:v1".to_owned()], "my/app:v2"));
    }
}
