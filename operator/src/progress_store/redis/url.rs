//! The Redis store's URL: where the store lives (one server, or a Redis Cluster reached through
//! seed nodes) and how many replicas must hold a write before the store reports it done. Pure: no
//! I/O; the connection is made by [`super::RedisStore::connect`].
//!
//! - `redis://[user:password@]host[:port][/db]` (or `rediss://`): one server, or a proxy in front
//!   of several.
//! - `redis+cluster://[user:password@]host:port[,host:port…]` (or `rediss+cluster://`): a Redis
//!   Cluster. Any reachable seed is enough: the client learns every node and slot from it, and
//!   follows the cluster's `MOVED` and `ASK` redirections after a failover or a resharding. A
//!   cluster has only database 0, so the path is empty (or `/0`).
//!
//! Two query parameters belong to the store and are removed before the rest reaches the Redis
//! client: `wait_replicas` (how many replicas must acknowledge a fence or a commit, through
//! `WAIT`; default 1 on a cluster, 0 on one server) and `wait_timeout_ms` (how long a write waits
//! for them; default [`DEFAULT_WAIT_TIMEOUT`]). docs/fenced-restart.md says why a fence is only
//! safe across a failover once a replica holds it.

use std::str::FromStr;
use std::time::Duration;

/// How long a write waits for its replicas unless `wait_timeout_ms` says otherwise: far above a
/// replica's acknowledgement on a healthy link (a round trip), short enough that a write answers
/// well within the agent's 10 s bound on a store call when a replica is down.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_millis(1000);

/// The largest `wait_timeout_ms`: the agent gives a store call 10 s in all.
pub const MAX_WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The query parameter naming how many replicas must acknowledge a write.
pub const WAIT_REPLICAS: &str = "wait_replicas";

/// The query parameter naming how long a write waits for them, in milliseconds.
pub const WAIT_TIMEOUT_MS: &str = "wait_timeout_ms";

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// One server or a cluster, with the URLs the Redis client connects to.
    pub topology: Topology,
    /// What a write needs before it counts.
    pub durability: Durability,
}

/// Where the store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (or a proxy): the URL the client connects to, without the store's parameters.
    Server {
        /// `redis://…` or `rediss://…`.
        url: String,
    },
    /// A Redis Cluster: one client URL per seed node, each with the credentials and the client's
    /// own parameters of the store URL.
    Cluster {
        /// `redis://host:port/…` per seed, in the order given.
        seeds: Vec<String>,
    },
}

/// How many replicas must acknowledge a fence or a commit (Redis `WAIT`) before the store answers
/// that it is done; a write they did not acknowledge in time fails with a backend error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must acknowledge; 0 answers as soon as the master applied the write.
    pub replicas: u32,
    /// How long to wait for them.
    pub timeout: Duration,
}

impl Durability {
    /// Answers once the master applied the write (one server without replicas).
    pub const MASTER_ONLY: Durability = Durability {
        replicas: 0,
        timeout: DEFAULT_WAIT_TIMEOUT,
    };

    /// Waits for `replicas` acknowledgements, at most [`DEFAULT_WAIT_TIMEOUT`].
    pub fn replicas(replicas: u32) -> Durability {
        Durability {
            replicas,
            timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

/// A store URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRedisUrlError {
    /// Not one of the four schemes.
    #[error("the scheme must be redis://, rediss://, redis+cluster:// or rediss+cluster://")]
    Scheme,
    /// No host after the scheme.
    #[error("the URL names no host")]
    NoHost,
    /// `a:1,,b:2`.
    #[error("seed {index} of the cluster URL is empty")]
    EmptySeed {
        /// Its position, from 0.
        index: usize,
    },
    /// Several hosts in a one-server URL.
    #[error("several hosts need a redis+cluster:// URL")]
    SeveralHosts,
    /// A database other than 0 on a cluster.
    #[error("a Redis Cluster has only database 0; the URL's path is {path:?}")]
    ClusterDatabase {
        /// The path given.
        path: String,
    },
    /// A store parameter with an unusable value (never echoes the rest of the URL: it may hold a
    /// password).
    #[error("{name} must be {expected}, got {value:?}")]
    Parameter {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

impl ParseRedisUrlError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Scheme => "scheme",
            Self::NoHost => "no_host",
            Self::EmptySeed { .. } => "empty_seed",
            Self::SeveralHosts => "several_hosts",
            Self::ClusterDatabase { .. } => "cluster_database",
            Self::Parameter { .. } => "parameter",
        }
    }
}

impl FromStr for RedisUrl {
    type Err = ParseRedisUrlError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (scheme, rest) = text.split_once("://").ok_or(ParseRedisUrlError::Scheme)?;
        let (client_scheme, cluster) = match scheme {
            "redis" => ("redis", false),
            "rediss" => ("rediss", false),
            "redis+cluster" => ("redis", true),
            "rediss+cluster" => ("rediss", true),
            _ => return Err(ParseRedisUrlError::Scheme),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query),
            None => (rest, ""),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        // The password may hold '@' (percent-encoded or not): the hosts follow the last one.
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((user_info, hosts)) => (format!("{user_info}@"), hosts),
            None => (String::new(), authority),
        };
        if hosts.is_empty() {
            return Err(ParseRedisUrlError::NoHost);
        }
        let (durability, client_query) = parameters(query, cluster)?;
        let client_query = if client_query.is_empty() {
            String::new()
        } else {
            format!("?{}", client_query.join("&"))
        };
        let topology = if cluster {
            if !matches!(path, "" | "/" | "/0") {
                return Err(ParseRedisUrlError::ClusterDatabase {
                    path: path.to_owned(),
                });
            }
            let seeds = hosts
                .split(',')
                .enumerate()
                .map(|(index, seed)| {
                    if seed.is_empty() {
                        Err(ParseRedisUrlError::EmptySeed { index })
                    } else {
                        Ok(format!(
                            "{client_scheme}://{credentials}{seed}/{client_query}"
                        ))
                    }
                })
                .collect::<Result<_, _>>()?;
            Topology::Cluster { seeds }
        } else {
            if hosts.contains(',') {
                return Err(ParseRedisUrlError::SeveralHosts);
            }
            Topology::Server {
                url: format!("{client_scheme}://{credentials}{hosts}{path}{client_query}"),
            }
        };
        Ok(RedisUrl {
            topology,
            durability,
        })
    }
}

/// The store's parameters out of `query`, and the client's own, in their order.
fn parameters(query: &str, cluster: bool) -> Result<(Durability, Vec<&str>), ParseRedisUrlError> {
    let mut durability = if cluster {
        Durability::replicas(1)
    } else {
        Durability::MASTER_ONLY
    };
    let mut client = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            WAIT_REPLICAS => {
                durability.replicas = value.parse().map_err(|_| ParseRedisUrlError::Parameter {
                    name: WAIT_REPLICAS,
                    value: value.to_owned(),
                    expected: "a number of replicas",
                })?;
            }
            WAIT_TIMEOUT_MS => {
                let millis = value
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_millis)
                    .filter(|t| !t.is_zero() && *t <= MAX_WAIT_TIMEOUT);
                durability.timeout = millis.ok_or_else(|| ParseRedisUrlError::Parameter {
                    name: WAIT_TIMEOUT_MS,
                    value: value.to_owned(),
                    expected: "milliseconds from 1 to 10000",
                })?;
            }
            _ => client.push(pair),
        }
    }
    Ok((durability, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RedisUrl, ParseRedisUrlError> {
        text.parse()
    }

    fn server(url: &str) -> Topology {
        Topology::Server { url: url.into() }
    }

    #[test]
    fn a_redis_url_is_one_server_that_answers_once_its_master_applied_a_write() {
        for url in [
            "redis://127.0.0.1:6379/0",
            "rediss://user:secret@redis.spark:6380",
            "redis://redis",
        ] {
            let parsed = parse(url).unwrap();
            assert_eq!(parsed.topology, server(url));
            assert_eq!(parsed.durability, Durability::MASTER_ONLY);
        }
    }

    #[test]
    fn a_cluster_url_lists_seeds_with_the_credentials_and_waits_for_one_replica() {
        let parsed = parse("redis+cluster://u:p%40ss@10.0.0.1:7000,10.0.0.2:7001/").unwrap();
        assert_eq!(
            parsed.topology,
            Topology::Cluster {
                seeds: vec![
                    "redis://u:p%40ss@10.0.0.1:7000/".into(),
                    "redis://u:p%40ss@10.0.0.2:7001/".into(),
                ]
            }
        );
        assert_eq!(parsed.durability, Durability::replicas(1));
        let tls = parse("rediss+cluster://[::1]:7000/0").unwrap();
        assert_eq!(
            tls.topology,
            Topology::Cluster {
                seeds: vec!["rediss://[::1]:7000/".into()]
            }
        );
    }

    #[test]
    fn the_store_parameters_are_taken_out_and_the_clients_are_passed_on() {
        let parsed =
            parse("redis+cluster://a:1,b:2?protocol=resp3&wait_replicas=2&wait_timeout_ms=250")
                .unwrap();
        assert_eq!(
            parsed.durability,
            Durability {
                replicas: 2,
                timeout: Duration::from_millis(250)
            }
        );
        assert_eq!(
            parsed.topology,
            Topology::Cluster {
                seeds: vec![
                    "redis://a:1/?protocol=resp3".into(),
                    "redis://b:2/?protocol=resp3".into()
                ]
            }
        );
        let single = parse("redis://r:6379/2?wait_replicas=1").unwrap();
        assert_eq!(single.topology, server("redis://r:6379/2"));
        assert_eq!(single.durability.replicas, 1);
        let off = parse("redis+cluster://a:1?wait_replicas=0").unwrap();
        assert_eq!(off.durability.replicas, 0, "the check can be turned off");
    }

    #[test]
    fn unusable_urls_are_refused_with_the_reason_and_without_the_password() {
        for (bad, kind) in [
            ("", "scheme"),
            ("redis", "scheme"),
            ("http://redis:6379", "scheme"),
            ("redis-cluster://a:1", "scheme"),
            ("redis://", "no_host"),
            ("redis:///0", "no_host"),
            ("redis://user:pw@/0", "no_host"),
            ("redis+cluster://a:1,,b:2", "empty_seed"),
            ("redis://a:1,b:2", "several_hosts"),
            ("redis+cluster://a:1/3", "cluster_database"),
            ("redis+cluster://a:1?wait_replicas=all", "parameter"),
            ("redis+cluster://a:1?wait_timeout_ms=0", "parameter"),
            ("redis+cluster://a:1?wait_timeout_ms=60000", "parameter"),
        ] {
            assert_eq!(parse(bad).map_err(|e| e.kind()), Err(kind), "{bad:?}");
        }
        let err = parse("redis+cluster://u:hunter2@a:1?wait_replicas=x").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
