//! Real process containers: spawning in their own process group, signalling the whole group,
//! and startup probes.
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

use tokio::io::{AsyncReadExt, AsyncWriteExt};
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

/// Spawns the process; `on_exit` gets its exit code (128+n when killed by signal n).
pub fn spawn(
    spec: SpawnSpec,
    rt: &tokio::runtime::Handle,
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
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .process_group(0)
        .spawn()?;
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

/// How a startup probe checks a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `GET http://127.0.0.1:<port><path>` must answer 2xx.
    Http {
        /// Port.
        port: u16,
        /// Path.
        path: String,
    },
    /// A TCP connection must succeed.
    Tcp {
        /// Port.
        port: u16,
    },
}

/// The probe of a container's `startupProbe` (`httpGet` or `tcpSocket`), resolving named ports.
pub fn startup_probe(container: &serde_json::Value) -> Option<Probe> {
    let probe = container.get("startupProbe")?;
    let port_of = |p: &serde_json::Value| -> Option<u16> {
        match p.get("port")? {
            serde_json::Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            serde_json::Value::String(s) => s.parse().ok().or_else(|| {
                container
                    .get("ports")?
                    .as_array()?
                    .iter()
                    .find(|cp| cp.get("name").and_then(|n| n.as_str()) == Some(s.as_str()))?
                    .get("containerPort")?
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
            }),
            _ => None,
        }
    };
    if let Some(h) = probe.get("httpGet") {
        let port = port_of(h)?;
        // Over HTTPS kubesim only checks that the port accepts connections.
        if h.get("scheme").and_then(|s| s.as_str()) == Some("HTTPS") {
            return Some(Probe::Tcp { port });
        }
        let path = h.get("path").and_then(|p| p.as_str()).unwrap_or("/");
        return Some(Probe::Http {
            port,
            path: if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            },
        });
    }
    probe
        .get("tcpSocket")
        .and_then(port_of)
        .map(|port| Probe::Tcp { port })
}

/// One probe attempt.
pub async fn probe_once(probe: &Probe) -> bool {
    let attempt = async {
        match probe {
            Probe::Tcp { port } => tokio::net::TcpStream::connect(("127.0.0.1", *port))
                .await
                .is_ok(),
            Probe::Http { port, path } => http_ok(*port, path).await.unwrap_or(false),
        }
    };
    tokio::time::timeout(Duration::from_secs(1), attempt)
        .await
        .unwrap_or(false)
}

async fn http_ok(port: u16, path: &str) -> std::io::Result<bool> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.34\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 64];
    while !buf.contains(&b'\n') && buf.len() < 1024 {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .unwrap_or(0);
    Ok((200..300).contains(&code))
}

/// Polls `probe` every `period` until it passes (then calls `on_pass`) or the process exits.
pub fn poll_probe(
    probe: Probe,
    period: Duration,
    exited: Arc<AtomicBool>,
    rt: &tokio::runtime::Handle,
    on_pass: impl FnOnce() + Send + 'static,
) {
    rt.spawn(async move {
        while !exited.load(Ordering::SeqCst) {
            if probe_once(&probe).await {
                on_pass();
                return;
            }
            tokio::time::sleep(period).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn probes_resolve_named_ports() {
        let c = json!({"ports": [{"name": "http", "containerPort": 4040}],
                       "startupProbe": {"httpGet": {"port": "http", "path": "healthz"}}});
        assert_eq!(
            startup_probe(&c),
            Some(Probe::Http {
                port: 4040,
                path: "/healthz".into()
            })
        );
        let c = json!({"startupProbe": {"tcpSocket": {"port": 9000}}});
        assert_eq!(startup_probe(&c), Some(Probe::Tcp { port: 9000 }));
        let c = json!({"startupProbe": {"exec": {"command": ["true"]}}});
        assert_eq!(startup_probe(&c), None);
    }
}
