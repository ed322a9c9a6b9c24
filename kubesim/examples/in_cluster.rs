//! A program for kubesim's in-cluster test, run inside a pod as a mapped image: it configures
//! kube-rs as any in-cluster program does, with `Config::infer()` (no kubeconfig in a pod, so
//! the service-account token, `ca.crt` and namespace at their real path and the
//! `KUBERNETES_SERVICE_*` variables), lists the pods labelled `app=witness` in its namespace and
//! prints them, then tries to list Secrets and prints the answer.
//!
//! Not a tool: outside a pod (or a cluster) it fails as any in-cluster program would.

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let config = kube::Config::infer().await?;
    println!(
        "server: {} namespace: {}",
        config.cluster_url, config.default_namespace
    );
    let client = kube::Client::try_from(config)?;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let listed = pods
        .list(&ListParams::default().labels("app=witness"))
        .await?;
    let names: Vec<String> = listed
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    println!("pods: {}", names.join(" "));
    let secrets: Api<Secret> = Api::default_namespaced(client);
    match secrets.list(&ListParams::default()).await {
        Ok(_) => println!("secrets: allowed"),
        Err(kube::Error::Api(status)) => println!("secrets: {} {}", status.code, status.message),
        Err(e) => println!("secrets: {e}"),
    }
    Ok(())
}
