//! The cluster's address plan (pure): pods and Services take their addresses from
//! 198.18.0.0/15, the block reserved for benchmarking (RFC 2544), which no real network routes,
//! so nothing a test does can reach or shadow a real host.
//!
//! - pods: 198.18.0.0/16; the node (the bridge in the cluster's network namespace) is
//!   198.18.0.1, pods start at 198.18.0.2;
//! - Services: 198.19.0.0/16; `default/kubernetes` is 198.19.0.1 (as 10.96.0.1 is on kubeadm
//!   clusters), 198.19.0.10 is where a cluster DNS would be, names are hashed into the rest.

use std::collections::HashSet;
use std::net::Ipv4Addr;

/// The pods' network.
pub const POD_NETWORK: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
/// Prefix length of the pods' network (and of every pod's address).
pub const POD_PREFIX: u8 = 16;
/// The node's address on the pods' network: the bridge, the probes' source, every `hostIP`.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The Services' network.
pub const SERVICE_NETWORK: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 0);
/// Prefix length of the Services' network.
pub const SERVICE_PREFIX: u8 = 16;
/// The ClusterIP of `default/kubernetes`, the API server as pods see it.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
/// The port of `default/kubernetes`.
pub const KUBERNETES_SERVICE_PORT: u16 = 443;
/// Where a cluster DNS server would listen; nothing does, so lookups fail at once.
pub const DNS_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 10);
/// The cluster domain of Service names.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// Addresses of the Service network that hashing never hands out (the well-known ones).
const SERVICE_RESERVED: u32 = 256;

fn host_count(prefix: u8) -> u32 {
    1u32 << (32 - u32::from(prefix))
}

fn in_network(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX << (32 - u32::from(prefix));
    u32::from(ip) & mask == u32::from(net) & mask
}

/// Whether `ip` lies in the Service network.
pub fn is_service_ip(ip: Ipv4Addr) -> bool {
    in_network(ip, SERVICE_NETWORK, SERVICE_PREFIX)
}

/// Whether `ip` lies in the pods' network.
pub fn is_pod_ip(ip: Ipv4Addr) -> bool {
    in_network(ip, POD_NETWORK, POD_PREFIX)
}

/// The ClusterIP for Service `namespace/name`: a hash of the name into the Service network,
/// probing onwards past addresses `taken` says are in use, so two Services never share one.
/// `None` when the network is full.
pub fn service_ip(
    namespace: &str,
    name: &str,
    taken: &dyn Fn(Ipv4Addr) -> bool,
) -> Option<Ipv4Addr> {
    let h = namespace
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(name.bytes())
        .fold(2_166_136_261u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(16_777_619)
        });
    let span = host_count(SERVICE_PREFIX) - SERVICE_RESERVED - 1;
    (0..span)
        .map(|i| {
            let offset = SERVICE_RESERVED + (h.wrapping_add(i) % span);
            Ipv4Addr::from(u32::from(SERVICE_NETWORK) + offset)
        })
        .find(|ip| !taken(*ip))
}

/// The pod addresses of one cluster: handed out in order, returned when a pod's network goes,
/// never the network, node or broadcast address.
#[derive(Debug, Default)]
pub struct IpPool {
    next: u32,
    used: HashSet<u32>,
}

impl IpPool {
    /// A free pod address, `None` when all 65,533 are in use.
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        // Offsets 2 ..= 65534 of the network: .0.0 is the network, .0.1 the node, .255.255
        // the broadcast address.
        let span = host_count(POD_PREFIX) - 3;
        for _ in 0..span {
            let offset = 2 + self.next % span;
            self.next = self.next.wrapping_add(1);
            if self.used.insert(offset) {
                return Some(Ipv4Addr::from(u32::from(POD_NETWORK) + offset));
            }
        }
        None
    }

    /// Gives `ip` back.
    pub fn release(&mut self, ip: Ipv4Addr) {
        self.used
            .remove(&(u32::from(ip).wrapping_sub(u32::from(POD_NETWORK))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_is_in_the_benchmarking_block_and_never_a_private_one() {
        let private = |ip: Ipv4Addr| ip.is_private() || ip.is_loopback();
        let mut pool = IpPool::default();
        for _ in 0..1000 {
            let ip = pool.allocate().expect("address");
            assert!(is_pod_ip(ip) && !private(ip) && ip != NODE_IP, "{ip}");
        }
        for (ns, name) in [("default", "a"), ("spark", "driver-svc"), ("x", "y")] {
            let ip = service_ip(ns, name, &|_| false).expect("address");
            assert!(is_service_ip(ip) && !private(ip), "{ip}");
            assert!(u32::from(ip) - u32::from(SERVICE_NETWORK) >= SERVICE_RESERVED);
        }
        for ip in [NODE_IP, KUBERNETES_SERVICE_IP, DNS_SERVICE_IP] {
            assert!(!private(ip), "{ip}");
        }
    }

    #[test]
    fn service_ips_are_stable_and_skip_taken_ones() {
        let first = service_ip("ns", "svc", &|_| false).expect("address");
        assert_eq!(service_ip("ns", "svc", &|_| false), Some(first));
        let second = service_ip("ns", "svc", &|ip| ip == first).expect("address");
        assert_ne!(first, second);
        assert_ne!(
            service_ip("ns", "svc", &|_| false),
            service_ip("other", "svc", &|_| false)
        );
    }

    #[test]
    fn released_pod_addresses_come_back_and_none_is_handed_out_twice() {
        let mut pool = IpPool::default();
        let a = pool.allocate().expect("a");
        let b = pool.allocate().expect("b");
        assert_eq!(a, Ipv4Addr::new(198, 18, 0, 2));
        assert_ne!(a, b);
        pool.release(a);
        let mut seen = HashSet::from([b]);
        while let Some(ip) = pool.allocate() {
            assert!(seen.insert(ip), "{ip} twice");
        }
        assert!(seen.contains(&a), "a released address is reused");
        assert_eq!(seen.len(), 65_533);
    }
}
