//! From a SparkApplication to what the submitter takes: the `spark-submit` argument vector the
//! widely used operator's `buildSparkSubmitArgs` produces for it (its REST variant, which sends
//! pod templates inline instead of `podTemplateFile` confs), plus the driver and executor pod
//! templates carrying what that operator's mutating webhook would have patched into the pods.
//!
//! Pure: the master URL and the submission id come from the caller (the id from the persisted
//! status), nothing reads the environment or the clock. Maps are iterated in key order, where the
//! widely used operator iterates Go maps in random order, so the same app always gives the same
//! argv.
//!
//! Deliberate differences from `buildSparkSubmitArgs`, all documented in `docs/operator.md`:
//! no `mutated-by-spark-operator` label (nothing mutates our pods: the templates carry it all),
//! `hadoopConfigMap` as Spark's own `spark.kubernetes.hadoop.configMapName`, no
//! `--load-spark-defaults` (the submitter has no client defaults file), and the webhook's
//! defaults applied here (`crate::defaults`).

mod template;

use serde_json::Value;
use submission::api::SubmitRequest;
use submission::builder::{
    DRIVER_MEMORY_LIMIT_CONF, DRIVER_SPARK_CONF_DIR_CONF, SPARK_VERSION_CONF,
};
use thiserror::Error;

use crate::crd::{SparkApplication, SparkApplicationSpec, SparkPodSpec};
use crate::defaults::with_defaults;
use crate::labels;
use crate::names::{DRIVER_POD_NAME_CONF, driver_pod_name};
use crate::progress_store::Scope;
use crate::recovery::{self, DriverRecovery, RecoverySettings};
use crate::unsupported::{message, unsupported_fields};

/// One submission: the request body for the submitter, plus the driver pod name for status.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitPlan {
    /// From `status.submissionID`.
    pub submission_id: String,
    /// What `spark.kubernetes.driver.pod.name` is set to.
    pub driver_pod_name: String,
    /// The `spark-submit` argument vector.
    pub args: Vec<String>,
    /// Inline driver `PodTemplateSpec`.
    pub driver_pod_template: Value,
    /// Inline executor `PodTemplateSpec`.
    pub executor_pod_template: Value,
}

impl SubmitPlan {
    /// The submitter's request body.
    pub fn into_request(self) -> SubmitRequest {
        SubmitRequest {
            submission_id: self.submission_id,
            spark_submit_args: self.args,
            driver_pod_template: Some(self.driver_pod_template),
            executor_pod_template: Some(self.executor_pod_template),
        }
    }
}

/// Which pod a setting is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Driver,
    Executor,
}

impl Role {
    /// `driver` or `executor`, as in Spark's conf keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Driver => "driver",
            Role::Executor => "executor",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why no submission could be built.
#[derive(Debug, Error)]
pub enum BuildArgsError {
    #[error("the SparkApplication has no {field}")]
    MissingMetadata { field: &'static str },
    #[error("the submission id is empty")]
    MissingSubmissionId,
    #[error("the spec uses fields this operator cannot honour: {fields}")]
    Unsupported { fields: String },
    #[error("{role} volume mount {name:?} names no volume in spec.volumes or the {role} template")]
    VolumeNotFound { role: Role, name: String },
    #[error(
        "volume {name:?} is a Spark local directory but not an emptyDir, hostPath, nfs or persistentVolumeClaim volume"
    )]
    UnsupportedLocalDirVolume { name: String },
    #[error("spec.{role}.template is not a pod template: {reason}")]
    InvalidTemplate { role: Role, reason: &'static str },
    #[error(
        "spec.restartPolicy.recovery is set, but this operator runs with fenced restarts disabled (start it with --recovery-store)"
    )]
    RecoveryDisabled,
    #[error("status.recoveryStatus.epoch is not set: the epoch must be fenced before submitting")]
    MissingEpoch,
    #[error("cannot encode {field} as JSON")]
    Encode {
        field: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl BuildArgsError {
    /// A stable name for events, metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            BuildArgsError::MissingMetadata { .. } => "missing_metadata",
            BuildArgsError::MissingSubmissionId => "missing_submission_id",
            BuildArgsError::Unsupported { .. } => "unsupported",
            BuildArgsError::VolumeNotFound { .. } => "volume_not_found",
            BuildArgsError::UnsupportedLocalDirVolume { .. } => "unsupported_local_dir_volume",
            BuildArgsError::InvalidTemplate { .. } => "invalid_template",
            BuildArgsError::RecoveryDisabled => "recovery_disabled",
            BuildArgsError::MissingEpoch => "missing_epoch",
            BuildArgsError::Encode { .. } => "encode",
        }
    }
}

/// `k8s://https://HOST:PORT` from the in-cluster service variables, bracketing IPv6 hosts.
pub fn master_url(host: &str, port: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("k8s://https://[{host}]:{port}")
    } else {
        format!("k8s://https://{host}:{port}")
    }
}

/// Builds the submission of `app` for the submitter at Kubernetes master `master`
/// (`k8s://https://...`), under the submission id in `app.status`, for an operator running
/// without fenced restarts.
pub fn build_args(app: &SparkApplication, master: &str) -> Result<SubmitPlan, BuildArgsError> {
    let submission_id = app.status.as_ref().map_or("", |s| s.submission_id.as_str());
    build_submission(app, submission_id, master, None)
}

/// [`build_args`] under `submission_id`, with the operator's fenced-restart settings (`None`:
/// the feature is off). A recovery-enabled app runs its driver under
/// `status.recoveryStatus.epoch`, which must be persisted (fenced) before the submission.
pub fn build_submission(
    app: &SparkApplication,
    submission_id: &str,
    master: &str,
    recovery: Option<&RecoverySettings>,
) -> Result<SubmitPlan, BuildArgsError> {
    let name = metadata(app.metadata.name.as_deref(), "metadata.name")?;
    let namespace = metadata(app.metadata.namespace.as_deref(), "metadata.namespace")?;
    let uid = metadata(app.metadata.uid.as_deref(), "metadata.uid")?;
    if submission_id.is_empty() {
        return Err(BuildArgsError::MissingSubmissionId);
    }
    let blocking: Vec<_> = unsupported_fields(&app.spec)
        .into_iter()
        .filter(|f| f.blocking)
        .collect();
    if !blocking.is_empty() {
        return Err(BuildArgsError::Unsupported {
            fields: message(&blocking),
        });
    }

    let mut spec = with_defaults(&app.spec);
    // What kubeflow's monitoring setup writes into the application before submitting it.
    crate::monitoring::apply(&mut spec, name, namespace);
    crate::batch::apply(&mut spec, name);
    let epoch = if recovery::requested(&spec) {
        let settings = recovery.ok_or(BuildArgsError::RecoveryDisabled)?;
        let status = app
            .status
            .as_ref()
            .and_then(|s| s.recovery_status.as_ref())
            .ok_or(BuildArgsError::MissingEpoch)?;
        Some((settings, status.epoch, Scope::new(uid, status.run)))
    } else {
        None
    };
    let base_name = driver_pod_name(name, &spec);
    let pod_name = match &epoch {
        Some((_, epoch, _)) => recovery::pod_name(&base_name, *epoch),
        None => base_name,
    };
    let driver_recovery = epoch
        .as_ref()
        .map(|(settings, epoch, scope)| DriverRecovery {
            namespace,
            app: name,
            scope,
            epoch: *epoch,
            pod_name: &pod_name,
            settings,
        });
    let mut a = Argv::default();

    a.flag("--master", master);
    a.flag("--deploy-mode", "cluster");
    if let Some(class) = &spec.main_class {
        a.flag("--class", class);
    }
    a.flag("--name", name);
    dependencies(&mut a, &spec);
    a.conf("spark.kubernetes.namespace", namespace);
    image(&mut a, &spec);
    // The submitter builds the objects the user's Spark would (labels, ports, NetworkPolicy);
    // `spec.sparkVersion` names it unless `sparkConf` sets the submitter's conf itself.
    if !spec.spark_version.is_empty() && !spec.spark_conf.contains_key(SPARK_VERSION_CONF) {
        a.conf(SPARK_VERSION_CONF, spec.spark_version.trim());
    }
    if let Some(version) = spec.python_version.as_deref().filter(|v| !v.is_empty()) {
        a.conf("spark.kubernetes.pyspark.pythonVersion", version);
    }
    if let Some(factor) = spec
        .memory_overhead_factor
        .as_deref()
        .filter(|v| !v.is_empty())
    {
        a.conf("spark.kubernetes.memoryOverheadFactor", factor);
    }
    // The operator follows the driver itself; spark-submit must not wait for it.
    a.conf("spark.kubernetes.submission.waitAppCompletion", "false");
    for (key, value) in &spec.spark_conf {
        // The pod name is set once, below, from the same precedence.
        if key != DRIVER_POD_NAME_CONF {
            a.conf(key, value);
        }
    }
    for (key, value) in &spec.hadoop_conf {
        a.conf(&format!("spark.hadoop.{key}"), value);
    }
    if let Some(config_map) = &spec.hadoop_config_map {
        a.conf("spark.kubernetes.hadoop.configMapName", config_map);
    }
    // The template mounts sparkConfigMap; the driver's SPARK_CONF_DIR is the submitter's to set.
    if spec
        .spark_config_map
        .as_deref()
        .is_some_and(|c| !c.is_empty())
    {
        a.conf(DRIVER_SPARK_CONF_DIR_CONF, template::SPARK_CONFIG_MAP_DIR);
    }
    a.conf(DRIVER_POD_NAME_CONF, &pod_name);

    driver_confs(&mut a, app, &spec, name, submission_id);
    for (key, value) in driver_recovery.iter().flat_map(DriverRecovery::confs) {
        a.conf(&key, &value);
    }
    env_vars(&mut a, Role::Driver, &spec.driver.pod);
    secrets(&mut a, Role::Driver, &spec.driver.pod);
    local_dir_volumes(&mut a, Role::Driver, &spec, &spec.driver.pod)?;
    executor_confs(&mut a, app, &spec, name, submission_id);
    env_vars(&mut a, Role::Executor, &spec.executor.pod);
    secrets(&mut a, Role::Executor, &spec.executor.pod);
    local_dir_volumes(&mut a, Role::Executor, &spec, &spec.executor.pod)?;
    for (key, value) in &spec.node_selector {
        a.conf(&format!("spark.kubernetes.node.selector.{key}"), value);
    }
    dynamic_allocation(&mut a, &spec);
    if let Some(user) = spec.proxy_user.as_deref().filter(|u| !u.is_empty()) {
        a.flag("--proxy-user", user);
    }
    a.args.push(spec.main_application_file.clone());
    a.args.extend(spec.arguments.iter().cloned());

    let owner = template::Owner { name, uid };
    let mut driver_pod_template = template::driver(&spec, &owner)?;
    if let Some(r) = &driver_recovery {
        r.add_agent(&mut driver_pod_template).map_err(|reason| {
            BuildArgsError::InvalidTemplate {
                role: Role::Driver,
                reason,
            }
        })?;
    }
    Ok(SubmitPlan {
        submission_id: submission_id.to_owned(),
        driver_pod_name: pod_name,
        args: a.args,
        driver_pod_template,
        executor_pod_template: template::executor(&spec, &owner)?,
    })
}

fn metadata<'a>(value: Option<&'a str>, field: &'static str) -> Result<&'a str, BuildArgsError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or(BuildArgsError::MissingMetadata { field })
}

#[derive(Default)]
struct Argv {
    args: Vec<String>,
}

impl Argv {
    fn flag(&mut self, flag: &str, value: &str) {
        self.args.push(flag.to_owned());
        self.args.push(value.to_owned());
    }

    fn conf(&mut self, key: &str, value: &str) {
        self.args.push("--conf".to_owned());
        self.args.push(format!("{key}={value}"));
    }
}

fn dependencies(a: &mut Argv, spec: &SparkApplicationSpec) {
    let Some(deps) = &spec.deps else {
        return;
    };
    for (flag, list) in [
        ("--jars", &deps.jars),
        ("--packages", &deps.packages),
        ("--exclude-packages", &deps.exclude_packages),
        ("--repositories", &deps.repositories),
        ("--py-files", &deps.py_files),
        ("--files", &deps.files),
        ("--archives", &deps.archives),
    ] {
        if !list.is_empty() {
            a.flag(flag, &list.join(","));
        }
    }
}

/// A Java memory string as a Kubernetes quantity, as the widely used operator converts
/// `memoryLimit` (`ConvertJavaMemoryStringToK8sMemoryString`): `2g`/`2gb` → `2Gi`, likewise
/// k, m, t and p, case-insensitive; anything else, trimmed, as it is (`2Gi` stays `2Gi`).
pub fn kubernetes_memory(memory: &str) -> String {
    let trimmed = memory.trim();
    let lower = trimmed.to_ascii_lowercase();
    for (unit, binary) in [
        ("kb", "Ki"),
        ("mb", "Mi"),
        ("gb", "Gi"),
        ("tb", "Ti"),
        ("pb", "Pi"),
        ("k", "Ki"),
        ("m", "Mi"),
        ("g", "Gi"),
        ("t", "Ti"),
        ("p", "Pi"),
    ] {
        if let Some(number) = lower.strip_suffix(unit) {
            return format!("{number}{binary}");
        }
    }
    trimmed.to_owned()
}

fn image(a: &mut Argv, spec: &SparkApplicationSpec) {
    if let Some(image) = spec.image.as_deref().filter(|v| !v.is_empty()) {
        a.conf("spark.kubernetes.container.image", image);
    }
    if let Some(policy) = spec.image_pull_policy.as_deref().filter(|v| !v.is_empty()) {
        a.conf("spark.kubernetes.container.image.pullPolicy", policy);
    }
    if !spec.image_pull_secrets.is_empty() {
        a.conf(
            "spark.kubernetes.container.image.pullSecrets",
            &spec.image_pull_secrets.join(","),
        );
    }
}

/// The labels every pod of a run gets, as `spark.kubernetes.<role>.label.*` confs.
fn common_labels(a: &mut Argv, role: Role, name: &str, id: &str) {
    let prefix = format!("spark.kubernetes.{role}.label.");
    a.conf(&format!("{prefix}{}", labels::APP_NAME), name);
    a.conf(
        &format!("{prefix}{}", labels::LAUNCHED_BY_SPARK_OPERATOR),
        "true",
    );
    a.conf(&format!("{prefix}{}", labels::SUBMISSION_ID), id);
}

/// The SparkApplication's own labels, Kueue's excepted.
fn app_labels(a: &mut Argv, role: Role, app: &SparkApplication) {
    for (key, value) in app.metadata.labels.iter().flatten() {
        if !key.starts_with(labels::KUEUE_PREFIX) {
            a.conf(&format!("spark.kubernetes.{role}.label.{key}"), value);
        }
    }
}

fn role_image<'a>(spec: &'a SparkApplicationSpec, pod: &'a SparkPodSpec) -> Option<&'a str> {
    pod.image
        .as_deref()
        .filter(|v| !v.is_empty())
        .or(spec.image.as_deref().filter(|v| !v.is_empty()))
}

fn driver_confs(
    a: &mut Argv,
    app: &SparkApplication,
    spec: &SparkApplicationSpec,
    name: &str,
    id: &str,
) {
    let driver = &spec.driver;
    common_labels(a, Role::Driver, name, id);
    if let Some(image) = role_image(spec, &driver.pod) {
        a.conf("spark.kubernetes.driver.container.image", image);
    }
    if let Some(cores) = driver.pod.cores {
        a.conf("spark.driver.cores", &cores.to_string());
    }
    if let Some(v) = &driver.core_request {
        a.conf("spark.kubernetes.driver.request.cores", v);
    }
    if let Some(v) = &driver.pod.core_limit {
        a.conf("spark.kubernetes.driver.limit.cores", v);
    }
    if let Some(v) = &driver.pod.memory {
        a.conf("spark.driver.memory", v);
    }
    if let Some(v) = &driver.pod.memory_overhead {
        a.conf("spark.driver.memoryOverhead", v);
    }
    // Spark sets the limit equal to the request; the submitter replaces it, as the webhook did.
    if let Some(v) = driver
        .pod
        .memory_limit
        .as_deref()
        .filter(|v| !v.trim().is_empty())
    {
        a.conf(DRIVER_MEMORY_LIMIT_CONF, &kubernetes_memory(v));
    }
    if let Some(v) = &driver.pod.service_account {
        a.conf("spark.kubernetes.authenticate.driver.serviceAccountName", v);
    }
    if let Some(v) = &driver.java_options {
        a.conf("spark.driver.extraJavaOptions", v);
    }
    if let Some(v) = &driver.kubernetes_master {
        a.conf("spark.kubernetes.driver.master", v);
    }
    app_labels(a, Role::Driver, app);
    for (key, value) in &driver.pod.labels {
        a.conf(&format!("spark.kubernetes.driver.label.{key}"), value);
    }
    for (key, value) in &driver.pod.annotations {
        a.conf(&format!("spark.kubernetes.driver.annotation.{key}"), value);
    }
    for (key, value) in &driver.service_labels {
        a.conf(
            &format!("spark.kubernetes.driver.service.label.{key}"),
            value,
        );
    }
    for (key, value) in &driver.service_annotations {
        a.conf(
            &format!("spark.kubernetes.driver.service.annotation.{key}"),
            value,
        );
    }
    for (key, secret) in &driver.pod.env_secret_key_refs {
        a.conf(
            &format!("spark.kubernetes.driver.secretKeyRef.{key}"),
            &format!("{}:{}", secret.name, secret.key),
        );
    }
}

fn executor_confs(
    a: &mut Argv,
    app: &SparkApplication,
    spec: &SparkApplicationSpec,
    name: &str,
    id: &str,
) {
    let executor = &spec.executor;
    common_labels(a, Role::Executor, name, id);
    if let Some(n) = executor.instances {
        a.conf("spark.executor.instances", &n.to_string());
    }
    if let Some(image) = role_image(spec, &executor.pod) {
        a.conf("spark.kubernetes.executor.container.image", image);
    }
    if let Some(cores) = executor.pod.cores {
        a.conf("spark.executor.cores", &cores.to_string());
    }
    if let Some(v) = &executor.core_request {
        a.conf("spark.kubernetes.executor.request.cores", v);
    }
    if let Some(v) = &executor.pod.core_limit {
        a.conf("spark.kubernetes.executor.limit.cores", v);
    }
    if let Some(v) = &executor.pod.memory {
        a.conf("spark.executor.memory", v);
    }
    if let Some(v) = &executor.pod.memory_overhead {
        a.conf("spark.executor.memoryOverhead", v);
    }
    if let Some(v) = &executor.pod.service_account {
        a.conf(
            "spark.kubernetes.authenticate.executor.serviceAccountName",
            v,
        );
    }
    if let Some(v) = executor.delete_on_termination {
        a.conf(
            "spark.kubernetes.executor.deleteOnTermination",
            &v.to_string(),
        );
    }
    app_labels(a, Role::Executor, app);
    for (key, value) in &executor.pod.labels {
        a.conf(&format!("spark.kubernetes.executor.label.{key}"), value);
    }
    for (key, value) in &executor.pod.annotations {
        a.conf(
            &format!("spark.kubernetes.executor.annotation.{key}"),
            value,
        );
    }
    for (key, secret) in &executor.pod.env_secret_key_refs {
        a.conf(
            &format!("spark.kubernetes.executor.secretKeyRef.{key}"),
            &format!("{}:{}", secret.name, secret.key),
        );
    }
    if let Some(v) = &executor.java_options {
        a.conf("spark.executor.extraJavaOptions", v);
    }
}

/// The deprecated `envVars` map: `spark.kubernetes.driverEnv.*` and `spark.executorEnv.*`.
fn env_vars(a: &mut Argv, role: Role, pod: &SparkPodSpec) {
    let prefix = match role {
        Role::Driver => "spark.kubernetes.driverEnv.",
        Role::Executor => "spark.executorEnv.",
    };
    for (key, value) in &pod.env_vars {
        a.conf(&format!("{prefix}{key}"), value);
    }
}

fn secrets(a: &mut Argv, role: Role, pod: &SparkPodSpec) {
    use crate::crd::SecretType;
    let env_prefix = match role {
        Role::Driver => "spark.kubernetes.driverEnv.",
        Role::Executor => "spark.executorEnv.",
    };
    for secret in &pod.secrets {
        a.conf(
            &format!("spark.kubernetes.{role}.secrets.{}", secret.name),
            &secret.path,
        );
        let env = match secret.secret_type {
            SecretType::GCPServiceAccount => Some(("GOOGLE_APPLICATION_CREDENTIALS", "key.json")),
            SecretType::HadoopDelegationToken => {
                Some(("HADOOP_TOKEN_FILE_LOCATION", "hadoop.token"))
            }
            SecretType::Generic => None,
        };
        if let Some((var, file)) = env {
            let path = format!("{}/{file}", secret.path.trim_end_matches('/'));
            a.conf(&format!("{env_prefix}{var}"), &path);
        }
    }
}

/// Spark local directories (`spark-local-dir-*` volumes) as `spark.kubernetes.<role>.volumes.*`.
fn local_dir_volumes(
    a: &mut Argv,
    role: Role,
    spec: &SparkApplicationSpec,
    pod: &SparkPodSpec,
) -> Result<(), BuildArgsError> {
    for mount in &pod.volume_mounts {
        let name = &mount.name;
        if !name.starts_with(labels::LOCAL_DIR_VOLUME_PREFIX) {
            continue;
        }
        let volume = spec
            .volumes
            .iter()
            .find(|v| &v.name == name)
            .ok_or_else(|| BuildArgsError::VolumeNotFound {
                role,
                name: name.clone(),
            })?;
        let kind = if volume.empty_dir.is_some() {
            "emptyDir"
        } else if volume.host_path.is_some() {
            "hostPath"
        } else if volume.nfs.is_some() {
            "nfs"
        } else if volume.persistent_volume_claim.is_some() {
            "persistentVolumeClaim"
        } else {
            return Err(BuildArgsError::UnsupportedLocalDirVolume { name: name.clone() });
        };
        let prefix = format!("spark.kubernetes.{role}.volumes.{kind}.{name}");
        if !mount.mount_path.is_empty() {
            a.conf(&format!("{prefix}.mount.path"), &mount.mount_path);
        }
        if let Some(sub_path) = mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
            a.conf(&format!("{prefix}.mount.subPath"), sub_path);
        }
        if mount.read_only == Some(true) {
            a.conf(&format!("{prefix}.mount.readOnly"), "true");
        }
        let option = |a: &mut Argv, key: &str, value: &str| {
            a.conf(&format!("{prefix}.options.{key}"), value);
        };
        if let Some(dir) = &volume.empty_dir {
            if let Some(limit) = &dir.size_limit {
                option(a, "sizeLimit", &limit.0);
            }
            if let Some(medium) = dir.medium.as_deref().filter(|m| !m.is_empty()) {
                option(a, "medium", medium);
            }
        } else if let Some(host) = &volume.host_path {
            option(a, "path", &host.path);
            if let Some(kind) = &host.type_ {
                option(a, "type", kind);
            }
        } else if let Some(nfs) = &volume.nfs {
            option(a, "path", &nfs.path);
            option(a, "server", &nfs.server);
            if nfs.read_only == Some(true) {
                option(a, "readOnly", "true");
            }
        } else if let Some(claim) = &volume.persistent_volume_claim {
            option(a, "claimName", &claim.claim_name);
            if claim.read_only == Some(true) {
                option(a, "readOnly", "true");
            }
        }
    }
    Ok(())
}

fn dynamic_allocation(a: &mut Argv, spec: &SparkApplicationSpec) {
    let Some(allocation) = spec.dynamic_allocation.as_ref().filter(|d| d.enabled) else {
        return;
    };
    a.conf("spark.dynamicAllocation.enabled", "true");
    if let Some(n) = allocation.initial_executors {
        a.conf("spark.dynamicAllocation.initialExecutors", &n.to_string());
    }
    if let Some(n) = allocation.min_executors {
        a.conf("spark.dynamicAllocation.minExecutors", &n.to_string());
    }
    if let Some(n) = allocation.max_executors {
        a.conf("spark.dynamicAllocation.maxExecutors", &n.to_string());
    }
    a.conf(
        "spark.dynamicAllocation.shuffleTracking.enabled",
        &allocation
            .shuffle_tracking_enabled
            .unwrap_or(true)
            .to_string(),
    );
    if let Some(ms) = allocation.shuffle_tracking_timeout {
        a.conf(
            "spark.dynamicAllocation.shuffleTracking.timeout",
            &ms.to_string(),
        );
    }
}

#[cfg(test)]
mod tests;
