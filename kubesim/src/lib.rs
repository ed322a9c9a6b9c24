//! kubesim: an in-process Kubernetes API server and kubelet simulator that unmodified clients
//! (kube-rs, the Python `kubernetes` client, Spark's `spark-submit`) accept.
//!
//! One store of JSON objects with one resourceVersion counter and one bounded event log feeds
//! every watch; the garbage collector, namespace controller, scheduler and kubelet consume that
//! log and write through the store like any client. See docs/kubesim.md.

pub mod admission;
pub mod api;
pub mod api_error;
pub mod apps;
pub mod auth;
pub mod base64;
pub mod cluster;
pub mod control;
pub mod demo;
pub mod events;
pub mod gc;
pub mod kubeconfig;
pub mod kubelet;
pub mod limit_range;
pub mod meta;
pub mod net;
pub mod node_token;
pub mod patch;
pub mod protobuf;
pub mod quantity;
pub mod rbac;
pub mod resource_quota;
pub mod resources;
pub mod selector;
pub mod services;
pub mod store;
pub mod tls;

pub use cluster::{Cluster, ClusterConfig, StartError};
