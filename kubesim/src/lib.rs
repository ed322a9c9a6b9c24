//! kubesim: an in-process Kubernetes API server and kubelet simulator that unmodified clients
//! (kube-rs, the Python `kubernetes` client, Spark's `spark-submit`) accept.
//!
//! One store of JSON objects with one resourceVersion counter and one bounded event log feeds
//! every watch; the garbage collector, namespace controller, scheduler and kubelet consume that
//! log and write through the store like any client. See docs/kubesim.md.
//!
//! Modules are declared from the bottom up: each uses only those above it.

/// Standard base64, as Kubernetes encodes `[]byte` fields in JSON (pure).
pub mod base64;

/// kubesim's HTTPS: a CA made at start, the serving certificate, client certificates.
pub mod tls;

/// Label and field selectors (pure).
pub mod selector;

/// The bearer token a pod's processes present, naming their node.
pub mod node_token;

/// Fault injection and request accounting: the state behind the `/sim/v1` control API.
pub mod control;

/// JSON merge, JSON and strategic-merge patch, server-side apply and managedFields (pure).
pub mod patch;

/// API errors as `Status` objects with the real reasons and codes.
pub mod api_error;

/// Object metadata: timestamps, uids, generated names, typed accessors over JSON.
pub mod meta;

/// ResourceQuota counting as the quota admission and evaluators do (pure).
pub mod resource_quota;

/// Kubernetes protobuf for built-in types, as client-go speaks it.
pub mod protobuf;

/// The kubeconfig kubesim writes for clients.
pub mod kubeconfig;

/// Every Service with its backends, as the Service proxy and hosts files see them (pure).
pub mod service_table;

/// The pods' network: a namespace per pod on a bridge, root filesystems, Service forwarding.
pub mod net;

/// Events: one storage, the `v1` and `events.k8s.io` views.
pub mod events;

/// LimitRange defaults and bounds at pod admission (pure).
pub mod limit_range;

/// The table of resource types: the built-in ones and those of CRDs.
pub mod resources;

/// Validation and defaulting on create and update, with the real field errors.
pub mod admission;

/// Every object as JSON, one resourceVersion counter, one bounded event log; quota.
pub mod store;

/// Authentication: who a request comes from.
pub mod auth;

/// The garbage collector and the namespace finalizer.
pub mod gc;

/// The Service controller: Endpoints and EndpointSlices, and the Service table it publishes.
pub mod services;

/// The Deployment and ReplicaSet controllers.
pub mod apps;

/// RBAC authorization as Kubernetes' authorizer decides.
pub mod rbac;

/// The scheduler and kubelet: pods through their life, processes, volumes, probes, logs.
pub mod kubelet;

/// The HTTP face: the REST API over the store, watches, logs, and the `/sim/v1` control API.
pub mod api;

/// Starting a whole cluster: store, controllers, kubelet, HTTP server.
pub mod cluster;

/// `kubesim demo`, a short tour.
pub mod demo;

pub use cluster::{Cluster, ClusterConfig, StartError};
