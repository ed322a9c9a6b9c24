//! Load benchmark of `submitter serve` over mTLS against kubesim, side by side with real
//! `spark-submit` doing the same submission, in one run:
//!
//!     cargo build --release -p kubesim -p submitter
//!     cargo run --release -p submitter --example service_bench -- [--submissions 5000] \
//!         [--concurrency 8,64,1000] [--spark-runs 3] [--max-seconds 120]
//!
//! Starts kubesim and `submitter serve` (both release binaries, separate processes) with a
//! throwaway PKI (rcgen) and a policy allowing the bench client; drives N unique submissions per
//! concurrency level through the crate's `SubmitterClient` (one pooled client, C tasks, no
//! retries so every failure is counted); reports submissions/s, p50/p99/max latency, the
//! answers, and the submitter's resident memory (peak VmRSS sampled during the run, and VmHWM).
//! Then `spark-submit` (PATH) runs the same argument vector `--spark-runs` times sequentially and
//! the throughput ratio is printed. Everything is on loopback; the processes are killed at the end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use submission::api::SubmitRequest;
use submitter_client::{ClientConfig, SubmitterClient};

const CLIENT_IDENTITY: &str = "bench.spark.svc";

#[derive(Debug, Parser)]
struct Args {
    /// Measured submissions per concurrency level.
    #[arg(long, env = "BENCH_SUBMISSIONS", default_value_t = 5000)]
    submissions: usize,
    /// Concurrent clients, one measured run each.
    #[arg(
        long,
        env = "BENCH_CONCURRENCY",
        value_delimiter = ',',
        default_value = "8,64,1000"
    )]
    concurrency: Vec<usize>,
    /// Sequential real spark-submit runs (0: skip).
    #[arg(long, env = "BENCH_SPARK_RUNS", default_value_t = 3)]
    spark_runs: usize,
    /// Bound on each measured run; a run stops taking new submissions after it.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 120)]
    max_seconds: u64,
    /// `RUST_LOG` of the submitter (its logs go to a file in the temp dir).
    #[arg(long, env = "BENCH_SUBMITTER_LOG", default_value = "info")]
    submitter_log: String,
    #[arg(long, env = "KUBESIM_BIN")]
    kubesim_bin: Option<PathBuf>,
    #[arg(long, env = "SUBMITTER_BIN")]
    submitter_bin: Option<PathBuf>,
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// The minimal JVM case (the corpus' SparkPi), as spark-submit and the submitter both get it.
fn argv(master: &str) -> Vec<String> {
    [
        "--master",
        master,
        "--deploy-mode",
        "cluster",
        "--name",
        "spark-pi",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "--conf",
        "spark.kubernetes.container.image=apache/spark:4.0.1",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf",
        "spark.kubernetes.namespace=default",
        "local:///opt/spark/examples/jars/spark-examples.jar",
        "10",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
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
        .push(DnType::CommonName, "bench ca");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
    let leaf = |cn: &str, sans: Vec<SanType>, usage| -> anyhow::Result<(String, String)> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = sans;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let server = leaf(
        "submitter",
        vec![
            SanType::DnsName("localhost".try_into()?),
            SanType::IpAddress("127.0.0.1".parse()?),
        ],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let client = leaf(
        "bench",
        vec![SanType::DnsName(CLIENT_IDENTITY.try_into()?)],
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
        client_cert: write("client.crt", &client.0)?,
        client_key: write("client.key", &client.1)?,
        policy: write(
            "policy.yaml",
            &format!(
                "clients:\n  - identity: {CLIENT_IDENTITY}\n    namespaces: [\"*\"]\n    serviceAccounts: [\"*\"]\n"
            ),
        )?,
    })
}

/// Starts kubesim; returns its URL once the kubeconfig is written.
fn start_kubesim(
    bin: &Path,
    kubeconfig: &Path,
    processes: &mut Processes,
) -> anyhow::Result<String> {
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child.stdout.take().context("kubesim stdout")?;
    processes.0.push(child);
    let mut reader = BufReader::new(stdout);
    let mut url = String::new();
    reader.read_line(&mut url)?;
    // Keep draining so the pipe never fills.
    std::thread::spawn(move || for _ in reader.lines() {});
    let deadline = Instant::now() + Duration::from_secs(30);
    while !kubeconfig.exists() {
        if Instant::now() > deadline {
            bail!("kubesim wrote no kubeconfig");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(url.trim().to_owned())
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
    // Fields after the command name (which may hold spaces) start at field 3.
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

struct RunResult {
    done: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    answers: BTreeMap<String, usize>,
    peak_rss_kib: u64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn drive(
    client: &SubmitterClient,
    master: &str,
    prefix: &str,
    total: usize,
    concurrency: usize,
    bound: Duration,
    pid: u32,
) -> RunResult {
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + bound;
    let args = Arc::new(argv(master));
    // RSS sampler: every 10 ms while the run lasts.
    let running = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let running = running.clone();
        let peak = peak.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                if let Some(rss) = proc_kib(pid, "VmRSS") {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let client = client.clone();
        let next = next.clone();
        let args = args.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut answers: BTreeMap<String, usize> = BTreeMap::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || Instant::now() > deadline {
                    break;
                }
                let request = SubmitRequest {
                    submission_id: format!("{prefix}-{i}"),
                    spark_submit_args: args.as_ref().clone(),
                    driver_pod_template: None,
                    executor_pod_template: None,
                };
                let sent = Instant::now();
                let answer = match client.submit(&request).await {
                    Ok(response) if response.duplicate_submission => "200 duplicate".to_owned(),
                    Ok(_) => "201 created".to_owned(),
                    Err(error) => match (error.status(), error.code()) {
                        (Some(status), Some(code)) => format!("{status} {code}"),
                        _ => format!("error {}", error.kind()),
                    },
                };
                latencies.push(sent.elapsed());
                *answers.entry(answer).or_default() += 1;
            }
            (latencies, answers)
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    let mut answers = BTreeMap::new();
    for task in tasks {
        let (l, a) = task.await.expect("a bench task panicked");
        latencies.extend(l);
        for (k, v) in a {
            *answers.entry(k).or_default() += v;
        }
    }
    let elapsed = start.elapsed();
    running.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    latencies.sort();
    RunResult {
        done: latencies.len(),
        elapsed,
        latencies,
        answers,
        peak_rss_kib: peak.load(Ordering::Relaxed),
    }
}

/// Sequential `spark-submit` runs; returns their wall times (None: not available or failed).
fn spark_submit(url: &str, kubeconfig: &Path, runs: usize) -> Option<Vec<Duration>> {
    if runs == 0
        || Command::new("spark-submit")
            .arg("--version")
            .output()
            .is_err()
    {
        return None;
    }
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let output = Command::new("spark-submit")
            .args(argv(&format!("k8s://{url}")))
            .env("KUBECONFIG", kubeconfig)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        if !output.status.success() {
            eprintln!(
                "spark-submit failed: {}",
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .rev()
                    .take(10)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            return None;
        }
        times.push(start.elapsed());
    }
    Some(times)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let kubesim_bin = args
        .kubesim_bin
        .clone()
        .unwrap_or_else(|| target_dir().join("release/kubesim"));
    let submitter_bin = args
        .submitter_bin
        .clone()
        .unwrap_or_else(|| target_dir().join("release/submitter"));
    let dir = tempfile::tempdir()?;
    let pki = pki(dir.path())?;
    let mut processes = Processes(Vec::new());
    let kubeconfig = dir.path().join("kubeconfig");
    let url = start_kubesim(&kubesim_bin, &kubeconfig, &mut processes)?;
    let kubesim_pid = processes.0[0].id();
    let max_concurrency = args.concurrency.iter().copied().max().unwrap_or(64).max(64);
    let port = free_port()?;
    let log = std::fs::File::create(dir.path().join("submitter.log"))?;
    let submitter = Command::new(&submitter_bin)
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
        .args(["--max-concurrency", &max_concurrency.to_string()])
        .env("RUST_LOG", &args.submitter_log)
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", submitter_bin.display()))?;
    let pid = submitter.id();
    processes.0.push(submitter);

    let runtime = tokio::runtime::Runtime::new()?;
    let mut config = ClientConfig::new(format!("https://localhost:{port}/api/v1/spark-submit"));
    config.ca = Some(pki.ca.clone());
    config.cert = Some(pki.client_cert.clone());
    config.key = Some(pki.client_key.clone());
    config.max_retries = 1; // count every failure; no retry hides one
    config.request_timeout = Duration::from_secs(30);
    let client = SubmitterClient::new(config)?;
    let master = format!("k8s://{url}");
    println!(
        "submitter serve (mTLS, --max-concurrency {max_concurrency}, RUST_LOG={}) against kubesim {url}; {} cores",
        args.submitter_log,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    runtime.block_on(async {
        client
            .wait_for_connection(Duration::from_secs(30))
            .await
            .context("the submitter did not come up")
    })?;
    println!(
        "submitter idle: VmRSS {:.1} MiB",
        mib(proc_kib(pid, "VmRSS").unwrap_or(0))
    );
    let bound = Duration::from_secs(args.max_seconds);
    let mut best = 0.0_f64;
    for &concurrency in &args.concurrency {
        // Warm-up (not measured): opens the connections, fills caches.
        let warm = runtime.block_on(drive(
            &client,
            &master,
            &format!("warm-c{concurrency}"),
            concurrency.max(200),
            concurrency,
            bound,
            pid,
        ));
        let cpu_before = (
            cpu_seconds(pid),
            cpu_seconds(kubesim_pid),
            cpu_seconds(std::process::id()),
        );
        let run = runtime.block_on(drive(
            &client,
            &master,
            &format!("bench-c{concurrency}"),
            args.submissions,
            concurrency,
            bound,
            pid,
        ));
        let cpu = (
            cpu_seconds(pid) - cpu_before.0,
            cpu_seconds(kubesim_pid) - cpu_before.1,
            cpu_seconds(std::process::id()) - cpu_before.2,
        );
        let rate = run.done as f64 / run.elapsed.as_secs_f64();
        best = best.max(rate);
        println!(
            "C={concurrency:>4}: {} submissions in {:.2} s = {rate:.0}/s; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
             submitter VmRSS peak {:.1} MiB (warm-up {:.1} MiB), VmHWM {:.1} MiB; \
             CPU s submitter {:.2} ({:.0} us/submission), kubesim {:.2}, bench client {:.2}; answers {:?} (warm-up {:?})",
            run.done,
            run.elapsed.as_secs_f64(),
            percentile(&run.latencies, 50.0).as_secs_f64() * 1e3,
            percentile(&run.latencies, 99.0).as_secs_f64() * 1e3,
            run.latencies
                .last()
                .copied()
                .unwrap_or_default()
                .as_secs_f64()
                * 1e3,
            mib(run.peak_rss_kib),
            mib(warm.peak_rss_kib),
            mib(proc_kib(pid, "VmHWM").unwrap_or(0)),
            cpu.0,
            cpu.0 / run.done.max(1) as f64 * 1e6,
            cpu.1,
            cpu.2,
            run.answers,
            warm.answers,
        );
    }
    // Memory at the highest concurrency without cache growth: the same submissions again are
    // duplicates (observe, answer 200), so no pod is added to the watch caches.
    if let Some(&concurrency) = args.concurrency.iter().max() {
        let before = proc_kib(pid, "VmRSS").unwrap_or(0);
        let run = runtime.block_on(drive(
            &client,
            &master,
            &format!("bench-c{concurrency}"),
            args.submissions,
            concurrency,
            bound,
            pid,
        ));
        println!(
            "C={concurrency:>4} repeats: {} duplicate submissions in {:.2} s = {:.0}/s; latency p50 {:.1} ms, p99 {:.1} ms; \
             submitter VmRSS {:.1} MiB before, peak {:.1} MiB during (+{:.1} MiB for {concurrency} requests in flight); answers {:?}",
            run.done,
            run.elapsed.as_secs_f64(),
            run.done as f64 / run.elapsed.as_secs_f64(),
            percentile(&run.latencies, 50.0).as_secs_f64() * 1e3,
            percentile(&run.latencies, 99.0).as_secs_f64() * 1e3,
            mib(before),
            mib(run.peak_rss_kib),
            mib(run.peak_rss_kib.saturating_sub(before)),
            run.answers,
        );
    }
    match spark_submit(&url, &kubeconfig, args.spark_runs) {
        Some(times) => {
            let total: Duration = times.iter().sum();
            let rate = times.len() as f64 / total.as_secs_f64();
            println!(
                "spark-submit x{} sequential: {:?} each = {rate:.3}/s",
                times.len(),
                times
                    .iter()
                    .map(|t| format!("{:.2} s", t.as_secs_f64()))
                    .collect::<Vec<_>>()
            );
            println!(
                "throughput ratio submitter (best run) / spark-submit: {:.0}x",
                best / rate
            );
        }
        None => println!("spark-submit not available (or failed): ratio skipped"),
    }
    drop(processes);
    Ok(())
}
