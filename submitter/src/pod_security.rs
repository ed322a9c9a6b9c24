//! Pod security per client identity: the submitter creates pods with its own rights, for clients
//! who may have none, so it checks what a submission asks its pods to do before creating
//! anything. The default is the Kubernetes "baseline" Pod Security Standard (the controls of the
//! `pod-security-admission` baseline level); a policy entry may relax named controls for its
//! identity ([`Exceptions`]), or lift them all (`level: privileged`).
//!
//! What is checked: the driver pod as built (templates and conf merged), the executor pod
//! template (the driver creates its executors from it), and the conf's `hostPath` volumes of the
//! executors (the driver adds them to every executor). What is not: anything the namespace's
//! own admission decides (see docs/security.md); the "restricted" level's extra controls.
//!
//! Pure: JSON in, violations out.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;
use submission::pointer;

/// A control of the baseline level, by the name a policy file uses to relax it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Control {
    /// `securityContext.windowsOptions.hostProcess`.
    HostProcess,
    /// `spec.hostNetwork`, `spec.hostPID`, `spec.hostIPC`.
    HostNamespaces,
    /// `securityContext.privileged`.
    Privileged,
    /// `securityContext.capabilities.add` beyond the baseline set.
    Capabilities,
    /// `spec.volumes[*].hostPath` (and Spark's `hostPath` volume confs).
    HostPath,
    /// `ports[*].hostPort`.
    HostPorts,
    /// AppArmor `Unconfined` (field or annotation).
    AppArmor,
    /// `seLinuxOptions` other than the container types.
    SeLinux,
    /// `securityContext.procMount` other than `Default`.
    ProcMount,
    /// `seccompProfile.type: Unconfined`.
    Seccomp,
    /// `spec.securityContext.sysctls` outside the safe set.
    Sysctls,
    /// A probe's or lifecycle hook's `host` field (Kubernetes 1.34+).
    HostProbes,
}

impl Control {
    pub const ALL: [Control; 12] = [
        Control::HostProcess,
        Control::HostNamespaces,
        Control::Privileged,
        Control::Capabilities,
        Control::HostPath,
        Control::HostPorts,
        Control::AppArmor,
        Control::SeLinux,
        Control::ProcMount,
        Control::Seccomp,
        Control::Sysctls,
        Control::HostProbes,
    ];

    /// The name the policy file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Control::HostProcess => "hostProcess",
            Control::HostNamespaces => "hostNamespaces",
            Control::Privileged => "privileged",
            Control::Capabilities => "capabilities",
            Control::HostPath => "hostPath",
            Control::HostPorts => "hostPorts",
            Control::AppArmor => "appArmor",
            Control::SeLinux => "seLinux",
            Control::ProcMount => "procMount",
            Control::Seccomp => "seccomp",
            Control::Sysctls => "sysctls",
            Control::HostProbes => "hostProbes",
        }
    }
}

/// The capabilities baseline lets a container add (Docker's default set minus `NET_RAW`).
pub const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The sysctls baseline allows (namespaced and isolated from other pods), as of Kubernetes 1.29.
pub const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// The SELinux types baseline allows.
const SELINUX_TYPES: [&str; 5] = [
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// What an identity may ask for beyond baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exceptions {
    /// Controls lifted entirely.
    pub controls: BTreeSet<Control>,
    /// Capabilities that may be added beyond [`BASELINE_CAPABILITIES`] (the `capabilities`
    /// control lifts them all).
    pub capabilities: BTreeSet<String>,
}

impl Exceptions {
    /// Baseline, nothing relaxed.
    pub fn baseline() -> Exceptions {
        Exceptions::default()
    }

    /// Every control lifted (`level: privileged`).
    pub fn privileged() -> Exceptions {
        Exceptions {
            controls: Control::ALL.into_iter().collect(),
            capabilities: BTreeSet::new(),
        }
    }

    /// What either allows.
    pub fn union(&self, other: &Exceptions) -> Exceptions {
        Exceptions {
            controls: self.controls.union(&other.controls).copied().collect(),
            capabilities: self
                .capabilities
                .union(&other.capabilities)
                .cloned()
                .collect(),
        }
    }

    /// What both allow.
    pub fn intersection(&self, other: &Exceptions) -> Exceptions {
        let capabilities = |a: &Exceptions, b: &Exceptions| -> BTreeSet<String> {
            // Lifting the control allows every capability the other names.
            match (
                a.controls.contains(&Control::Capabilities),
                b.controls.contains(&Control::Capabilities),
            ) {
                (true, _) => b.capabilities.clone(),
                (_, true) => a.capabilities.clone(),
                _ => a
                    .capabilities
                    .intersection(&b.capabilities)
                    .cloned()
                    .collect(),
            }
        };
        Exceptions {
            controls: self
                .controls
                .intersection(&other.controls)
                .copied()
                .collect(),
            capabilities: capabilities(self, other),
        }
    }

    fn allows(&self, control: Control) -> bool {
        self.controls.contains(&control)
    }

    fn allows_capability(&self, capability: &str) -> bool {
        self.allows(Control::Capabilities)
            || BASELINE_CAPABILITIES.contains(&capability)
            || self.capabilities.contains(capability)
    }
}

/// One thing a pod asked for that the identity may not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub control: Control,
    /// Where: `driver pod spec.containers[0].securityContext.privileged`.
    pub at: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.at, self.control.as_str())
    }
}

/// Checks a pod (`{metadata, spec}`) named `what` ("driver pod", "executor pod template").
pub fn check_pod(what: &str, pod: &Value, exceptions: &Exceptions) -> Vec<Violation> {
    let mut found = Checker {
        what,
        exceptions,
        found: Vec::new(),
    };
    if let Some(annotations) = pointer::at(pod, "/metadata/annotations").and_then(Value::as_object)
    {
        for (key, value) in annotations {
            if key.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && value
                    .as_str()
                    .is_some_and(|v| v != "runtime/default" && !v.starts_with("localhost/"))
            {
                found.flag(Control::AppArmor, format!("metadata.annotations[{key}]"));
            }
        }
    }
    let Some(spec) = pod.get("spec") else {
        return found.found;
    };
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(field).and_then(Value::as_bool) == Some(true) {
            found.flag(Control::HostNamespaces, format!("spec.{field}"));
        }
    }
    for (index, volume) in array(spec, "volumes") {
        if volume.get("hostPath").is_some_and(|v| !v.is_null()) {
            found.flag(Control::HostPath, format!("spec.volumes[{index}].hostPath"));
        }
    }
    if let Some(context) = spec.get("securityContext") {
        found.security_context("spec.securityContext", context, false);
        for (index, sysctl) in array(context, "sysctls") {
            let name = sysctl.get("name").and_then(Value::as_str).unwrap_or("");
            if !SAFE_SYSCTLS.contains(&name) {
                found.flag(
                    Control::Sysctls,
                    format!("spec.securityContext.sysctls[{index}] {name:?}"),
                );
            }
        }
    }
    let host_users_off = spec.get("hostUsers").and_then(Value::as_bool) == Some(false);
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (index, container) in array(spec, list) {
            let at = format!("spec.{list}[{index}]");
            if let Some(context) = container.get("securityContext") {
                found.security_context(&format!("{at}.securityContext"), context, true);
                let proc_mount = context.get("procMount").and_then(Value::as_str);
                // `Unmasked` is baseline only in a user namespace (hostUsers: false).
                if proc_mount
                    .is_some_and(|m| m != "Default" && !(m == "Unmasked" && host_users_off))
                {
                    found.flag(
                        Control::ProcMount,
                        format!("{at}.securityContext.procMount"),
                    );
                }
            }
            for (port_index, port) in array(container, "ports") {
                if port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    found.flag(
                        Control::HostPorts,
                        format!("{at}.ports[{port_index}].hostPort"),
                    );
                }
            }
            found.host_handlers(&at, container);
        }
    }
    found.found
}

/// Checks the conf's executor volumes: the driver adds
/// `spark.kubernetes.executor.volumes.hostPath.*` to every executor pod. (The driver's own
/// volume confs are in the driver pod as built.)
pub fn check_conf<'a>(
    conf: impl IntoIterator<Item = (&'a str, &'a str)>,
    exceptions: &Exceptions,
) -> Vec<Violation> {
    if exceptions.allows(Control::HostPath) {
        return Vec::new();
    }
    let mut names = BTreeSet::new();
    for (key, _) in conf {
        if let Some(rest) = key.strip_prefix(EXECUTOR_HOST_PATH) {
            let name = rest.split('.').next().unwrap_or_default();
            names.insert(format!("conf {EXECUTOR_HOST_PATH}{name}"));
        }
    }
    names
        .into_iter()
        .map(|at| Violation {
            control: Control::HostPath,
            at,
        })
        .collect()
}

/// Spark's conf prefix of the executors' `hostPath` volumes.
const EXECUTOR_HOST_PATH: &str = "spark.kubernetes.executor.volumes.hostPath.";

/// The pods a submission makes, to check: the driver pod as built, and the executor pod
/// template (pod-shaped, or a PodTemplate's `template`).
pub fn submission_pods<'a>(
    driver_pod: &'a Value,
    executor_template: Option<&'a Value>,
) -> Vec<(&'static str, &'a Value)> {
    let mut pods = vec![("driver pod", driver_pod)];
    if let Some(template) = executor_template {
        pods.push((
            "executor pod template",
            template.get("template").unwrap_or(template),
        ));
    }
    pods
}

struct Checker<'a> {
    what: &'a str,
    exceptions: &'a Exceptions,
    found: Vec<Violation>,
}

impl Checker<'_> {
    fn flag(&mut self, control: Control, at: String) {
        if !self.exceptions.allows(control) {
            self.found.push(Violation {
                control,
                at: format!("{} {at}", self.what),
            });
        }
    }

    /// The fields a pod's and a container's security contexts share (`container`: the ones only
    /// a container has as well).
    fn security_context(&mut self, at: &str, context: &Value, container: bool) {
        if pointer::at(context, "/windowsOptions/hostProcess").and_then(Value::as_bool)
            == Some(true)
        {
            self.flag(
                Control::HostProcess,
                format!("{at}.windowsOptions.hostProcess"),
            );
        }
        if pointer::at(context, "/seccompProfile/type").and_then(Value::as_str)
            == Some("Unconfined")
        {
            self.flag(Control::Seccomp, format!("{at}.seccompProfile.type"));
        }
        if pointer::at(context, "/appArmorProfile/type").and_then(Value::as_str)
            == Some("Unconfined")
        {
            self.flag(Control::AppArmor, format!("{at}.appArmorProfile.type"));
        }
        if let Some(options) = context.get("seLinuxOptions") {
            let field = |name: &str| options.get(name).and_then(Value::as_str).unwrap_or("");
            if !SELINUX_TYPES.contains(&field("type")) {
                self.flag(Control::SeLinux, format!("{at}.seLinuxOptions.type"));
            }
            for name in ["user", "role"] {
                if !field(name).is_empty() {
                    self.flag(Control::SeLinux, format!("{at}.seLinuxOptions.{name}"));
                }
            }
        }
        if !container {
            return;
        }
        if context.get("privileged").and_then(Value::as_bool) == Some(true) {
            self.flag(Control::Privileged, format!("{at}.privileged"));
        }
        let added = pointer::at(context, "/capabilities/add").and_then(Value::as_array);
        for (index, capability) in added.into_iter().flatten().enumerate() {
            let name = capability.as_str().unwrap_or("");
            if !self.exceptions.allows_capability(name) {
                self.found.push(Violation {
                    control: Control::Capabilities,
                    at: format!("{} {at}.capabilities.add[{index}] {name:?}", self.what),
                });
            }
        }
    }

    /// Probes and lifecycle hooks that would make the kubelet connect to another host.
    fn host_handlers(&mut self, at: &str, container: &Value) {
        // (name, pointer): pointers spelled out, not formatted for every container.
        let handlers = [
            ("livenessProbe", "/livenessProbe"),
            ("readinessProbe", "/readinessProbe"),
            ("startupProbe", "/startupProbe"),
            ("lifecycle/postStart", "/lifecycle/postStart"),
            ("lifecycle/preStop", "/lifecycle/preStop"),
        ];
        for (handler, handler_pointer) in handlers {
            let Some(value) = pointer::at(container, handler_pointer) else {
                continue;
            };
            for (kind, host) in [
                ("httpGet", "/httpGet/host"),
                ("tcpSocket", "/tcpSocket/host"),
            ] {
                if pointer::at(value, host)
                    .and_then(Value::as_str)
                    .is_some_and(|host| !host.is_empty())
                {
                    let handler = handler.replace('/', ".");
                    self.flag(Control::HostProbes, format!("{at}.{handler}.{kind}.host"));
                }
            }
        }
    }
}

fn array<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn controls(pod: Value, exceptions: &Exceptions) -> Vec<&'static str> {
        check_pod("driver pod", &pod, exceptions)
            .iter()
            .map(|v| v.control.as_str())
            .collect()
    }

    fn container(security: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c", "securityContext": security}]}})
    }

    #[test]
    fn baseline_table() {
        let base = Exceptions::baseline();
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"spec": {"containers": [{"name": "c"}]}}), vec![]),
            (container(json!({"privileged": true})), vec!["privileged"]),
            (container(json!({"privileged": false})), vec![]),
            (
                container(json!({"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}})),
                vec![],
            ),
            (
                container(json!({"capabilities": {"add": ["NET_ADMIN"]}})),
                vec!["capabilities"],
            ),
            (
                container(json!({"capabilities": {"add": ["NET_RAW"]}})),
                vec!["capabilities"],
            ),
            (
                container(json!({"capabilities": {"drop": ["ALL"]}})),
                vec![],
            ),
            (
                json!({"spec": {"hostNetwork": true, "hostPID": true, "hostIPC": false}}),
                vec!["hostNamespaces", "hostNamespaces"],
            ),
            (
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]}}),
                vec!["hostPath"],
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 81}]}]}}),
                vec!["hostPorts"],
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}]}]}}),
                vec![],
            ),
            (
                json!({"spec": {"initContainers": [{"name": "i", "securityContext": {"privileged": true}}]}}),
                vec!["privileged"],
            ),
            (
                json!({"spec": {"ephemeralContainers": [{"name": "e", "securityContext": {"privileged": true}}]}}),
                vec!["privileged"],
            ),
            (
                container(json!({"windowsOptions": {"hostProcess": true}})),
                vec!["hostProcess"],
            ),
            (
                container(json!({"seccompProfile": {"type": "Unconfined"}})),
                vec!["seccomp"],
            ),
            (
                container(json!({"seccompProfile": {"type": "RuntimeDefault"}})),
                vec![],
            ),
            (
                json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}),
                vec!["seccomp"],
            ),
            (
                container(json!({"appArmorProfile": {"type": "Unconfined"}})),
                vec!["appArmor"],
            ),
            (
                json!({"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}}),
                vec!["appArmor"],
            ),
            (
                json!({"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "localhost/p"}}}),
                vec![],
            ),
            (
                container(json!({"seLinuxOptions": {"type": "container_t"}})),
                vec![],
            ),
            (
                container(json!({"seLinuxOptions": {"type": "spc_t"}})),
                vec!["seLinux"],
            ),
            (
                container(json!({"seLinuxOptions": {"user": "system_u"}})),
                vec!["seLinux"],
            ),
            (
                container(json!({"procMount": "Unmasked"})),
                vec!["procMount"],
            ),
            (
                json!({"spec": {"hostUsers": false, "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}}),
                vec![],
            ),
            (
                json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]}}}),
                vec!["sysctls"],
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}, "lifecycle": {"preStop": {"tcpSocket": {"host": "x", "port": 1}}}}]}}),
                vec!["hostProbes", "hostProbes"],
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "readinessProbe": {"httpGet": {"host": "", "port": 80}}}]}}),
                vec![],
            ),
        ];
        for (pod, expected) in cases {
            assert_eq!(controls(pod.clone(), &base), expected, "{pod}");
        }
    }

    #[test]
    fn exceptions_lift_only_what_they_name() {
        let pod = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"]}}}]}});
        let some = Exceptions {
            controls: [Control::HostNamespaces].into_iter().collect(),
            capabilities: ["NET_ADMIN".to_owned()].into_iter().collect(),
        };
        assert_eq!(controls(pod.clone(), &some), ["privileged", "capabilities"]);
        let violations = check_pod("driver pod", &pod, &some);
        assert_eq!(
            violations[1].to_string(),
            "driver pod spec.containers[0].securityContext.capabilities.add[1] \"SYS_ADMIN\" (capabilities)"
        );
        assert!(controls(pod, &Exceptions::privileged()).is_empty());
    }

    #[test]
    fn intersection_keeps_what_both_allow() {
        let a = Exceptions {
            controls: [Control::HostPath, Control::Capabilities]
                .into_iter()
                .collect(),
            capabilities: BTreeSet::new(),
        };
        let b = Exceptions {
            controls: [Control::HostPath].into_iter().collect(),
            capabilities: ["NET_ADMIN".to_owned()].into_iter().collect(),
        };
        let both = a.intersection(&b);
        assert_eq!(both.controls, [Control::HostPath].into_iter().collect());
        assert_eq!(both.capabilities, b.capabilities);
        assert_eq!(a.union(&b).controls.len(), 2);
    }

    #[test]
    fn host_path_volume_confs_are_checked() {
        let conf = [
            (
                "spark.kubernetes.executor.volumes.hostPath.data.mount.path",
                "/data",
            ),
            (
                "spark.kubernetes.executor.volumes.hostPath.data.options.path",
                "/mnt",
            ),
            (
                "spark.kubernetes.driver.volumes.emptyDir.scratch.mount.path",
                "/s",
            ),
        ];
        let found = check_conf(conf, &Exceptions::baseline());
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].at,
            "conf spark.kubernetes.executor.volumes.hostPath.data"
        );
        let allowed = Exceptions {
            controls: [Control::HostPath].into_iter().collect(),
            ..Exceptions::default()
        };
        assert!(check_conf(conf, &allowed).is_empty());
    }
}
