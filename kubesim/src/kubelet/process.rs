//! Real process containers: spawning in their own process group (inside the pod's namespaces
//! when the pod has its own network) and signalling the whole group.
//!
//! Signals go to the process group (so `sh -c` children die with their shell) through the
//! `kill` program, since kubesim uses no `unsafe` and no libc binding. Stopping sends SIGTERM and
//! escalates to SIGKILL after the grace period; a kill is SIGKILL at once. As a fallback the
//! group leader also gets tokio's `start_kill` (SIGKILL), and `kill_on_drop` reaps leaders if
//! the kubelet goes away.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

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
    /// Where stdout and stderr go.
    pub log: PathBuf,
}

/// Moves the previous instance's log aside (`<c>.previous.log`, as `kubectl logs --previous`
/// would show it) and opens a fresh one.
fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    if log.exists() {
        let prev = log.with_extension("previous.log");
        std::fs::rename(log, prev)?;
    }
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::File::create(log)
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
    let out = open_log(&spec.log)?;
    let err = out.try_clone()?;
    let _guard = rt.enter();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .process_group(0);
    let mut child = launch(&mut cmd)?;
    let pid = child.id().unwrap_or(0);
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
