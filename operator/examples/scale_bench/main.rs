//! Scale benchmark of the operator: N SparkApplications on kubesim, run to completion, for the
//! real watch-based `operator run` and, side by side, a polling variant (a LIST per interval).
//!
//!     cargo build --release -p operator -p submitter -p kubesim
//!     cargo run --release -p operator --example scale_bench -- [--apps 500] \
//!         [--variants watch,poll] [--concurrency 32] [--run-seconds 0] [--max-seconds 900]
//!
//! Per variant and app count: a fresh kubesim (in this process: its request counters and store
//! are read directly), `submitter serve` (release binary, mTLS with a throwaway rcgen PKI), and
//! the operator as its own process (`operator run`, or this example re-executed as
//! `poll-operator`), so its peak resident memory (VmHWM) is its own. The CRD is installed by
//! the bench, the counters reset once the operator is ready; then the apps are created with
//! bounded concurrency, and the bench waits (bounded) until every app is COMPLETED or FAILED.
//! Reported: drain time (first create → all terminal), apps/s, API requests per app by verb
//! (the bench's own creates subtracted), writes per app split by who makes them, the
//! requests of an idle window after the drain, reconcile latency p50/p99 (the operator's
//! `/metrics` histogram), and the operator's peak RSS.

mod poll;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use kube::api::{Api, PostParams};
use kubesim::{Cluster, ClusterConfig};
use operator::crd::SparkApplication;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use serde_json::json;
use submitter::client::{ClientConfig, SubmitterClient};

const OPERATOR_IDENTITY: &str = "spark-operator.spark.svc";
const NAMESPACE: &str = "default";

#[derive(Debug, Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    #[command(flatten)]
    bench: Args,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// The polling operator (started by the bench as a child process).
    PollOperator(poll::PollArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Variant {
    /// `operator run`: watches and caches.
    Watch,
    /// A LIST of apps and driver pods per interval, same decide and effects.
    Poll,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Watch => "watch",
            Variant::Poll => "poll",
        }
    }
}

#[derive(Debug, clap::Args)]
struct Args {
    /// Applications per run; several (comma-separated) show how costs grow.
    #[arg(long, env = "BENCH_APPS", value_delimiter = ',', default_value = "500")]
    apps: Vec<usize>,
    /// Variants to run, one after the other, each on a fresh cluster.
    #[arg(
        long,
        env = "BENCH_VARIANTS",
        value_delimiter = ',',
        default_value = "watch,poll"
    )]
    variants: Vec<Variant>,
    /// Concurrent app creations.
    #[arg(long, env = "BENCH_CONCURRENCY", default_value_t = 32)]
    concurrency: usize,
    /// Apps created per batch; the next batch starts when the previous one is created.
    #[arg(long, env = "BENCH_BATCH", default_value_t = 1000)]
    batch: usize,
    /// `kubesim.io/run-seconds` of every driver.
    #[arg(long, env = "BENCH_RUN_SECONDS", default_value = "0")]
    run_seconds: String,
    /// The polling variant's interval.
    #[arg(long, env = "BENCH_POLL_INTERVAL_MS", default_value_t = 1000)]
    poll_interval_ms: u64,
    /// Bound on one run (creation and drain).
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 900)]
    max_seconds: u64,
    /// Requests counted after the drain, with nothing left to do.
    #[arg(long, env = "BENCH_IDLE_SECONDS", default_value_t = 10)]
    idle_seconds: u64,
    /// `RUST_LOG` of the operator and the submitter (logs go to files in the temp dir).
    #[arg(long, env = "BENCH_LOG", default_value = "warn")]
    log: String,
    #[arg(long, env = "OPERATOR_BIN")]
    operator_bin: Option<PathBuf>,
    #[arg(long, env = "SUBMITTER_BIN")]
    submitter_bin: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.role {
        Some(Role::PollOperator(args)) => poll::main(args),
        None => bench(cli.bench),
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// Child processes, killed on drop.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    policy: PathBuf,
}

fn pki(dir: &Path) -> anyhow::Result<Pki> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "scale bench ca");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
    let leaf = |sans: Vec<SanType>, usage| -> anyhow::Result<(String, String)> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = sans;
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let server = leaf(
        vec![
            SanType::DnsName("localhost".try_into()?),
            SanType::IpAddress("127.0.0.1".parse()?),
        ],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let client = leaf(
        vec![SanType::DnsName(OPERATOR_IDENTITY.try_into()?)],
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    Ok(Pki {
        ca: write("ca.crt", &issuer.pem())?,
        server_cert: write("tls.crt", &server.0)?,
        server_key: write("tls.key", &server.1)?,
        client_cert: write("operator.crt", &client.0)?,
        client_key: write("operator.key", &client.1)?,
        policy: write(
            "policy.yaml",
            &format!(
                "clients:\n  - identity: {OPERATOR_IDENTITY}\n    namespaces: [\"*\"]\n    serviceAccounts: [\"*\"]\n"
            ),
        )?,
    })
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A `/proc/<pid>/status` field in KiB.
fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU seconds of a process so far (`/proc/<pid>/stat`, at 100 ticks/s).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / 100.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A plain HTTP/1.1 GET on loopback (the probe server); `None` on any failure.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Some((code, body))
}

/// The reconcile-duration histogram from `/metrics`: (p50, p99, count), the percentiles as
/// the upper bound of the bucket they fall in.
fn reconcile_percentiles(metrics: &str) -> (f64, f64, u64) {
    let prefix = "spark_operator_reconcile_duration_seconds_bucket{le=\"";
    let mut buckets: Vec<(f64, u64)> = metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(prefix)?;
            let (le, rest) = rest.split_once('"')?;
            let count = rest.trim_start_matches('}').split_whitespace().next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map_or(0, |b| b.1);
    let at = |p: f64| {
        let want = (p * total as f64).ceil() as u64;
        buckets
            .iter()
            .find(|(_, c)| *c >= want.max(1))
            .map_or(f64::NAN, |(le, _)| *le)
    };
    (at(0.50), at(0.99), total)
}

fn metric_value(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.split_whitespace().last()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Request counts keyed by (verb, resource), watches counted under `watch`.
type Counts = BTreeMap<(String, String), u64>;

fn counts(cluster: &Cluster) -> Counts {
    let mut out = Counts::new();
    for row in cluster.control.counts() {
        let verb = if row.watch {
            "watch".to_owned()
        } else {
            row.verb
        };
        *out.entry((verb, row.resource)).or_default() += row.count;
    }
    out
}

fn diff(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

const VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

fn by_verb(counts: &Counts) -> BTreeMap<&str, u64> {
    let mut out = BTreeMap::new();
    for ((verb, _), n) in counts {
        let verb = VERBS
            .iter()
            .find(|v| **v == verb)
            .copied()
            .unwrap_or("other");
        *out.entry(verb).or_default() += n;
    }
    out
}

/// Who makes a request, by resource and verb: the submitter creates the driver pod and its
/// companions; the operator owns everything about SparkApplications, events and the rest of
/// the driver pod verbs.
fn is_submitter(verb: &str, resource: &str) -> bool {
    matches!(resource, "configmaps" | "services" | "networkpolicies")
        || (resource == "pods" && verb == "create")
}

struct Figures {
    variant: Variant,
    apps: usize,
    created: usize,
    completed: usize,
    failed: usize,
    create_secs: f64,
    drain_secs: f64,
    counts: Counts,
    idle: Counts,
    idle_secs: f64,
    p50: f64,
    p99: f64,
    /// Per app, first seen (ADDED) to COMPLETED or FAILED, sorted.
    latencies: Vec<Duration>,
    reconciles: u64,
    submissions: u64,
    peak_rss_kib: u64,
    operator_cpu: f64,
}

fn bench(args: Args) -> anyhow::Result<()> {
    let operator_bin = args
        .operator_bin
        .clone()
        .unwrap_or_else(|| target_dir().join("release/operator"));
    let submitter_bin = args
        .submitter_bin
        .clone()
        .unwrap_or_else(|| target_dir().join("release/submitter"));
    for bin in [&operator_bin, &submitter_bin] {
        if !bin.exists() {
            bail!(
                "{} is missing: cargo build --release -p operator -p submitter -p kubesim",
                bin.display()
            );
        }
    }
    println!(
        "scale bench: apps {:?}, variants {:?}, create concurrency {}, batch {}, driver run-seconds {}, poll interval {} ms; {} cores",
        args.apps,
        args.variants.iter().map(|v| v.name()).collect::<Vec<_>>(),
        args.concurrency,
        args.batch,
        args.run_seconds,
        args.poll_interval_ms,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let mut results = Vec::new();
    for &apps in &args.apps {
        for &variant in &args.variants {
            let figures = runtime
                .block_on(run_one(&args, variant, apps, &operator_bin, &submitter_bin))
                .with_context(|| format!("{} with {apps} apps", variant.name()))?;
            print_one(&figures);
            results.push(figures);
        }
    }
    print_table(&results);
    Ok(())
}

async fn run_one(
    args: &Args,
    variant: Variant,
    apps: usize,
    operator_bin: &Path,
    submitter_bin: &Path,
) -> anyhow::Result<Figures> {
    let bound = Duration::from_secs(args.max_seconds);
    let dir = tempfile::tempdir()?;
    let pki = pki(dir.path())?;
    let cluster = Cluster::start(ClusterConfig {
        // Every app makes ~20 events; watches must be able to resume without a 410 re-list.
        history: (apps * 40).max(100_000),
        ..ClusterConfig::default()
    })
    .await?;
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig)?;
    let client = cluster.client()?;
    let mut processes = Processes(Vec::new());

    let port = free_port()?;
    let log = std::fs::File::create(dir.path().join("submitter.log"))?;
    processes.0.push(
        Command::new(submitter_bin)
            .arg("serve")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--tls-cert")
            .arg(&pki.server_cert)
            .arg("--tls-key")
            .arg(&pki.server_key)
            .arg("--client-ca")
            .arg(&pki.ca)
            .arg("--policy")
            .arg(&pki.policy)
            .env("RUST_LOG", &args.log)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", submitter_bin.display()))?,
    );
    let submitter_url = format!("https://localhost:{port}");
    let mut probe = ClientConfig::new(format!("{submitter_url}/api/v1/spark-submit"));
    probe.ca = Some(pki.ca.clone());
    probe.cert = Some(pki.client_cert.clone());
    probe.key = Some(pki.client_key.clone());
    SubmitterClient::new(probe)?
        .wait_for_connection(Duration::from_secs(30))
        .await
        .context("the submitter did not come up")?;

    operator::controller::install_crd(&client).await?;

    let probe_port = free_port()?;
    let probe_addr: SocketAddr = format!("127.0.0.1:{probe_port}").parse()?;
    let log_path = dir.path().join("operator.log");
    let log = std::fs::File::create(&log_path)?;
    let mut command = match variant {
        Variant::Watch => {
            let mut c = Command::new(operator_bin);
            c.arg("run").args(["--install-crd", "false"]);
            c
        }
        Variant::Poll => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("poll-operator")
                .args(["--interval-ms", &args.poll_interval_ms.to_string()]);
            c
        }
    };
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--submitter-url", &submitter_url])
        .arg("--tls-cert")
        .arg(&pki.client_cert)
        .arg("--tls-key")
        .arg(&pki.client_key)
        .arg("--ca")
        .arg(&pki.ca)
        .args(["--probe-listen", &probe_addr.to_string()])
        .env("RUST_LOG", &args.log)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let operator = command.spawn().context("cannot start the operator")?;
    let pid = operator.id();
    processes.0.push(operator);
    let ready_by = Instant::now() + Duration::from_secs(60);
    while http_get(probe_addr, "/readyz").map(|r| r.0) != Some(200) {
        if Instant::now() > ready_by {
            bail!(
                "the operator did not become ready; its log: {}",
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let idle_rss = proc_kib(pid, "VmRSS").unwrap_or(0);
    let cpu_before = cpu_seconds(pid);
    cluster.control.reset_counts();
    let tracker = Tracker::new(&cluster)?;

    // Create: `concurrency` tasks take the next index, batch by batch.
    let api: Api<SparkApplication> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    let deadline = start + bound;
    // Drain: follow kubesim's event log behind the API (so the bench adds no requests), from
    // before the first create so that no event is missed.
    let drained = tokio::spawn(drain(tracker, apps, deadline, move |elapsed, done| {
        eprintln!(
            "  {} {apps}: {:.0} s, {done} terminal, operator VmRSS {:.0} MiB",
            variant.name(),
            elapsed.as_secs_f64(),
            mib(proc_kib(pid, "VmRSS").unwrap_or(0))
        );
    }));
    let created = Arc::new(AtomicUsize::new(0));
    let batch = args.batch.max(1);
    for first in (0..apps).step_by(batch) {
        let end = (first + batch).min(apps);
        let next = Arc::new(AtomicUsize::new(first));
        let mut tasks = Vec::new();
        for _ in 0..args.concurrency.max(1) {
            let (api, next, created) = (api.clone(), next.clone(), created.clone());
            let run_seconds = args.run_seconds.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end || Instant::now() > deadline {
                        return Ok::<_, anyhow::Error>(());
                    }
                    api.create(&PostParams::default(), &app(i, &run_seconds)?)
                        .await
                        .with_context(|| format!("cannot create app {i}"))?;
                    created.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for task in tasks {
            task.await??;
        }
    }
    let created = created.load(Ordering::Relaxed);
    let create_secs = start.elapsed().as_secs_f64();

    let (completed, failed, latencies) = drained.await?;
    let drain_secs = start.elapsed().as_secs_f64();
    let mut drained = counts(&cluster);
    // The bench's own creates are not the operator's.
    if let Some(n) = drained.get_mut(&("create".to_owned(), "sparkapplications".to_owned())) {
        *n -= created as u64;
    }
    let operator_cpu = cpu_seconds(pid) - cpu_before;

    let idle_start = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let idle = diff(&counts(&cluster), &counts_with_bench(&drained, created));
    let idle_secs = idle_start.elapsed().as_secs_f64();

    let metrics = http_get(probe_addr, "/metrics").map_or_else(String::new, |r| r.1);
    let (p50, p99, reconciles) = reconcile_percentiles(&metrics);
    let submissions = metric_value(&metrics, "spark_operator_submissions_total");
    let peak_rss_kib = proc_kib(pid, "VmHWM").unwrap_or(0);
    eprintln!(
        "  {} {apps}: operator VmRSS idle before the run {:.1} MiB; logs in {}",
        variant.name(),
        mib(idle_rss),
        dir.path().display()
    );
    drop(processes);
    drop(cluster);
    Ok(Figures {
        variant,
        apps,
        created,
        completed,
        failed,
        create_secs,
        drain_secs,
        counts: drained,
        idle,
        idle_secs,
        p50,
        p99,
        latencies,
        reconciles,
        submissions,
        peak_rss_kib,
        operator_cpu,
    })
}

/// Follows SparkApplications in kubesim's event log: when each was added and when it reached a
/// terminal state.
struct Tracker {
    live: tokio::sync::broadcast::Receiver<Arc<kubesim::store::Event>>,
    added: HashMap<String, Instant>,
    done: HashMap<String, (bool, Duration)>,
}

impl Tracker {
    fn new(cluster: &Cluster) -> anyhow::Result<Tracker> {
        let subscription = cluster
            .store
            .subscribe(&|_, _, _| false, kubesim::store::WatchFrom::Now)
            .map_err(|e| anyhow::anyhow!("cannot subscribe to kubesim's events: {e:?}"))?;
        Ok(Tracker {
            live: subscription.live,
            added: HashMap::new(),
            done: HashMap::new(),
        })
    }

    fn on_event(&mut self, event: &kubesim::store::Event) {
        if event.plural != "sparkapplications" {
            return;
        }
        let Some(name) = event.object["metadata"]["name"].as_str() else {
            return;
        };
        let now = Instant::now();
        let added = *self.added.entry(name.to_owned()).or_insert(now);
        let completed = match event.object["status"]["applicationState"]["state"].as_str() {
            Some("COMPLETED") => true,
            Some("FAILED") => false,
            _ => return,
        };
        self.done
            .entry(name.to_owned())
            .or_insert((completed, now - added));
    }
}

/// Waits (bounded by `deadline`) until `expected` apps are terminal; (completed, failed,
/// sorted latencies). `progress` is called every 30 s.
async fn drain(
    mut tracker: Tracker,
    expected: usize,
    deadline: Instant,
    progress: impl Fn(Duration, usize) + Send + 'static,
) -> (usize, usize, Vec<Duration>) {
    use tokio::sync::broadcast::error::RecvError;
    let start = Instant::now();
    let mut last_report = Instant::now();
    while tracker.done.len() < expected && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), tracker.live.recv()).await {
            Ok(Ok(event)) => tracker.on_event(&event),
            Ok(Err(RecvError::Lagged(missed))) => {
                eprintln!("  the bench's event follower lagged by {missed} events");
            }
            Ok(Err(RecvError::Closed)) => break,
            Err(_) => {}
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            last_report = Instant::now();
            progress(start.elapsed(), tracker.done.len());
        }
    }
    let completed = tracker.done.values().filter(|(ok, _)| *ok).count();
    let mut latencies: Vec<Duration> = tracker.done.values().map(|(_, d)| *d).collect();
    latencies.sort();
    (completed, tracker.done.len() - completed, latencies)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn counts_with_bench(counts: &Counts, created: usize) -> Counts {
    let mut out = counts.clone();
    *out.entry(("create".to_owned(), "sparkapplications".to_owned()))
        .or_default() += created as u64;
    out
}

/// One SparkApplication whose driver exits 0 after `run_seconds`.
fn app(i: usize, run_seconds: &str) -> anyhow::Result<SparkApplication> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": format!("app-{i:05}"), "namespace": NAMESPACE},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": "spark:4.0.0",
            "sparkVersion": "4.0.0",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": {"cores": 1, "memory": "512m",
                       "annotations": {"kubesim.io/run-seconds": run_seconds}},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }))?)
}

fn per_app(n: u64, apps: usize) -> f64 {
    n as f64 / apps.max(1) as f64
}

fn print_one(f: &Figures) {
    println!(
        "\n== {} with {} apps: {} created in {:.1} s, {} completed, {} failed, drained in {:.1} s ({:.1} apps/s)",
        f.variant.name(),
        f.apps,
        f.created,
        f.create_secs,
        f.completed,
        f.failed,
        f.drain_secs,
        f.completed as f64 / f.drain_secs
    );
    println!(
        "requests from first create to drain (bench's creates excluded), by verb and resource:"
    );
    for ((verb, resource), n) in &f.counts {
        println!(
            "  {verb:>8} {resource:<32} {n:>9}  {:>7.2}/app",
            per_app(*n, f.created)
        );
    }
    println!(
        "idle {:.0} s after the drain: {:?}",
        f.idle_secs,
        f.idle
            .iter()
            .map(|((v, r), n)| format!("{v} {r} {n}"))
            .collect::<Vec<_>>()
    );
    println!(
        "reconciles {} (p50 <= {:.0} ms, p99 <= {:.0} ms by histogram bucket), submissions {}, operator peak RSS {:.1} MiB, operator CPU {:.1} s",
        f.reconciles,
        f.p50 * 1e3,
        f.p99 * 1e3,
        f.submissions,
        mib(f.peak_rss_kib),
        f.operator_cpu
    );
    println!(
        "app created -> terminal: p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        percentile(&f.latencies, 50.0).as_secs_f64(),
        percentile(&f.latencies, 99.0).as_secs_f64(),
        f.latencies
            .last()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
    );
}

fn print_table(results: &[Figures]) {
    println!(
        "\n| variant | apps | drain s | apps/s | GET/app | LIST/app | WATCH/app | POST/app | PUT/app | PATCH/app | DELETE/app | operator writes/app | submitter writes/app | idle LIST/s | reconcile p50 / p99 | app created→done p50 / p99 | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for f in results {
        let verbs = by_verb(&f.counts);
        let v = |verb: &str| per_app(verbs.get(verb).copied().unwrap_or(0), f.created);
        let (mut operator_writes, mut submitter_writes) = (0, 0);
        for ((verb, resource), n) in &f.counts {
            if WRITES.contains(&verb.as_str()) {
                if is_submitter(verb, resource) {
                    submitter_writes += n;
                } else {
                    operator_writes += n;
                }
            }
        }
        let idle_lists: u64 = f
            .idle
            .iter()
            .filter(|((verb, _), _)| verb == "list")
            .map(|(_, n)| n)
            .sum();
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.3} | {:.4} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.0} / {:.0} ms | {:.1} / {:.1} s | {:.1} |",
            f.variant.name(),
            f.apps,
            f.drain_secs,
            f.completed as f64 / f.drain_secs,
            v("get"),
            v("list"),
            v("watch"),
            v("create"),
            v("update"),
            v("patch"),
            v("delete"),
            per_app(operator_writes, f.created),
            per_app(submitter_writes, f.created),
            idle_lists as f64 / f.idle_secs.max(1e-9),
            f.p50 * 1e3,
            f.p99 * 1e3,
            percentile(&f.latencies, 50.0).as_secs_f64(),
            percentile(&f.latencies, 99.0).as_secs_f64(),
            mib(f.peak_rss_kib)
        );
    }
    for apps in results
        .iter()
        .map(|f| f.apps)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let find = |v: Variant| results.iter().find(|f| f.apps == apps && f.variant == v);
        if let (Some(w), Some(p)) = (find(Variant::Watch), find(Variant::Poll)) {
            let lists = |f: &Figures| by_verb(&f.counts).get("list").copied().unwrap_or(0);
            let total = |f: &Figures| f.counts.values().sum::<u64>();
            println!(
                "ratio poll/watch at {apps} apps: LIST requests {} vs {}, all requests per app {:.2} vs {:.2} ({:.2}x), drain time {:.2}x, peak RSS {:.2}x",
                lists(p),
                lists(w),
                per_app(total(p), p.created),
                per_app(total(w), w.created),
                per_app(total(p), p.created) / per_app(total(w), w.created).max(1e-9),
                p.drain_secs / w.drain_secs,
                p.peak_rss_kib as f64 / w.peak_rss_kib.max(1) as f64
            );
        }
    }
}
