//! From one accepted `spark-submit` command line (plus optional pod templates and the client's
//! submission id) to exactly the objects the user's Spark's `KubernetesClientApplication` creates
//! for the driver: the Pod, the headless Service, the NetworkPolicy (4.2 on), on-demand PVCs, the
//! executor pod-template ConfigMap and the spark-conf ConfigMap, in Spark's creation order. Which
//! Spark (3.5, 4.0, 4.1, 4.2 or 4.3) is chosen by [`version`]; steps that differ between them
//! say which release introduced or removed what they do.
//!
//! Pure: no clock (the submit time is an input), no randomness (ids derive from the submission
//! id, see `naming`), no I/O. Differences from Spark are deliberate and listed in
//! docs/submitter.md.

mod error;
pub mod java;
mod pod;
mod resources;
pub mod version;
pub(crate) mod volumes;

use serde_json::Value;

pub use error::{BuildError, ErrorCode};
pub use version::{SPARK_VERSION_CONF, SparkLine, SparkVersion, SparkVersionError, VersionSource};

use crate::argv;
use crate::conf::{SparkConf, Submission};
use crate::meta::labels;
use crate::naming::{self, SubmissionId};
use crate::resource::java_trim;
use crate::template;

/// Ours, not Spark's: the driver container's memory limit, a Kubernetes quantity at or above the
/// request, in place of the limit Spark sets (equal to the request). What the widely used
/// operator's webhook patches for `spec.driver.memoryLimit`, applied while building instead.
pub const DRIVER_MEMORY_LIMIT_CONF: &str = "spark.kubernetes.submitter.driver.limit.memory";

/// Ours, not Spark's: the driver container's `SPARK_CONF_DIR`, an absolute path, in place of
/// Spark's `/opt/spark/conf` (which still holds `spark.properties`, read through
/// `--properties-file`). What the widely used operator's webhook sets for `spec.sparkConfigMap`;
/// the driver then also hands that directory's files to its executors (Spark's executor
/// ConfigMap is made from the driver's `SPARK_CONF_DIR`).
pub const DRIVER_SPARK_CONF_DIR_CONF: &str = "spark.kubernetes.submitter.driver.sparkConfDir";

/// Spark-conf keys the builder reads, spelled once.
pub(crate) mod conf_keys {
    pub const DRIVER_POD_NAME: &str = "spark.kubernetes.driver.pod.name";
    pub const CONTAINER_IMAGE: &str = "spark.kubernetes.container.image";
    pub const DRIVER_CONTAINER_IMAGE: &str = "spark.kubernetes.driver.container.image";
    pub const PULL_POLICY: &str = "spark.kubernetes.container.image.pullPolicy";
    pub const PULL_SECRETS: &str = "spark.kubernetes.container.image.pullSecrets";
    pub const DRIVER_TEMPLATE_FILE: &str = "spark.kubernetes.driver.podTemplateFile";
    pub const EXECUTOR_TEMPLATE_FILE: &str = "spark.kubernetes.executor.podTemplateFile";
    pub const DRIVER_TEMPLATE_CONTAINER: &str = "spark.kubernetes.driver.podTemplateContainerName";
    pub const EXECUTOR_TEMPLATE_CONTAINER: &str =
        "spark.kubernetes.executor.podTemplateContainerName";
    pub const DRIVER_FEATURE_STEPS: &str = "spark.kubernetes.driver.pod.featureSteps";
    pub const DRIVER_EXCLUDED_STEPS: &str = "spark.kubernetes.driver.pod.excludedFeatureSteps";
    pub const DRIVER_LABEL: &str = "spark.kubernetes.driver.label.";
    pub const DRIVER_ANNOTATION: &str = "spark.kubernetes.driver.annotation.";
    pub const DRIVER_SERVICE_LABEL: &str = "spark.kubernetes.driver.service.label.";
    pub const DRIVER_SERVICE_ANNOTATION: &str = "spark.kubernetes.driver.service.annotation.";
    pub const DRIVER_ENV: &str = "spark.kubernetes.driverEnv.";
    pub const DRIVER_SECRETS: &str = "spark.kubernetes.driver.secrets.";
    pub const DRIVER_SECRET_KEY_REF: &str = "spark.kubernetes.driver.secretKeyRef.";
    pub const NODE_SELECTOR: &str = "spark.kubernetes.node.selector.";
    pub const DRIVER_NODE_SELECTOR: &str = "spark.kubernetes.driver.node.selector.";
    pub const DRIVER_SCHEDULER_NAME: &str = "spark.kubernetes.driver.scheduler.name";
    pub const SCHEDULER_NAME: &str = "spark.kubernetes.scheduler.name";
    pub const SERVICE_ACCOUNT: &str = "spark.kubernetes.authenticate.driver.serviceAccountName";
    pub const REQUEST_CORES: &str = "spark.kubernetes.driver.request.cores";
    pub const LIMIT_CORES: &str = "spark.kubernetes.driver.limit.cores";
    pub const MEMORY_OVERHEAD: &str = "spark.driver.memoryOverhead";
    pub const MIN_MEMORY_OVERHEAD: &str = "spark.driver.minMemoryOverhead";
    pub const DRIVER_OVERHEAD_FACTOR: &str = "spark.driver.memoryOverheadFactor";
    pub const K8S_OVERHEAD_FACTOR: &str = "spark.kubernetes.memoryOverheadFactor";
    pub const DRIVER_PORT: &str = "spark.driver.port";
    pub const DRIVER_BLOCK_MANAGER_PORT: &str = "spark.driver.blockManager.port";
    pub const BLOCK_MANAGER_PORT: &str = "spark.blockManager.port";
    pub const UI_PORT: &str = "spark.ui.port";
    pub const CONNECT_PORT: &str = "spark.connect.grpc.binding.port";
    pub const ALLOW_PRIVILEGE_ESCALATION: &str =
        "spark.kubernetes.driver.securityContext.allowPrivilegeEscalation";
    pub const ALLOW_PRIVILEGE_ESCALATION_FALLBACK: &str =
        "spark.kubernetes.securityContext.allowPrivilegeEscalation";
    pub const LOCAL_DIR: &str = "spark.local.dir";
    pub const LOCAL_DIRS_TMPFS: &str = "spark.kubernetes.local.dirs.tmpfs";
    pub const SERVICE_IP_FAMILY_POLICY: &str = "spark.kubernetes.driver.service.ipFamilyPolicy";
    pub const SERVICE_IP_FAMILIES: &str = "spark.kubernetes.driver.service.ipFamilies";
    pub const SERVICE_PUBLISH_NOT_READY: &str =
        "spark.kubernetes.driver.service.publishNotReadyAddresses";
    pub const LEGACY_READ_WRITE_ONCE: &str = "spark.kubernetes.legacy.useReadWriteOnceAccessMode";
    pub const PYSPARK_PYTHON: &str = "spark.pyspark.python";
    pub const PYSPARK_DRIVER_PYTHON: &str = "spark.pyspark.driver.python";
    pub const DRIVER_RESOURCE: &str = "spark.driver.resource.";
    pub const HADOOP_CONFIG_MAP: &str = "spark.kubernetes.hadoop.configMapName";
    pub const KRB5_CONFIG_MAP: &str = "spark.kubernetes.kerberos.krb5.configMapName";
    pub const APP_ID: &str = "spark.app.id";
    pub const SUBMIT_TIME: &str = "spark.app.submitTime";
    pub const SUBMIT_IN_DRIVER: &str = "spark.kubernetes.submitInDriver";
    pub const RESOURCE_TYPE: &str = "spark.kubernetes.resource.type";
}

/// Feature steps a user may exclude by class name, as Spark lets them.
pub(crate) mod steps {
    pub const NETWORK_POLICY: &str =
        "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep";
    pub const LOCAL_DIRS: &str = "org.apache.spark.deploy.k8s.features.LocalDirsFeatureStep";
    pub const MOUNT_SECRETS: &str = "org.apache.spark.deploy.k8s.features.MountSecretsFeatureStep";
    pub const ENV_SECRETS: &str = "org.apache.spark.deploy.k8s.features.EnvSecretsFeatureStep";
    pub const MOUNT_VOLUMES: &str = "org.apache.spark.deploy.k8s.features.MountVolumesFeatureStep";
}

/// Everything one build needs. Pure data: the caller reads the clock and the templates.
#[derive(Debug, Clone, Copy)]
pub struct BuildInput<'a> {
    pub submission: &'a Submission,
    /// A `PodTemplateSpec` (`{metadata, spec}`) or a `Pod`, as JSON.
    pub driver_template: Option<&'a Value>,
    pub executor_template: Option<&'a Value>,
    pub submission_id: &'a SubmissionId,
    /// `spark.app.submitTime`, milliseconds since the epoch.
    pub submit_time_ms: i64,
    /// `SPARK_USER` in the driver unless `--proxy-user` is given: the submitting user.
    pub spark_user: &'a str,
}

/// Who the driver is, for the API answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub app_name: String,
    pub app_id: String,
    pub driver_pod_name: String,
    pub namespace: String,
    /// The Spark the objects were built for.
    pub spark_version: SparkVersion,
}

/// The built objects, in Spark's creation order: the Pod first, then Service, NetworkPolicy,
/// PersistentVolumeClaims, executor pod-template ConfigMap, spark-conf ConfigMap. Dependents
/// carry no ownerReferences yet (see `meta::attach_owner`).
#[derive(Debug, Clone, PartialEq)]
pub struct DriverObjects {
    pub objects: Vec<Value>,
    pub identity: Identity,
}

impl DriverObjects {
    /// The driver pod (always the first object).
    pub fn pod(&self) -> &Value {
        &self.objects[0]
    }
}

/// A request's submission id and argument vector, read and checked once: what a repeat check
/// ([`ParsedSubmission::names`]) and the build ([`ParsedSubmission::input`]) share, so a
/// submission is parsed once whichever way it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSubmission {
    pub id: SubmissionId,
    pub submission: Submission,
}

impl ParsedSubmission {
    /// Reads `submission_id`, then parses and checks `args`, in the order a build reports them.
    pub fn parse(args: &[String], submission_id: &str) -> Result<ParsedSubmission, BuildError> {
        let id: SubmissionId = submission_id
            .parse()
            .map_err(|source| BuildError::InvalidSubmissionId { source })?;
        let parsed = argv::parse(args).map_err(|source| BuildError::ParseArgs { source })?;
        Ok(ParsedSubmission {
            id,
            submission: Submission::from_args(&parsed),
        })
    }

    /// The names [`build`] gives the driver.
    pub fn names(&self) -> DriverNames {
        DriverNames::of(&self.submission, &self.id)
    }

    /// The build input for this submission with the given templates, submit time and user.
    pub fn input<'a>(
        &'a self,
        driver_template: Option<&'a Value>,
        executor_template: Option<&'a Value>,
        submit_time_ms: i64,
        spark_user: &'a str,
    ) -> BuildInput<'a> {
        BuildInput {
            submission: &self.submission,
            driver_template,
            executor_template,
            submission_id: &self.id,
            submit_time_ms,
            spark_user,
        }
    }
}

/// Parses `args` and builds, the one path the service and `submitter render` share.
pub fn build_from_argv(
    args: &[String],
    driver_template: Option<&Value>,
    executor_template: Option<&Value>,
    submission_id: &str,
    submit_time_ms: i64,
    spark_user: &str,
) -> Result<DriverObjects, BuildError> {
    let parsed = ParsedSubmission::parse(args, submission_id)?;
    build(&parsed.input(
        driver_template,
        executor_template,
        submit_time_ms,
        spark_user,
    ))
}

/// The names and settings every step shares, resolved once.
pub(crate) struct Plan<'a> {
    pub input: &'a BuildInput<'a>,
    pub conf: &'a SparkConf,
    /// The Spark release line whose behaviour is reproduced, and the release's patch number.
    pub line: SparkLine,
    pub patch: u32,
    pub app_name: String,
    pub app_id: String,
    pub prefix: String,
    pub pod_name: String,
    pub namespace: String,
    pub service_name: String,
    pub conf_map_name: String,
    pub driver_port: i32,
    pub block_manager_port: i32,
    pub ui_port: i32,
    /// The Spark Connect port (Spark 4.1 on).
    pub connect_port: Option<i32>,
    /// The driver's labels: custom ones, then Spark's four (`KubernetesDriverConf.labels`).
    pub driver_labels: Vec<(String, String)>,
    pub excluded_steps: Vec<String>,
    /// The settings Spark's `SparkConf` holds when the feature steps read it, as far as we know
    /// them; the order of its hash tables depends on them (see [`spark_conf_entries`]).
    pub spark_conf: Vec<(String, String)>,
}

impl Plan<'_> {
    pub fn enabled(&self, step: &str) -> bool {
        !self.excluded_steps.iter().any(|s| s == step)
    }
}

/// Builds the driver's objects. See the module documentation.
pub fn build(input: &BuildInput<'_>) -> Result<DriverObjects, BuildError> {
    let sub = input.submission;
    let conf = &sub.conf;
    refuse_unsupported(conf)?;
    let version =
        SparkVersion::select(conf).map_err(|source| BuildError::SparkVersion { source })?;
    let line = version.line();
    // Spark 3.5.0's SparkSubmit still assigned --total-executor-cores to spark.cores.max on
    // Kubernetes; 3.5.1 stopped.
    let with_cores_max;
    let conf = match &sub.total_executor_cores {
        Some(cores) if line == SparkLine::V3_5 && version.patch() == 0 => {
            let mut c = conf.clone();
            c.set(crate::keys::CORES_MAX, cores.as_str());
            with_cores_max = c;
            &with_cores_max
        }
        _ => conf,
    };
    let spark_conf = spark_conf_entries(input, conf);
    // Spark parses the executor volumes first, to fail before anything is created.
    volumes::parse(conf, volumes::EXECUTOR_PREFIX, &spark_conf, line)?;

    let id = input.submission_id;
    let DriverNames {
        app_name,
        app_id,
        namespace,
        pod_name,
        prefix,
    } = DriverNames::of(sub, id);
    let service_name = naming::driver_service_name(&prefix, &id.unique_id("driver-service-name"));
    let conf_map_name = spark_conf_config_map_name(id);

    let driver_port = raw_int(conf, conf_keys::DRIVER_PORT, 7078)?;
    let block_manager_port = match conf.get(conf_keys::DRIVER_BLOCK_MANAGER_PORT) {
        Some(_) => raw_int(conf, conf_keys::DRIVER_BLOCK_MANAGER_PORT, 7079)?,
        None => raw_int(conf, conf_keys::BLOCK_MANAGER_PORT, 7079)?,
    };
    let ui_port = conf.get_int(conf_keys::UI_PORT)?.unwrap_or(4040);
    // The driver exposes a Spark Connect port since Spark 4.1.
    let connect_port = if line >= SparkLine::V4_1 {
        Some(raw_int(conf, conf_keys::CONNECT_PORT, 15002)?)
    } else {
        None
    };

    let mut driver_labels: Vec<(String, String)> = Vec::new();
    for (key, value) in conf.with_prefix(conf_keys::DRIVER_LABEL) {
        if labels::RESERVED.contains(&key) {
            return Err(BuildError::ReservedLabel {
                key: key.to_owned(),
            });
        }
        // Spark 4.0 substitutes {{APP_ID}} in label values too (3.5 only in annotations).
        let value = if line >= SparkLine::V4_0 {
            substitute_app_id(value, &app_id)
        } else {
            value.to_owned()
        };
        driver_labels.push((key.to_owned(), value));
    }
    driver_labels.extend([
        (
            labels::SPARK_VERSION.to_owned(),
            version.release().to_owned(),
        ),
        (labels::SPARK_APP_ID.to_owned(), app_id.clone()),
        (
            labels::SPARK_APP_NAME.to_owned(),
            naming::app_name_label(&app_name),
        ),
        (
            labels::SPARK_ROLE.to_owned(),
            labels::DRIVER_ROLE.to_owned(),
        ),
    ]);
    let excluded_steps = sequence(conf.get(conf_keys::DRIVER_EXCLUDED_STEPS));

    let plan = Plan {
        input,
        conf,
        line,
        patch: version.patch(),
        app_name,
        app_id,
        prefix,
        pod_name,
        namespace,
        service_name,
        conf_map_name,
        driver_port,
        block_manager_port,
        ui_port,
        connect_port,
        driver_labels,
        excluded_steps,
        spark_conf,
    };

    let base = match input.driver_template {
        Some(t) => template::load_driver(t, conf.get(conf_keys::DRIVER_TEMPLATE_CONTAINER))
            .map_err(|source| BuildError::DriverTemplate { source })?,
        None => template::SparkPod::initial(),
    };
    if let Some(t) = input.executor_template {
        template::check_executor(t, conf.get(conf_keys::EXECUTOR_TEMPLATE_CONTAINER))
            .map_err(|source| BuildError::ExecutorTemplate { source })?;
    }

    let driver = pod::build(&plan, base)?;
    let properties = resources::properties(&plan, &driver.extra_properties);

    let mut objects = Vec::with_capacity(6);
    objects.push(driver.pod);
    objects.push(resources::service(&plan));
    // NetworkPolicyFeatureStep joined the driver's steps in Spark 4.2.
    if plan.line >= SparkLine::V4_2 && plan.enabled(steps::NETWORK_POLICY) {
        objects.push(resources::network_policy(&plan));
    }
    objects.extend(driver.claims);
    if let Some(t) = input.executor_template {
        objects.push(resources::pod_template_config_map(&plan, t));
    }
    objects.push(resources::spark_conf_config_map(&plan, &properties));
    for object in &mut objects {
        resources::mark_submission(object, id);
    }

    Ok(DriverObjects {
        objects,
        identity: Identity {
            app_name: plan.app_name,
            app_id: plan.app_id,
            driver_pod_name: plan.pod_name,
            namespace: plan.namespace,
            spark_version: version,
        },
    })
}

/// The names a build gives the driver, from the submission and its id alone (no build): what a
/// repeat of a submission needs to find its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverNames {
    pub app_name: String,
    pub app_id: String,
    pub namespace: String,
    pub pod_name: String,
    /// Spark's resource name prefix (the Service, the executor pod-template ConfigMap).
    pub prefix: String,
}

impl DriverNames {
    /// The names `build` gives the driver of `submission` under `id`.
    pub fn of(submission: &Submission, id: &SubmissionId) -> DriverNames {
        let app_name = submission.app_name().to_owned();
        // spark.kubernetes.driver.resourceNamePrefix only counts when Spark runs its own tests.
        let prefix = naming::resource_name_prefix(&app_name, &id.unique_id("resource-name-prefix"));
        let pod_name = submission
            .conf
            .get(conf_keys::DRIVER_POD_NAME)
            .map_or_else(|| format!("{prefix}-driver"), str::to_owned);
        DriverNames {
            app_id: id.app_id(),
            namespace: submission.namespace().to_owned(),
            app_name,
            pod_name,
            prefix,
        }
    }

    /// The ConfigMaps the driver pod mounts, in the order `build` lists them: the executor
    /// pod-template ConfigMap (with an executor template), then the spark-conf ConfigMap.
    pub fn config_maps(&self, id: &SubmissionId, executor_template: bool) -> Vec<String> {
        let template = executor_template.then(|| executor_template_config_map_name(&self.prefix));
        template
            .into_iter()
            .chain([spark_conf_config_map_name(id)])
            .collect()
    }
}

/// The spark-conf ConfigMap's name: from the submission id alone, so every attempt of one id
/// meets it.
fn spark_conf_config_map_name(id: &SubmissionId) -> String {
    format!("spark-drv-{}-conf-map", id.unique_id("spark-conf-map"))
}

/// The executor pod-template ConfigMap's name.
pub(crate) fn executor_template_config_map_name(prefix: &str) -> String {
    format!("{prefix}-driver-podspec-conf-map")
}

/// The settings of Spark's `SparkConf` when `KubernetesClientApplication` starts, in the order
/// they were set as far as we know it: the submission's conf, plus `spark.app.submitTime` (which
/// SparkSubmit sets; ours is added with the properties) and the template-file confs (Spark's
/// templates are files on the client, whose paths we do not have: an empty value stands in).
fn spark_conf_entries(input: &BuildInput<'_>, conf: &SparkConf) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = conf
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    if !conf.contains(conf_keys::SUBMIT_TIME) {
        entries.push((
            conf_keys::SUBMIT_TIME.to_owned(),
            input.submit_time_ms.to_string(),
        ));
    }
    for (template, key) in [
        (input.driver_template, conf_keys::DRIVER_TEMPLATE_FILE),
        (input.executor_template, conf_keys::EXECUTOR_TEMPLATE_FILE),
    ] {
        if template.is_some() {
            entries.push((key.to_owned(), String::new()));
        }
    }
    entries
}

/// Confs whose Spark behaviour needs the client machine or user code, which a server does not
/// have: refused rather than silently ignored.
fn refuse_unsupported(conf: &SparkConf) -> Result<(), BuildError> {
    const CLIENT_FILE: &str = "it names a file on the client machine; send the template inline (driver_pod_template / executor_pod_template)";
    for key in [
        conf_keys::DRIVER_TEMPLATE_FILE,
        conf_keys::EXECUTOR_TEMPLATE_FILE,
    ] {
        if conf.contains(key) {
            return Err(BuildError::UnsupportedConf {
                key: key.to_owned(),
                reason: CLIENT_FILE,
            });
        }
    }
    if conf
        .get(conf_keys::DRIVER_FEATURE_STEPS)
        .is_some_and(|v| !java_trim(v).is_empty())
    {
        return Err(BuildError::UnsupportedConf {
            key: conf_keys::DRIVER_FEATURE_STEPS.to_owned(),
            reason: "user feature steps are classes on the client's class path, which the submitter cannot run",
        });
    }
    for suffix in [
        "oauthTokenFile",
        "caCertFile",
        "clientKeyFile",
        "clientCertFile",
        "oauthToken",
    ] {
        let key = format!("spark.kubernetes.authenticate.driver.{suffix}");
        if conf.contains(&key) {
            return Err(BuildError::UnsupportedConf {
                key,
                reason: "driver credentials are copied from the client into a Secret by spark-submit; use spark.kubernetes.authenticate.driver.serviceAccountName or the mounted.* confs",
            });
        }
    }
    Ok(())
}

/// `SparkConf.getInt(key, default)`: `Integer.parseInt` of the raw value, no trimming.
fn raw_int(conf: &SparkConf, key: &str, default: i32) -> Result<i32, BuildError> {
    match conf.get(key) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| BuildError::InvalidConf {
            key: key.to_owned(),
            reason: format!("{v:?} is not an int"),
        }),
    }
}

/// `Utils.substituteAppNExecIds` with no executor.
pub(crate) fn substitute_app_id(value: &str, app_id: &str) -> String {
    value
        .replace("{{APP_ID}}", app_id)
        .replace("{{EXECUTOR_ID}}", "")
}

/// A `.toSequence` conf: comma-split, trimmed, blanks dropped.
pub(crate) fn sequence(value: Option<&str>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(java_trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
