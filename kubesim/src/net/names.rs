//! How a pod finds Services (pure): the kubelet-managed `/etc/hosts` (kubesim has no DNS
//! server, so the names a cluster DNS would answer are written there), `/etc/resolv.conf`, and
//! the Service environment variables a kubelet injects.

use std::fmt::Write as _;

use serde_json::Value;

use super::addr::{CLUSTER_DOMAIN, DNS_SERVICE_IP};
use crate::meta::At;
use crate::service_table::ServiceRecord;

/// The pod fields its hosts file is made from.
#[derive(Debug, Clone)]
pub struct PodHosts<'a> {
    /// Namespace (short Service names resolve in it).
    pub namespace: &'a str,
    /// `status.podIP`.
    pub ip: &'a str,
    /// `spec.hostname`, else the pod name.
    pub hostname: &'a str,
    /// `spec.subdomain`, if any.
    pub subdomain: Option<&'a str>,
    /// `spec.hostAliases`.
    pub host_aliases: &'a [Value],
}

impl<'a> PodHosts<'a> {
    /// The hosts fields of `pod` at `ip`.
    pub fn of(pod: &'a Value, ip: &'a str) -> PodHosts<'a> {
        let spec = |f: &str| {
            pod.at(&format!("/spec/{f}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        PodHosts {
            namespace: crate::meta::meta_str(pod, "namespace"),
            ip,
            hostname: spec("hostname").unwrap_or_else(|| crate::meta::name(pod)),
            subdomain: spec("subdomain"),
            host_aliases: pod
                .at("/spec/hostAliases")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]),
        }
    }
}

/// The pod's `/etc/hosts`: the kubelet's managed file (localhost, the pod's own name, host
/// aliases), then every Service under the names a cluster DNS answers: `svc.ns`,
/// `svc.ns.svc`, `svc.ns.svc.cluster.local`, and `svc` for the pod's own namespace.
pub fn hosts_file(pod: &PodHosts<'_>, services: &[ServiceRecord]) -> String {
    let mut out = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    match pod.subdomain {
        Some(sub) => {
            let _ = writeln!(
                out,
                "{}\t{}.{sub}.{}.svc.{CLUSTER_DOMAIN}\t{}",
                pod.ip, pod.hostname, pod.namespace, pod.hostname
            );
        }
        None => {
            let _ = writeln!(out, "{}\t{}", pod.ip, pod.hostname);
        }
    }
    if !pod.host_aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in pod.host_aliases {
            let ip = alias.get("ip").and_then(Value::as_str).unwrap_or("");
            let names: Vec<&str> = alias
                .get("hostnames")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !ip.is_empty() && !names.is_empty() {
                let _ = writeln!(out, "{ip}\t{}", names.join("\t"));
            }
        }
    }
    out.push_str("\n# Services (kubesim has no DNS server; it keeps these lines up to date).\n");
    for s in services {
        let own = s.namespace == pod.namespace;
        for ip in &s.ips {
            let _ = write!(
                out,
                "{ip}\t{n}.{ns}.svc.{CLUSTER_DOMAIN} {n}.{ns}.svc {n}.{ns}",
                n = s.name,
                ns = s.namespace
            );
            if own {
                let _ = write!(out, " {}", s.name);
            }
            out.push('\n');
        }
        for (ip, host) in &s.hostnames {
            let _ = writeln!(
                out,
                "{ip}\t{host}.{n}.{ns}.svc.{CLUSTER_DOMAIN} {host}.{n}.{ns}.svc {host}.{n}.{ns}",
                n = s.name,
                ns = s.namespace
            );
        }
    }
    out
}

/// The pod's `/etc/resolv.conf` as a kubelet writes it for `dnsPolicy: ClusterFirst`. The
/// nameserver is the cluster DNS address, where nothing listens: a lookup that misses the hosts
/// file fails at once instead of leaving the cluster.
pub fn resolv_conf(namespace: &str) -> String {
    format!(
        "search {namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n\
         nameserver {DNS_SERVICE_IP}\n\
         options ndots:5\n"
    )
}

/// `FOO-bar.baz` → `FOO_BAR_BAZ` (a leading digit gets a `_`), as the kubelet names variables.
fn env_name(s: &str) -> String {
    let name = s.replace(['.', '-'], "_").to_ascii_uppercase();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    }
}

/// The Service environment variables of a pod in `namespace`: `default/kubernetes` always, and
/// with `enableServiceLinks` (the default) every Service of the pod's namespace that has a
/// ClusterIP, each as `{SVC}_SERVICE_HOST`, `{SVC}_SERVICE_PORT[_{PORT}]` and the Docker link
/// variables, in Service name order.
pub fn service_env(
    namespace: &str,
    enable_links: bool,
    services: &[Value],
) -> Vec<(String, String)> {
    let mut chosen: std::collections::BTreeMap<&str, &Value> = std::collections::BTreeMap::new();
    for s in services {
        let ns = crate::meta::meta_str(s, "namespace");
        let name = crate::meta::name(s);
        let ip = s
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        if ip.is_empty() || ip == "None" {
            continue;
        }
        if ns == "default" && name == "kubernetes" {
            chosen.entry(name).or_insert(s);
        } else if ns == namespace && enable_links {
            chosen.insert(name, s);
        }
    }
    let mut out = Vec::new();
    for (name, s) in chosen {
        let ip = s
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        let ports: Vec<&Value> = s
            .at("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        let Some(first) = ports.first() else { continue };
        let prefix = env_name(name);
        let port_of = |p: &Value| p.get("port").and_then(Value::as_i64).unwrap_or(0);
        out.push((format!("{prefix}_SERVICE_HOST"), ip.to_string()));
        out.push((format!("{prefix}_SERVICE_PORT"), port_of(first).to_string()));
        for p in &ports {
            if let Some(pn) = p
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                out.push((
                    format!("{prefix}_SERVICE_PORT_{}", env_name(pn)),
                    port_of(p).to_string(),
                ));
            }
        }
        for (i, p) in ports.iter().enumerate() {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            let lower = proto.to_ascii_lowercase();
            let port = port_of(p);
            let url = format!("{lower}://{ip}:{port}");
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let pp = format!("{prefix}_PORT_{port}_{}", proto.to_ascii_uppercase());
            out.push((format!("{pp}_PROTO"), lower));
            out.push((format!("{pp}_PORT"), port.to_string()));
            out.push((format!("{pp}_ADDR"), ip.to_string()));
            out.push((pp, url));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::net::Ipv4Addr;

    fn svc(ns: &str, name: &str, ip: &str, ports: Value) -> Value {
        json!({"metadata": {"namespace": ns, "name": name},
               "spec": {"clusterIP": ip, "ports": ports}})
    }

    #[test]
    fn service_env_matches_the_kubelets_names() {
        let services = vec![
            svc(
                "default",
                "kubernetes",
                "198.19.0.1",
                json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
            ),
            svc(
                "spark",
                "my-svc.v1",
                "198.19.3.4",
                json!([{"port": 80, "protocol": "TCP"}, {"name": "metrics-x", "port": 9090, "protocol": "TCP"}]),
            ),
            svc("spark", "headless", "None", json!([{"port": 7078}])),
            svc("other", "elsewhere", "198.19.9.9", json!([{"port": 1}])),
            svc("spark", "1st", "198.19.1.1", json!([{"port": 5}])),
        ];
        let env: std::collections::BTreeMap<String, String> =
            service_env("spark", true, &services).into_iter().collect();
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("198.19.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT"), Some("tcp://198.19.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_ADDR"), Some("198.19.0.1"));
        assert_eq!(get("MY_SVC_V1_SERVICE_HOST"), Some("198.19.3.4"));
        assert_eq!(get("MY_SVC_V1_SERVICE_PORT"), Some("80"));
        assert_eq!(get("MY_SVC_V1_SERVICE_PORT_METRICS_X"), Some("9090"));
        assert_eq!(
            get("MY_SVC_V1_PORT_9090_TCP"),
            Some("tcp://198.19.3.4:9090")
        );
        assert_eq!(get("MY_SVC_V1_PORT_9090_TCP_PROTO"), Some("tcp"));
        assert_eq!(get("_1ST_SERVICE_HOST"), Some("198.19.1.1"));
        assert!(
            !env.keys()
                .any(|k| k.starts_with("HEADLESS") || k.starts_with("ELSEWHERE"))
        );
        let without_links: Vec<String> = service_env("spark", false, &services)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert!(without_links.iter().all(|k| k.starts_with("KUBERNETES_")));
        assert!(!without_links.is_empty());
    }

    #[test]
    fn hosts_file_resolves_services_under_every_dns_name() {
        let pod = json!({"metadata": {"namespace": "spark", "name": "exec-1"},
                         "spec": {"hostAliases": [{"ip": "198.18.9.9", "hostnames": ["a", "b"]}]}});
        let services = vec![
            ServiceRecord {
                namespace: "spark".into(),
                name: "driver-svc".into(),
                ips: vec![Ipv4Addr::new(198, 18, 0, 7)],
                hostnames: vec![],
            },
            ServiceRecord {
                namespace: "other".into(),
                name: "api".into(),
                ips: vec![Ipv4Addr::new(198, 19, 2, 2)],
                hostnames: vec![(Ipv4Addr::new(198, 18, 0, 8), "web-0".into())],
            },
        ];
        let text = hosts_file(&PodHosts::of(&pod, "198.18.0.5"), &services);
        assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(text.contains("198.18.0.5\texec-1\n"), "{text}");
        assert!(text.contains("198.18.9.9\ta\tb\n"), "{text}");
        assert!(text.contains(
            "198.18.0.7\tdriver-svc.spark.svc.cluster.local driver-svc.spark.svc driver-svc.spark driver-svc\n"
        ), "{text}");
        assert!(
            text.contains("198.19.2.2\tapi.other.svc.cluster.local api.other.svc api.other\n"),
            "{text}"
        );
        assert!(
            text.contains("198.18.0.8\tweb-0.api.other.svc.cluster.local"),
            "{text}"
        );
        let sub = json!({"metadata": {"namespace": "ns", "name": "p"},
                         "spec": {"hostname": "h", "subdomain": "s"}});
        let text = hosts_file(&PodHosts::of(&sub, "198.18.0.6"), &[]);
        assert!(
            text.contains("198.18.0.6\th.s.ns.svc.cluster.local\th\n"),
            "{text}"
        );
    }
}
