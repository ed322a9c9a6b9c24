//! Latency of the progress store backends: the Kubernetes store (one ConfigMap per application,
//! compare-and-swap) against an in-process kubesim, the Redis store (one Lua script per write)
//! against a real `redis-server` on a free loopback port, and the same store against a real Redis
//! Cluster of three masters and three replicas on loopback (fences and commits then wait for one
//! replica's acknowledgement); the servers are started here and killed at the end.
//!
//!     cargo run --release -p operator --example store_bench -- [--ops 2000] [--max-seconds 20] \
//!         [--warmup 100] [--concurrency 8] [--backends kube,redis,redis-cluster]
//!
//! Sequential: one client, one operation at a time, each operation type on its own application:
//! `advance_epoch` (from the current epoch, so every call moves it), `commit` (epoch 1, after the
//! operator's first fence, growing
//! seq, a payload of about 50 bytes; an untimed `prune(16)` every 64 commits keeps the history as
//! the operator would), `heartbeat`, `latest` (16 markers stored) and `epoch`. Each type runs
//! `--warmup` untimed calls, then `--ops` timed calls or until `--max-seconds`, whichever comes
//! first. Concurrent mix: `--concurrency` tasks on one shared client, each on its own application
//! (one agent per driver), cycling commit, heartbeat, latest, epoch for `--ops` rounds in all.
//!
//! Prints markdown tables (milliseconds; ops/s is completed calls over wall time) with kube/redis
//! and cluster/redis ratios, and whether Redis meets the target of store operations under 1 ms.

use sandbox::redis::RedisServer;
use sandbox::redis_cluster::{ClusterOptions, RedisCluster};
use std::future::Future;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use kubesim::{Cluster, ClusterConfig};
use operator::progress_store::kube::KubeStore;
use operator::progress_store::redis::RedisStore;
use operator::progress_store::{AppKey, ProgressStore, Scope, StoreError};

const NAMESPACE: &str = "default";
/// Markers kept by the untimed prune during the commit run, and stored before the `latest` run.
const HISTORY: usize = 16;
/// Commits between two untimed prunes.
const PRUNE_EVERY: u64 = 64;
/// The target of issue 6 for Redis on loopback.
const TARGET: Duration = Duration::from_millis(1);

#[derive(Debug, Parser)]
struct Args {
    /// Timed calls per operation type (sequential), and rounds of the mix in all (concurrent).
    #[arg(long, env = "BENCH_OPS", default_value_t = 2000)]
    ops: u64,
    /// Untimed calls per operation type before the timed ones.
    #[arg(long, env = "BENCH_WARMUP", default_value_t = 100)]
    warmup: u64,
    /// Bound on the timed calls of one operation type (and of the mix), in seconds.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 20)]
    max_seconds: u64,
    /// Tasks of the concurrent mix; 0 skips it.
    #[arg(long, env = "BENCH_CONCURRENCY", default_value_t = 8)]
    concurrency: u64,
    /// Backends to measure, in this order.
    #[arg(
        long,
        env = "BENCH_BACKENDS",
        value_delimiter = ',',
        default_value = "kube,redis"
    )]
    backends: Vec<Backend>,
    /// The `redis-server` binary.
    #[arg(long, env = "REDIS_SERVER", default_value = "redis-server")]
    redis_server: PathBuf,
    /// Also write the figures as JSON here (read by `cargo run -p bench`).
    #[arg(long, env = "BENCH_JSON")]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// `KubeStore` on in-process kubesim.
    Kube,
    /// `RedisStore` on a local `redis-server`.
    Redis,
    /// `RedisStore` on a local Redis Cluster (3 masters, 3 replicas; writes wait for a replica).
    RedisCluster,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Kube => "kube",
            Backend::Redis => "redis",
            Backend::RedisCluster => "redis-cluster",
        }
    }

    /// The short name in ratio columns.
    fn short(self) -> &'static str {
        match self {
            Backend::RedisCluster => "cluster",
            other => other.name(),
        }
    }
}

/// Ratio columns: (numerator, denominator), shown when both ran.
const RATIOS: [(Backend, Backend); 2] = [
    (Backend::Kube, Backend::Redis),
    (Backend::RedisCluster, Backend::Redis),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    AdvanceEpoch,
    Commit,
    Heartbeat,
    Latest,
    Epoch,
}

impl Op {
    const SEQUENTIAL: [Op; 5] = [
        Op::AdvanceEpoch,
        Op::Commit,
        Op::Heartbeat,
        Op::Latest,
        Op::Epoch,
    ];
    const MIX: [Op; 4] = [Op::Commit, Op::Heartbeat, Op::Latest, Op::Epoch];

    fn name(self) -> &'static str {
        match self {
            Op::AdvanceEpoch => "advance_epoch",
            Op::Commit => "commit",
            Op::Heartbeat => "heartbeat",
            Op::Latest => "latest",
            Op::Epoch => "epoch",
        }
    }
}

/// Latency summary of one operation type on one backend.
#[derive(Debug, Clone)]
struct Stats {
    n: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    ops_per_s: f64,
    /// The time bound stopped the run before the requested count.
    cut_short: bool,
}

impl Stats {
    fn of(mut samples: Vec<Duration>, wall: Duration, requested: u64) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        // Nearest rank: the smallest sample with at least p of all samples at or below it.
        let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Self {
            n,
            p50: rank(0.50),
            p99: rank(0.99),
            max: samples[n - 1],
            ops_per_s: n as f64 / wall.as_secs_f64(),
            cut_short: (n as u64) < requested,
        })
    }
}

/// What one backend measured.
struct Report {
    backend: Backend,
    sequential: Vec<(Op, Stats)>,
    /// Per operation type, then all of them.
    mix: Vec<(&'static str, Stats)>,
}

/// Why a backend was not measured.
struct Skipped {
    backend: Backend,
    reason: String,
}

fn app(name: String) -> AppKey {
    let scope = Scope::new(format!("uid-{name}"), 1);
    AppKey::new(NAMESPACE, name, scope)
}

/// The epoch of the first driver: the operator fences once before it starts.
const FIRST_EPOCH: u64 = 1;

/// A small marker payload like a staged driver's.
fn payload(seq: u64) -> String {
    format!(r#"{{"stage":{seq},"output":"s3://bench/out/stage-{seq:06}"}}"#)
}

/// One call of `op`; `i` counts calls on this application from 0, so every call is valid on the
/// state the previous ones left (the epoch is `i` before the i-th advance, seqs grow).
async fn call<S: ProgressStore>(
    s: &S,
    a: &AppKey,
    op: Op,
    i: u64,
    body: &str,
) -> anyhow::Result<()> {
    match op {
        Op::AdvanceEpoch => {
            let epoch = s.advance_epoch(a, i).await?;
            if epoch != i + 1 {
                bail!("advance_epoch from {i} returned {epoch}");
            }
        }
        Op::Commit => s.commit(a, FIRST_EPOCH, i + 1, body, i).await?,
        Op::Heartbeat => s.heartbeat(a, FIRST_EPOCH, i).await?,
        Op::Latest => {
            if s.latest(a).await?.is_none() {
                bail!("latest found no marker for {a}");
            }
        }
        Op::Epoch => {
            s.epoch(a).await?;
        }
    }
    Ok(())
}

/// Untimed state an operation type needs before its run.
async fn prepare<S: ProgressStore>(s: &S, a: &AppKey, op: Op) -> Result<(), StoreError> {
    match op {
        Op::Latest => {
            s.advance_epoch(a, 0).await?;
            for seq in 1..=HISTORY as u64 {
                s.commit(a, FIRST_EPOCH, seq, &payload(seq), seq).await?;
            }
        }
        Op::Epoch | Op::Commit | Op::Heartbeat => {
            s.advance_epoch(a, 0).await?;
        }
        Op::AdvanceEpoch => {}
    }
    Ok(())
}

/// The `i`-th call of a sequential run, timed; the commit run's prune happens after the clock stops.
async fn step<S: ProgressStore>(
    s: &S,
    a: &AppKey,
    backend: Backend,
    op: Op,
    i: u64,
) -> anyhow::Result<Duration> {
    let body = payload(i + 1);
    let t = Instant::now();
    call(s, a, op, i, &body)
        .await
        .with_context(|| format!("{} {} call {i}", backend.name(), op.name()))?;
    let took = t.elapsed();
    if op == Op::Commit && (i + 1).is_multiple_of(PRUNE_EVERY) {
        s.prune(a, HISTORY).await?;
    }
    Ok(took)
}

async fn sequential<S: ProgressStore>(
    s: &S,
    backend: Backend,
    op: Op,
    args: &Args,
) -> anyhow::Result<Stats> {
    let a = app(format!("bench-{}", op.name().replace('_', "-")));
    prepare(s, &a, op).await?;
    for i in 0..args.warmup {
        step(s, &a, backend, op, i).await?;
    }
    let bound = Duration::from_secs(args.max_seconds);
    let mut samples = Vec::with_capacity(args.ops as usize);
    let started = Instant::now();
    for i in args.warmup..args.warmup + args.ops {
        if started.elapsed() >= bound {
            break;
        }
        samples.push(step(s, &a, backend, op, i).await?);
    }
    let wall = started.elapsed();
    Stats::of(samples, wall, args.ops).context("no timed calls (is --max-seconds 0?)")
}

/// `--concurrency` tasks sharing one client, each on its own application.
async fn mix<S: ProgressStore + Clone + 'static>(
    s: &S,
    args: &Args,
) -> anyhow::Result<Vec<(&'static str, Stats)>> {
    let tasks = args.concurrency;
    let rounds = args.ops.div_ceil(tasks);
    let deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (s, a) = (s.clone(), app(format!("bench-mix-{task}")));
        s.advance_epoch(&a, 0).await?;
        handles.push(tokio::spawn(async move {
            let mut samples: Vec<(Op, Duration)> = Vec::with_capacity(rounds as usize * 4);
            for r in 0..rounds {
                if Instant::now() >= deadline {
                    break;
                }
                for op in Op::MIX {
                    let body = payload(r + 1);
                    let t = Instant::now();
                    call(&s, &a, op, r, &body)
                        .await
                        .with_context(|| format!("mix task {task} {} round {r}", op.name()))?;
                    samples.push((op, t.elapsed()));
                }
                if (r + 1).is_multiple_of(PRUNE_EVERY) {
                    s.prune(&a, HISTORY).await?;
                }
            }
            anyhow::Ok(samples)
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.context("mix task panicked")??);
    }
    let wall = started.elapsed();
    let requested = rounds * tasks;
    let mut out = Vec::new();
    for op in Op::MIX {
        let of_op = all.iter().filter(|(o, _)| *o == op).map(|(_, d)| *d);
        if let Some(stats) = Stats::of(of_op.collect(), wall, requested) {
            out.push((op.name(), stats));
        }
    }
    let every = all.iter().map(|(_, d)| *d).collect();
    if let Some(stats) = Stats::of(every, wall, requested * Op::MIX.len() as u64) {
        out.push(("all", stats));
    }
    Ok(out)
}

async fn measure<S: ProgressStore + Clone + 'static>(
    s: &S,
    backend: Backend,
    args: &Args,
) -> anyhow::Result<Report> {
    let mut sequential_stats = Vec::new();
    for op in Op::SEQUENTIAL {
        let stats = sequential(s, backend, op, args).await?;
        eprintln!(
            "{} {}: {} calls, p50 {} ms",
            backend.name(),
            op.name(),
            stats.n,
            ms(stats.p50)
        );
        sequential_stats.push((op, stats));
    }
    let mix_stats = if args.concurrency == 0 {
        Vec::new()
    } else {
        let m = mix(s, args).await?;
        eprintln!("{} mix of {} tasks done", backend.name(), args.concurrency);
        m
    };
    Ok(Report {
        backend,
        sequential: sequential_stats,
        mix: mix_stats,
    })
}

async fn run_kube(args: &Args) -> anyhow::Result<Report> {
    let cluster = Cluster::start(ClusterConfig::default())
        .await
        .context("starting kubesim")?;
    // No SparkApplication exists here to own the objects: with owners, the garbage collector
    // would delete them under the benchmark.
    let store = KubeStore::without_owners(cluster.client().context("kubesim client")?);
    measure(&store, Backend::Kube, args).await
}

/// The server's version line, for the report (`None` when it cannot be run).
fn redis_version(binary: &Path) -> Option<String> {
    let out = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    Some(v.to_string())
}

/// The Redis store on a `redis-server` or a Redis Cluster started here, killed at the end.
async fn run_redis(args: &Args, backend: Backend) -> Result<Report, Skipped> {
    let skipped = |reason: String| Skipped { backend, reason };
    // The server or cluster lives until the measurement is over.
    let (alive, url): (Box<dyn std::any::Any>, String) = if backend == Backend::RedisCluster {
        let cluster = RedisCluster::start_with(&args.redis_server, ClusterOptions::default())
            .map_err(|e| skipped(format!("{e:#}")))?;
        let url = cluster.url();
        (Box::new(cluster), url)
    } else {
        let server =
            RedisServer::start_binary(&args.redis_server).map_err(|e| skipped(format!("{e:#}")))?;
        let url = server.url();
        (Box::new(server), url)
    };
    let store = RedisStore::connect(&url)
        .await
        .map_err(|e| skipped(format!("connecting: {e}")))?;
    let report = measure(&store, backend, args)
        .await
        .map_err(|e| skipped(format!("{e:#}")));
    drop(alive);
    report
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        "n/a".to_string()
    } else {
        format!("{:.1}×", a.as_secs_f64() / b.as_secs_f64())
    }
}

/// One markdown table: a row per operation, columns per backend, kube/redis ratios when both ran.
fn table(rows: &[&str], reports: &[Report], pick: impl Fn(&Report, &str) -> Option<Stats>) {
    let mut header = vec!["operation".to_string()];
    for r in reports {
        let b = r.backend.name();
        header.extend([
            format!("{b} p50"),
            format!("{b} p99"),
            format!("{b} max"),
            format!("{b} ops/s"),
        ]);
    }
    let find = |b: Backend| reports.iter().find(|r| r.backend == b);
    let ratios: Vec<(&Report, &Report)> = RATIOS
        .iter()
        .filter_map(|(n, d)| Some((find(*n)?, find(*d)?)))
        .collect();
    for (n, d) in &ratios {
        let name = format!("{}/{}", n.backend.short(), d.backend.short());
        header.extend([format!("{name} p50"), format!("{name} p99")]);
    }
    println!("| {} |", header.join(" | "));
    println!("|{}", "---|".repeat(header.len()));
    for row in rows {
        let mut cells = vec![row.to_string()];
        for r in reports {
            match pick(r, row) {
                Some(s) => cells.extend([
                    ms(s.p50),
                    ms(s.p99),
                    ms(s.max),
                    format!(
                        "{:.0}{}",
                        s.ops_per_s,
                        if s.cut_short {
                            format!(" (time bound, n={})", s.n)
                        } else {
                            String::new()
                        }
                    ),
                ]),
                None => cells.extend(std::iter::repeat_n("n/a".to_string(), 4)),
            }
        }
        for (n, d) in &ratios {
            match (pick(n, row), pick(d, row)) {
                (Some(n), Some(d)) => cells.extend([ratio(n.p50, d.p50), ratio(n.p99, d.p99)]),
                _ => cells.extend(["n/a".to_string(), "n/a".to_string()]),
            }
        }
        println!("| {} |", cells.join(" | "));
    }
}

/// The figures as JSON: per backend, per operation, sequential and in the mix.
fn to_json(reports: &[Report], skipped: &[Skipped]) -> serde_json::Value {
    let stats = |rows: Vec<(&str, &Stats)>| -> Vec<serde_json::Value> {
        rows.into_iter()
            .map(|(op, s)| {
                serde_json::json!({
                    "op": op, "n": s.n, "p50_ms": s.p50.as_secs_f64() * 1e3,
                    "p99_ms": s.p99.as_secs_f64() * 1e3, "max_ms": s.max.as_secs_f64() * 1e3,
                    "ops_per_s": s.ops_per_s, "cut_short": s.cut_short,
                })
            })
            .collect()
    };
    serde_json::json!({
        "backends": reports.iter().map(|r| serde_json::json!({
            "backend": r.backend.name(),
            "sequential": stats(r.sequential.iter().map(|(o, s)| (o.name(), s)).collect()),
            "mix": stats(r.mix.iter().map(|(o, s)| (*o, s)).collect()),
        })).collect::<Vec<_>>(),
        "skipped": skipped.iter().map(|s| serde_json::json!({
            "backend": s.backend.name(), "reason": s.reason,
        })).collect::<Vec<_>>(),
    })
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// Runs `f` on a fresh runtime, so one backend's leftover tasks never share workers with the next.
fn on_runtime<T>(f: impl Future<Output = T>) -> anyhow::Result<T> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    Ok(rt.block_on(f))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.ops == 0 {
        bail!("--ops must be at least 1");
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut reports = Vec::new();
    let mut skipped = Vec::new();
    for &backend in &args.backends {
        match backend {
            Backend::Kube => reports.push(on_runtime(run_kube(&args))??),
            Backend::Redis | Backend::RedisCluster => {
                match on_runtime(run_redis(&args, backend))? {
                    Ok(r) => reports.push(r),
                    Err(s) => {
                        eprintln!("{} not measured: {}", s.backend.name(), s.reason);
                        skipped.push(s);
                    }
                }
            }
        }
    }

    println!(
        "store_bench: {} cores ({}), tokio multi-thread runtime with {cores} workers; \
         kube = KubeStore on in-process kubesim over loopback HTTP; redis = RedisStore on \
         redis-server {} (loopback, --save '' --appendonly no); redis-cluster = the same on 3 \
         masters and 3 replicas of it, fences and commits confirmed by a replica (WAIT 1)",
        cores,
        cpu_model().unwrap_or_else(|| "cpu model unknown".to_string()),
        redis_version(&args.redis_server).unwrap_or_else(|| "(version unknown)".to_string()),
    );
    println!(
        "ops {} per operation (warmup {}), bound {} s per operation, mix {} tasks; latencies in ms",
        args.ops, args.warmup, args.max_seconds, args.concurrency
    );
    for s in &skipped {
        println!("{}: not measured ({})", s.backend.name(), s.reason);
    }
    if reports.is_empty() {
        bail!("no backend was measured");
    }
    if let Some(path) = &args.json {
        std::fs::write(path, to_json(&reports, &skipped).to_string())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }

    println!("\nSequential, one client:\n");
    let names: Vec<&str> = Op::SEQUENTIAL.iter().map(|o| o.name()).collect();
    table(&names, &reports, |r, row| {
        r.sequential
            .iter()
            .find(|(o, _)| o.name() == row)
            .map(|(_, s)| s.clone())
    });
    if args.concurrency > 0 {
        println!(
            "\nConcurrent mix, {} tasks on one client, one application each \
             (ops/s of a row: its calls over the mix's wall time):\n",
            args.concurrency
        );
        let mut names: Vec<&str> = Op::MIX.iter().map(|o| o.name()).collect();
        names.push("all");
        table(&names, &reports, |r, row| {
            r.mix
                .iter()
                .find(|(o, _)| *o == row)
                .map(|(_, s)| s.clone())
        });
    }

    let verdict = |d: Duration| if d < TARGET { "met" } else { "not met" };
    for backend in [Backend::Redis, Backend::RedisCluster] {
        let Some(report) = reports.iter().find(|r| r.backend == backend) else {
            if args.backends.contains(&backend) {
                println!("\nTarget ({} under 1 ms): not measured", backend.name());
            }
            continue;
        };
        let worst = |pick: fn(&Stats) -> Duration| {
            report
                .sequential
                .iter()
                .map(|(o, s)| (pick(s), o.name()))
                .max()
                .expect("every report has sequential stats")
        };
        let (p50, p50_op) = worst(|s| s.p50);
        let (p99, p99_op) = worst(|s| s.p99);
        println!(
            "\nTarget: store operations under 1 ms ({} on loopback), sequential: worst p50 \
             {} ms ({p50_op}) {}; worst p99 {} ms ({p99_op}) {}",
            backend.name(),
            ms(p50),
            verdict(p50),
            ms(p99),
            verdict(p99),
        );
    }
    Ok(())
}
