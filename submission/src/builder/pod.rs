//! The driver pod: Spark's driver feature steps applied in `KubernetesDriverBuilder`'s order to
//! the template (or an empty pod), then what `Client.run` adds (the conf volume, `SPARK_CONF_DIR`)
//! and the Spark container appended after the template's other containers.

use serde_json::{Map, Value, json};

use super::{
    BuildError, Plan, SparkLine, conf_keys, java, sequence, steps, substitute_app_id, volumes,
};
use crate::conf::{ResourceType, SparkConf};
use crate::template::{DEFAULT_DRIVER_CONTAINER_NAME, SparkPod};

pub(crate) const SPARK_CONF_VOLUME: &str = "spark-conf-volume-driver";
pub(crate) const SPARK_CONF_DIR: &str = "/opt/spark/conf";
pub(crate) const SPARK_CONF_FILE: &str = "spark.properties";
pub(crate) const POD_TEMPLATE_VOLUME: &str = "pod-template-volume";
pub(crate) const POD_TEMPLATE_DIR: &str = "/opt/spark/pod-template";
pub(crate) const POD_TEMPLATE_FILE: &str = "pod-spec-template.yml";
pub(crate) const POD_TEMPLATE_KEY: &str = "podspec-configmap-key";
const HADOOP_CONF_VOLUME: &str = "hadoop-properties";
const HADOOP_CONF_DIR: &str = "/opt/hadoop/conf";
const KRB5_VOLUME: &str = "krb5-file";

pub(crate) struct BuiltPod {
    pub pod: Value,
    pub claims: Vec<Value>,
    /// Properties the pod steps add to spark.properties, in step order.
    pub extra_properties: Vec<(String, String)>,
}

/// Appends `items` to the list under `key`, creating it (fabric8's `addTo…`).
fn append(object: &mut Map<String, Value>, key: &str, items: impl IntoIterator<Item = Value>) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return;
    }
    let entry = object
        .entry(key)
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(list) = entry {
        list.extend(items);
    }
}

/// The object under `key`, created if missing or not an object (fabric8's `editOrNew…`).
fn object<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry
        .as_object_mut()
        .expect("the entry was made an object just above")
}

/// Puts `pairs` into the string map under `key` (fabric8's `addTo…(Map)`).
fn put_all<'p>(
    parent: &mut Map<String, Value>,
    key: &str,
    pairs: impl IntoIterator<Item = (&'p str, String)>,
) {
    let mut pairs = pairs.into_iter().peekable();
    if pairs.peek().is_none() {
        return;
    }
    let map = object(parent, key);
    for (k, v) in pairs {
        map.insert(k.to_owned(), Value::String(v));
    }
}

fn env(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}

pub(crate) fn build(plan: &Plan<'_>, base: SparkPod) -> Result<BuiltPod, BuildError> {
    let conf = plan.conf;
    let input = plan.input;
    let sub = input.submission;
    let SparkPod {
        mut pod,
        mut container,
    } = base;
    let mut extra: Vec<(String, String)> = Vec::new();
    let mut claims = Vec::new();

    // BasicDriverFeatureStep.
    let image = conf
        .get(conf_keys::DRIVER_CONTAINER_IMAGE)
        .or_else(|| conf.get(conf_keys::CONTAINER_IMAGE))
        .ok_or(BuildError::MissingImage)?;
    let pull_policy = conf.get_or(conf_keys::PULL_POLICY, "IfNotPresent");
    if !matches!(pull_policy, "Always" | "Never" | "IfNotPresent") {
        return Err(BuildError::InvalidConf {
            key: conf_keys::PULL_POLICY.to_owned(),
            reason: format!("{pull_policy:?} is not one of Always, Never, IfNotPresent"),
        });
    }
    let memory = Memory::resolve(conf, sub.resource_type, plan.line)?;
    let cores = conf.get_int(crate::keys::DRIVER_CORES)?.unwrap_or(1);
    let cpu_request = conf
        .get(conf_keys::REQUEST_CORES)
        .map_or_else(|| cores.to_string(), str::to_owned);
    let cpu_limit = conf.get(conf_keys::LIMIT_CORES);
    let custom_resources = custom_resources(conf)?;
    // Spark 4.3 sets the container's allowPrivilegeEscalation (false unless asked).
    let allow_privilege_escalation = if plan.line >= SparkLine::V4_3 {
        Some(
            match conf.get_bool(conf_keys::ALLOW_PRIVILEGE_ESCALATION)? {
                Some(b) => b,
                None => conf.get_bool_or(conf_keys::ALLOW_PRIVILEGE_ESCALATION_FALLBACK, false)?,
            },
        )
    } else {
        None
    };

    if !container.get("name").is_some_and(Value::is_string) {
        container.insert("name".into(), json!(DEFAULT_DRIVER_CONTAINER_NAME));
    }
    container.insert("image".into(), json!(image));
    container.insert("imagePullPolicy".into(), json!(pull_policy));
    let port =
        |name: &str, number: i32| json!({"containerPort": number, "name": name, "protocol": "TCP"});
    append(
        &mut container,
        "ports",
        [
            Some(port("driver-rpc-port", plan.driver_port)),
            Some(port("blockmanager", plan.block_manager_port)),
            Some(port("spark-ui", plan.ui_port)),
            plan.connect_port.map(|p| port("spark-connect", p)),
        ]
        .into_iter()
        .flatten(),
    );
    let spark_user = sub.proxy_user.as_deref().unwrap_or(input.spark_user);
    let mut envs = vec![
        env("SPARK_USER", spark_user),
        env("SPARK_APPLICATION_ID", &plan.app_id),
    ];
    envs.extend(
        conf.with_prefix(conf_keys::DRIVER_ENV)
            .map(|(k, v)| env(k, v)),
    );
    envs.push(
        json!({"name": crate::meta::containers::DRIVER_BIND_ADDRESS_ENV,
        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}),
    );
    append(&mut container, "env", envs);
    {
        let resources = object(&mut container, "resources");
        let memory_quantity = format!("{}Mi", memory.total_mib);
        put_all(resources, "requests", [("cpu", cpu_request)]);
        put_all(
            resources,
            "limits",
            cpu_limit.map(|l| ("cpu", l.to_owned())),
        );
        put_all(resources, "requests", [("memory", memory_quantity.clone())]);
        let memory_limit = match conf.get(super::DRIVER_MEMORY_LIMIT_CONF) {
            Some(limit) => checked_memory_limit(limit, memory.total_mib)?,
            None => memory_quantity,
        };
        put_all(resources, "limits", [("memory", memory_limit)]);
        put_all(
            resources,
            "limits",
            custom_resources
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone())),
        );
    }
    if let Some(allow) = allow_privilege_escalation {
        object(&mut container, "securityContext")
            .insert("allowPrivilegeEscalation".into(), json!(allow));
    }

    {
        let metadata = object(&mut pod, "metadata");
        metadata.insert("name".into(), json!(plan.pod_name));
        put_all(
            metadata,
            "labels",
            plan.driver_labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone())),
        );
        put_all(
            metadata,
            "annotations",
            conf.with_prefix(conf_keys::DRIVER_ANNOTATION)
                .map(|(k, v)| (k, substitute_app_id(v, &plan.app_id))),
        );
    }
    {
        let spec = object(&mut pod, "spec");
        spec.insert("restartPolicy".into(), json!("Never"));
        put_all(
            spec,
            "nodeSelector",
            conf.with_prefix(conf_keys::NODE_SELECTOR)
                .map(|(k, v)| (k, v.to_owned())),
        );
        put_all(
            spec,
            "nodeSelector",
            conf.with_prefix(conf_keys::DRIVER_NODE_SELECTOR)
                .map(|(k, v)| (k, v.to_owned())),
        );
        append(
            spec,
            "imagePullSecrets",
            sequence(conf.get(conf_keys::PULL_SECRETS))
                .into_iter()
                .map(|name| json!({"name": name})),
        );
        if let Some(scheduler) = conf
            .get(conf_keys::DRIVER_SCHEDULER_NAME)
            .or_else(|| conf.get(conf_keys::SCHEDULER_NAME))
        {
            spec.insert("schedulerName".into(), json!(scheduler));
        }
    }
    extra.extend([
        (conf_keys::DRIVER_POD_NAME.to_owned(), plan.pod_name.clone()),
        (conf_keys::APP_ID.to_owned(), plan.app_id.clone()),
        (conf_keys::SUBMIT_IN_DRIVER.to_owned(), "true".to_owned()),
        (
            conf_keys::K8S_OVERHEAD_FACTOR.to_owned(),
            java::double_to_string(memory.default_factor),
        ),
    ]);

    // DriverKubernetesCredentialsFeatureStep: the service account, and tokens redacted.
    if let Some(account) = conf.get(conf_keys::SERVICE_ACCOUNT) {
        let spec = object(&mut pod, "spec");
        spec.insert("serviceAccount".into(), json!(account));
        spec.insert("serviceAccountName".into(), json!(account));
    }
    for (key, _) in conf.iter().filter(|(k, _)| k.ends_with("oauthToken")) {
        extra.push((key.to_owned(), "<present_but_redacted>".to_owned()));
    }

    // DriverServiceFeatureStep (the Service itself is built in `resources`).
    extra.extend([
        (
            crate::keys::DRIVER_HOST.to_owned(),
            format!("{}.{}.svc", plan.service_name, plan.namespace),
        ),
        (
            conf_keys::DRIVER_PORT.to_owned(),
            plan.driver_port.to_string(),
        ),
        (
            conf_keys::DRIVER_BLOCK_MANAGER_PORT.to_owned(),
            service_block_manager_port(conf)?.to_string(),
        ),
    ]);

    // MountSecretsFeatureStep.
    if plan.enabled(steps::MOUNT_SECRETS) {
        let secrets: Vec<(&str, &str)> = conf.with_prefix(conf_keys::DRIVER_SECRETS).collect();
        append(
            object(&mut pod, "spec"),
            "volumes",
            secrets.iter().map(|(name, _)| {
                json!({"name": format!("{name}-volume"), "secret": {"secretName": name}})
            }),
        );
        append(
            &mut container,
            "volumeMounts",
            secrets
                .iter()
                .map(|(name, path)| json!({"mountPath": path, "name": format!("{name}-volume")})),
        );
    }

    // EnvSecretsFeatureStep.
    if plan.enabled(steps::ENV_SECRETS) {
        let mut refs = Vec::new();
        for (env_name, key_ref) in conf.with_prefix(conf_keys::DRIVER_SECRET_KEY_REF) {
            let parts = java::split(key_ref, ':');
            let [name, key] = parts.as_slice() else {
                return Err(BuildError::InvalidSecretKeyRef {
                    env: env_name.to_owned(),
                    value: key_ref.to_owned(),
                });
            };
            refs.push(json!({"name": env_name,
                "valueFrom": {"secretKeyRef": {"key": key, "name": name}}}));
        }
        append(&mut container, "env", refs);
    }

    // MountVolumesFeatureStep.
    if plan.enabled(steps::MOUNT_VOLUMES) {
        let specs = volumes::parse(conf, volumes::DRIVER_PREFIX, &plan.spark_conf, plan.line)?;
        // On-demand claims are ReadWriteOncePod by default since Spark 4.0. 3.5.1 added the
        // legacy switch, defaulting to ReadWriteOnce; 3.5.0 has no switch and always asks that.
        let legacy_default = plan.line < SparkLine::V4_0;
        let read_write_once = if plan.line == SparkLine::V3_5 && plan.patch == 0 {
            true
        } else {
            conf.get_bool_or(conf_keys::LEGACY_READ_WRITE_ONCE, legacy_default)?
        };
        let built = volumes::driver_volumes(
            &specs,
            &plan.prefix,
            &plan.app_id,
            read_write_once,
            plan.line,
        )?;
        append(object(&mut pod, "spec"), "volumes", built.volumes);
        append(&mut container, "volumeMounts", built.mounts);
        claims = built.claims;
    }

    // DriverCommandFeatureStep.
    let mut args = vec![json!("driver")];
    if let Some(user) = &sub.proxy_user {
        args.extend([json!("--proxy-user"), json!(user)]);
    }
    args.extend([
        json!("--properties-file"),
        json!(format!("{SPARK_CONF_DIR}/{SPARK_CONF_FILE}")),
        json!("--class"),
        json!(sub.main_class),
        json!(sub.primary_resource),
    ]);
    args.extend(sub.app_args.iter().map(|a| json!(a)));
    append(&mut container, "args", args);
    if sub.resource_type == ResourceType::Python {
        let python = conf.get(conf_keys::PYSPARK_PYTHON);
        let driver_python = conf.get(conf_keys::PYSPARK_DRIVER_PYTHON).or(python);
        append(
            &mut container,
            "env",
            [
                ("PYSPARK_PYTHON", python),
                ("PYSPARK_DRIVER_PYTHON", driver_python),
            ]
            .into_iter()
            .filter_map(|(name, value)| value.map(|v| env(name, v))),
        );
    }
    extra.push((
        conf_keys::RESOURCE_TYPE.to_owned(),
        sub.resource_type.as_str().to_owned(),
    ));

    // HadoopConfDriverFeatureStep, with an existing ConfigMap (a client HADOOP_CONF_DIR is not ours).
    if let Some(config_map) = conf.get(conf_keys::HADOOP_CONFIG_MAP) {
        append(
            object(&mut pod, "spec"),
            "volumes",
            [json!({"configMap": {"name": config_map}, "name": HADOOP_CONF_VOLUME})],
        );
        append(
            &mut container,
            "volumeMounts",
            [json!({"mountPath": HADOOP_CONF_DIR, "name": HADOOP_CONF_VOLUME})],
        );
        append(
            &mut container,
            "env",
            [env("HADOOP_CONF_DIR", HADOOP_CONF_DIR)],
        );
        // Executors mount the same ConfigMap.
        extra.push((
            "spark.kubernetes.executor.hadoopConfigMapName".to_owned(),
            config_map.to_owned(),
        ));
    }

    // KerberosConfDriverFeatureStep, with an existing krb5 ConfigMap.
    if let Some(config_map) = conf.get(conf_keys::KRB5_CONFIG_MAP) {
        append(
            object(&mut pod, "spec"),
            "volumes",
            [json!({"configMap": {"name": config_map}, "name": KRB5_VOLUME})],
        );
        append(
            &mut container,
            "volumeMounts",
            [json!({"mountPath": "/etc/krb5.conf", "name": KRB5_VOLUME, "subPath": "krb5.conf"})],
        );
    }

    // PodTemplateConfigMapStep.
    if input.executor_template.is_some() {
        append(
            object(&mut pod, "spec"),
            "volumes",
            [json!({"configMap": {
                    "items": [{"key": POD_TEMPLATE_KEY, "path": POD_TEMPLATE_FILE}],
                    "name": pod_template_config_map_name(plan)},
                "name": POD_TEMPLATE_VOLUME})],
        );
        append(
            &mut container,
            "volumeMounts",
            [json!({"mountPath": POD_TEMPLATE_DIR, "name": POD_TEMPLATE_VOLUME})],
        );
        extra.push((
            conf_keys::EXECUTOR_TEMPLATE_FILE.to_owned(),
            format!("{POD_TEMPLATE_DIR}/{POD_TEMPLATE_FILE}"),
        ));
    }

    // LocalDirsFeatureStep.
    if plan.enabled(steps::LOCAL_DIRS) {
        local_dirs(plan, &mut pod, &mut container)?;
    }

    // Client.run: the spark-conf volume, and the Spark container after the template's others.
    let conf_dir = match conf.get(super::DRIVER_SPARK_CONF_DIR_CONF) {
        Some(dir) if dir.starts_with('/') => dir,
        Some(dir) => {
            return Err(BuildError::InvalidConf {
                key: super::DRIVER_SPARK_CONF_DIR_CONF.to_owned(),
                reason: format!("{dir:?} is not an absolute path"),
            });
        }
        None => SPARK_CONF_DIR,
    };
    append(&mut container, "env", [env("SPARK_CONF_DIR", conf_dir)]);
    append(
        &mut container,
        "volumeMounts",
        [json!({"mountPath": SPARK_CONF_DIR, "name": SPARK_CONF_VOLUME})],
    );
    let spec = object(&mut pod, "spec");
    append(spec, "containers", [Value::Object(container)]);
    append(
        spec,
        "volumes",
        [json!({"configMap": {
                "items": [{"key": SPARK_CONF_FILE, "mode": 420, "path": SPARK_CONF_FILE}],
                "name": plan.conf_map_name},
            "name": SPARK_CONF_VOLUME})],
    );

    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Pod"));
    out.extend(pod);
    Ok(BuiltPod {
        pod: Value::Object(out),
        claims,
        extra_properties: extra,
    })
}

/// The memory limit asked for, refused when it is not a Kubernetes quantity or is below the
/// request (the API server would refuse the pod for either).
fn checked_memory_limit(limit: &str, request_mib: i64) -> Result<String, BuildError> {
    let invalid = |reason: String| BuildError::InvalidConf {
        key: super::DRIVER_MEMORY_LIMIT_CONF.to_owned(),
        reason,
    };
    let bytes = quantity_bytes(limit)
        .ok_or_else(|| invalid(format!("{limit:?} is not a Kubernetes quantity")))?;
    if bytes < (request_mib as f64) * 1024.0 * 1024.0 {
        return Err(invalid(format!(
            "{limit} is below the driver's memory request ({request_mib}Mi: memory plus overhead)"
        )));
    }
    Ok(limit.to_owned())
}

/// The value of a non-negative Kubernetes quantity (`2Gi`, `1500M`, `1e9`, `0.5Gi`), in bytes.
fn quantity_bytes(quantity: &str) -> Option<f64> {
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            let digits = digits.strip_prefix('+').unwrap_or(digits);
            let (sign, digits) = match digits.strip_prefix('-') {
                Some(d) => (-1, d),
                None => (1, digits),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            10f64.powi(sign * digits.parse::<i32>().ok()?)
        }
    };
    Some(value * scale)
}

pub(crate) fn pod_template_config_map_name(plan: &Plan<'_>) -> String {
    super::executor_template_config_map_name(&plan.prefix)
}

/// The Service's and spark.properties' block manager port: `spark.driver.blockManager.port`
/// read raw, without the pod's fallback to `spark.blockManager.port`.
fn service_block_manager_port(conf: &SparkConf) -> Result<i32, BuildError> {
    super::raw_int(conf, conf_keys::DRIVER_BLOCK_MANAGER_PORT, 7079)
}

fn local_dirs(
    plan: &Plan<'_>,
    pod: &mut Map<String, Value>,
    container: &mut Map<String, Value>,
) -> Result<(), BuildError> {
    let from_template: Vec<String> = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| {
            m.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with("spark-local-dir-"))
        })
        .filter_map(|m| {
            m.get("mountPath")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    // Mounts the template already names spark-local-dir-* are used as they are.
    if !from_template.is_empty() {
        append(
            container,
            "env",
            [env("SPARK_LOCAL_DIRS", &from_template.join(","))],
        );
        return Ok(());
    }
    let tmpfs = plan.conf.get_bool_or(conf_keys::LOCAL_DIRS_TMPFS, false)?;
    // SPARK_LOCAL_DIRS of the client's environment would come first in Spark; a server has none.
    let dirs: Vec<String> = match plan.conf.get(conf_keys::LOCAL_DIR) {
        Some(list) => java::split(list, ',')
            .into_iter()
            .map(str::to_owned)
            .collect(),
        None => vec![format!(
            "/var/data/spark-{}",
            plan.input.submission_id.local_dir_uuid()
        )],
    };
    let empty_dir = if tmpfs {
        json!({"medium": "Memory"})
    } else {
        json!({})
    };
    append(
        object(pod, "spec"),
        "volumes",
        (1..=dirs.len())
            .map(|i| json!({"emptyDir": empty_dir, "name": format!("spark-local-dir-{i}")})),
    );
    append(container, "env", [env("SPARK_LOCAL_DIRS", &dirs.join(","))]);
    append(
        container,
        "volumeMounts",
        dirs.iter()
            .enumerate()
            .map(|(i, d)| json!({"mountPath": d, "name": format!("spark-local-dir-{}", i + 1)})),
    );
    Ok(())
}

/// The driver's memory as `BasicDriverFeatureStep` sizes it.
struct Memory {
    total_mib: i64,
    /// What spark.properties gets as `spark.kubernetes.memoryOverheadFactor`.
    default_factor: f64,
}

impl Memory {
    fn resolve(
        conf: &SparkConf,
        resource_type: ResourceType,
        line: SparkLine,
    ) -> Result<Memory, BuildError> {
        let memory_mib = conf
            .get_size_mib(crate::keys::DRIVER_MEMORY)?
            .unwrap_or(1024);
        let k8s_factor = read_factor(conf, conf_keys::K8S_OVERHEAD_FACTOR, false)?;
        let default_factor = match (resource_type, k8s_factor) {
            (_, Some(f)) => f,
            (ResourceType::Java, None) => 0.1,
            (ResourceType::Python | ResourceType::R, None) => 0.4,
        };
        let factor =
            read_factor(conf, conf_keys::DRIVER_OVERHEAD_FACTOR, true)?.unwrap_or(default_factor);
        let overhead = match conf.get_size_mib(conf_keys::MEMORY_OVERHEAD)? {
            Some(explicit) => explicit,
            None => {
                // spark.driver.minMemoryOverhead came with Spark 4.0; 3.5's minimum is fixed.
                let min = if line >= SparkLine::V4_0 {
                    conf.get_size_mib(conf_keys::MIN_MEMORY_OVERHEAD)?
                } else {
                    None
                }
                .unwrap_or(384);
                // Scala's Double.toInt saturates like `as`.
                i64::from((factor * memory_mib as f64) as i32).max(min)
            }
        };
        Ok(Memory {
            total_mib: memory_mib.saturating_add(overhead),
            default_factor,
        })
    }
}

fn read_factor(conf: &SparkConf, key: &str, positive: bool) -> Result<Option<f64>, BuildError> {
    let Some(raw) = conf.get(key) else {
        return Ok(None);
    };
    let value = java::parse_double(raw).ok_or_else(|| BuildError::InvalidConf {
        key: key.to_owned(),
        reason: format!("{raw:?} is not a double"),
    })?;
    let ok = if positive { value > 0.0 } else { value >= 0.0 };
    if !ok {
        return Err(BuildError::InvalidConf {
            key: key.to_owned(),
            reason: format!(
                "{raw:?} must be {}",
                if positive {
                    "greater than 0"
                } else {
                    "non-negative"
                }
            ),
        });
    }
    Ok(Some(value))
}

/// `KubernetesUtils.buildResourcesQuantities("spark.driver", conf)`: one limit
/// `<vendor>/<name>: <amount>` per `spark.driver.resource.<name>.*`.
fn custom_resources(conf: &SparkConf) -> Result<Vec<(String, String)>, BuildError> {
    let mut names: Vec<&str> = Vec::new();
    for (rest, _) in conf.with_prefix(conf_keys::DRIVER_RESOURCE) {
        let name = rest.split('.').next().unwrap_or(rest);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let get =
            |suffix: &str| conf.get(&format!("{}{name}.{suffix}", conf_keys::DRIVER_RESOURCE));
        let invalid = |reason: String| BuildError::InvalidResourceRequest {
            name: name.to_owned(),
            reason,
        };
        let amount = get("amount")
            .ok_or_else(|| invalid(format!("you must specify an amount for {name}")))?;
        let amount: i64 = amount
            .parse()
            .map_err(|_| invalid(format!("amount {amount:?} is not a whole number")))?;
        let vendor = get("vendor").ok_or_else(|| {
            invalid(format!(
                "resource: {name} was requested, but vendor was not specified"
            ))
        })?;
        out.push((format!("{vendor}/{name}"), amount.to_string()));
    }
    Ok(out)
}
