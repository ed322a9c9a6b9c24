//! Container probes as a kubelet runs them: `httpGet` and `tcpSocket` from the node to the pod
//! IP (or to `host` as the node sees it, so `127.0.0.1` is the node's own loopback), `exec`
//! inside the container's namespaces; initial delay, period, timeout and thresholds; failures
//! reported with the kubelet's messages (`Startup probe failed: Get "http://…": dial tcp …:
//! connect: connection refused`). `HTTPS` probes complete a TLS handshake without verifying the
//! server and without a client certificate, then send the same GET, as the kubelet's prober
//! (`InsecureSkipVerify`) does.
//!
//! [`probes_of`] reads a container's probes (pure); [`run_worker`] probes one container
//! instance and reports what a kubelet would act on.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::net::ClusterNet;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

impl ProbeKind {
    /// The word the kubelet's messages use.
    pub fn word(self) -> &'static str {
        match self {
            Self::Startup => "Startup",
            Self::Readiness => "Readiness",
            Self::Liveness => "Liveness",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Startup => "startupProbe",
            Self::Readiness => "readinessProbe",
            Self::Liveness => "livenessProbe",
        }
    }
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `GET scheme://host:port/path` must answer 200–399.
    Http {
        /// `HTTP` or `HTTPS` (TLS without verifying the server, no client certificate).
        https: bool,
        /// `host`, else the pod IP.
        host: Option<String>,
        /// Port.
        port: u16,
        /// Path (with a leading `/`).
        path: String,
        /// `httpHeaders`.
        headers: Vec<(String, String)>,
    },
    /// A TCP connection must open.
    Tcp {
        /// `host`, else the pod IP.
        host: Option<String>,
        /// Port.
        port: u16,
    },
    /// The command must exit 0.
    Exec {
        /// `command`.
        command: Vec<String>,
    },
    /// A probe kubesim cannot run (gRPC): it passes, so it never holds a pod.
    Unsupported,
}

/// One probe of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Which one.
    pub kind: ProbeKind,
    /// What it does.
    pub check: Check,
    /// `initialDelaySeconds`.
    pub initial_delay: Duration,
    /// `periodSeconds` (default 10).
    pub period: Duration,
    /// `timeoutSeconds` (default 1).
    pub timeout: Duration,
    /// `successThreshold` (default 1).
    pub success_threshold: u32,
    /// `failureThreshold` (default 3).
    pub failure_threshold: u32,
}

fn port_of(container: &Value, p: &Value) -> Option<u16> {
    match p.get("port")? {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(s) => s.parse().ok().or_else(|| {
            container
                .get("ports")?
                .as_array()?
                .iter()
                .find(|cp| cp.get("name").and_then(Value::as_str) == Some(s.as_str()))?
                .get("containerPort")?
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
        }),
        _ => None,
    }
}

fn host_of(action: &Value) -> Option<String> {
    action
        .get("host")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// The container's probes, in the order startup, readiness, liveness. A probe whose port
/// cannot be resolved is an error (the kubelet reports it on every attempt).
pub fn probes_of(container: &Value) -> Vec<Probe> {
    let mut out = Vec::new();
    for kind in [
        ProbeKind::Startup,
        ProbeKind::Readiness,
        ProbeKind::Liveness,
    ] {
        let Some(p) = container.get(kind.field()) else {
            continue;
        };
        let secs = |f: &str, default: u64| {
            p.get(f)
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        let check = if let Some(h) = p.get("httpGet") {
            let path = h.get("path").and_then(Value::as_str).unwrap_or("/");
            match port_of(container, h) {
                Some(port) => Check::Http {
                    https: h.get("scheme").and_then(Value::as_str) == Some("HTTPS"),
                    host: host_of(h),
                    port,
                    path: if path.starts_with('/') {
                        path.to_string()
                    } else {
                        format!("/{path}")
                    },
                    headers: h
                        .get("httpHeaders")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|hd| {
                            Some((
                                hd.get("name")?.as_str()?.to_string(),
                                hd.get("value")?.as_str()?.to_string(),
                            ))
                        })
                        .collect(),
                },
                None => Check::Unsupported,
            }
        } else if let Some(t) = p.get("tcpSocket") {
            match port_of(container, t) {
                Some(port) => Check::Tcp {
                    host: host_of(t),
                    port,
                },
                None => Check::Unsupported,
            }
        } else if let Some(e) = p.get("exec") {
            Check::Exec {
                command: e
                    .get("command")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect(),
            }
        } else {
            Check::Unsupported
        };
        out.push(Probe {
            kind,
            check,
            initial_delay: Duration::from_secs(
                p.get("initialDelaySeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            ),
            period: Duration::from_secs(secs("periodSeconds", 10)),
            timeout: Duration::from_secs(secs("timeoutSeconds", 1)),
            // Startup and liveness probes must have a success threshold of 1.
            success_threshold: if kind == ProbeKind::Readiness {
                u32::try_from(secs("successThreshold", 1)).unwrap_or(1)
            } else {
                1
            },
            failure_threshold: u32::try_from(secs("failureThreshold", 3)).unwrap_or(3),
        });
    }
    out
}

/// Where a container runs, for its probes.
#[derive(Clone)]
pub struct Target {
    /// The pod's IP.
    pub pod_ip: String,
    /// The cluster network (`None`: pods share the host's network).
    pub net: Option<Arc<ClusterNet>>,
    /// The container's process (exec probes join its namespaces).
    pub pid: u32,
    /// The container's environment and working directory (exec probes run with them).
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Set once the container instance has exited.
    pub exited: Arc<AtomicBool>,
}

/// One probe attempt: `Ok(())` or the failure text the kubelet reports.
pub async fn probe_once(check: &Check, timeout: Duration, target: &Target) -> Result<(), String> {
    match check {
        Check::Unsupported => Ok(()),
        Check::Tcp { host, port } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.clone());
            dial(&host, *port, timeout, target).await.map(|_| ())
        }
        Check::Http {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.clone());
            let scheme = if *https { "https" } else { "http" };
            let url = format!("{scheme}://{}{path}", join_host_port(&host, *port));
            let get = async {
                let mut s = dial(&host, *port, timeout, target)
                    .await
                    .map_err(|e| format!("Get \"{url}\": {e}"))?;
                let got = if *https {
                    let mut s = tls_handshake(s, &host)
                        .await
                        .map_err(|e| format!("Get \"{url}\": {e}"))?;
                    let got = http_get(&mut s, &host, *port, path, headers).await;
                    // Go's client ends the session with close_notify; the server sees no
                    // truncated connection.
                    let _ = s.shutdown().await;
                    got
                } else {
                    http_get(&mut s, &host, *port, path, headers).await
                };
                got.map_err(|e| match e {
                    HttpFailure::Status(code) => {
                        format!("HTTP probe failed with statuscode: {code}")
                    }
                    HttpFailure::Io(e) => format!("Get \"{url}\": {e}"),
                })
            };
            match tokio::time::timeout(timeout, get).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                )),
            }
        }
        Check::Exec { command } => exec(command, timeout, target).await,
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Opens a TCP connection as the node would, with Go's error text on failure.
async fn dial(
    host: &str,
    port: u16,
    timeout: Duration,
    target: &Target,
) -> Result<TcpStream, String> {
    let hp = join_host_port(host, port);
    let ip: IpAddr = match host {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        _ => host
            .parse()
            .map_err(|_| format!("dial tcp: lookup {host}: no such host"))?,
    };
    let addr = SocketAddr::new(ip, port);
    let connect = async {
        match (&target.net, addr) {
            (Some(net), SocketAddr::V4(_)) => net.connect(addr).await,
            _ => TcpStream::connect(addr).await,
        }
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("dial tcp {hp}: connect: {}", go_errno(&e))),
        Err(_) => Err(format!("dial tcp {hp}: i/o timeout")),
    }
}

/// The text Go prints for a connect error.
fn go_errno(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".into(),
        NetworkUnreachable => "network is unreachable".into(),
        HostUnreachable => "no route to host".into(),
        ConnectionReset => "connection reset by peer".into(),
        _ => e.to_string(),
    }
}

/// The kubelet's prober verifies no server certificate (Go's `InsecureSkipVerify`): serving
/// certificates of pods are rarely issued for their pod IPs. The handshake's own signatures are
/// still checked, as Go checks them.
#[derive(Debug)]
struct AnyServerCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The prober's TLS client: no ALPN (its transport speaks HTTP/1.1), no client certificate.
fn probe_tls_config() -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A TLS session over `s` to `host` (an address: no SNI is sent, as Go sends none for one).
async fn tls_handshake(
    s: TcpStream,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let config = probe_tls_config()?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, s)
        .await
        .map_err(|e| {
            let plain_http = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|tls| {
                    matches!(
                        tls,
                        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
                    )
                });
            if plain_http {
                // Go's transport names this case.
                "http: server gave HTTP response to HTTPS client".to_owned()
            } else {
                e.to_string()
            }
        })
}

enum HttpFailure {
    Status(u16),
    Io(String),
}

async fn http_get(
    s: &mut (impl AsyncRead + AsyncWrite + Unpin),
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> Result<(), HttpFailure> {
    let io = |e: std::io::Error| HttpFailure::Io(e.to_string());
    let host_header = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| join_host_port(host, port));
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {host_header}\r\n");
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
    {
        req.push_str("User-Agent: kube-probe/1.34\r\n");
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
    {
        req.push_str("Accept: */*\r\n");
    }
    for (k, v) in headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
    {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.map_err(io)?;
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 64];
    while !buf.contains(&b'\n') && buf.len() < 1024 {
        let n = s.read(&mut chunk).await.map_err(io)?;
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
        .ok_or_else(|| HttpFailure::Io("malformed HTTP response".into()))?;
    // Go's client follows redirects; a kubelet counts any answer below 400 as success.
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(HttpFailure::Status(code))
    }
}

/// Runs an exec probe in the container's namespaces with its environment.
async fn exec(command: &[String], timeout: Duration, target: &Target) -> Result<(), String> {
    let Some((program, args)) = command.split_first() else {
        return Err("exec probe has no command".into());
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(target.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&target.cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let rt = tokio::runtime::Handle::current();
    let pid = target.pid;
    let spawned = match target.net {
        Some(_) => crate::net::ns::on_thread(|| {
            crate::net::ns::enter_process(pid)?;
            let _guard = rt.enter();
            cmd.spawn()
        }),
        None => cmd.spawn(),
    };
    let child = spawned.map_err(|e| format!("failed to exec in container: {e}"))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            Err(text)
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("command {command:?} timed out")),
    }
}

/// What a probe worker tells the kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// One attempt failed with this text (an `Unhealthy` event).
    Failed(String),
    /// The probe's result changed: startup passed (`true`) or gave up (`false`), readiness
    /// turned on or off, liveness gave up (`false`).
    Result(bool),
}

/// Probes one container instance until it exits, or until the probe's job is done (a startup
/// probe that passed or gave up, a liveness probe that gave up).
pub async fn run_worker(probe: Probe, target: Target, report: impl Fn(Report) + Send + 'static) {
    tokio::time::sleep(probe.initial_delay).await;
    let (mut successes, mut failures) = (0u32, 0u32);
    // Readiness starts false; the other probes report only a final outcome.
    let mut ready = false;
    while !target.exited.load(Ordering::SeqCst) {
        let outcome = probe_once(&probe.check, probe.timeout, &target).await;
        if target.exited.load(Ordering::SeqCst) {
            return;
        }
        match outcome {
            Ok(()) => {
                failures = 0;
                successes = successes.saturating_add(1);
                if successes >= probe.success_threshold {
                    match probe.kind {
                        ProbeKind::Startup => return report(Report::Result(true)),
                        ProbeKind::Readiness if !ready => {
                            ready = true;
                            report(Report::Result(true));
                        }
                        _ => {}
                    }
                }
            }
            Err(text) => {
                successes = 0;
                failures = failures.saturating_add(1);
                report(Report::Failed(text));
                if failures >= probe.failure_threshold {
                    match probe.kind {
                        ProbeKind::Startup | ProbeKind::Liveness => {
                            return report(Report::Result(false));
                        }
                        ProbeKind::Readiness if ready => {
                            ready = false;
                            report(Report::Result(false));
                        }
                        ProbeKind::Readiness => {}
                    }
                }
            }
        }
        tokio::time::sleep(probe.period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn probes_resolve_named_ports_hosts_and_defaults() {
        let c = json!({"ports": [{"name": "http", "containerPort": 4040}],
                       "startupProbe": {"httpGet": {"port": "http", "path": "healthz", "host": "127.0.0.1"},
                                        "periodSeconds": 1, "failureThreshold": 300},
                       "readinessProbe": {"tcpSocket": {"port": 9000}, "successThreshold": 2},
                       "livenessProbe": {"exec": {"command": ["cat", "/tmp/ok"]}}});
        let probes = probes_of(&c);
        assert_eq!(probes.len(), 3);
        assert_eq!(
            probes[0].check,
            Check::Http {
                https: false,
                host: Some("127.0.0.1".into()),
                port: 4040,
                path: "/healthz".into(),
                headers: vec![]
            }
        );
        assert_eq!(
            (probes[0].period, probes[0].failure_threshold),
            (Duration::from_secs(1), 300)
        );
        assert_eq!(
            probes[1].check,
            Check::Tcp {
                host: None,
                port: 9000
            }
        );
        assert_eq!(
            (probes[1].success_threshold, probes[1].period),
            (2, Duration::from_secs(10))
        );
        assert_eq!(
            probes[2].check,
            Check::Exec {
                command: vec!["cat".into(), "/tmp/ok".into()]
            }
        );
        assert_eq!(
            (probes[2].timeout, probes[2].failure_threshold),
            (Duration::from_secs(1), 3)
        );
        let grpc = json!({"livenessProbe": {"grpc": {"port": 1}}});
        assert_eq!(probes_of(&grpc)[0].check, Check::Unsupported);
    }

    #[tokio::test]
    async fn a_refused_http_probe_reads_like_the_kubelets() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let target = Target {
            pod_ip: "127.0.0.1".into(),
            net: None,
            pid: 0,
            env: vec![],
            cwd: std::env::temp_dir(),
            exited: Arc::new(AtomicBool::new(false)),
        };
        let check = Check::Http {
            https: false,
            host: None,
            port,
            path: "/ready".into(),
            headers: vec![],
        };
        let err = probe_once(&check, Duration::from_secs(1), &target)
            .await
            .expect_err("refused");
        assert_eq!(
            err,
            format!(
                "Get \"http://127.0.0.1:{port}/ready\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }

    /// A TLS server on loopback answering each request with the status its path names
    /// (`/200`, `/503`); returns its port and the requests it saw (`path user-agent`).
    async fn tls_server() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let cert =
            rcgen::generate_simple_self_signed(vec!["pod.example".to_owned()]).expect("cert");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (seen, requests) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(mut s) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).await.unwrap_or(0) == 1
                    {
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let agent = head
                        .lines()
                        .find_map(|l| l.strip_prefix("User-Agent: "))
                        .unwrap_or("")
                        .to_owned();
                    let _ = seen.send(format!("{path} {agent}"));
                    let code = path.trim_start_matches('/');
                    let answer = format!(
                        "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = s.write_all(answer.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        (port, requests)
    }

    fn loopback() -> Target {
        Target {
            pod_ip: "127.0.0.1".into(),
            net: None,
            pid: 0,
            env: vec![],
            cwd: std::env::temp_dir(),
            exited: Arc::new(AtomicBool::new(false)),
        }
    }

    fn https(port: u16, path: &str) -> Check {
        Check::Http {
            https: true,
            host: None,
            port,
            path: path.into(),
            headers: vec![],
        }
    }

    #[tokio::test]
    async fn an_https_probe_gets_its_answer_over_tls_whatever_the_certificate() {
        let (port, mut requests) = tls_server().await;
        let timeout = Duration::from_secs(5);
        // A self-signed certificate for another name: the kubelet does not verify it.
        probe_once(&https(port, "/200"), timeout, &loopback())
            .await
            .expect("200 passes");
        assert_eq!(
            requests.recv().await.as_deref(),
            Some("/200 kube-probe/1.34")
        );
        let err = probe_once(&https(port, "/503"), timeout, &loopback())
            .await
            .expect_err("503 fails");
        assert_eq!(err, "HTTP probe failed with statuscode: 503");
        assert_eq!(
            requests.recv().await.as_deref(),
            Some("/503 kube-probe/1.34")
        );
    }

    #[tokio::test]
    async fn an_https_probe_of_a_plain_http_port_fails() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            }
        });
        let err = probe_once(
            &https(port, "/healthz"),
            Duration::from_secs(5),
            &loopback(),
        )
        .await
        .expect_err("no TLS, no answer");
        assert_eq!(
            err,
            format!(
                "Get \"https://127.0.0.1:{port}/healthz\": http: server gave HTTP response to HTTPS client"
            )
        );
    }
}
