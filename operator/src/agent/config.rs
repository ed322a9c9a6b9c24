//! The agent's configuration: flags and `SPARK_RECOVERY_*` environment variables (the contract the
//! operator's driver pod template fills in), validated into [`Config`]. Pure: no I/O.

use std::str::FromStr;
use std::time::Duration;

use crate::progress_store::{AppKey, ParseScopeError, Scope};

/// The application (`SPARK_RECOVERY_APP`).
pub const ENV_APP: &str = "SPARK_RECOVERY_APP";
/// The epoch the driver runs under (`SPARK_RECOVERY_EPOCH`).
pub const ENV_EPOCH: &str = "SPARK_RECOVERY_EPOCH";
/// The application object and run the progress belongs to, `<uid>/<run>` (`SPARK_RECOVERY_SCOPE`).
pub const ENV_SCOPE: &str = "SPARK_RECOVERY_SCOPE";
/// The store backend (`SPARK_RECOVERY_STORE`).
pub const ENV_STORE: &str = "SPARK_RECOVERY_STORE";
/// The Redis URL (`SPARK_RECOVERY_REDIS_URL`).
pub const ENV_REDIS_URL: &str = "SPARK_RECOVERY_REDIS_URL";
/// The loopback port of the marker API (`SPARK_RECOVERY_PORT`).
pub const ENV_PORT: &str = "SPARK_RECOVERY_PORT";
/// The heartbeat interval (`SPARK_RECOVERY_HEARTBEAT_MILLIS`).
pub const ENV_HEARTBEAT_MILLIS: &str = "SPARK_RECOVERY_HEARTBEAT_MILLIS";

/// The port the marker API listens on when none is set. A pod's containers share one port space,
/// so it must be one a Spark driver never binds: not Spark's driver and block-manager ports
/// (7078, 7079 on Kubernetes) nor the UI's (4040), Spark Connect's (15002) or the standalone
/// master's (7077), nor the 16 ports after each that `spark.port.maxRetries` lets Spark try.
pub const DEFAULT_PORT: u16 = 7979;
/// The heartbeat interval when none is set.
pub const DEFAULT_HEARTBEAT_MILLIS: u64 = 1000;

/// `operator agent [probe]`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentCommand {
    #[command(subcommand)]
    pub action: Option<AgentAction>,
    #[command(flatten)]
    pub args: AgentArgs,
}

/// What `operator agent` does besides serving.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AgentAction {
    /// The startup probe: exit 0 once the agent in this pod has restored the latest marker.
    Probe(ProbeArgs),
}

/// `operator agent probe`: run by the kubelet inside the agent's container, where it shares the
/// pod's loopback with the agent.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// The agent's port on 127.0.0.1 (the container's own `SPARK_RECOVERY_PORT`).
    #[arg(long, env = ENV_PORT, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Bound on each step (connect, exchange); both together stay below the probe's
    /// `timeoutSeconds` (1).
    #[arg(long, default_value_t = 400)]
    pub timeout_millis: u64,
}

/// `operator agent`: the recovery agent, a native sidecar of the Spark driver.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The SparkApplication, `<namespace>/<name>` (required).
    // Optional to clap so that a missing value is reported by its variable name: the agent is
    // configured by the pod's environment, and clap's own error names only `--app`.
    #[arg(long, env = ENV_APP)]
    pub app: Option<String>,
    /// The epoch the driver in this pod runs under (required).
    #[arg(long, env = ENV_EPOCH)]
    pub epoch: Option<u64>,
    /// The application object and run the progress belongs to, `<uid>/<run>` (required).
    #[arg(long, env = ENV_SCOPE)]
    pub scope: Option<String>,
    /// The state store backend.
    #[arg(long, env = ENV_STORE, value_enum, default_value_t = StoreKind::Kubernetes)]
    pub store: StoreKind,
    /// The Redis URL (`redis://host:port/db`, or `redis+cluster://host:port,…` for a Redis
    /// Cluster), required with `--store redis`; the operator passes its own.
    #[arg(long, env = ENV_REDIS_URL)]
    pub redis_url: Option<String>,
    /// Port of the marker API; it listens on 127.0.0.1 only.
    #[arg(long, env = ENV_PORT, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Milliseconds between heartbeats.
    #[arg(long, env = ENV_HEARTBEAT_MILLIS, default_value_t = DEFAULT_HEARTBEAT_MILLIS)]
    pub heartbeat_millis: u64,
}

/// The state store backends the agent can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// One ConfigMap per application (needs nothing extra).
    Kubernetes,
    /// Redis or Redis Cluster.
    Redis,
}

/// The store, with what it needs to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// The Kubernetes store, through `kube::Client::try_default()`.
    Kubernetes,
    /// The Redis store at `url`.
    Redis {
        /// `redis://…`.
        url: String,
    },
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The application.
    pub app: AppKey,
    /// The epoch the driver runs under.
    pub epoch: u64,
    /// The store.
    pub store: StoreConfig,
    /// The loopback port.
    pub port: u16,
    /// Time between heartbeats.
    pub heartbeat_interval: Duration,
}

impl Config {
    /// Which backend, without its URL (which may hold a password): for logs.
    pub fn store_kind(&self) -> StoreKind {
        match self.store {
            StoreConfig::Kubernetes => StoreKind::Kubernetes,
            StoreConfig::Redis { .. } => StoreKind::Redis,
        }
    }
}

/// The configuration is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `SPARK_RECOVERY_APP` is not `<namespace>/<name>`.
    #[error("{ENV_APP} must be <namespace>/<name>, got {value:?}: {reason}")]
    App {
        /// What was given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A required setting is absent.
    #[error("{var} (or --{flag}) is required")]
    Missing {
        /// The environment variable.
        var: &'static str,
        /// The flag.
        flag: &'static str,
    },
    /// `SPARK_RECOVERY_SCOPE` is not `<uid>/<run>`.
    #[error("{ENV_SCOPE} must be <uid>/<run>")]
    Scope(#[source] ParseScopeError),
    /// Redis was chosen without a URL.
    #[error("{ENV_STORE}=redis needs {ENV_REDIS_URL}")]
    MissingRedisUrl,
    /// A heartbeat interval of zero.
    #[error("{ENV_HEARTBEAT_MILLIS} must be at least 1")]
    HeartbeatInterval,
}

impl ConfigError {
    /// A stable label for tests and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::App { .. } => "app",
            Self::Missing { .. } => "missing",
            Self::Scope(_) => "scope",
            Self::MissingRedisUrl => "missing_redis_url",
            Self::HeartbeatInterval => "heartbeat_interval",
        }
    }
}

/// A `<namespace>/<name>` reference to a SparkApplication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppRef {
    pub namespace: String,
    pub name: String,
}

impl FromStr for AppRef {
    type Err = ConfigError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let bad = |reason| ConfigError::App {
            value: value.to_owned(),
            reason,
        };
        let (namespace, name) = value.split_once('/').ok_or_else(|| bad("no '/'"))?;
        if !is_dns_label(namespace) {
            return Err(bad("the namespace is not a DNS label"));
        }
        if !is_dns_subdomain(name) {
            return Err(bad("the name is not a DNS subdomain"));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// RFC 1123 label: 1–63 of `[a-z0-9-]`, alphanumeric at both ends.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

impl TryFrom<AgentArgs> for Config {
    type Error = ConfigError;

    fn try_from(args: AgentArgs) -> Result<Self, Self::Error> {
        let AppRef { namespace, name } = args
            .app
            .ok_or(ConfigError::Missing {
                var: ENV_APP,
                flag: "app",
            })?
            .parse()?;
        let epoch = args.epoch.ok_or(ConfigError::Missing {
            var: ENV_EPOCH,
            flag: "epoch",
        })?;
        let scope: Scope = args
            .scope
            .ok_or(ConfigError::Missing {
                var: ENV_SCOPE,
                flag: "scope",
            })?
            .parse()
            .map_err(ConfigError::Scope)?;
        let app = AppKey::new(namespace, name, scope);
        let store = match (args.store, args.redis_url) {
            (StoreKind::Kubernetes, _) => StoreConfig::Kubernetes,
            (StoreKind::Redis, Some(url)) if !url.trim().is_empty() => StoreConfig::Redis { url },
            (StoreKind::Redis, _) => return Err(ConfigError::MissingRedisUrl),
        };
        if args.heartbeat_millis == 0 {
            return Err(ConfigError::HeartbeatInterval);
        }
        Ok(Self {
            app,
            epoch,
            store,
            port: args.port,
            heartbeat_interval: Duration::from_millis(args.heartbeat_millis),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    /// The configuration of `args`, with a scope unless they name one.
    fn config(args: &[&str]) -> Result<Config, ConfigError> {
        let scope = ["--scope", "uid-1/1"];
        let extra: &[&str] = if args.contains(&"--scope") {
            &[]
        } else {
            &scope
        };
        raw_config(&[args, extra].concat())
    }

    fn raw_config(args: &[&str]) -> Result<Config, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("agent").chain(args.iter().copied()))
            .expect("flags parse");
        Config::try_from(cli.agent)
    }

    #[test]
    fn defaults_are_the_kubernetes_store_on_the_default_port_beating_every_second() {
        let c = config(&["--app", "spark/pi", "--epoch", "3"]).unwrap();
        assert_eq!(
            c,
            Config {
                app: AppKey::new("spark", "pi", Scope::new("uid-1", 1)),
                epoch: 3,
                store: StoreConfig::Kubernetes,
                port: DEFAULT_PORT,
                heartbeat_interval: Duration::from_secs(1),
            }
        );
    }

    #[test]
    fn the_default_agent_port_is_free_in_a_spark_driver_pod() {
        // Spark's defaults, each followed by the `spark.port.maxRetries` (16) ports it may try
        // next: the standalone master, the driver and block manager on Kubernetes, the UI and
        // Spark Connect; and the external shuffle service.
        let spark = [
            7077..=7077 + 16,
            7078..=7078 + 16,
            7079..=7079 + 16,
            4040..=4040 + 16,
            15002..=15002 + 16,
            7337..=7337,
        ];
        for range in spark {
            assert!(
                !range.contains(&DEFAULT_PORT),
                "{DEFAULT_PORT} is Spark's ({range:?})"
            );
        }
    }

    #[test]
    fn agent_probe_is_a_subcommand_reading_the_agents_port() {
        #[derive(Debug, Parser)]
        struct AgentCli {
            #[command(flatten)]
            agent: AgentCommand,
        }
        let cli = AgentCli::try_parse_from(["agent", "probe", "--port", "7000"]).unwrap();
        match cli.agent.action {
            Some(AgentAction::Probe(p)) => assert_eq!(p.port, 7000),
            other => panic!("{other:?}"),
        }
        let cli = AgentCli::try_parse_from(["agent", "--app", "a/b"]).unwrap();
        assert!(cli.agent.action.is_none());
        assert_eq!(cli.agent.args.app.as_deref(), Some("a/b"));
    }

    #[test]
    fn redis_needs_a_url() {
        let err = config(&["--app", "a/b", "--epoch", "0", "--store", "redis"]).unwrap_err();
        assert_eq!(err.kind(), "missing_redis_url");
        let c = config(&[
            "--app",
            "a/b",
            "--epoch",
            "0",
            "--store",
            "redis",
            "--redis-url",
            "redis://127.0.0.1:6379/",
        ])
        .unwrap();
        assert_eq!(
            c.store,
            StoreConfig::Redis {
                url: "redis://127.0.0.1:6379/".into()
            }
        );
    }

    #[test]
    fn a_missing_app_or_epoch_is_named_by_its_variable() {
        let err = config(&["--epoch", "0"]).unwrap_err();
        assert_eq!(err.kind(), "missing");
        assert!(err.to_string().contains(ENV_APP), "{err}");
        let err = config(&["--app", "a/b"]).unwrap_err();
        assert_eq!(err.kind(), "missing");
        assert!(err.to_string().contains(ENV_EPOCH), "{err}");
        let err = raw_config(&["--app", "a/b", "--epoch", "1"]).unwrap_err();
        assert_eq!(err.kind(), "missing");
        assert!(err.to_string().contains(ENV_SCOPE), "{err}");
    }

    #[test]
    fn the_scope_is_an_application_uid_and_a_run() {
        let c = config(&["--app", "a/b", "--epoch", "1", "--scope", "4f1c-9a/3"]).unwrap();
        assert_eq!(c.app.scope, Scope::new("4f1c-9a", 3));
        for bad in ["", "uid", "uid/", "/3", "uid/x", "u id/1"] {
            let err = config(&["--app", "a/b", "--epoch", "1", "--scope", bad]).unwrap_err();
            assert_eq!(err.kind(), "scope", "{bad:?}");
        }
    }

    #[test]
    fn a_zero_heartbeat_interval_is_refused() {
        let err = config(&["--app", "a/b", "--epoch", "0", "--heartbeat-millis", "0"]).unwrap_err();
        assert_eq!(err.kind(), "heartbeat_interval");
    }

    #[test]
    fn app_references_are_namespace_slash_name() {
        for ok in ["default/pi", "ns-1/app.v2", "a/b"] {
            assert!(ok.parse::<AppRef>().is_ok(), "{ok}");
        }
        for bad in [
            "", "pi", "/pi", "ns/", "ns/a/b", "Ns/pi", "ns/Pi", "-ns/pi", "ns/pi-", "ns/a..b",
        ] {
            let err = bad.parse::<AppRef>().unwrap_err();
            assert_eq!(err.kind(), "app", "{bad:?}");
        }
    }

    #[test]
    fn every_flag_reads_its_spark_recovery_variable() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let envs: Vec<_> = cmd
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect();
        for env in [
            ENV_APP,
            ENV_EPOCH,
            ENV_SCOPE,
            ENV_STORE,
            ENV_REDIS_URL,
            ENV_PORT,
            ENV_HEARTBEAT_MILLIS,
        ] {
            assert!(envs.iter().any(|e| e == env), "{env} missing: {envs:?}");
        }
    }
}
