//! Starting a cluster and talking to its control API.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use kube::Client;
use kubesim::kubelet::ImageCommand;
use kubesim::{Cluster, ClusterConfig};
use serde_json::Value;

/// A started cluster and a kube-rs client for it.
pub struct Sim {
    pub cluster: Cluster,
    pub client: Client,
}

/// An image that runs `command` (the container's arguments appended).
pub fn image(command: &[&str]) -> ImageCommand {
    ImageCommand {
        command: command.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
    }
}

/// A cluster where `images` run as real processes.
pub async fn start_with(images: BTreeMap<String, ImageCommand>) -> Sim {
    let cluster = Cluster::start(ClusterConfig {
        images,
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let client = cluster.client().unwrap();
    Sim { cluster, client }
}

/// A cluster where the image `local/shell:1` runs its arguments with `sh -c` as a real process.
pub async fn start_with_images() -> Sim {
    start_with(BTreeMap::from([(
        "local/shell:1".to_string(),
        image(&["sh", "-c"]),
    )]))
    .await
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
    let mut headers = Vec::new();
    if let Some(ct) = content_type {
        headers.push(("Content-Type", ct));
    }
    let r = exchange(uri, method, &headers, body.as_bytes()).await;
    let text = String::from_utf8_lossy(&r.body).to_string();
    (
        r.code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A raw answer: status, headers (names lower-cased) and body bytes.
pub struct RawResponse {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The values of a header.
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl Sim {
    /// Sends a request with any headers and body bytes and returns the raw answer.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> RawResponse {
        exchange(
            &format!("{}{path}", self.cluster.url),
            method,
            headers,
            body,
        )
        .await
    }
}

async fn exchange(uri: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> RawResponse {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = uri.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.expect("read");
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let raw_body = out[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let code: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(&raw_body)
    } else {
        raw_body
    };
    RawResponse {
        code,
        headers,
        body,
    }
}

fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = s.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(String::from_utf8_lossy(&s[..eol]).trim(), 16).unwrap_or(0);
        let rest = &s[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        s = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
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

/// Grants service account `sa` of `ns` the `rules` there: a Role named `role` and a RoleBinding
/// of the same name, created with `client` (an admin's), as a chart would.
pub async fn grant(client: &Client, ns: &str, sa: &str, role: &str, rules: Value) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Api, PostParams};
    let pp = PostParams::default();
    let role_obj: Role =
        serde_json::from_value(serde_json::json!({"metadata": {"name": role}, "rules": rules}))
            .expect("a Role");
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&pp, &role_obj)
        .await
        .expect("create the Role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    }))
    .expect("a RoleBinding");
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&pp, &binding)
        .await
        .expect("create the RoleBinding");
}
