//! Starting a whole simulated cluster: store, controllers, kubelet and the HTTP server.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::api::{self, AppState};
use crate::auth::{Authenticator, TokenSpec};
use crate::control::Control;
use crate::kubeconfig::Credentials;
use crate::kubelet::{ImageCommand, Kubelet, KubeletConfig};
use crate::store::{Store, WriteOpts};
use crate::tls::Pki;

/// The block Service ClusterIPs come from: the upper half of 198.18.0.0/15 (reserved for
/// benchmarking, so no real network uses it); pod addresses take the lower half.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 19, 0, 0), 16);

/// The ClusterIP of `default/kubernetes`, the API server's in-cluster address: the first
/// address of [`SERVICE_CIDR`], as a real cluster gives it the first address of its service
/// range. The serving certificate names it.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

/// How to run a cluster (the YAML of `kubesim serve --config`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterConfig {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Node names.
    pub nodes: Vec<String>,
    /// Images that run as real local processes.
    pub images: std::collections::BTreeMap<String, ImageCommand>,
    /// Where pods' volumes and logs live (a temporary folder when unset).
    pub work_dir: Option<PathBuf>,
    /// Events kept for watch resumption.
    pub history: usize,
    /// Interval between watch bookmarks, in milliseconds.
    pub bookmark_millis: u64,
    /// Kubelet step (scheduling and start-up delay), in milliseconds.
    pub tick_millis: u64,
    /// Address of the HTTPS listener (port 0 picks a free one); the plain-HTTP one is
    /// `listen`.
    pub https_listen: SocketAddr,
    /// The ClusterIP of `default/kubernetes` (and an address of the serving certificate).
    pub kubernetes_service_ip: Ipv4Addr,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        let kubelet = KubeletConfig::default();
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodes: kubelet.nodes,
            images: kubelet.images,
            work_dir: None,
            history: 100_000,
            bookmark_millis: 1_000,
            tick_millis: kubelet.tick.as_millis() as u64,
            https_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            kubernetes_service_ip: KUBERNETES_SERVICE_IP,
        }
    }
}

/// Why a cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The work folder could not be made.
    #[error("cannot create work directory")]
    WorkDir(#[source] std::io::Error),
    /// The built-in namespaces could not be created.
    #[error("cannot create namespace {0}")]
    Bootstrap(String),
    /// The kube-rs client could not be configured.
    #[error("cannot build a client for {url}")]
    Client {
        /// The server URL.
        url: String,
        /// The cause.
        source: kube::Error,
    },
    /// The cluster's certificates could not be made.
    #[error("cannot make the cluster's certificates")]
    Tls(#[source] crate::tls::PkiError),
    /// A kubeconfig for a client could not be read back.
    #[error("cannot read the kubeconfig made for a client")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// A service-account token could not be issued.
    #[error("cannot issue a token")]
    Token(#[source] crate::auth::IssueError),
}

impl StartError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bind { .. } => "bind",
            Self::WorkDir(_) => "work_dir",
            Self::Bootstrap(_) => "bootstrap",
            Self::Client { .. } => "client",
            Self::Tls(_) => "tls",
            Self::Kubeconfig(_) => "kubeconfig",
            Self::Token(_) => "token",
        }
    }
}

/// A running simulated cluster. Dropping it stops the server.
pub struct Cluster {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
    /// The object store (for tests that look behind the API).
    pub store: Arc<Store>,
    /// Counters and fault rules.
    pub control: Arc<Control>,
    /// The kubelet.
    pub kubelet: Arc<Kubelet>,
    /// `https://127.0.0.1:PORT`: the same API over TLS, with authentication and RBAC.
    pub https_url: String,
    /// The HTTPS listener's address.
    pub https_addr: SocketAddr,
    /// The cluster's CA, serving and admin certificates.
    pub pki: Arc<Pki>,
    /// Issues and checks credentials (service-account tokens).
    pub auth: Arc<Authenticator>,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    _work_dir: Option<tempfile::TempDir>,
}

impl Cluster {
    /// Starts a cluster on the current tokio runtime and returns once it accepts requests.
    pub async fn start(config: ClusterConfig) -> Result<Self, StartError> {
        let (work_dir, temp) = match &config.work_dir {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(StartError::WorkDir)?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("kubesim-")
                    .tempdir()
                    .map_err(StartError::WorkDir)?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        // Bound before the kubelet starts: its processes' kubeconfigs name the address. Requests
        // wait in the backlog until the server runs below.
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        let url = format!("http://{addr}");
        let https_listener = tokio::net::TcpListener::bind(config.https_listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.https_listen,
                source,
            })?;
        let https_addr = https_listener
            .local_addr()
            .map_err(|source| StartError::Bind {
                addr: config.https_listen,
                source,
            })?;
        let pki =
            Arc::new(Pki::generate(config.kubernetes_service_ip.into()).map_err(StartError::Tls)?);
        let tls_config = pki.server_config().map_err(StartError::Tls)?;
        let store = Store::new(config.history);
        bootstrap(&store)?;
        bootstrap_api_server(&store, config.kubernetes_service_ip, https_addr.port())?;
        crate::gc::start(store.clone());
        crate::rbac::start_aggregator(store.clone());
        crate::apps::start(store.clone());
        // Made before the kubelet, which needs to issue pods' service-account tokens (and the
        // CA, `pki`, for their `ca.crt`).
        let auth = Arc::new(Authenticator::new(store.clone()));
        let kubelet = Kubelet::start(
            store.clone(),
            KubeletConfig {
                nodes: config.nodes.clone(),
                images: config.images.clone(),
                work_dir,
                tick: Duration::from_millis(config.tick_millis.max(1)),
                api_url: Some(url.clone()),
            },
        );
        let control = Arc::new(Control::default());
        let state = AppState {
            store: store.clone(),
            control: control.clone(),
            kubelet: kubelet.clone(),
            bookmark_interval: Duration::from_millis(config.bookmark_millis.max(10)),
            auth: auth.clone(),
        };
        let (tx, rx) = tokio::sync::watch::channel(false);
        let app = api::router(state);
        tokio::spawn(crate::tls::serve(
            https_listener,
            tls_config,
            app.clone(),
            rx.clone(),
        ));
        let mut plain_rx = rx;
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = plain_rx.changed().await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "kubesim server stopped");
            }
        });
        Ok(Self {
            url,
            addr,
            store,
            control,
            kubelet,
            https_url: format!("https://{https_addr}"),
            https_addr,
            pki,
            auth,
            shutdown: Some(tx),
            _work_dir: temp,
        })
    }

    /// The CA certificate (PEM) that signed the API server's serving certificate: what
    /// clients trust, and the `ca.crt` of every service-account volume.
    pub fn ca_pem(&self) -> String {
        self.pki.ca_pem()
    }

    /// The kubeconfig for the HTTPS listener as the admin (`kubernetes-admin` in
    /// `system:masters`, by client certificate), default namespace `default`.
    pub fn https_kubeconfig(&self) -> String {
        let admin = self.pki.admin();
        crate::kubeconfig::render_https(
            &self.https_url,
            &self.ca_pem(),
            Credentials::ClientCertificate {
                cert: &admin.cert,
                key: &admin.key,
            },
            "default",
        )
    }

    /// A kubeconfig for the HTTPS listener that authenticates with `token` (a service-account
    /// token), default namespace `namespace`.
    pub fn token_kubeconfig(&self, token: &str, namespace: &str) -> String {
        crate::kubeconfig::render_https(
            &self.https_url,
            &self.ca_pem(),
            Credentials::Token(token),
            namespace,
        )
    }

    /// Writes the HTTPS admin kubeconfig atomically.
    pub fn write_https_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.https_kubeconfig())?;
        std::fs::rename(tmp, path)
    }

    /// A service-account token for `namespace/service_account` (an hour, the API server's
    /// audience, bound to no pod), as a TokenRequest would return it.
    pub fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
    ) -> Result<String, StartError> {
        self.auth
            .issue(&TokenSpec {
                namespace: namespace.to_string(),
                service_account: service_account.to_string(),
                audiences: Vec::new(),
                expiration_seconds: crate::auth::DEFAULT_EXPIRATION_SECONDS,
                bound_pod: None,
            })
            .map(|t| t.token)
            .map_err(StartError::Token)
    }

    /// A kube-rs client over HTTPS from a kubeconfig text (as `https_kubeconfig` or
    /// `token_kubeconfig` write it): real TLS, real credentials.
    pub async fn client_from_kubeconfig(text: &str) -> Result<kube::Client, StartError> {
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(text).map_err(StartError::Kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(StartError::Kubeconfig)?;
        let url = config.cluster_url.to_string();
        kube::Client::try_from(config).map_err(|source| StartError::Client { url, source })
    }

    /// A kube-rs client for the HTTPS listener as the admin.
    pub async fn https_client(&self) -> Result<kube::Client, StartError> {
        Self::client_from_kubeconfig(&self.https_kubeconfig()).await
    }

    /// A kube-rs client for this cluster (default namespace `default`).
    pub fn client(&self) -> Result<kube::Client, StartError> {
        let uri = self
            .url
            .parse()
            .expect("a URL made from a socket address is a valid URI");
        kube::Client::try_from(kube::Config::new(uri)).map_err(|source| StartError::Client {
            url: self.url.clone(),
            source,
        })
    }

    /// The kubeconfig text for this cluster.
    pub fn kubeconfig(&self) -> String {
        crate::kubeconfig::render(&self.url)
    }

    /// Writes the kubeconfig atomically (so a reader never sees half a file).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.kubeconfig())?;
        std::fs::rename(tmp, path)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
    }
}

/// What the API server itself creates in a new cluster: the default RBAC policy and the
/// `default/kubernetes` Service naming the API server's in-cluster address (HTTPS on 443,
/// forwarded to the HTTPS listener's port).
fn bootstrap_api_server(
    store: &Arc<Store>,
    service_ip: Ipv4Addr,
    https_port: u16,
) -> Result<(), StartError> {
    let registry = store.registry();
    for (plural, obj) in crate::rbac::default_policy() {
        let rt = registry
            .find(crate::rbac::GROUP, "v1", plural)
            .ok_or_else(|| StartError::Bootstrap(format!("{plural} type missing")))?;
        let name = crate::meta::name(&obj).to_string();
        store
            .create(&rt, "", obj, &WriteOpts::default())
            .map_err(|_| StartError::Bootstrap(name))?;
    }
    let svc_rt = registry
        .find("", "v1", "services")
        .ok_or_else(|| StartError::Bootstrap("services type missing".into()))?;
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": service_ip.to_string(),
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": https_port}],
            "sessionAffinity": "None",
        },
    });
    store
        .create(&svc_rt, "default", svc, &WriteOpts::default())
        .map_err(|_| StartError::Bootstrap("service default/kubernetes".into()))?;
    Ok(())
}

/// The namespaces every cluster starts with, and their default service accounts.
fn bootstrap(store: &Arc<Store>) -> Result<(), StartError> {
    let registry = store.registry();
    let ns_rt = registry
        .find("", "v1", "namespaces")
        .ok_or_else(|| StartError::Bootstrap("namespaces type missing".into()))?;
    let sa_rt = registry
        .find("", "v1", "serviceaccounts")
        .ok_or_else(|| StartError::Bootstrap("serviceaccounts type missing".into()))?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        store
            .create(&ns_rt, "", obj, &WriteOpts::default())
            .map_err(|_| StartError::Bootstrap(ns.into()))?;
        let sa =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        store
            .create(&sa_rt, ns, sa, &WriteOpts::default())
            .map_err(|_| StartError::Bootstrap(ns.into()))?;
    }
    Ok(())
}
