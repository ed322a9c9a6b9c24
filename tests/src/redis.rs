//! A real `redis-server` on a free loopback port, for the Redis progress store's tests, the
//! end-to-end tests and the store benchmark: the one launcher they all share.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The line `redis-server` logs once it accepts connections.
const READY_LINE: &str = "Ready to accept connections";

/// How long a start may take before it counts as failed.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a `redis-server` could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartRedisError {
    #[error("cannot pick a free loopback port")]
    PickPort(#[source] std::io::Error),
    #[error("cannot run {binary} (is redis-server installed? scripts/install-deps.sh installs it)")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("redis-server did not report ready within {START_TIMEOUT:?}; its last lines: {tail}")]
    NotReady { tail: String },
}

impl StartRedisError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PickPort(_) => "pick_port",
            Self::Spawn { .. } => "spawn",
            Self::NotReady { .. } => "not_ready",
        }
    }
}

/// A `redis-server` child process, killed when dropped. Persistence is off: each one starts empty.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    binary: PathBuf,
}

impl RedisServer {
    /// Starts `redis-server` from `PATH`.
    pub fn start() -> Result<RedisServer, StartRedisError> {
        RedisServer::start_binary(Path::new("redis-server"))
    }

    /// Starts the given binary; retries on another port when the chosen one was taken in between.
    pub fn start_binary(binary: &Path) -> Result<RedisServer, StartRedisError> {
        let mut last = None;
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(StartRedisError::PickPort)?
                .port();
            match spawn_ready(binary, port, &[]) {
                Ok(child) => {
                    return Ok(RedisServer {
                        child,
                        port,
                        binary: binary.to_owned(),
                    });
                }
                Err(error @ StartRedisError::Spawn { .. }) => return Err(error),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or(StartRedisError::NotReady {
            tail: String::new(),
        }))
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (a crash, as far as clients can tell); [`RedisServer::restart`] brings
    /// it back on the same port, empty.
    pub fn kill(&mut self) {
        // Best effort: it may have exited on its own.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server if it runs, then starts a new, empty one on the same port.
    pub fn restart(&mut self) -> Result<(), StartRedisError> {
        self.kill();
        self.child = spawn_ready(&self.binary, self.port, &[])?;
        Ok(())
    }
}

/// Spawns the server on `port` with `extra` options and waits for its ready line; kills it if it
/// never comes.
pub(crate) fn spawn_ready(
    binary: &Path,
    port: u16,
    extra: &[String],
) -> Result<Child, StartRedisError> {
    let mut child = Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| StartRedisError::Spawn {
            binary: binary.display().to_string(),
            source,
        })?;
    let ready = match child.stdout.take() {
        Some(stdout) => wait_ready(stdout),
        None => Err("(no standard output)".to_owned()),
    };
    match ready {
        Ok(()) => Ok(child),
        Err(tail) => {
            // Best effort: the process may already have exited (port taken).
            let _ = child.kill();
            let _ = child.wait();
            Err(StartRedisError::NotReady { tail })
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads the server's log until it is ready; the log's last lines when it exits or stalls. The
/// log is drained on a thread for the server's whole life so a full pipe never blocks it.
fn wait_ready(stdout: ChildStdout) -> Result<(), String> {
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tail: Vec<String> = Vec::new();
        let mut told = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !told && line.contains(READY_LINE) {
                told = true;
                let _ = ready_tx.send(Ok(()));
            }
            if !told {
                tail.push(line);
                if tail.len() > 5 {
                    tail.remove(0);
                }
            }
        }
        if !told {
            let _ = ready_tx.send(Err(tail.join(" | ")));
        }
    });
    ready_rx
        .recv_timeout(START_TIMEOUT)
        .unwrap_or_else(|_| Err("(no line within the timeout)".to_owned()))
}
