//! What a fenced restart puts into a submission, as plain functions.
//!
//! The epoch a driver runs under travels inside its own submission: the recovery agent sidecar in
//! the inline driver template gets it as `SPARK_RECOVERY_EPOCH`, the driver container gets the
//! same value through `spark.kubernetes.driverEnv.*`, and the pod carries it as a label. Nothing
//! patches the pod afterwards, so the agent and the store can never disagree about it (the seed's
//! bug 1 needed a webhook race; there is no webhook here).
//!
//! Every epoch's driver gets its own pod name (`<driver name>-e<epoch>`), so a zombie stuck
//! terminating on a partitioned node never blocks its successor.

use serde_json::{Value, json};

use crate::crd::SparkApplicationSpec;
use crate::labels;
use crate::progress_store::Scope;
use crate::progress_store::redis::url::{ParseRedisUrlError, RedisUrl};

/// The agent's environment: the contract between the pod template written here and
/// `operator agent` (docs/recovery-agent.md). One definition, in the agent's configuration.
pub mod env {
    pub use crate::agent::config::{
        ENV_APP as APP, ENV_EPOCH as EPOCH, ENV_HEARTBEAT_MILLIS as HEARTBEAT_MILLIS,
        ENV_PORT as PORT, ENV_REDIS_URL as REDIS_URL, ENV_SCOPE as SCOPE, ENV_STORE as STORE,
    };
    /// For the driver: the agent's base URL.
    pub const URL: &str = "SPARK_RECOVERY_URL";
}

/// The agent's container name in the driver pod.
pub const AGENT_CONTAINER: &str = "spark-recovery-agent";

/// The agent's startup probe, an `exec` probe run inside the agent's container: it asks the agent
/// on the pod's loopback (`GET /v1/ready`) and passes once the last marker has been restored. A
/// kubelet sends `httpGet` probes from the node, which never reaches a loopback-only listener.
/// `operator` must be on the agent image's `PATH` (the operator's image has it).
pub const AGENT_PROBE_COMMAND: [&str; 3] = ["operator", "agent", "probe"];

/// Which state store backs the epochs and markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// One ConfigMap per application (the default: needs nothing extra).
    Kubernetes,
    /// Redis or Redis Cluster at this URL (`redis://…` or `redis+cluster://…`, see
    /// [`crate::progress_store::redis::url`]); the agent gets the same URL.
    Redis { url: String },
}

impl StoreKind {
    /// The name the agent reads from `SPARK_RECOVERY_STORE`.
    pub fn as_str(&self) -> &'static str {
        match self {
            StoreKind::Kubernetes => "kubernetes",
            StoreKind::Redis { .. } => "redis",
        }
    }
}

/// `--recovery-store`: where fenced restarts keep their state (`kubernetes`, a `redis://` or
/// `rediss://` URL of one server, a `redis+cluster://` or `rediss+cluster://` URL of a Redis
/// Cluster), or `none` to turn the feature off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryStore {
    /// Fenced restarts are off; applications asking for them fail with a message saying so.
    None,
    /// Fenced restarts keep their state in this store.
    Store(StoreKind),
}

/// `--recovery-store` is none of `kubernetes`, `none` or a usable Redis URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRecoveryStoreError {
    /// Neither a store name nor a Redis URL.
    #[error(
        "{value:?} is not a recovery store: expected kubernetes, none, or a redis://, rediss://, \
         redis+cluster:// or rediss+cluster:// URL"
    )]
    Unknown { value: String },
    /// A Redis URL the store cannot use (the message leaves out the URL: it may hold a password;
    /// the reason is in it because clap shows only the message).
    #[error("the recovery store's Redis URL is unusable: {0}")]
    RedisUrl(ParseRedisUrlError),
}

impl ParseRecoveryStoreError {
    /// A stable label for tests and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "unknown",
            Self::RedisUrl(_) => "redis_url",
        }
    }
}

impl std::str::FromStr for RecoveryStore {
    type Err = ParseRecoveryStoreError;

    fn from_str(value: &str) -> Result<RecoveryStore, ParseRecoveryStoreError> {
        match value {
            "none" => Ok(RecoveryStore::None),
            "kubernetes" => Ok(RecoveryStore::Store(StoreKind::Kubernetes)),
            url if url.contains("://") && url.starts_with("redis") => {
                url.parse::<RedisUrl>()
                    .map_err(ParseRecoveryStoreError::RedisUrl)?;
                Ok(RecoveryStore::Store(StoreKind::Redis {
                    url: url.to_owned(),
                }))
            }
            other => Err(ParseRecoveryStoreError::Unknown {
                value: other.to_owned(),
            }),
        }
    }
}

/// Operator-wide settings of fenced restarts; absent when the operator runs with the feature off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoverySettings {
    pub store: StoreKind,
    /// The image of the agent sidecar (the operator's own image; its entrypoint is `operator`).
    pub agent_image: String,
    /// The agent's loopback port inside the driver pod (every pod has its own network).
    pub agent_port: u16,
    pub heartbeat_millis: u64,
    /// Heartbeat staleness window for apps that set none.
    pub heartbeat_timeout_seconds: i64,
    /// How long the Redis store keeps an application's progress after its last write.
    pub redis_ttl: std::time::Duration,
}

impl Default for RecoverySettings {
    fn default() -> Self {
        RecoverySettings {
            store: StoreKind::Kubernetes,
            agent_image: "spark-operator:latest".to_owned(),
            agent_port: crate::agent::config::DEFAULT_PORT,
            heartbeat_millis: 1000,
            heartbeat_timeout_seconds: 30,
            redis_ttl: crate::progress_store::redis::DEFAULT_TTL,
        }
    }
}

/// Whether the application asks for fenced restarts.
pub fn requested(spec: &SparkApplicationSpec) -> bool {
    spec.restart_policy
        .as_ref()
        .and_then(|p| p.recovery.as_ref())
        .is_some_and(|r| r.is_enabled())
}

/// The heartbeat staleness window of an application, in milliseconds.
pub fn heartbeat_timeout_ms(spec: &SparkApplicationSpec, settings: &RecoverySettings) -> u64 {
    let seconds = spec
        .restart_policy
        .as_ref()
        .and_then(|p| p.recovery.as_ref())
        .and_then(|r| r.heartbeat_timeout_seconds)
        .unwrap_or(settings.heartbeat_timeout_seconds);
    u64::try_from(seconds).unwrap_or(1).max(1) * 1000
}

/// The driver pod's name under `epoch`.
pub fn pod_name(base: &str, epoch: u64) -> String {
    format!("{base}-e{epoch}")
}

/// What one driver's submission carries for its epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverRecovery<'a> {
    pub namespace: &'a str,
    pub app: &'a str,
    /// The application object and run the driver's progress belongs to.
    pub scope: &'a Scope,
    pub epoch: u64,
    pub pod_name: &'a str,
    pub settings: &'a RecoverySettings,
}

impl DriverRecovery<'_> {
    fn port(&self) -> u16 {
        self.settings.agent_port
    }

    /// `--conf` pairs: the driver container's env and the epoch label on the pod.
    pub fn confs(&self) -> Vec<(String, String)> {
        let driver_env = |name: &str| format!("spark.kubernetes.driverEnv.{name}");
        vec![
            (
                format!("spark.kubernetes.driver.label.{}", labels::RECOVERY_EPOCH),
                self.epoch.to_string(),
            ),
            (
                driver_env(env::URL),
                format!("http://127.0.0.1:{}", self.port()),
            ),
            (driver_env(env::EPOCH), self.epoch.to_string()),
            (
                driver_env(env::APP),
                format!("{}/{}", self.namespace, self.app),
            ),
        ]
    }

    /// The agent as a native sidecar (an init container with `restartPolicy: Always`): it starts
    /// before the driver, its startup probe holds the driver back until the marker is restored,
    /// and it never keeps the pod from completing once the driver exits.
    pub fn agent_container(&self) -> Value {
        let port = self.port();
        let mut env = vec![
            json!({"name": env::APP, "value": format!("{}/{}", self.namespace, self.app)}),
            json!({"name": env::EPOCH, "value": self.epoch.to_string()}),
            json!({"name": env::SCOPE, "value": self.scope.to_string()}),
            json!({"name": env::STORE, "value": self.settings.store.as_str()}),
            json!({"name": env::PORT, "value": port.to_string()}),
            json!({"name": env::HEARTBEAT_MILLIS, "value": self.settings.heartbeat_millis.to_string()}),
        ];
        if let StoreKind::Redis { url } = &self.settings.store {
            env.push(json!({"name": env::REDIS_URL, "value": url}));
        }
        json!({
            "name": AGENT_CONTAINER,
            "image": self.settings.agent_image,
            "args": ["agent"],
            "restartPolicy": "Always",
            "env": env,
            "startupProbe": {
                "exec": {"command": AGENT_PROBE_COMMAND},
                "periodSeconds": 1,
                "timeoutSeconds": 1,
                "failureThreshold": 300,
            },
        })
    }

    /// Puts the agent first among the template's init containers, so it gates them too.
    pub fn add_agent(&self, template: &mut Value) -> Result<(), &'static str> {
        let root = template
            .as_object_mut()
            .ok_or("the template is not an object")?;
        let spec = root
            .entry("spec")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or("spec is not an object")?;
        let init = spec
            .entry("initContainers")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or("spec.initContainers is not a list")?;
        if init
            .iter()
            .any(|c| c.get("name").and_then(Value::as_str) == Some(AGENT_CONTAINER))
        {
            return Err("an init container is already named spark-recovery-agent");
        }
        init.insert(0, self.agent_container());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SCOPE: std::sync::LazyLock<Scope> = std::sync::LazyLock::new(|| Scope::new("uid-1", 2));

    fn recovery(settings: &RecoverySettings) -> DriverRecovery<'_> {
        DriverRecovery {
            namespace: "ns",
            app: "pi",
            scope: &SCOPE,
            epoch: 3,
            pod_name: "pi-driver-e3",
            settings,
        }
    }

    #[test]
    fn the_recovery_store_flag_is_kubernetes_none_or_a_redis_url() {
        let parse = |v: &str| v.parse::<RecoveryStore>();
        assert_eq!(
            parse("kubernetes"),
            Ok(RecoveryStore::Store(StoreKind::Kubernetes))
        );
        assert_eq!(parse("none"), Ok(RecoveryStore::None));
        for url in [
            "redis://127.0.0.1:6379/0",
            "rediss://redis.spark:6380",
            "redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
            "rediss+cluster://user:pw@redis-cluster.spark:6379/?wait_replicas=2",
        ] {
            assert_eq!(
                parse(url),
                Ok(RecoveryStore::Store(StoreKind::Redis { url: url.into() }))
            );
        }
        for (bad, kind) in [
            ("", "unknown"),
            ("Kubernetes", "unknown"),
            ("redis", "unknown"),
            ("http://redis:6379", "unknown"),
            ("redis://", "redis_url"),
            ("redis:///0", "redis_url"),
            ("redis://a:1,b:2", "redis_url"),
            ("redis+cluster://a:1/2", "redis_url"),
            ("redis+cluster://a:1?wait_replicas=all", "redis_url"),
        ] {
            assert_eq!(parse(bad).map_err(|e| e.kind()), Err(kind), "{bad:?}");
        }
        let err = parse("redis+cluster://u:secret@a:1/2").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn every_epoch_gets_its_own_pod_name() {
        assert_eq!(pod_name("pi-driver", 1), "pi-driver-e1");
        assert_ne!(pod_name("pi-driver", 1), pod_name("pi-driver", 2));
    }

    #[test]
    fn the_agent_is_a_native_sidecar_with_the_epoch_of_its_submission() {
        let settings = RecoverySettings {
            store: StoreKind::Redis {
                url: "redis://127.0.0.1:6379".into(),
            },
            ..RecoverySettings::default()
        };
        let r = recovery(&settings);
        let c = r.agent_container();
        assert_eq!(c["restartPolicy"], "Always");
        let env: std::collections::BTreeMap<&str, &str> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(env[env::EPOCH], "3");
        assert_eq!(env[env::APP], "ns/pi");
        assert_eq!(env[env::SCOPE], "uid-1/2");
        assert_eq!(env[env::STORE], "redis");
        assert_eq!(env[env::REDIS_URL], "redis://127.0.0.1:6379");
        let confs = r.confs();
        assert!(confs.contains(&(
            "spark.kubernetes.driverEnv.SPARK_RECOVERY_EPOCH".into(),
            "3".into()
        )));
        assert!(confs.contains(&(
            "spark.kubernetes.driver.label.sparkoperator.k8s.io/recovery-epoch".into(),
            "3".into()
        )));
    }

    #[test]
    fn the_agents_startup_probe_runs_inside_its_container_not_from_the_node() {
        let settings = RecoverySettings::default();
        let c = recovery(&settings).agent_container();
        let probe = &c["startupProbe"];
        // A kubelet sends httpGet and tcpSocket probes from the node to the pod IP (or to `host`
        // as the node sees it): neither reaches an agent listening on the pod's loopback.
        assert!(probe.get("httpGet").is_none(), "{probe}");
        assert!(probe.get("tcpSocket").is_none(), "{probe}");
        assert_eq!(
            probe["exec"]["command"],
            json!(["operator", "agent", "probe"])
        );
        // The probe finds the agent's port in the container's own environment.
        let port = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == env::PORT)
            .map(|e| e["value"].clone());
        assert_eq!(
            port,
            Some(json!(crate::agent::config::DEFAULT_PORT.to_string()))
        );
    }

    #[test]
    fn the_agent_goes_first_and_a_second_one_is_refused() {
        let settings = RecoverySettings::default();
        let r = recovery(&settings);
        let mut template = json!({"spec": {"initContainers": [{"name": "user-init"}]}});
        r.add_agent(&mut template).unwrap();
        assert_eq!(
            template["spec"]["initContainers"][0]["name"],
            AGENT_CONTAINER
        );
        assert_eq!(template["spec"]["initContainers"][1]["name"], "user-init");
        assert!(r.add_agent(&mut template).is_err());
        let mut empty = json!({});
        r.add_agent(&mut empty).unwrap();
        assert_eq!(empty["spec"]["initContainers"][0]["name"], AGENT_CONTAINER);
        assert!(r.add_agent(&mut json!([])).is_err());
    }

    #[test]
    fn recovery_is_opt_in_and_the_window_defaults_to_the_operators() {
        let mut spec: SparkApplicationSpec = serde_json::from_value(
            serde_json::json!({"type": "Scala", "mode": "cluster", "sparkVersion": "4.3.0", "mainApplicationFile": "local:///app.jar", "driver": {}, "executor": {}}),
        )
        .unwrap();
        assert!(!requested(&spec));
        let settings = RecoverySettings::default();
        assert_eq!(heartbeat_timeout_ms(&spec, &settings), 30_000);
        spec.restart_policy = Some(crate::crd::RestartPolicy {
            recovery: Some(crate::crd::RecoverySpec {
                enabled: None,
                heartbeat_timeout_seconds: Some(5),
            }),
            ..Default::default()
        });
        assert!(requested(&spec));
        assert_eq!(heartbeat_timeout_ms(&spec, &settings), 5_000);
        spec.restart_policy
            .as_mut()
            .unwrap()
            .recovery
            .as_mut()
            .unwrap()
            .enabled = Some(false);
        assert!(!requested(&spec));
    }
}
