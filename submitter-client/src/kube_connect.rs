//! The Kubernetes client the submitter and the operator talk to the API server with: kube-rs'
//! own stack (TLS from the kubeconfig, the API server's URL, credentials and their refresh,
//! extra headers) over a connector with `TCP_NODELAY` on, which kube-rs' default connector
//! leaves off. A request and its body leave in one write either way; small follow-up writes
//! (a watch's keep-alive, a TLS record split) must not wait for an ACK.

use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::ServiceBuilder;

/// A client for `config`. A proxy in the kubeconfig is left to kube-rs' own builder.
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let https = config.rustls_https_connector_with_connector(http)?;
    let hyper = HyperClient::builder(TokioExecutor::new()).build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(|error| -> Box<dyn std::error::Error + Send + Sync> { Box::new(error) })
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}
