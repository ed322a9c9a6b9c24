//! Agent ports on a shared loopback, a sandbox-only stopgap for the host's network.
//!
//! In a cluster every pod has its own network, so every recovery agent listens on the same port
//! (`operator run --agent-port`), and so does the sandbox when kubesim gives pods their own
//! network (as root, with the Kubernetes store). On the host's network (not root, or a Redis
//! store on this machine's loopback, which pods cannot reach) a zombie's agent and its
//! successor's would collide on that port. There the sandbox gives its agent and driver images
//! three variables, and the `sandbox agent` and `sandbox staged-driver` programs each derive the
//! same port from the sandbox's salt and the pod's name (`HOSTNAME`, which the kubelet sets)
//! instead of the one the operator put in the pod. Nothing of this is in the operator.

/// The first port of the range (below the ephemeral range).
pub const ENV_BASE: &str = "SANDBOX_AGENT_PORT_BASE";
/// How many ports the range holds.
pub const ENV_SPAN: &str = "SANDBOX_AGENT_PORT_SPAN";
/// A salt of one sandbox, mixed into the hash: sandboxes running side by side (tests in
/// parallel) name their pods alike, and must not find each other's agents.
pub const ENV_SALT: &str = "SANDBOX_AGENT_PORT_SALT";

/// The range the sandbox spreads agents over.
pub const BASE: u16 = 21_000;
pub const SPAN: u16 = 10_000;

/// The port of the agent in pod `pod`: FNV-1a of the name within `base..base + span`, so the
/// agent and the driver of one pod agree, and two pods rarely share one.
pub fn spread(base: u16, span: u16, pod: &str) -> u16 {
    let hash = pod.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let offset = u16::try_from(hash % u64::from(span.max(1))).unwrap_or(0);
    base.saturating_add(offset)
}

/// The port this process's agent uses: spread by the sandbox's salt and `HOSTNAME` when the
/// image sets the range, else `given` (the operator's).
pub fn from_env(given: u16) -> u16 {
    let var = |name: &str| std::env::var(name).ok();
    let number = |name: &str| var(name).and_then(|v| v.parse::<u16>().ok());
    match (number(ENV_BASE), number(ENV_SPAN), var("HOSTNAME")) {
        (Some(base), Some(span), Some(pod)) => {
            let salt = var(ENV_SALT).unwrap_or_default();
            spread(base, span, &format!("{salt}/{pod}"))
        }
        _ => given,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_spread_over_the_range_and_one_pod_always_gets_one_port() {
        let ports: std::collections::BTreeSet<u16> = (0..50)
            .map(|e| spread(BASE, SPAN, &format!("pi-driver-e{e}")))
            .collect();
        assert!(ports.iter().all(|p| (BASE..BASE + SPAN).contains(p)));
        assert!(ports.len() > 40, "names spread over the range: {ports:?}");
        assert_eq!(
            spread(BASE, SPAN, "pi-driver-e7"),
            spread(BASE, SPAN, "pi-driver-e7")
        );
        assert_eq!(spread(BASE, 1, "a"), BASE);
    }
}
