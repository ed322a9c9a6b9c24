//! Real process containers: spawning in their own process group (inside the pod's namespaces
//! when the pod has its own network) and signalling the whole group.
//!
//! Signals go to the process group (so `sh -c` children die with their shell) through the
//! `kill` program, since kubesim uses no `unsafe` and no libc binding. Stopping sends SIGTERM and
//! escalates to SIGKILL after the grace period; a kill is SIGKILL at once. As a fallback the
//! group leader also gets tokio's `start_kill` (SIGKILL), and `kill_on_drop` reaps leaders if
//! the kubelet goes away.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead};
use tokio::sync::Notify;

use super::container_log::{self, MAX_RECORD, Stream};

/// A running process container instance.
#[derive(Debug, Clone)]
pub struct ProcHandle {
    /// Pid of the group leader (= the process group id).
    pub pid: u32,
    /// Wakes the waiter to SIGKILL the leader directly.
    kill: Arc<Notify>,
    /// Set once the leader has exited.
    exited: Arc<AtomicBool>,
}

impl ProcHandle {
    /// Whether the process has exited.
    pub fn has_exited(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
    }

    /// SIGKILLs the process group now.
    pub fn kill_now(&self) {
        if !self.has_exited() {
            signal_group(self.pid, "KILL");
            self.kill.notify_one();
        }
    }

    /// SIGTERMs the process group, and SIGKILLs it if it is still there after `grace`.
    pub fn terminate(&self, grace: Duration, rt: &tokio::runtime::Handle) {
        if self.has_exited() {
            return;
        }
        signal_group(self.pid, "TERM");
        let me = self.clone();
        rt.spawn(async move {
            tokio::time::sleep(grace).await;
            me.kill_now();
        });
    }

    /// A flag that turns true when the process exits (for probes).
    pub fn exited_flag(&self) -> Arc<AtomicBool> {
        self.exited.clone()
    }
}

/// Sends `SIG<sig>` to the process group `pgid` (failure means it is already gone).
fn signal_group(pgid: u32, sig: &str) {
    let result = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = result {
        tracing::warn!(pgid, sig, error = %e, "could not run kill");
    }
}

/// Everything needed to spawn one container instance.
#[derive(Debug)]
pub struct SpawnSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Environment added to kubesim's own.
    pub env: Vec<(String, String)>,
    /// Working directory (the pod root).
    pub cwd: PathBuf,
    /// The log file stdout and stderr are written to, as CRI records.
    pub log: PathBuf,
    /// Rung after each record written, for followers of the log.
    pub bell: Arc<Notify>,
}

/// How long an exit waits for the container's outputs to be drained into its log; only a
/// process left behind that holds them open makes it wait this long.
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// Where the instance before the current one keeps its log.
pub fn previous_log(log: &Path) -> PathBuf {
    log.with_extension("previous.log")
}

/// Moves the previous instance's log aside (`<c>.previous.log`, as `kubectl logs --previous`
/// would show it) and opens a fresh one.
fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    if log.exists() {
        std::fs::rename(log, previous_log(log))?;
    }
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Appending: the two copiers write whole records through handles that share the file.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
}

/// Copies one of the container's outputs into its log, one CRI record per line (cut at
/// [`MAX_RECORD`]), stamped when read, as a container runtime does.
async fn copy_output(
    from: impl AsyncRead + Unpin,
    stream: Stream,
    mut to: std::fs::File,
    bell: Arc<Notify>,
) {
    let mut reader = tokio::io::BufReader::with_capacity(MAX_RECORD, from);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match read_record(&mut reader, &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let record = container_log::record(SystemTime::now(), stream, &line);
        if let Err(e) = to.write_all(&record) {
            tracing::warn!(error = %e, "could not write a container's log");
            return;
        }
        bell.notify_waiters();
    }
}

/// Reads one line (with its newline), or at most [`MAX_RECORD`] bytes of one, or what is left
/// at the end of the output.
async fn read_record(
    r: &mut (impl AsyncBufRead + Unpin),
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(out.len());
        }
        let room = (MAX_RECORD - out.len()).min(buf.len());
        let take = buf[..room]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(room, |i| i + 1);
        out.extend_from_slice(&buf[..take]);
        r.consume(take);
        if out.last() == Some(&b'\n') || out.len() >= MAX_RECORD {
            return Ok(out.len());
        }
    }
}

/// Spawns the process through `launch` (which starts the command where the container runs);
/// `on_exit` gets its exit code (128+n when killed by signal n).
pub fn spawn(
    spec: SpawnSpec,
    rt: &tokio::runtime::Handle,
    launch: impl FnOnce(&mut tokio::process::Command) -> std::io::Result<tokio::process::Child>,
    on_exit: impl FnOnce(i32) + Send + 'static,
) -> std::io::Result<ProcHandle> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no command: the image has no command and the container sets none",
        ));
    };
    let log = open_log(&spec.log)?;
    let log_err = log.try_clone()?;
    let _guard = rt.enter();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = launch(&mut cmd)?;
    let pid = child.id().unwrap_or(0);
    let mut copiers = Vec::new();
    if let Some(out) = child.stdout.take() {
        copiers.push(rt.spawn(copy_output(out, Stream::Stdout, log, spec.bell.clone())));
    }
    if let Some(err) = child.stderr.take() {
        copiers.push(rt.spawn(copy_output(err, Stream::Stderr, log_err, spec.bell)));
    }
    let kill = Arc::new(Notify::new());
    let exited = Arc::new(AtomicBool::new(false));
    let handle = ProcHandle {
        pid,
        kill: kill.clone(),
        exited: exited.clone(),
    };
    rt.spawn(async move {
        let status = tokio::select! {
            s = child.wait() => s,
            () = kill.notified() => {
                let _ = child.start_kill();
                child.wait().await
            }
        };
        exited.store(true, Ordering::SeqCst);
        // Everything the container wrote is in its log before its exit is reported, so a
        // follower that sees the exit and reads to the end has every line.
        let drained = futures::future::join_all(copiers);
        if tokio::time::timeout(LOG_DRAIN, drained).await.is_err() {
            tracing::debug!(pid, "a container's outputs stay open after its exit");
        }
        let code = match status {
            Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
            Err(e) => {
                tracing::warn!(pid, error = %e, "waiting for a container process failed");
                128
            }
        };
        on_exit(code);
    });
    Ok(handle)
}
