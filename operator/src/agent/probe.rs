//! `operator agent probe`: the agent's startup probe as the kubelet runs it, an `exec` probe
//! inside the agent's own container. It asks the agent on the pod's loopback whether the latest
//! marker has been restored (`GET /v1/ready`) and exits 0 only on `200`.
//!
//! Why `exec` and not `httpGet`: a kubelet sends an `httpGet` probe from the node to the pod's IP
//! (or to `host` as the node sees it), never to the pod's own loopback, and the agent listens on
//! loopback only so that nothing outside the pod can reach the marker API. Run inside the
//! container, this probe shares the pod's network and reaches the agent where the driver does.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use super::api::READY_PATH;

/// Bound on each step (connect, then the exchange), so the whole probe stays below the kubelet's
/// default probe timeout of one second; the agent answers on loopback in well under that.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(400);

/// Most bytes of an answer read: the status line is all the probe needs.
const MAX_ANSWER_BYTES: u64 = 4096;

/// The agent did not report ready.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Nothing accepted the connection (the agent is starting or gone).
    #[error("cannot connect to the recovery agent on {addr}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The connection failed or timed out during the exchange.
    #[error("no answer from the recovery agent on {addr}")]
    Exchange {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The agent answered, but not ready (the restore has not finished).
    #[error("the recovery agent is not ready yet (HTTP {status})")]
    NotReady { status: u16 },
    /// The answer has no HTTP status line.
    #[error("the answer on {addr} is not HTTP")]
    Malformed { addr: SocketAddr },
}

impl ProbeError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "connect",
            Self::Exchange { .. } => "exchange",
            Self::NotReady { .. } => "not_ready",
            Self::Malformed { .. } => "malformed",
        }
    }
}

/// One probe of the agent on 127.0.0.1:`port`, bounded by `timeout` per step.
pub fn probe(port: u16, timeout: Duration) -> Result<(), ProbeError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|source| ProbeError::Connect { addr, source })?;
    let exchange = |stream: &mut TcpStream| -> std::io::Result<Vec<u8>> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        write!(
            stream,
            "GET {READY_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: spark-recovery-probe\r\nConnection: close\r\n\r\n"
        )?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER_BYTES).read_to_end(&mut answer)?;
        Ok(answer)
    };
    let answer = exchange(&mut stream).map_err(|source| ProbeError::Exchange { addr, source })?;
    match status_code(&answer) {
        Some(200) => Ok(()),
        Some(status) => Err(ProbeError::NotReady { status }),
        None => Err(ProbeError::Malformed { addr }),
    }
}

/// The status code of an HTTP/1.x answer.
fn status_code(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    words.next().filter(|v| v.starts_with("HTTP/1."))?;
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_http_status_line_gives_a_status() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\n\r\n{}"), Some(200));
        assert_eq!(
            status_code(b"HTTP/1.0 503 Service Unavailable\r\n"),
            Some(503)
        );
        assert_eq!(status_code(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_code(b""), None);
    }
}
