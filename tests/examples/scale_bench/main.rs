//! Scale benchmark of the operator: N SparkApplications on kubesim, run to completion, for the
//! real watch-based `operator run` and, side by side, a polling variant (a LIST per interval).
//!
//!     cargo build --release -p operator --bin operator
//!     cargo build --release -p sandbox --example scale_bench
//!     cargo build --release -p submitter --bin submitter
//!     target/release/examples/scale_bench [--apps 1000,3000,10000] [--variants watch,poll] \
//!         [--create-rate 50] [--concurrency 32] [--run-seconds 0] [--max-seconds 900] \
//!         [--submission-retries 0] [--submitter-max-concurrency N] [--log-dir DIR]
//!
//! `--create-rate 0` (the default) creates every app at once (a burst: the drain measures
//! throughput); a rate paces creations (the drain then measures per-app cost and latency at
//! that arrival rate while N apps accumulate).
//!
//! Per variant and app count: a fresh kubesim (in this process: its request counters and event
//! log are read directly, so the bench's observation adds no requests), `submitter serve`
//! (release binary, mTLS with a throwaway rcgen PKI), and the operator as its own process
//! (`operator run`, or this example re-executed as `poll-operator`), so its peak resident
//! memory (VmHWM) is its own. The bench installs the CRD and resets the counters once the
//! operator is ready; then it creates the apps with bounded concurrency and waits (bounded by
//! `--max-seconds` from the first create) until every app is terminal. Drivers are scripted
//! kubesim pods (`kubesim.io/run-seconds`): no real processes.
//!
//! Reported: drain time (first create → all terminal), apps/s, API requests per app by verb
//! (the bench's own creates subtracted), writes per app split by who makes them, the requests
//! of an idle window after the drain, latency from creation to SUBMITTED and to a terminal state
//! (p50/p99, from kubesim's event log), the operator's reconcile durations (its `/metrics`
//! histogram), the operator's peak RSS and CPU, the submitter's peak RSS, and the poll/watch
//! ratios.

mod poll;
mod report;
mod track;

use std::collections::BTreeMap;
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

use serde_json::json;
use submitter_client::{ClientConfig, SubmitterClient};

use report::Figures;
use track::Tracker;

const OPERATOR_IDENTITY: &str = "spark-operator.spark.svc";

/// The user the operator acts as towards kubesim (impersonated, in `system:masters` like the
/// bench's own admin): kubesim's authorization journal then tells its requests from the
/// submitter's, which share every resource the operator writes (Services, ConfigMaps).
const OPERATOR_USER: &str = "scale-bench-operator";
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
    /// Creations per second (0: as fast as `concurrency` allows, a burst).
    #[arg(long, env = "BENCH_CREATE_RATE", default_value_t = 0.0)]
    create_rate: f64,
    /// Apps created per batch; the next batch starts when the previous one is created.
    #[arg(long, env = "BENCH_BATCH", default_value_t = 1000)]
    batch: usize,
    /// `kubesim.io/run-seconds` of every driver.
    #[arg(long, env = "BENCH_RUN_SECONDS", default_value = "0")]
    run_seconds: String,
    /// `spec.restartPolicy.onSubmissionFailureRetries` of every app, with type
    /// `OnInfrastructureFailure` (only an unavailable or overloaded submitter is retried) and a
    /// 1 s interval; 0: type `Never`, the default, so a refused submission fails the app.
    #[arg(long, env = "BENCH_SUBMISSION_RETRIES", default_value_t = 0)]
    submission_retries: i32,
    /// `submitter serve --max-concurrency` (requests beyond it get 503 SUBMITTER_OVERLOADED);
    /// default: the submitter's own default.
    #[arg(long, env = "BENCH_SUBMITTER_MAX_CONCURRENCY")]
    submitter_max_concurrency: Option<usize>,
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
    /// Keep the operator's and the submitter's logs here (default: a temporary folder,
    /// removed after the run).
    #[arg(long, env = "BENCH_LOG_DIR")]
    log_dir: Option<PathBuf>,
    #[arg(long, env = "OPERATOR_BIN")]
    operator_bin: Option<PathBuf>,
    #[arg(long, env = "SUBMITTER_BIN")]
    submitter_bin: Option<PathBuf>,
    /// Also write every run's figures as a JSON array here (read by `cargo run -p bench`).
    #[arg(long, env = "BENCH_JSON")]
    json: Option<PathBuf>,
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

/// A counter family from `/metrics`, by its (single) label's value.
fn metric_by_label(metrics: &str, name: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let label = labels
            .split_once('"')
            .and_then(|(_, v)| v.split_once('"'))
            .map_or("", |(v, _)| v);
        if let Ok(value) = value.parse::<f64>() {
            *out.entry(label.to_owned()).or_default() += value as u64;
        }
    }
    out
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

/// The operator's requests, keyed as [`counts`], from kubesim's authorization journal (the
/// impersonation checks left out).
fn operator_counts(cluster: &Cluster) -> Counts {
    let mut out = Counts::new();
    for row in cluster.control.authz() {
        if row.user == OPERATOR_USER && row.verb != "impersonate" {
            *out.entry((row.verb, row.resource)).or_default() += row.count;
        }
    }
    out
}

/// The kubeconfig `operator_kubeconfig` writes: the cluster's, acting as [`OPERATOR_USER`].
fn operator_kubeconfig(cluster: &Cluster) -> anyhow::Result<String> {
    let text = cluster.kubeconfig();
    let anonymous = "  user: {}\n";
    if !text.contains(anonymous) {
        bail!("kubesim's kubeconfig has no credential-less user to act as the operator: {text}");
    }
    Ok(text.replace(
        anonymous,
        &format!("  user: {{as: {OPERATOR_USER}, as-groups: [system:masters]}}\n"),
    ))
}

fn diff(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
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
                "{} is missing: cargo build --release -p operator --bin operator --example scale_bench && cargo build --release -p submitter --bin submitter",
                bin.display()
            );
        }
    }
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    println!(
        "scale bench: apps {:?}, variants {:?}, create concurrency {}, batch {}, driver run-seconds {}, poll interval {} ms, bound {} s per run; {} cores",
        args.apps,
        args.variants.iter().map(|v| v.name()).collect::<Vec<_>>(),
        args.concurrency,
        args.batch,
        args.run_seconds,
        args.poll_interval_ms,
        args.max_seconds,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let mut results = Vec::new();
    for &apps in &args.apps {
        for &variant in &args.variants {
            // Ctrl-C drops the run, and with it (Processes) the operator and the submitter.
            let figures = runtime
                .block_on(async {
                    tokio::select! {
                        figures = run_one(&args, variant, apps, &operator_bin, &submitter_bin) => figures,
                        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
                    }
                })
                .with_context(|| format!("{} with {apps} apps", variant.name()))?;
            report::print_one(&figures);
            results.push(figures);
        }
    }
    report::print_tables(&results);
    if let Some(path) = &args.json {
        let runs: Vec<serde_json::Value> = results.iter().map(report::to_json).collect();
        std::fs::write(path, serde_json::Value::from(runs).to_string())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Bound on one API call or start-up step of the bench itself.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

async fn run_one(
    args: &Args,
    variant: Variant,
    apps: usize,
    operator_bin: &Path,
    submitter_bin: &Path,
) -> anyhow::Result<Figures> {
    let bound = Duration::from_secs(args.max_seconds);
    let dir = tempfile::tempdir()?;
    let log_dir = args
        .log_dir
        .clone()
        .unwrap_or_else(|| dir.path().to_owned());
    let log_file = |who: &str| -> anyhow::Result<(PathBuf, std::fs::File)> {
        let path = log_dir.join(format!("{}-{apps}-{who}.log", variant.name()));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok((path, file))
    };
    let pki = sandbox::certs::PkiFiles::write(dir.path(), "scale bench ca", OPERATOR_IDENTITY)?;
    let cluster = Cluster::start(ClusterConfig {
        // ~20 events per app; watches (and the bench's follower) resume without a 410 re-list.
        history: (apps * 40).max(100_000),
        ..ClusterConfig::default()
    })
    .await?;
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig)?;
    let operator_kubeconfig_path = dir.path().join("operator-kubeconfig");
    std::fs::write(&operator_kubeconfig_path, operator_kubeconfig(&cluster)?)?;
    let client = cluster.client()?;
    let mut processes = Processes(Vec::new());

    let port = free_port()?;
    let (submitter_log, log) = log_file("submitter")?;
    let submitter = Command::new(submitter_bin)
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
        .args(
            args.submitter_max_concurrency
                .map(|n| ["--max-concurrency".to_owned(), n.to_string()])
                .iter()
                .flatten(),
        )
        .env("RUST_LOG", &args.log)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", submitter_bin.display()))?;
    let submitter_pid = submitter.id();
    processes.0.push(submitter);
    let submitter_url = format!("https://localhost:{port}");
    let mut probe = ClientConfig::new(format!("{submitter_url}/api/v1/spark-submit"));
    probe.ca = Some(pki.ca.clone());
    probe.cert = Some(pki.client_cert.clone());
    probe.key = Some(pki.client_key.clone());
    SubmitterClient::new(probe)?
        .wait_for_connection(Duration::from_secs(30))
        .await
        .with_context(|| {
            format!(
                "the submitter did not come up; its log: {}",
                submitter_log.display()
            )
        })?;

    tokio::time::timeout(STEP_TIMEOUT, operator::controller::install_crd(&client))
        .await
        .context("installing the CRD timed out")??;

    let probe_addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let (operator_log, log) = log_file("operator")?;
    let mut command = match variant {
        Variant::Watch => {
            let mut c = Command::new(operator_bin);
            c.arg("run").args(["--install-crd", "false"]);
            c
        }
        Variant::Poll => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("poll-operator")
                .args(["--interval-ms", &args.poll_interval_ms.to_string()])
                // Its own bound, should the bench die without killing it.
                .args(["--max-seconds", &(args.max_seconds + 120).to_string()]);
            c
        }
    };
    command
        .arg("--kubeconfig")
        .arg(&operator_kubeconfig_path)
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
    let ready_by = Instant::now() + STEP_TIMEOUT;
    while http_get(probe_addr, "/readyz").map(|r| r.0) != Some(200) {
        if Instant::now() > ready_by {
            bail!(
                "the operator did not become ready; its log: {}",
                operator_log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let operator_idle_kib = proc_kib(pid, "VmRSS").unwrap_or(0);
    let cpu_before = cpu_seconds(pid);
    cluster.control.reset_counts();
    cluster.control.reset_authz();
    // Follows kubesim's event log from before the first create, so that no change is missed.
    let tracker = Tracker::new(cluster.store.clone())?;

    let api: Api<SparkApplication> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    let deadline = start + bound;
    let drained = tokio::spawn(tracker.drain(
        apps,
        deadline,
        move |elapsed, submitted, done| {
            eprintln!(
                "  {} {apps}: {:.0} s, {submitted} submitted, {done} terminal, operator VmRSS {:.0} MiB",
                variant.name(),
                elapsed.as_secs_f64(),
                mib(proc_kib(pid, "VmRSS").unwrap_or(0))
            );
        },
    ));
    // Create: `concurrency` tasks take the next index, batch by batch, until the deadline.
    let created = Arc::new(AtomicUsize::new(0));
    let batch = args.batch.max(1);
    for first in (0..apps).step_by(batch) {
        let end = (first + batch).min(apps);
        let next = Arc::new(AtomicUsize::new(first));
        let mut tasks = Vec::new();
        for _ in 0..args.concurrency.max(1) {
            let (api, next, created) = (api.clone(), next.clone(), created.clone());
            let (run_seconds, retries, rate) = (
                args.run_seconds.clone(),
                args.submission_retries,
                args.create_rate,
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end || Instant::now() > deadline {
                        return Ok::<_, anyhow::Error>(());
                    }
                    if rate > 0.0 {
                        let due = start + Duration::from_secs_f64(i as f64 / rate);
                        tokio::time::sleep_until(due.min(deadline).into()).await;
                    }
                    let app = app(i, &run_seconds, retries)?;
                    tokio::time::timeout(STEP_TIMEOUT, api.create(&PostParams::default(), &app))
                        .await
                        .with_context(|| format!("creating app {i} timed out"))?
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

    let drained = drained.await??;
    let drain_secs = start.elapsed().as_secs_f64();
    let operator_cpu = cpu_seconds(pid) - cpu_before;
    let mut counted = counts(&cluster);
    let by_operator = operator_counts(&cluster);
    // The bench's own creates are not the operator's.
    if let Some(n) = counted.get_mut(&("create".to_owned(), "sparkapplications".to_owned())) {
        *n = n.saturating_sub(created as u64);
    }
    counted.retain(|_, n| *n > 0);

    let idle_start = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let idle = diff(&counts(&cluster), &counts_with_bench(&counted, created));
    let idle_secs = idle_start.elapsed().as_secs_f64();
    let idle_cpu = cpu_seconds(pid) - cpu_before - operator_cpu;

    let metrics = http_get(probe_addr, "/metrics").map_or_else(String::new, |r| r.1);
    let (reconcile_p50, reconcile_p99, reconciles) = reconcile_percentiles(&metrics);
    let submissions = metric_by_label(&metrics, "spark_operator_submissions_total");
    let operator_peak_kib = proc_kib(pid, "VmHWM").unwrap_or(0);
    let submitter_peak_kib = proc_kib(submitter_pid, "VmHWM").unwrap_or(0);
    if args.log_dir.is_some() {
        eprintln!(
            "  logs: {} {}",
            operator_log.display(),
            submitter_log.display()
        );
    }
    drop(processes);
    drop(cluster);
    Ok(Figures {
        variant,
        apps,
        created,
        create_secs,
        drain_secs,
        drained,
        counts: counted,
        by_operator,
        idle,
        idle_secs,
        reconcile_p50,
        reconcile_p99,
        reconciles,
        submissions,
        operator_idle_kib,
        operator_peak_kib,
        operator_cpu,
        idle_cpu,
        submitter_peak_kib,
    })
}

fn counts_with_bench(counts: &Counts, created: usize) -> Counts {
    let mut out = counts.clone();
    *out.entry(("create".to_owned(), "sparkapplications".to_owned()))
        .or_default() += created as u64;
    out
}

/// One SparkApplication whose driver exits 0 after `run_seconds`.
fn app(i: usize, run_seconds: &str, submission_retries: i32) -> anyhow::Result<SparkApplication> {
    let restart_policy = if submission_retries > 0 {
        json!({"type": "OnInfrastructureFailure",
               "onSubmissionFailureRetries": submission_retries,
               "onSubmissionFailureRetryInterval": 1})
    } else {
        json!({"type": "Never"})
    };
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
            "restartPolicy": restart_policy,
        },
    }))?)
}
