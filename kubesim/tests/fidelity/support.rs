//! Starting a cluster and talking to its control API.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kubesim::{Cluster, ClusterConfig};
use serde_json::Value;

/// A started cluster and a kube-rs client for it.
pub struct Sim {
    pub cluster: Cluster,
    pub client: Client,
}

pub async fn start() -> Sim {
    let cluster = Cluster::start(ClusterConfig::default())
        .await
        .expect("cluster starts");
    let client = cluster.client().expect("client");
    Sim { cluster, client }
}

impl Sim {
    /// Sends a raw request and returns (status, body) without interpreting errors.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        // kube's Client turns non-2xx answers into errors; a bare HTTP/1.1 exchange lets tests
        // see exactly what the server sent.
        let uri = format!("{}{path}", self.cluster.url);
        raw_http(&uri, method, content_type, body).await
    }

    pub async fn control(&self, method: &str, path: &str, body: &str) -> Value {
        let (code, v) = self
            .raw(
                method,
                &format!("/sim/v1{path}"),
                Some("application/json"),
                body,
            )
            .await;
        assert!(code < 300, "control {path} failed: {code} {v}");
        v
    }

    /// Number of requests counted for (verb, resource), summed over namespaces.
    pub async fn count(&self, verb: &str, resource: &str) -> u64 {
        let rows = self.control("GET", "/requests", "").await;
        rows.as_array()
            .expect("array")
            .iter()
            .filter(|r| r["verb"] == verb && r["resource"] == resource)
            .map(|r| r["count"].as_u64().unwrap_or(0))
            .sum()
    }
}

/// Minimal HTTP/1.1 client over a TcpStream (Connection: close) so tests see raw answers.
async fn raw_http(uri: &str, method: &str, content_type: Option<&str>, body: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = uri.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).to_string();
    let code: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (
        code,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Polls `f` until it returns Some, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
