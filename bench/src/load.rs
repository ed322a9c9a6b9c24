//! The submitter under load: `submitter serve` (release binary, mTLS) on a kubesim process,
//! driven by independent keep-alive clients (one connection each) at 1…N concurrent clients.
//! Per level: throughput, latency percentiles, CPU per submission of the submitter and of
//! kubesim, API requests per submission by verb, and the submitter's peak RSS. Then cached
//! duplicates (ids submitted again), real `spark-submit` on the same argument vector against
//! the same kubesim, how long the service takes from start to ready, and what a cached driver
//! costs in memory (a second submitter started on the full cluster).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use submission::api::SubmitRequest;
use submitter_client::{ClientConfig, SubmitterClient};

use crate::procs::{Counts, Kubesim, Pki, Submitter};

/// Bound on one run of the load (all levels).
const LEVEL_BOUND: Duration = Duration::from_secs(600);

/// What one concurrency level measured.
#[derive(Debug, Clone)]
pub struct Level {
    pub clients: usize,
    pub submissions: usize,
    pub errors: usize,
    pub seconds: f64,
    pub latencies_ms: Percentiles,
    pub submitter_cpu_us: f64,
    pub kubesim_cpu_us: f64,
    pub requests: Counts,
    pub submitter_peak_mib: f64,
    /// The submitter's resident memory once the level is over.
    pub submitter_after_mib: f64,
    /// CPU milliseconds of the fixed work timed just before the level ([`crate::machine`]).
    pub machine_ms: f64,
}

impl Level {
    pub fn per_second(&self) -> f64 {
        self.submissions as f64 / self.seconds.max(1e-9)
    }

    pub fn requests_per_submission(&self) -> f64 {
        self.requests.total() as f64 / self.submissions.max(1) as f64
    }

    /// `None` when the level made no API request (cached duplicates): kubesim's CPU then went to
    /// the watches, not to requests.
    pub fn kubesim_cpu_per_request_us(&self) -> Option<f64> {
        let requests = self.requests.total();
        (requests > 0).then(|| self.kubesim_cpu_us * self.submissions as f64 / requests as f64)
    }

    /// [`Level::kubesim_cpu_per_request_us`] as a table cell.
    pub fn kubesim_cpu_per_request_cell(&self) -> String {
        self.kubesim_cpu_per_request_us()
            .map_or_else(|| "n/a".to_owned(), |us| format!("{us:.0}"))
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Percentiles {
    pub fn of(mut samples: Vec<f64>) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i]
        };
        Percentiles {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
        }
    }
}

/// The whole load run.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub start_to_ready_ms: f64,
    pub levels: Vec<Level>,
    pub duplicates: Level,
    pub idle_submitter_mib: f64,
    /// Real `spark-submit`, sequential, on the same kubesim; `None` when it could not run.
    pub spark: Option<SparkSubmit>,
    /// What cached drivers cost a second submitter started on the cluster the run left.
    pub cache: CacheMemory,
    /// What open connections cost, on a nearly empty cluster; `None` when not measured.
    pub connections: Option<ConnectionMemory>,
    /// The share of system (kernel) time in each process' CPU over the fresh levels.
    pub kernel_share: KernelShare,
}

/// System time over user + system time, over the fresh levels.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelShare {
    pub submitter: f64,
    pub kubesim: f64,
}

impl KernelShare {
    fn of(before: (Duration, Duration), after: (Duration, Duration)) -> f64 {
        let user = after.0.saturating_sub(before.0).as_secs_f64();
        let system = after.1.saturating_sub(before.1).as_secs_f64();
        if user + system > 0.0 {
            system / (user + system)
        } else {
            0.0
        }
    }
}

/// The submitter's memory with `connections` concurrent keep-alive mTLS connections, each
/// submitting one cached duplicate, on a cluster holding one driver: what connections cost
/// without the caches of a full cluster.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionMemory {
    pub connections: usize,
    /// Answers that were errors (a shed or failed request still held its connection).
    pub errors: usize,
    /// Resident memory when ready, before any connection.
    pub idle_mib: f64,
    /// Peak resident memory while the connections were opened and served.
    pub peak_mib: f64,
    /// Resident memory with every connection still open, once all were answered.
    pub open_mib: f64,
}

/// What real `spark-submit` cost per submission.
#[derive(Debug, Clone)]
pub struct SparkSubmit {
    pub runs: usize,
    pub wall_ms: Percentiles,
    /// CPU of the JVM (and its children), per submission.
    pub cpu_ms: f64,
    pub requests: Counts,
}

impl SparkSubmit {
    pub fn requests_per_submission(&self) -> f64 {
        self.requests.total() as f64 / self.runs.max(1) as f64
    }
}

/// What cached drivers cost: the submitter's resident memory after the first level and after
/// the second (few connections either way, `added` more drivers in its caches), and a second
/// submitter's when ready on the cluster the run left (`drivers` drivers; its first listing's
/// transient allocations included).
#[derive(Debug, Clone, Copy)]
pub struct CacheMemory {
    pub first_level_mib: f64,
    pub second_level_mib: f64,
    pub added: usize,
    pub drivers: usize,
    pub ready_mib: f64,
}

impl CacheMemory {
    /// Resident memory grown per driver between the first two levels (with whatever else a
    /// submission leaves behind, allocator fragmentation included).
    pub fn kib_per_driver(&self) -> f64 {
        (self.second_level_mib - self.first_level_mib) * 1024.0 / self.added.max(1) as f64
    }
}

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub levels: Vec<usize>,
    /// Fresh submissions per level (at least two per client).
    pub per_level: usize,
    /// Cached duplicates submitted after the levels.
    pub duplicates: usize,
    /// Sequential runs of real `spark-submit` (0: none).
    pub spark_runs: usize,
    /// Concurrent connections of the connection-memory run (0: not run).
    pub connections: usize,
}

/// The argument vector every submission sends (`master`: where `spark-submit` would go).
fn args_for(master: &str) -> Vec<String> {
    [
        "--master",
        master,
        "--deploy-mode",
        "cluster",
        "--name",
        "bench",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "--conf",
        "spark.kubernetes.container.image=spark:4.3.0",
        // The driver runs until deleted: no retention records are written during the run.
        "--conf",
        "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
        "local:///opt/spark/examples/jars/spark-examples.jar",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn args() -> Vec<String> {
    args_for("k8s://https://kubernetes.default.svc:443")
}

/// Children's CPU time of this process so far (`/proc/self/stat` cutime + cstime: the
/// processes it has waited for, with theirs).
fn children_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
            // Fields 16 and 17 of stat; the state (field 3) comes first here.
            Some(field(13)? + field(14)?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Runs real `spark-submit` `runs` times, one after the other, against `kubesim`.
fn spark_submit(kubesim: &Kubesim, runs: usize) -> anyhow::Result<Option<SparkSubmit>> {
    if runs == 0
        || std::process::Command::new("spark-submit")
            .arg("--version")
            .output()
            .is_err()
    {
        return Ok(None);
    }
    let before = kubesim.counts()?;
    let cpu_before = children_cpu();
    let mut walls = Vec::new();
    for i in 0..runs {
        let mut argv = args_for(&format!("k8s://{}", kubesim.url));
        // A name of its own per run: Spark derives the driver pod's name from it.
        argv[5] = format!("spark-{i}");
        let start = Instant::now();
        let output = std::process::Command::new("spark-submit")
            .args(&argv)
            .env("KUBECONFIG", &kubesim.kubeconfig)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdin(std::process::Stdio::null())
            .output()
            .context("cannot run spark-submit")?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(10).collect();
            anyhow::bail!("spark-submit failed: {}", tail.join("\n"));
        }
        walls.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Some(SparkSubmit {
        runs,
        wall_ms: Percentiles::of(walls),
        cpu_ms: (children_cpu() - cpu_before).as_secs_f64() * 1e3 / runs as f64,
        requests: kubesim.counts()?.since(&before),
    }))
}

fn request(id: &str) -> SubmitRequest {
    SubmitRequest {
        submission_id: id.to_owned(),
        spark_submit_args: args(),
        driver_pod_template: None,
        executor_pod_template: None,
    }
}

pub(crate) fn client(url: &str, pki: &Pki) -> anyhow::Result<SubmitterClient> {
    let mut config = ClientConfig::new(format!("{url}/api/v1/spark-submit"));
    config.ca = Some(pki.ca.clone());
    config.cert = Some(pki.client_cert.clone());
    config.key = Some(pki.client_key.clone());
    // One attempt: a failure is counted, never hidden by a retry.
    config.max_retries = 1;
    config.request_timeout = Duration::from_secs(60);
    Ok(SubmitterClient::new(config)?)
}

/// kubesim, the benchmark's certificates, and a `submitter serve` on that kubesim.
pub(crate) struct Stack {
    pub kubesim: Kubesim,
    pub pki: Pki,
    pub submitter: Submitter,
}

impl Stack {
    /// Starts kubesim keeping `history` events of each type and a submitter serving up to
    /// `max_concurrency` requests at once, both under callgrind when `callgrind` names their
    /// count files (kubesim's, the submitter's); returns once the submitter is ready.
    pub(crate) async fn start(
        bin_dir: &Path,
        dir: &Path,
        history: usize,
        max_concurrency: usize,
        callgrind: Option<(&Path, &Path)>,
    ) -> anyhow::Result<Stack> {
        let kubesim = Kubesim::start(bin_dir, dir, history, callgrind.map(|c| c.0))?;
        let pki = Pki::write(dir, "bench ca", crate::procs::CLIENT_IDENTITY)?;
        let submitter = Submitter::start(
            bin_dir,
            dir,
            &pki,
            &kubesim.kubeconfig,
            max_concurrency,
            callgrind.map(|c| c.1),
        )?;
        ready(&submitter, &pki).await?;
        Ok(Stack {
            kubesim,
            pki,
            submitter,
        })
    }
}

/// Waits until `submitter` answers from synced caches; its log is named if it never does.
async fn ready(submitter: &Submitter, pki: &Pki) -> anyhow::Result<()> {
    wait_ready(&client(&submitter.url, pki)?)
        .await
        .with_context(|| format!("see {}", submitter.proc.log.display()))
}

/// Polls a status look-up until the service answers it from synced caches (404 for an unknown
/// driver instead of 503), bounded.
async fn wait_ready(client: &SubmitterClient) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.driver_status("default", "no-such-driver").await {
            Err(error) if error.status() == Some(404) => return Ok(()),
            _ if Instant::now() > deadline => anyhow::bail!("the submitter never became ready"),
            _ => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
}

/// Submits `ids` from `clients` concurrent clients; (latencies in ms, errors, wall time).
pub(crate) async fn drive(
    clients: &[SubmitterClient],
    ids: Arc<Vec<String>>,
) -> anyhow::Result<(Vec<f64>, usize, f64)> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .map(|client| {
            let (ids, next) = (ids.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= ids.len() || start.elapsed() > LEVEL_BOUND {
                        return (latencies, errors);
                    }
                    let began = Instant::now();
                    match client.submit(&request(&ids[i])).await {
                        Ok(_) => latencies.push(began.elapsed().as_secs_f64() * 1e3),
                        Err(_) => errors += 1,
                    }
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (l, e) = task.await?;
        latencies.extend(l);
        errors += e;
    }
    Ok((latencies, errors, start.elapsed().as_secs_f64()))
}

/// A window in which the submitter used less than [`QUIET_CPU`] of CPU: no watch events are
/// arriving any more.
pub const QUIET_WINDOW: Duration = Duration::from_millis(100);
pub const QUIET_CPU: Duration = Duration::from_millis(1);
/// The longest wait for quiet; a run that never gets there goes on (its CPU figures then include
/// whatever kept the submitter busy).
pub const SETTLE_BOUND: Duration = Duration::from_secs(20);

/// Waits until the submitter has been quiet for two windows in a row. A level's drivers go on
/// changing after their last answer (the kubelet starts them, each step a pod event the
/// submitter's watch decodes): waiting counts that work to the level that caused it, and keeps it
/// out of the next level, above all out of the short level of cached duplicates.
pub(crate) async fn settle(submitter: &Submitter) {
    let started = Instant::now();
    let mut quiet_windows = 0;
    while quiet_windows < 2 && started.elapsed() < SETTLE_BOUND {
        let before = submitter.proc.cpu();
        tokio::time::sleep(QUIET_WINDOW).await;
        quiet_windows = if submitter.proc.cpu() - before < QUIET_CPU {
            quiet_windows + 1
        } else {
            0
        };
    }
}

async fn level(
    kubesim: &Kubesim,
    submitter: &Submitter,
    clients: &[SubmitterClient],
    ids: Vec<String>,
) -> anyhow::Result<Level> {
    let machine_ms = crate::machine::fixed_work_ms();
    let counts_before = kubesim.counts()?;
    let (s_cpu, k_cpu) = (submitter.proc.cpu(), kubesim.proc.cpu());
    submitter.proc.reset_peak();
    let (latencies, errors, seconds) = drive(clients, Arc::new(ids)).await?;
    settle(submitter).await;
    let submissions = latencies.len();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / submissions.max(1) as f64;
    Ok(Level {
        clients: clients.len(),
        submissions,
        errors,
        seconds,
        latencies_ms: Percentiles::of(latencies),
        submitter_cpu_us: per(submitter.proc.cpu() - s_cpu),
        kubesim_cpu_us: per(kubesim.proc.cpu() - k_cpu),
        requests: kubesim.counts()?.since(&counts_before),
        submitter_peak_mib: submitter.proc.peak_kib() as f64 / 1024.0,
        submitter_after_mib: submitter.proc.rss_kib() as f64 / 1024.0,
        machine_ms,
    })
}

/// The submitter's memory with `connections` concurrent keep-alive mTLS clients, each making
/// one request (a duplicate of the one driver the cluster holds), on a kubesim and submitter of
/// their own, so no cached driver of the load is counted.
async fn connection_memory(
    bin_dir: &std::path::Path,
    dir: &std::path::Path,
    connections: usize,
) -> anyhow::Result<ConnectionMemory> {
    let dir = dir.join("connections");
    std::fs::create_dir_all(&dir)?;
    // Room for every connection's request at once: none is shed.
    let Stack {
        kubesim: _kubesim,
        pki,
        submitter,
    } = Stack::start(bin_dir, &dir, 10_000, connections, None).await?;
    let first = client(&submitter.url, &pki)?;
    first.submit(&request("conn-0")).await?;
    // A first duplicate: the driver has reached the caches by then, or does while it waits.
    first.submit(&request("conn-0")).await?;
    let idle_mib = submitter.proc.rss_kib() as f64 / 1024.0;
    submitter.proc.reset_peak();
    let clients: Vec<SubmitterClient> = (0..connections)
        .map(|_| client(&submitter.url, &pki))
        .collect::<anyhow::Result<_>>()?;
    // One request per client, all at once; the clients (and their connections) stay open
    // until measured.
    let errors = submit_once_each(&clients, "conn-0").await?;
    let peak_mib = submitter.proc.peak_kib() as f64 / 1024.0;
    let open_mib = submitter.proc.rss_kib() as f64 / 1024.0;
    Ok(ConnectionMemory {
        connections: clients.len(),
        errors,
        idle_mib,
        peak_mib,
        open_mib,
    })
}

/// Each client submits `id` once, all concurrently; how many answers were errors.
async fn submit_once_each(clients: &[SubmitterClient], id: &str) -> anyhow::Result<usize> {
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .map(|client| {
            let id = id.to_owned();
            tokio::spawn(async move {
                let answer = tokio::time::timeout(LEVEL_BOUND, client.submit(&request(&id))).await;
                matches!(answer, Ok(Ok(_)))
            })
        })
        .collect();
    let mut errors = 0;
    for task in tasks {
        if !task.await? {
            errors += 1;
        }
    }
    Ok(errors)
}

/// Runs the load with the binaries in `bin_dir`.
pub async fn run(
    bin_dir: &std::path::Path,
    dir: &std::path::Path,
    config: &LoadConfig,
) -> anyhow::Result<LoadResult> {
    let total: usize = config
        .levels
        .iter()
        .map(|c| config.per_level.max(2 * c))
        .sum();
    let max_clients = config.levels.iter().copied().max().unwrap_or(1);
    let Stack {
        kubesim,
        pki,
        submitter,
    } = Stack::start(
        bin_dir,
        dir,
        (total * 40).max(100_000),
        max_clients.max(64),
        None,
    )
    .await?;
    let start_to_ready_ms = submitter.started.elapsed().as_secs_f64() * 1e3;
    let idle_submitter_mib = submitter.proc.rss_kib() as f64 / 1024.0;

    // Warm-up: connections, caches, the allocator's first pages.
    let warm: Vec<SubmitterClient> = (0..4)
        .map(|_| client(&submitter.url, &pki))
        .collect::<anyhow::Result<_>>()?;
    let warm_ids: Vec<String> = (0..40).map(|i| format!("warm-{i}")).collect();
    drive(&warm, Arc::new(warm_ids)).await?;

    let mut levels = Vec::new();
    let mut submitted: Vec<String> = Vec::new();
    let split_before = (submitter.proc.user_system(), kubesim.proc.user_system());
    for &clients in &config.levels {
        let n = config.per_level.max(2 * clients);
        let ids: Vec<String> = (0..n).map(|i| format!("load-c{clients}-{i}")).collect();
        let pool: Vec<SubmitterClient> = (0..clients)
            .map(|_| client(&submitter.url, &pki))
            .collect::<anyhow::Result<_>>()?;
        let measured = level(&kubesim, &submitter, &pool, ids.clone()).await?;
        eprintln!(
            "  submitter, {clients} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {:.0} µs CPU/submission, {:.1} requests/submission, {} errors; kubesim {:.0} µs CPU/submission, {} µs/request; peak RSS {:.1} MiB; fixed work {:.0} ms",
            measured.per_second(),
            measured.latencies_ms.p50,
            measured.latencies_ms.p99,
            measured.submitter_cpu_us,
            measured.requests_per_submission(),
            measured.errors,
            measured.kubesim_cpu_us,
            measured.kubesim_cpu_per_request_cell(),
            measured.submitter_peak_mib,
            measured.machine_ms,
        );
        submitted.extend(ids);
        levels.push(measured);
    }

    let kernel_share = KernelShare {
        submitter: KernelShare::of(split_before.0, submitter.proc.user_system()),
        kubesim: KernelShare::of(split_before.1, kubesim.proc.user_system()),
    };

    // Duplicates of drivers the caches hold (the last level's are the newest).
    let dup_ids: Vec<String> = submitted
        .iter()
        .take(config.duplicates.min(submitted.len()))
        .cloned()
        .collect();
    let pool: Vec<SubmitterClient> = (0..8)
        .map(|_| client(&submitter.url, &pki))
        .collect::<anyhow::Result<_>>()?;
    let duplicates = level(&kubesim, &submitter, &pool, dup_ids).await?;
    eprintln!(
        "  submitter, cached duplicates: {:.0}/s, {:.0} µs CPU/duplicate, {:.2} requests/duplicate",
        duplicates.per_second(),
        duplicates.submitter_cpu_us,
        duplicates.requests_per_submission()
    );
    let spark = spark_submit(&kubesim, config.spark_runs)?;

    // A second submitter on the cluster as the run left it.
    let drivers = submitted.len() + 40 + config.spark_runs;
    drop(submitter);
    let second = Submitter::start(bin_dir, dir, &pki, &kubesim.kubeconfig, 64, None)?;
    ready(&second, &pki).await?;
    let (first, next) = (levels.first(), levels.get(1));
    let cache = CacheMemory {
        first_level_mib: first.map_or(0.0, |l| l.submitter_after_mib),
        second_level_mib: next.map_or(0.0, |l| l.submitter_after_mib),
        added: next.map_or(0, |l| l.submissions),
        drivers,
        ready_mib: second.proc.rss_kib() as f64 / 1024.0,
    };
    drop(second);
    drop(kubesim);
    let connections = if config.connections == 0 {
        None
    } else {
        let measured = connection_memory(bin_dir, dir, config.connections).await?;
        eprintln!(
            "  submitter, {} concurrent connections: peak RSS {:.1} MiB ({:.1} MiB ready, {:.1} MiB with all open), {} errors",
            measured.connections,
            measured.peak_mib,
            measured.idle_mib,
            measured.open_mib,
            measured.errors
        );
        Some(measured)
    };
    Ok(LoadResult {
        start_to_ready_ms,
        levels,
        duplicates,
        idle_submitter_mib,
        spark,
        cache,
        connections,
        kernel_share,
    })
}
