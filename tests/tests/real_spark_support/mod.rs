//! Shared by the real-Spark tests: the sandbox with kubesim's Spark image, Spark's options for
//! a small run, waiting for a driver, and the memory a run takes.
#![allow(dead_code)] // each test crate uses a different part

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use kube::runtime::wait::await_condition;
use sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

/// Longest one real run may take, submission to the driver's exit (a cold JVM pair on two
/// shared cores takes about a minute).
pub const RUN_LIMIT: Duration = Duration::from_secs(240);

/// The driver's container, as Spark names it.
pub const DRIVER_CONTAINER: &str = "spark-kubernetes-driver";

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

pub async fn real_spark_sandbox() -> Sandbox {
    init_tracing();
    let config = SandboxConfig::real_spark(env!("CARGO_BIN_EXE_sandbox").into());
    Sandbox::start(config)
        .await
        .expect("the real-Spark sandbox starts (root, Java 17 and pyspark are needed)")
}

/// Spark's own options for the job: the image kubesim maps to pyspark, small memory, one
/// executor. The driver reaches the API server as in a cluster: Spark's default
/// `https://kubernetes.default.svc`, with the service-account CA and token.
pub fn spark_confs() -> Vec<(&'static str, &'static str)> {
    vec![
        ("spark.kubernetes.container.image", "apache/spark:4.3.0"),
        ("spark.executor.instances", "1"),
        // Spark 4.3 hands executors the driver pod's IP by default; the Service's name makes
        // them resolve the headless Service (kubesim's hosts file) as older Sparks always did.
        ("spark.kubernetes.executor.useDriverPodIP", "false"),
        // The account the sandbox grants what a driver does (RBAC applies to pods' requests).
        (
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            sandbox::driver_account::NAME,
        ),
        ("spark.driver.memory", "512m"),
        ("spark.executor.memory", "512m"),
    ]
}

/// [`spark_confs`] as a SparkApplication's `sparkConf`, without what its spec says itself (image,
/// memory, instances).
pub fn app_spark_conf() -> serde_json::Map<String, Value> {
    spark_confs()
        .into_iter()
        .filter(|(k, _)| !k.ends_with(".memory") && !k.ends_with(".instances"))
        .filter(|(k, _)| {
            *k != "spark.kubernetes.container.image"
                && *k != "spark.kubernetes.authenticate.driver.serviceAccountName"
        })
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// The resident memory of this process's descendants (every pod's processes), sampled every
/// 200 ms; the peak is the most they held at once.
pub struct PeakMemory {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakMemory {
    pub fn start() -> PeakMemory {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(descendants_rss_bytes(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        PeakMemory {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the peak in MiB.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed) / (1024 * 1024)
    }
}

/// Sum of `VmRSS` over the descendants of this process.
fn descendants_rss_bytes() -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut parent_of = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // `pid (comm) state ppid ...`; the name may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut family = BTreeSet::from([std::process::id()]);
    // Bounded: each pass adds at least one process or stops.
    for _ in 0..parent_of.len() {
        let before = family.len();
        for (pid, ppid) in &parent_of {
            if family.contains(ppid) {
                family.insert(*pid);
            }
        }
        if family.len() == before {
            break;
        }
    }
    family.remove(&std::process::id());
    family
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

/// Waits (on the pod's watch) until the driver container has terminated; its exit code.
pub async fn driver_exit_code(pods: &Api<Pod>, name: &str) -> i32 {
    let terminated = |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.name == DRIVER_CONTAINER)
            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    let pod = tokio::time::timeout(
        RUN_LIMIT,
        await_condition(pods.clone(), name, move |p: Option<&Pod>| {
            terminated(p).is_some()
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("the driver {name} did not finish within {RUN_LIMIT:?}"))
    .expect("watching the driver pod");
    terminated(pod.as_ref()).expect("terminated")
}

/// The driver container's log.
pub async fn driver_log(sandbox: &Sandbox, pod: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    pods.logs(
        pod,
        &LogParams {
            container: Some(DRIVER_CONTAINER.into()),
            ..LogParams::default()
        },
    )
    .await
    .unwrap_or_default()
}

pub fn report(path: &str, started: Instant, peak_mib: u64) {
    eprintln!(
        "real spark run via {path}: wall {:.1} s (submission to driver exit), peak memory of the pods' processes {peak_mib} MiB",
        started.elapsed().as_secs_f64()
    );
}

/// Waits (on watch events, bounded by [`RUN_LIMIT`]) until the SparkApplication `name` reaches a
/// terminal state, and returns it.
pub async fn await_terminal(
    apps: &Api<operator::crd::SparkApplication>,
    name: &str,
) -> operator::crd::SparkApplication {
    use operator::crd::{ApplicationStateType, SparkApplication};
    let terminal = |a: Option<&SparkApplication>| {
        a.and_then(|a| a.status.as_ref())
            .is_some_and(|s| ApplicationStateType::is_terminal(s.app_state.state))
    };
    tokio::time::timeout(RUN_LIMIT, await_condition(apps.clone(), name, terminal))
        .await
        .expect("the application finishes within the run's bound")
        .expect("watching the application")
        .expect("the application exists")
}
