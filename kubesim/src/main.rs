//! `kubesim serve`: run a simulated Kubernetes cluster until killed.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kubesim::{Cluster, ClusterConfig};

#[derive(Parser)]
#[command(
    name = "kubesim",
    version,
    about = "A Kubernetes API server and kubelet simulator"
)]
struct Cli {
    /// Threads that run the cluster's tasks (one per core by default). One thread spends less
    /// CPU per request beside busy clients, but caps kubesim at one core (docs/kubesim.md).
    #[arg(long, env = "KUBESIM_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    worker_threads: Option<u16>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Kubernetes API until killed: plain HTTP (no authentication, cluster-admin)
    /// and HTTPS (client certificates, service-account tokens, RBAC) side by side.
    Serve {
        /// Address of the plain-HTTP listener; port 0 picks a free port.
        #[arg(long, env = "KUBESIM_LISTEN", default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Address of the HTTPS listener; port 0 picks a free port.
        #[arg(long, env = "KUBESIM_HTTPS_LISTEN", default_value = "127.0.0.1:0")]
        https_listen: std::net::SocketAddr,
        /// Point the kubeconfig (and the printed URL) at the HTTPS listener, with the cluster
        /// CA as `certificate-authority-data` and the admin's client certificate.
        #[arg(long, env = "KUBESIM_HTTPS")]
        https: bool,
        /// Write a kubeconfig here once the server accepts requests.
        #[arg(long, env = "KUBESIM_KUBECONFIG_OUT")]
        kubeconfig_out: Option<PathBuf>,
        /// YAML cluster configuration (nodes, images mapped to local commands, ...).
        #[arg(long, env = "KUBESIM_CONFIG")]
        config: Option<PathBuf>,
        /// Folder for pod volumes and logs (a temporary folder by default).
        #[arg(long, env = "KUBESIM_WORK_DIR")]
        work_dir: Option<PathBuf>,
    },
    /// Start a cluster, run a pod with a native sidecar to completion under a watch, show garbage
    /// collection and request counts, then exit.
    Demo,
}

fn main() -> anyhow::Result<()> {
    init_tracing();
    let cli = Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.worker_threads {
        runtime.worker_threads(usize::from(n));
    }
    runtime
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(run(cli.command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Demo => {
            let phase = kubesim::demo::run().await.context("kubesim demo")?;
            anyhow::ensure!(phase == "Succeeded", "demo pod ended {phase}");
            Ok(())
        }
        Command::Serve {
            listen,
            https_listen,
            https,
            kubeconfig_out,
            config,
            work_dir,
        } => {
            let mut cfg: ClusterConfig = match &config {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    yaml_serde::from_str(&text)
                        .with_context(|| format!("parsing {}", path.display()))?
                }
                None => ClusterConfig::default(),
            };
            cfg.listen = listen;
            cfg.https_listen = https_listen;
            if work_dir.is_some() {
                cfg.work_dir = work_dir;
            }
            let cluster = Cluster::start(cfg).await.context("starting kubesim")?;
            if let Some(path) = &kubeconfig_out {
                let written = if https {
                    cluster.write_https_kubeconfig(path)
                } else {
                    cluster.write_kubeconfig(path)
                };
                written.with_context(|| format!("writing {}", path.display()))?;
            }
            println!(
                "{}",
                if https {
                    &cluster.https_url
                } else {
                    &cluster.url
                }
            );
            tracing::info!(url = %cluster.url, https_url = %cluster.https_url, "kubesim serving");
            tokio::signal::ctrl_c()
                .await
                .context("waiting for ctrl-c")?;
            drop(cluster);
            Ok(())
        }
    }
}

fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::io::stderr().is_terminal() {
        builder.init();
    } else {
        builder.json().init();
    }
}
