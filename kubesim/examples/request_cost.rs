//! kubesim's CPU cost per API request, side by side for the ways a request can arrive: plain
//! HTTP as the unsecured admin (the baseline), with a service-account token (JWT check and
//! RBAC), asking for protobuf, and over HTTPS with the admin's client certificate. Each variant
//! sends the same GET of one ConfigMap sequentially on one keep-alive connection; the process's
//! CPU time (server and this minimal client together) is divided by the request count, so the
//! differences between rows are what the server adds.
//!
//! `cargo run --release -p kubesim --example request_cost -- [requests]`

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use kubesim::{Cluster, ClusterConfig};

/// CPU seconds (user + system) of this process so far, from /proc (Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|x| x.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks / 100.0
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn plain(addr: std::net::SocketAddr) -> anyhow::Result<Sender> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn tls(cluster: &Cluster) -> anyhow::Result<Sender> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(
        cluster.ca_pem().as_bytes(),
    )?)?;
    let admin = cluster.pki.admin();
    let certs = vec![rustls_pki_types::CertificateDer::from_pem_slice(
        admin.cert.as_bytes(),
    )?];
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(admin.key.as_bytes())?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_client_auth_cert(certs, key)?;
    let stream = tokio::net::TcpStream::connect(cluster.https_addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls_pki_types::ServerName::try_from("localhost")?.to_owned(),
            stream,
        )
        .await?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn run(
    label: &str,
    sender: &mut Sender,
    requests: usize,
    headers: &[(&str, &str)],
) -> anyhow::Result<f64> {
    let path = "/api/v1/namespaces/default/configmaps/probe";
    let send = |sender: &mut Sender| {
        let mut req = hyper::Request::get(path).header("host", "localhost");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Empty::<Bytes>::new()).expect("a valid request");
        sender.send_request(req)
    };
    // Warm up (connection, caches), then measure.
    for _ in 0..200 {
        let resp = send(sender).await?;
        anyhow::ensure!(resp.status() == 200, "{label}: {}", resp.status());
        resp.into_body().collect().await?;
    }
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    for _ in 0..requests {
        let resp = send(sender).await?;
        anyhow::ensure!(resp.status() == 200, "{label}: {}", resp.status());
        resp.into_body().collect().await?;
    }
    let cpu = cpu_seconds() - cpu0;
    let wall = t0.elapsed().as_secs_f64();
    let per = cpu / requests as f64 * 1e6;
    println!(
        "{label:<44} {per:>7.1} µs CPU/request  {:>7.0} requests/s",
        requests as f64 / wall
    );
    Ok(per)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let requests: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let cluster = Cluster::start(ClusterConfig::default()).await?;
    let client = cluster.client()?;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "default");
    cms.create(
        &Default::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": "probe"},
            "data": {"spark.properties": "spark.app.name=pi\nspark.executor.instances=2\n"}}))?,
    )
    .await?;
    // A service account that may read ConfigMaps through a Role among a few other bindings.
    let admin = |path: &str, body: serde_json::Value| {
        let client = client.clone();
        let path = path.to_string();
        async move {
            let req = http::Request::post(path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body)?)?;
            client.request_text(req).await?;
            anyhow::Ok(())
        }
    };
    admin(
        "/api/v1/namespaces/default/serviceaccounts",
        serde_json::json!({"metadata": {"name": "reader"}}),
    )
    .await?;
    admin(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        serde_json::json!({
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    )
    .await?;
    for i in 0..5 {
        admin("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", serde_json::json!({
            "metadata": {"name": format!("other-{i}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": format!("other-{i}"), "namespace": "default"}]})).await?;
    }
    admin(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        serde_json::json!({
        "metadata": {"name": "reader-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}),
    )
    .await?;
    let token = cluster.service_account_token("default", "reader")?;
    let bearer = format!("Bearer {token}");

    println!("{requests} sequential GETs of one ConfigMap per row, one keep-alive connection");
    let base = run(
        "plain HTTP, unsecured admin, JSON",
        &mut plain(cluster.addr).await?,
        requests,
        &[],
    )
    .await?;
    let rows = [
        (
            "plain HTTP, service-account token (RBAC), JSON",
            run(
                "plain HTTP, service-account token (RBAC), JSON",
                &mut plain(cluster.addr).await?,
                requests,
                &[("authorization", bearer.as_str())],
            )
            .await?,
        ),
        (
            "plain HTTP, unsecured admin, protobuf",
            run(
                "plain HTTP, unsecured admin, protobuf",
                &mut plain(cluster.addr).await?,
                requests,
                &[("accept", "application/vnd.kubernetes.protobuf, */*")],
            )
            .await?,
        ),
        (
            "HTTPS, admin client certificate, JSON",
            run(
                "HTTPS, admin client certificate, JSON",
                &mut tls(&cluster).await?,
                requests,
                &[],
            )
            .await?,
        ),
    ];
    for (label, per) in rows {
        println!(
            "{label:<44} {:>+7.1} µs over the baseline ({:.2}x)",
            per - base,
            per / base
        );
    }
    Ok(())
}
