//! The SparkConf `spark-submit` hands to `KubernetesClientApplication` in cluster mode, following
//! Spark 4.3's `SparkSubmitArguments.loadEnvironmentArguments` (a flag beats the `--conf` of the
//! same key) and `SparkSubmit.prepareSubmitEnvironment` (the `OptionAssigner` table for
//! `KUBERNETES` + `CLUSTER`, the primary jar appended to `spark.jars`, path lists resolved).
//! Left to the caller, because they need a clock or randomness: `spark.app.submitTime`,
//! `spark.app.id` and everything `KubernetesClientApplication` adds afterwards.

use super::SparkConf;
use crate::argv::SubmitArgs;
use crate::keys;
use crate::master::kubernetes_master_url;
use crate::resource::{ResourceType, is_shell, list_entries};

impl SparkConf {
    /// Total over any `SubmitArgs`; for one accepted by `argv::parse` it is exactly Spark's.
    pub fn from_submit_args(args: &SubmitArgs) -> SparkConf {
        let mut conf = SparkConf::new();
        // SparkSubmitArguments.ignoreNonSparkProperties drops the rest with a warning.
        for (key, value) in args.confs.iter().filter(|(k, _)| k.starts_with("spark.")) {
            conf.set(key.as_str(), value.as_str());
        }
        let flag_or_conf = |flag: &Option<String>, key: &str| -> Option<String> {
            flag.clone().or_else(|| conf.get(key).map(str::to_owned))
        };

        let master = flag_or_conf(&args.master, keys::MASTER)
            .map(|m| kubernetes_master_url(&m).unwrap_or(m));
        // Spark's default deploy mode is client; argv::parse refuses it, this stays total.
        let deploy_mode =
            flag_or_conf(&args.deploy_mode, keys::DEPLOY_MODE).unwrap_or_else(|| "client".into());
        let name = flag_or_conf(&args.name, keys::APP_NAME)
            .or_else(|| args.main_class.clone())
            .or_else(|| file_name(&args.primary_resource));
        let principal = flag_or_conf(&args.principal, keys::PRINCIPAL)
            .or_else(|| conf.get(keys::YARN_PRINCIPAL).map(str::to_owned));
        let keytab = flag_or_conf(&args.keytab, keys::KEYTAB)
            .or_else(|| conf.get(keys::YARN_KEYTAB).map(str::to_owned));

        // The OptionAssigner rows that apply to Kubernetes cluster mode, in Spark's order.
        // --driver-memory and the driver path options are already confs (see SubmitArgs).
        let assigned = [
            (keys::MASTER, master),
            (keys::DEPLOY_MODE, Some(deploy_mode)),
            (keys::APP_NAME, name),
            (keys::PRINCIPAL, principal),
            (keys::KEYTAB, keytab),
            (keys::PY_FILES, flag_or_conf(&args.py_files, keys::PY_FILES)),
            (
                keys::JAR_PACKAGES,
                flag_or_conf(&args.packages, keys::JAR_PACKAGES),
            ),
            (
                keys::JAR_REPOSITORIES,
                flag_or_conf(&args.repositories, keys::JAR_REPOSITORIES),
            ),
            (
                keys::JAR_PACKAGES_EXCLUSIONS,
                flag_or_conf(&args.exclude_packages, keys::JAR_PACKAGES_EXCLUSIONS),
            ),
            (
                keys::EXECUTOR_INSTANCES,
                flag_or_conf(&args.num_executors, keys::EXECUTOR_INSTANCES),
            ),
            (
                keys::EXECUTOR_CORES,
                flag_or_conf(&args.executor_cores, keys::EXECUTOR_CORES),
            ),
            (
                keys::EXECUTOR_MEMORY,
                flag_or_conf(&args.executor_memory, keys::EXECUTOR_MEMORY),
            ),
            (keys::FILES, flag_or_conf(&args.files, keys::FILES)),
            (keys::ARCHIVES, flag_or_conf(&args.archives, keys::ARCHIVES)),
            (keys::JARS, flag_or_conf(&args.jars, keys::JARS)),
            (
                keys::DRIVER_CORES,
                flag_or_conf(&args.driver_cores, keys::DRIVER_CORES),
            ),
        ];
        for (key, value) in assigned {
            if let Some(value) = value {
                conf.set(key, value);
            }
        }

        // "Add the application jar automatically so the user doesn't have to call sc.addJar";
        // Python and R primaries travel as the primary resource instead.
        if ResourceType::of(&args.primary_resource) == ResourceType::Java {
            let mut jars: Vec<&str> = conf
                .get(keys::JARS)
                .map(list_entries)
                .into_iter()
                .flatten()
                .collect();
            if is_user_jar(&args.primary_resource) {
                jars.push(&args.primary_resource);
            }
            let jars = jars.join(",");
            conf.set(keys::JARS, jars);
        }

        // A driver host from the client is meaningless for a driver in a pod.
        conf.remove(keys::DRIVER_HOST);

        for key in [keys::JARS, keys::FILES, keys::ARCHIVES] {
            if let Some(list) = conf.get(key) {
                let normalised = list_entries(list).collect::<Vec<_>>().join(",");
                conf.set(key, normalised);
            }
        }
        // Always present, empty when there are none (`spark.submit.pyFiles=` in spark.properties).
        let py_files = conf
            .get(keys::PY_FILES)
            .map(|list| list_entries(list).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        conf.set(keys::PY_FILES, py_files);
        conf
    }
}

/// `SparkSubmit.isUserJar`: not a shell, not Python, not R, not `spark-internal`.
pub(crate) fn is_user_jar(primary: &str) -> bool {
    ResourceType::of(primary) == ResourceType::Java
        && !is_shell(primary)
        && primary != "spark-internal"
}

/// `new File(primaryResource).getName()`, Spark's last fallback for the app name.
fn file_name(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    let name = trimmed.rsplit('/').next().unwrap_or(trimmed);
    (!name.is_empty()).then(|| name.to_owned())
}
