//! The simulated nodes: their Node objects, their Ready condition, and partitions that cut a
//! node and its pods' processes off from the API server.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::{HOST_IP, Kubelet, lock, merge_status};
use crate::meta;
use crate::store::{Part, WriteOpts};

pub(super) struct NodeState {
    pub(super) name: String,
    /// Read without the state lock by the API server on every request from a node's process;
    /// written only under the state lock, so the kubelet sees it change together with the
    /// orphans it governs.
    pub(super) partitioned: AtomicBool,
}

impl NodeState {
    pub(super) fn is_partitioned(&self) -> bool {
        self.partitioned.load(Ordering::Acquire)
    }
}

impl Kubelet {
    /// Cuts a node off: its pods keep running, but their status stops updating and the node
    /// turns `Ready=Unknown`. `false` for an unknown node.
    pub fn partition(&self, node: &str) -> bool {
        self.set_partitioned(node, true)
    }

    /// Reconnects a node: its pods' status catches up and pending deletions finish.
    pub fn heal(&self, node: &str) -> bool {
        self.set_partitioned(node, false)
    }

    /// Whether `node` is cut off now (`false` for an unknown node). Lock-free: the API server
    /// asks on every request that carries a node token.
    pub fn is_partitioned(&self, node: &str) -> bool {
        self.nodes
            .iter()
            .any(|n| n.name == node && n.is_partitioned())
    }

    pub(super) fn set_partitioned(&self, node: &str, partitioned: bool) -> bool {
        let Some(n) = self.nodes.iter().find(|n| n.name == node) else {
            return false;
        };
        {
            let mut st = lock(&self.state);
            if n.is_partitioned() == partitioned {
                return true;
            }
            n.partitioned.store(partitioned, Ordering::Release);
            // Log followers of the node's pods learn that the API server lost them.
            for e in st.pods.values().filter(|e| e.node == node) {
                e.bell.notify_waiters();
            }
            if !partitioned {
                // The node hears of the pods removed while it was cut off and stops them.
                let (gone, kept) = std::mem::take(&mut st.orphans)
                    .into_iter()
                    .partition(|o| o.node == node);
                st.orphans = kept;
                for o in gone {
                    self.dispose(&st.names, o);
                }
            }
        }
        self.write_node_ready(node, !partitioned);
        self.wake.notify_one();
        true
    }

    pub(super) fn write_node_ready(&self, node: &str, ready: bool) {
        let now = meta::now_rfc3339();
        let result = self.store.modify(
            &self.nodes_rt,
            "",
            node,
            Part::Status,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                let ours = json!({"conditions": [node_ready(ready, &now)]});
                next["status"] = merge_status(cur.get("status"), &ours, &now);
                Ok(next)
            },
        );
        if let Err(e) = result {
            tracing::warn!(node, error = %e, "could not update node status");
        }
    }
}

pub(super) fn node_object(name: &str) -> Value {
    let now = meta::now_rfc3339();
    let resources =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }},
        "spec": {},
        "status": {
            "conditions": [node_ready(true, &now)],
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {
                "kubeletVersion": "v1.34.0",
                "kubeProxyVersion": "v1.34.0",
                "containerRuntimeVersion": concat!("kubesim://", env!("CARGO_PKG_VERSION")),
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "kubesim",
                "kernelVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "phase": "Running",
        },
    })
}

pub(super) fn node_ready(ready: bool, now: &str) -> Value {
    if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "message": "kubelet is posting ready status",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    } else {
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
               "message": "Kubelet stopped posting node status.",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    }
}
