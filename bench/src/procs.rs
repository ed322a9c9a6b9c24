//! The processes a benchmark runs and what it reads of them: kubesim and `submitter serve` as
//! child processes (so each one's CPU time and memory are its own), their CPU time from
//! `/proc/<pid>/task/*/schedstat` (nanoseconds, not 10 ms ticks), their resident memory, and
//! kubesim's request counters (`/sim/v1/requests`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The identity the benchmark's clients present.
pub const CLIENT_IDENTITY: &str = "bench.spark.svc";

/// A child process, killed when dropped.
pub struct Proc {
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// User + system CPU time of every thread so far.
    pub fn cpu(&self) -> Duration {
        cpu_time(self.pid())
    }

    /// User and system CPU time so far (10 ms ticks).
    pub fn user_system(&self) -> (Duration, Duration) {
        user_system_time(self.pid()).unwrap_or_default()
    }

    /// Resident memory now, KiB.
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmRSS").unwrap_or(0)
    }

    /// Peak resident memory so far, KiB.
    pub fn peak_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmHWM").unwrap_or(0)
    }

    /// Resets the peak (VmHWM) to the current RSS (`/proc/<pid>/clear_refs`, value 5).
    pub fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of a process: the live threads' schedstat nanoseconds, or `/proc/<pid>/stat`'s
/// utime + stime (10 ms ticks, but counting threads that have exited) when that is larger.
pub fn cpu_time(pid: u32) -> Duration {
    let mut nanos: u64 = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            nanos += schedstat_nanos(&task.path().join("schedstat")).unwrap_or(0);
        }
    }
    let live = Duration::from_nanos(nanos);
    let (user, system) = user_system_time(pid).unwrap_or_default();
    let all = user + system;
    if all > live + Duration::from_millis(20) {
        all
    } else {
        live
    }
}

/// A thread's time on a CPU, in nanoseconds: the first field of its `schedstat` file.
pub fn schedstat_nanos(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// User and system CPU time of a process, every thread's, exited ones too (`/proc/<pid>/stat`,
/// in 10 ms ticks).
pub fn user_system_time(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime); the state (field 3) comes first here.
    let ticks = |i: usize| {
        let n = fields.get(i)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(n * 10))
    };
    Some((ticks(11)?, ticks(12)?))
}

/// A `/proc/<pid>/status` field in KiB.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The workspace's release folder, where the benchmarked binaries are built.
pub fn release_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release"),
        |dir| PathBuf::from(dir).join("release"),
    )
}

/// Builds the release binaries the benchmark runs (a no-op when they are up to date).
pub fn build_binaries() -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "kubesim",
            "-p",
            "submitter",
            "-p",
            "operator",
            "-p",
            "sandbox",
            "--bin",
            "kubesim",
            "--bin",
            "submitter",
            "--bin",
            "operator",
            "--example",
            "scale_bench",
            "--example",
            "store_bench",
        ])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("cargo build of the benchmarked binaries failed");
    }
    Ok(())
}

/// A command running `binary`, under valgrind's callgrind (its counts written to `callgrind`,
/// one file per dump) when given.
fn program(binary: &Path, callgrind: Option<&Path>) -> Command {
    match callgrind {
        None => Command::new(binary),
        Some(out) => {
            let mut command = Command::new("valgrind");
            command
                .arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(binary);
            command
        }
    }
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, std::fs::File)> {
    let path = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    Ok((path, file))
}

/// A kubesim process (plain HTTP, host network, scripted pods only).
pub struct Kubesim {
    pub proc: Proc,
    pub url: String,
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
}

impl Kubesim {
    /// Starts `kubesim serve` keeping `history` events of each type, under callgrind writing
    /// to `callgrind` when given.
    pub fn start(
        bin_dir: &Path,
        dir: &Path,
        history: usize,
        callgrind: Option<&Path>,
    ) -> anyhow::Result<Kubesim> {
        let config = dir.join("kubesim.yaml");
        std::fs::write(&config, format!("network: host\nhistory: {history}\n"))?;
        let kubeconfig = dir.join("kubeconfig");
        let (log, file) = log_file(dir, "kubesim")?;
        let mut child = program(&bin_dir.join("kubesim"), callgrind)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--work-dir")
            .arg(dir.join("kubesim-work"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .context("cannot start kubesim (cargo build --release -p kubesim)")?;
        let stdout = child.stdout.take().context("kubesim's stdout")?;
        let proc = Proc { child, log };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("kubesim printed no URL")?;
        let url = line.trim().to_owned();
        let addr: SocketAddr = url
            .strip_prefix("http://")
            .with_context(|| format!("unexpected kubesim URL {url:?}"))?
            .parse()?;
        Ok(Kubesim {
            proc,
            url,
            addr,
            kubeconfig,
        })
    }

    /// Request counters by (verb, resource), watches under `watch`.
    pub fn counts(&self) -> anyhow::Result<Counts> {
        let (code, body) = http(self.addr, "GET", "/sim/v1/requests")?;
        if code != 200 {
            bail!("/sim/v1/requests answered {code}");
        }
        let rows: Vec<serde_json::Value> = serde_json::from_str(&body)?;
        let mut counts = Counts::default();
        for row in rows {
            let verb = if row["watch"].as_bool() == Some(true) {
                "watch"
            } else {
                row["verb"].as_str().unwrap_or("")
            };
            let resource = row["resource"].as_str().unwrap_or("");
            *counts
                .0
                .entry((verb.to_owned(), resource.to_owned()))
                .or_default() += row["count"].as_u64().unwrap_or(0);
        }
        Ok(counts)
    }
}

/// Requests by (verb, resource).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts(pub BTreeMap<(String, String), u64>);

impl Counts {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Counts) -> Counts {
        Counts(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
        )
    }

    /// Every request but watches (a watch is one long request, counted when it starts).
    pub fn total(&self) -> u64 {
        self.0
            .iter()
            .filter(|((verb, _), _)| verb != "watch")
            .map(|(_, v)| v)
            .sum()
    }
}

/// One plain HTTP/1.1 request on loopback, `Connection: close`: (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status")?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    // kubesim answers small bodies whole; a chunked one is de-chunked here.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((code, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The benchmark's mTLS files (one client identity).
pub type Pki = sandbox::certs::PkiFiles;

/// A `submitter serve` process over mTLS.
pub struct Submitter {
    pub proc: Proc,
    pub url: String,
    pub started: Instant,
}

impl Submitter {
    /// Starts the release binary against `kubeconfig`, under callgrind writing to `callgrind`
    /// when given; returns once it listens.
    pub fn start(
        bin_dir: &Path,
        dir: &Path,
        pki: &Pki,
        kubeconfig: &Path,
        max_concurrency: usize,
        callgrind: Option<&Path>,
    ) -> anyhow::Result<Submitter> {
        let port = free_port()?;
        let (log, file) = log_file(dir, &format!("submitter-{port}"))?;
        let started = Instant::now();
        let child = program(&bin_dir.join("submitter"), callgrind)
            .arg("serve")
            .arg("--kubeconfig")
            .arg(kubeconfig)
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
            // Every client of the load shares one certificate, so one identity's budget would
            // shed half of the top level; as an env var, a baseline build without per-identity
            // budgets ignores it.
            .env(
                "SUBMITTER_MAX_IN_FLIGHT_PER_IDENTITY",
                max_concurrency.to_string(),
            )
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("cannot start the submitter (cargo build --release -p submitter)")?;
        Ok(Submitter {
            proc: Proc { child, log },
            url: format!("https://localhost:{port}"),
            started,
        })
    }
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A short description of the machine: CPU model, cores, memory, kernel.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    format!(
        "{model}, {cores} cores available, {:.1} GiB memory, Linux {kernel}",
        mem_kib as f64 / 1024.0 / 1024.0
    )
}
