//! Starting a whole simulated cluster: store, controllers, kubelet and the HTTP server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::api::{self, AppState};
use crate::auth::{Authenticator, TokenSpec};
use crate::control::Control;
use crate::kubeconfig::Credentials;
use crate::kubelet::spark_image::{SparkImage, SparkImageConfig, SparkImageError};
use crate::kubelet::{ImageCommand, Kubelet, KubeletConfig};
use crate::net::addr::{KUBERNETES_SERVICE_PORT, NODE_IP};
use crate::net::{ClusterNet, NetError, NetworkMode};
use crate::store::{Store, WriteOpts};
use crate::tls::Pki;

/// The ClusterIP of `default/kubernetes`, the API server's in-cluster address: the first
/// address of the Service range (198.19.0.0/16, the upper half of 198.18.0.0/15; pods take the
/// lower half), as a real cluster gives it the first address of its service range. The serving
/// certificate names it.
pub use crate::net::addr::KUBERNETES_SERVICE_IP;

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
    /// Events of each type kept for watch resumption.
    pub history: usize,
    /// Interval between watch bookmarks, in milliseconds.
    pub bookmark_millis: u64,
    /// Kubelet step (scheduling and start-up delay), in milliseconds.
    pub tick_millis: u64,
    /// Address of the HTTPS listener (port 0 picks a free one); the plain-HTTP one is
    /// `listen`.
    pub https_listen: SocketAddr,
    /// `pod` (default): each pod has its own network namespace and address (needs root);
    /// `host`: pods share the host's network, as before pods had their own.
    pub network: NetworkMode,
    /// The Spark image (`apache/spark`, `spark`) run from the local Spark distribution (needs
    /// `network: pod`); absent: Spark images are scripted like any unmapped image.
    pub spark: Option<SparkImageConfig>,
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
            network: NetworkMode::default(),
            spark: None,
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
    /// The pods' network could not be set up.
    #[error("cannot set up the pods' network")]
    Network(#[source] NetError),
    /// The Spark image could not be set up.
    #[error("cannot set up the Spark image")]
    SparkImage(#[source] SparkImageError),
    /// The Service proxy could not start.
    #[error("cannot start the Service proxy")]
    Proxy(#[source] std::io::Error),
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
            Self::Network(_) => "network",
            Self::SparkImage(_) => "spark_image",
            Self::Proxy(_) => "proxy",
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
    /// The pods' network (`None` with `network: host`).
    pub net: Option<Arc<ClusterNet>>,
    proxy: Option<tokio::task::JoinHandle<()>>,
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
        let pki = Arc::new(Pki::generate(KUBERNETES_SERVICE_IP.into()).map_err(StartError::Tls)?);
        let tls_config = pki.server_config().map_err(StartError::Tls)?;
        let net = match config.network {
            NetworkMode::Pod => Some(Arc::new(ClusterNet::create().map_err(StartError::Network)?)),
            NetworkMode::Host => None,
        };
        let store = Store::new(config.history);
        bootstrap(&store)?;
        // Pods reach the API server over HTTPS, as in a cluster: the `kubernetes` Service's
        // endpoint is the node's address at the HTTPS listener's port.
        let api_endpoint = match net {
            Some(_) => NODE_IP.to_string(),
            None => crate::kubelet::HOST_IP.to_string(),
        };
        bootstrap_api_server(&store, &api_endpoint, https_addr.port())?;
        crate::gc::start(store.clone());
        crate::rbac::start_aggregator(store.clone());
        crate::apps::start(store.clone());
        let services = crate::services::start(store.clone());
        let proxy = match &net {
            Some(net) => Some(
                crate::net::proxy::start(net.clone(), services.clone(), https_addr)
                    .map_err(StartError::Proxy)?,
            ),
            None => None,
        };
        let spark = match &config.spark {
            Some(c) => Some(Arc::new(
                SparkImage::resolve(c, &work_dir.join(".images").join("spark"))
                    .map_err(StartError::SparkImage)?,
            )),
            None => None,
        };
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
                network: net.clone(),
                services: Some(services),
                ca_pem: Some(pki.ca_pem()),
                spark,
                tokens: Some(auth.clone()),
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
            // TCP_NODELAY on every connection, as on the HTTPS listener.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
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
            net,
            proxy,
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

impl Cluster {
    /// Opens a TCP connection to `addr` as seen from inside the cluster (from the node): a pod
    /// IP, a ClusterIP. With `network: host` it is an ordinary connection.
    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
        match &self.net {
            Some(net) => net.connect(addr).await,
            None => tokio::net::TcpStream::connect(addr).await,
        }
    }

    /// A port-forward: a listener on 127.0.0.1 (ephemeral port) in the host's namespace whose
    /// connections are relayed to `addr` inside the cluster; it lives as long as the returned
    /// task does (abort it to stop).
    pub async fn port_forward(
        &self,
        addr: SocketAddr,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let local = listener.local_addr()?;
        let net = self.net.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let net = net.clone();
                tokio::spawn(async move {
                    let server = match &net {
                        Some(net) => net.connect(addr).await,
                        None => tokio::net::TcpStream::connect(addr).await,
                    };
                    if let Ok(mut server) = server {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Ok((local, task))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        self.kubelet.shutdown();
        if let Some(p) = self.proxy.take() {
            p.abort();
        }
        if let Some(net) = &self.net {
            net.shutdown();
        }
    }
}

/// What the API server itself creates in a new cluster: the default RBAC policy, and the
/// `default/kubernetes` Service at 198.19.0.1:443 with its endpoint where the HTTPS listener is as
/// the node sees it.
fn bootstrap_api_server(
    store: &Arc<Store>,
    endpoint_ip: &str,
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
    let fail = || StartError::Bootstrap("default/kubernetes".into());
    let svc_rt = registry.find("", "v1", "services").ok_or_else(fail)?;
    let ep_rt = registry.find("", "v1", "endpoints").ok_or_else(fail)?;
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP.to_string(),
            "ports": [{"name": "https", "port": KUBERNETES_SERVICE_PORT, "protocol": "TCP",
                       "targetPort": https_port}],
            "sessionAffinity": "None",
        },
    });
    store
        .create(&svc_rt, "default", svc, &WriteOpts::default())
        .map_err(|_| fail())?;
    let ep = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": endpoint_ip}],
                     "ports": [{"name": "https", "port": https_port, "protocol": "TCP"}]}],
    });
    store
        .create(&ep_rt, "default", ep, &WriteOpts::default())
        .map_err(|_| fail())?;
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
