//! The Spark image (`apache/spark:*`, `spark:*`) run from the local Spark distribution: the
//! folder of PyPI's `pyspark` package laid at `/opt/spark`, the local Java runtime at
//! `/opt/java/openjdk`, and an entrypoint of kubesim's own at `/opt/entrypoint.sh` that keeps
//! the image's conventions:
//!
//! - `driver ARGS…` runs `$SPARK_HOME/bin/spark-submit --conf spark.driver.bindAddress=…
//!   --deploy-mode client ARGS…` (what Spark's driver pod asks for: `--properties-file
//!   /opt/spark/conf/spark.properties --class … RESOURCE …`);
//! - `executor` runs the JVM of `KubernetesExecutorBackend` from the `SPARK_EXECUTOR_*`,
//!   `SPARK_DRIVER_URL`, `SPARK_JAVA_OPT_<n>` variables the driver sets on executor pods;
//! - anything else is run as given.
//!
//! The facts come from Spark's `resource-managers/kubernetes/docker/src/main/dockerfiles/spark/`
//! (entrypoint.sh, Dockerfile) and the official images (apache/spark-docker): `SPARK_HOME` is
//! `/opt/spark`, the working directory `/opt/spark/work-dir`, `JAVA_HOME` `/opt/java/openjdk`.
//! What differs: no `tini` and no switch to the `spark` user (kubesim runs every process as
//! itself), and Python is the machine's `python3`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::image::{self, ImageRun};

/// Where the image has Spark.
pub const SPARK_HOME: &str = "/opt/spark";
/// The image's `WORKDIR`.
pub const WORK_DIR: &str = "/opt/spark/work-dir";
/// Where the image has Java.
pub const JAVA_HOME: &str = "/opt/java/openjdk";
/// The image's entrypoint.
pub const ENTRYPOINT: &str = "/opt/entrypoint.sh";

/// The Spark image mapping (`spark:` in the cluster configuration). Present means on.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SparkImageConfig {
    /// Images that run Spark: repositories (any tag) or exact images.
    pub images: Vec<String>,
    /// The Spark distribution laid at `/opt/spark` (a folder with `bin/spark-submit` and
    /// `jars/`). Default: the folder of the `pyspark` package `python3` imports.
    pub home: Option<PathBuf>,
    /// The Java runtime laid at `/opt/java/openjdk`. Default: the one `java` on `PATH` runs.
    pub java_home: Option<PathBuf>,
    /// More of the image: host files or folders laid at these paths, e.g. your programs at
    /// `/opt/spark/work-dir` (so `local:///opt/spark/work-dir/pi.py` names them).
    pub files: BTreeMap<PathBuf, PathBuf>,
}

impl Default for SparkImageConfig {
    fn default() -> Self {
        SparkImageConfig {
            images: vec!["apache/spark".to_owned(), "spark".to_owned()],
            home: None,
            java_home: None,
            files: BTreeMap::new(),
        }
    }
}

/// Why the Spark image could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SparkImageError {
    /// No Spark distribution was named and `python3` cannot import `pyspark`.
    #[error(
        "no Spark distribution: `python3 -c 'import pyspark'` failed ({detail}); install it \
         (`pip install pyspark==4.3.0`) or name one under spark.home"
    )]
    FindSpark {
        /// What python said.
        detail: String,
    },
    /// No Java runtime was named and there is no `java` on `PATH`.
    #[error("no Java runtime: no `java` on PATH; install Java 17 or name one under spark.javaHome")]
    FindJava,
    /// A named folder is not what it should be.
    #[error("{path} is not {what}")]
    NotFound {
        /// The path.
        path: PathBuf,
        /// What was expected there.
        what: &'static str,
    },
    /// A path in the image is not absolute.
    #[error("image path {0} is not absolute")]
    RelativeImagePath(PathBuf),
    /// The entrypoint could not be written.
    #[error("cannot write the entrypoint {path}")]
    WriteEntrypoint {
        /// Where.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl SparkImageError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::FindSpark { .. } => "find_spark",
            Self::FindJava => "find_java",
            Self::NotFound { .. } => "not_found",
            Self::RelativeImagePath(_) => "relative_image_path",
            Self::WriteEntrypoint { .. } => "write_entrypoint",
        }
    }
}

/// The Spark image, resolved on this machine.
#[derive(Debug, Clone)]
pub struct SparkImage {
    images: Vec<String>,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    files: Vec<(PathBuf, PathBuf)>,
    /// The Spark distribution in use (the host folder laid at `/opt/spark`).
    pub home: PathBuf,
    /// The Java runtime in use (the host folder laid at `/opt/java/openjdk`).
    pub java_home: PathBuf,
}

impl SparkImage {
    /// Finds Spark and Java and writes the entrypoint under `dir`.
    pub fn resolve(config: &SparkImageConfig, dir: &Path) -> Result<SparkImage, SparkImageError> {
        let home = match &config.home {
            Some(h) => h.clone(),
            None => find_pyspark()?,
        };
        if !home.join("bin/spark-submit").is_file() || !home.join("jars").is_dir() {
            return Err(SparkImageError::NotFound {
                path: home,
                what: "a Spark distribution (bin/spark-submit, jars/)",
            });
        }
        let java_home = match &config.java_home {
            Some(h) => h.clone(),
            None => find_java()?,
        };
        if !java_home.join("bin/java").is_file() {
            return Err(SparkImageError::NotFound {
                path: java_home,
                what: "a Java runtime (bin/java)",
            });
        }
        std::fs::create_dir_all(dir).map_err(|source| SparkImageError::WriteEntrypoint {
            path: dir.to_path_buf(),
            source,
        })?;
        let entrypoint = dir.join("entrypoint.sh");
        write_executable(&entrypoint, ENTRYPOINT_SCRIPT).map_err(|source| {
            SparkImageError::WriteEntrypoint {
                path: entrypoint.clone(),
                source,
            }
        })?;
        let mut files = vec![
            (PathBuf::from(JAVA_HOME), java_home.clone()),
            (PathBuf::from(SPARK_HOME), home.clone()),
            (PathBuf::from(ENTRYPOINT), entrypoint),
        ];
        for (at, from) in &config.files {
            if !at.is_absolute() {
                return Err(SparkImageError::RelativeImagePath(at.clone()));
            }
            if !from.exists() {
                return Err(SparkImageError::NotFound {
                    path: from.clone(),
                    what: "a file or folder to lay into the Spark image",
                });
            }
            files.push((at.clone(), from.clone()));
        }
        // Parents before children, as layers must go.
        files.sort_by_key(|(at, _)| super::super::net::rootfs::depth(at));
        let env = BTreeMap::from([
            ("SPARK_HOME".to_owned(), SPARK_HOME.to_owned()),
            ("JAVA_HOME".to_owned(), JAVA_HOME.to_owned()),
        ]);
        Ok(SparkImage {
            images: config.images.clone(),
            command: vec![ENTRYPOINT.to_owned()],
            env,
            files,
            home,
            java_home,
        })
    }

    /// Whether `image` is a Spark image.
    pub fn matches(&self, image: &str) -> bool {
        image::matches(&self.images, image)
    }

    /// What its containers run.
    pub fn run(&self) -> ImageRun<'_> {
        ImageRun {
            command: &self.command,
            env: &self.env,
            working_dir: Some(WORK_DIR),
            files: &self.files,
        }
    }
}

fn find_pyspark() -> Result<PathBuf, SparkImageError> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, pyspark; print(os.path.dirname(os.path.abspath(pyspark.__file__)))",
        ])
        .output()
        .map_err(|e| SparkImageError::FindSpark {
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(SparkImageError::FindSpark {
            detail: stderr.lines().last().unwrap_or("").trim().to_owned(),
        });
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn find_java() -> Result<PathBuf, SparkImageError> {
    let path = std::env::var_os("PATH").ok_or(SparkImageError::FindJava)?;
    let java = std::env::split_paths(&path)
        .map(|d| d.join("java"))
        .find(|j| j.is_file())
        .ok_or(SparkImageError::FindJava)?;
    // `java` is usually a chain of links (/usr/bin/java → /etc/alternatives → the JDK).
    let real = java.canonicalize().map_err(|_| SparkImageError::FindJava)?;
    real.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or(SparkImageError::FindJava)
}

fn write_executable(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, path)
}

/// kubesim's entrypoint for the Spark image (see the module documentation).
const ENTRYPOINT_SCRIPT: &str = r#"#!/bin/bash
# The Spark image's entrypoint as kubesim runs it. Written for kubesim, following the
# conventions of the apache/spark images: `driver` and `executor` as Spark's pods ask, anything
# else run as given.
set -eo pipefail

export SPARK_HOME="${SPARK_HOME:-/opt/spark}"
if [ -z "${JAVA_HOME:-}" ]; then
  JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
  export JAVA_HOME
fi

# The executor's class path: configuration first, then Spark's jars, extras, the working folder.
classpath="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/jars/*"
if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
  classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
fi
if [ -n "${HADOOP_HOME:-}" ] && [ -z "${SPARK_DIST_CLASSPATH:-}" ]; then
  SPARK_DIST_CLASSPATH="$("$HADOOP_HOME/bin/hadoop" classpath)"
  export SPARK_DIST_CLASSPATH
fi
if [ -n "${HADOOP_CONF_DIR+set}" ]; then
  classpath="$HADOOP_CONF_DIR:$classpath"
fi
if [ -n "${SPARK_CONF_DIR+set}" ]; then
  classpath="$SPARK_CONF_DIR:$classpath"
else
  classpath="$SPARK_HOME/conf:$classpath"
fi
classpath="$classpath:$PWD"

# The driver passes the executor's JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
java_opts=()
i=0
while true; do
  name="SPARK_JAVA_OPT_$i"
  [ -n "${!name+set}" ] || break
  java_opts+=("${!name}")
  i=$((i + 1))
done

mode="${1:-}"
case "$mode" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$classpath:${SPARK_DIST_CLASSPATH:-}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec "$@"
    ;;
esac
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_spark(root: &Path) -> (PathBuf, PathBuf) {
        let home = root.join("pyspark");
        std::fs::create_dir_all(home.join("bin")).expect("bin");
        std::fs::create_dir_all(home.join("jars")).expect("jars");
        std::fs::write(home.join("bin/spark-submit"), "").expect("spark-submit");
        let java = root.join("jdk");
        std::fs::create_dir_all(java.join("bin")).expect("jdk");
        std::fs::write(java.join("bin/java"), "").expect("java");
        (home, java)
    }

    #[test]
    fn the_image_lays_spark_java_and_the_entrypoint_at_the_images_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, java) = fake_spark(dir.path());
        let programs = dir.path().join("programs");
        std::fs::create_dir_all(&programs).expect("programs");
        let config = SparkImageConfig {
            home: Some(home.clone()),
            java_home: Some(java.clone()),
            files: BTreeMap::from([(PathBuf::from(WORK_DIR), programs.clone())]),
            ..SparkImageConfig::default()
        };
        let image = SparkImage::resolve(&config, &dir.path().join("image")).expect("resolve");
        let run = image.run();
        assert_eq!(run.command, [ENTRYPOINT.to_owned()]);
        assert_eq!(run.working_dir, Some(WORK_DIR));
        assert_eq!(run.env["SPARK_HOME"], SPARK_HOME);
        assert_eq!(run.env["JAVA_HOME"], JAVA_HOME);
        let at: Vec<&Path> = run.files.iter().map(|(a, _)| a.as_path()).collect();
        assert_eq!(
            at,
            [
                Path::new(SPARK_HOME),
                Path::new(ENTRYPOINT),
                Path::new(JAVA_HOME),
                Path::new(WORK_DIR),
            ],
            "parents before children"
        );
        let script = &run.files[1].1;
        let text = std::fs::read_to_string(script).expect("entrypoint");
        assert!(text.starts_with("#!/bin/bash"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(script)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "executable");
        assert!(image.matches("apache/spark:4.0.1"));
        assert!(!image.matches("spark-staged-driver:sandbox"));
    }

    #[test]
    fn a_folder_that_is_not_spark_is_refused_with_its_kind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, java) = fake_spark(dir.path());
        let config = SparkImageConfig {
            home: Some(dir.path().join("nothing")),
            java_home: Some(java),
            ..SparkImageConfig::default()
        };
        let err = SparkImage::resolve(&config, dir.path()).expect_err("not spark");
        assert_eq!(err.kind(), "not_found");
        let config = SparkImageConfig {
            files: BTreeMap::from([(PathBuf::from("relative"), dir.path().to_path_buf())]),
            ..config
        };
        let (home, _) = fake_spark(dir.path());
        let config = SparkImageConfig {
            home: Some(home),
            ..config
        };
        let err = SparkImage::resolve(&config, dir.path()).expect_err("relative");
        assert_eq!(err.kind(), "relative_image_path");
    }
}
