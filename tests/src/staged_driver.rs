//! `sandbox staged-driver`: a simulated Spark driver for the fenced-restart tests and the demo.
//!
//! A subcommand of the `sandbox` binary, so `cargo run -p sandbox -- demo` has it without
//! building anything else.
//!
//! It does what a real driver using the recovery agent does, without Spark: restore the latest
//! marker from the agent, run the stages after it one by one, and after each stage commit a marker
//! and only then publish the stage's output. A commit answered `FENCED` means a newer epoch took
//! over: the stage's output is discarded and the driver exits 3 without writing anything more.
//!
//! Environment:
//! - `SPARK_RECOVERY_URL`: the agent, `http://127.0.0.1:<port>` (required; the port is replaced as
//!   the sandbox's agent replaces its own, see `agent_ports`);
//! - `SPARK_RECOVERY_EPOCH`: the epoch, for the log lines only (the agent knows its own);
//! - `STAGES` (default 5), `STAGE_MILLIS` (default 1000): the work;
//! - `OUTPUT`: a file every published stage is appended to (one line per stage);
//! - `JOURNAL`: a file every standard output line is also appended to (it outlives the pod).
//!
//! Arguments (what Spark passes a driver container) are ignored.
//!
//! Standard output, one line per event, `key=value` pairs:
//! `restored stage=<seq|none> epoch=E`, `start stage=S epoch=E`, `commit stage=S epoch=E`,
//! `fenced stage=S epoch=E`, `done stages=N epoch=E`.
//!
//! Exit codes: 0 done, 2 bad configuration, 3 fenced, 4 the agent refused for another reason.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long a commit is retried while the agent answers `STORE_UNAVAILABLE` or cannot be reached
/// (a partitioned node): long enough to outlive any test partition.
const RETRY_FOR: Duration = Duration::from_secs(600);
const RETRY_EVERY: Duration = Duration::from_millis(200);

struct Reply {
    status: u16,
    body: serde_json::Value,
}

/// One HTTP/1.1 request with `Connection: close`; the agent is on loopback and answers small JSON.
fn request(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers in the agent's answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status in the agent's answer"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let payload = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    let body = serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null);
    Ok(Reply { status, body })
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// Retries `op` while the agent is unreachable or answers 503 (not ready, store unavailable).
fn with_retries(what: &str, mut op: impl FnMut() -> std::io::Result<Reply>) -> Option<Reply> {
    let started = Instant::now();
    loop {
        match op() {
            Ok(reply) if reply.status != 503 => return Some(reply),
            Ok(reply) => eprintln!("{what}: agent answered 503 {}; retrying", reply.body),
            Err(e) => eprintln!("{what}: agent unreachable ({e}); retrying"),
        }
        if started.elapsed() > RETRY_FOR {
            eprintln!("{what}: giving up after {RETRY_FOR:?}");
            return None;
        }
        std::thread::sleep(RETRY_EVERY);
    }
}

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a non-negative integer")),
        Err(_) => Ok(default),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // Best effort: a closed stdout or journal must not stop the work.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    if let Ok(path) = std::env::var("JOURNAL") {
        let _ = append(&path, line);
    }
}

fn append(path: &str, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(file, "{line}")?;
    file.sync_data()
}

fn publish(output: Option<&str>, line: &str) -> std::io::Result<()> {
    match output {
        Some(path) => append(path, line),
        None => Ok(()),
    }
}

/// Runs the driver to its exit code.
pub fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(message) => {
            eprintln!("staged-driver: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let url = std::env::var("SPARK_RECOVERY_URL").map_err(|_| "SPARK_RECOVERY_URL is not set")?;
    let addr = url
        .strip_prefix("http://")
        .map(|a| a.trim_end_matches('/').to_owned())
        .ok_or_else(|| format!("SPARK_RECOVERY_URL={url:?} is not http://host:port"))?;
    // On the sandbox's shared loopback the agent of this pod took a port of its own.
    let addr = match addr.rsplit_once(':') {
        Some((host, port)) => match port.parse::<u16>() {
            Ok(port) => format!("{host}:{}", crate::agent_ports::from_env(port)),
            Err(_) => return Err(format!("SPARK_RECOVERY_URL={url:?} has no port")),
        },
        None => return Err(format!("SPARK_RECOVERY_URL={url:?} has no port")),
    };
    let epoch = std::env::var("SPARK_RECOVERY_EPOCH").unwrap_or_else(|_| "?".into());
    let stages = env_u64("STAGES", 5)?;
    let stage_time = Duration::from_millis(env_u64("STAGE_MILLIS", 1000)?);
    let output = std::env::var("OUTPUT").ok();

    let Some(reply) = with_retries("restore", || request(&addr, "GET", "/v1/marker", "")) else {
        return Ok(ExitCode::from(4));
    };
    if reply.status != 200 {
        eprintln!("restore: agent answered {} {}", reply.status, reply.body);
        return Ok(ExitCode::from(4));
    }
    let restored = reply.body["marker"]["seq"].as_u64();
    match restored {
        Some(seq) => say(&format!("restored stage={seq} epoch={epoch}")),
        None => say(&format!("restored stage=none epoch={epoch}")),
    }

    for stage in restored.map_or(1, |s| s + 1)..=stages {
        say(&format!("start stage={stage} epoch={epoch}"));
        std::thread::sleep(stage_time);
        let body =
            serde_json::json!({"seq": stage, "payload": format!("stage-{stage}")}).to_string();
        let Some(reply) = with_retries("commit", || request(&addr, "POST", "/v1/marker", &body))
        else {
            return Ok(ExitCode::from(4));
        };
        match (reply.status, reply.body["error"].as_str()) {
            (200, _) => {
                publish(output.as_deref(), &format!("stage={stage} epoch={epoch}"))
                    .map_err(|e| format!("cannot append to OUTPUT: {e}"))?;
                say(&format!("commit stage={stage} epoch={epoch}"));
            }
            (409, Some("FENCED")) => {
                say(&format!("fenced stage={stage} epoch={epoch}"));
                return Ok(ExitCode::from(3));
            }
            (status, _) => {
                eprintln!("commit: agent answered {status} {}", reply.body);
                return Ok(ExitCode::from(4));
            }
        }
    }
    say(&format!("done stages={stages} epoch={epoch}"));
    Ok(ExitCode::SUCCESS)
}
