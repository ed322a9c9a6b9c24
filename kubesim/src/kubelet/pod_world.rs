//! The world a real-process pod sees: its volumes, its service-account token (issued and
//! renewed as the kubelet does), its kubeconfig, `/etc/hosts` and friends, and each
//! container's file system view.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::image::ImageRun;
use super::machine::{CRef, Section};
use super::{HOST_IP, Kubelet, PodEntry, State, atomic, env, error_chain, volumes};
use crate::auth::{Authenticator, BoundPod, IssueError, TokenSpec};
use crate::meta::At;
use crate::net::addr::NODE_IP;
use crate::net::names::{PodHosts, hosts_file, resolv_conf};
use crate::net::ns::FileView;
use crate::net::rootfs::{Mount, MountKind};
use crate::{kubeconfig, node_token};

impl Kubelet {
    /// Whether every volume of the pod can be mounted; records `FailedMount` once when not, and
    /// materialises the pod folder for real processes when so.
    pub(super) fn check_mounts(&self, e: &mut PodEntry, orphans: &[PodEntry]) -> bool {
        let exists =
            |plural: &str, name: &str| self.store.get_shared("", plural, &e.ns, name).is_some();
        if let Some((_, message)) = volumes::missing_volume(&e.pod, &exists) {
            if !e.mount_event_sent {
                e.mount_event_sent = true;
                self.record_event(e, "Warning", "FailedMount", &message, None);
            }
            return false;
        }
        if e.has_process && e.root.is_none() {
            let Some(dir) = self.pod_dir(&e.ns, &e.name) else {
                return false;
            };
            // The token volume is mounted with the others: without a token (its service
            // account gone) the pod does not start, as on a kubelet.
            let token = match self.pod_token(e) {
                Ok(t) => t,
                Err(err) => {
                    if !e.materialise_failed {
                        e.materialise_failed = true;
                        let msg = format!(
                            "MountVolume.SetUp failed for volume \"{TOKEN_VOLUME}\" : failed to fetch token: {err}"
                        );
                        self.record_event(e, "Warning", "FailedMount", &msg, None);
                    }
                    return false;
                }
            };
            let lookup = |plural: &str, name: &str| self.store.get_raw("", plural, &e.ns, name);
            let addrs = env::PodAddrs {
                pod_ip: &e.ip,
                host_ip: self.host_ip(),
            };
            let made = self
                .clear_pod_dir(orphans, &e.ns, &e.name, &dir)
                .and_then(|()| volumes::materialise(&e.pod, &dir, &lookup, addrs))
                .and_then(|root| {
                    self.write_pod_world(e, &dir, token.as_deref())
                        .map(|()| root)
                });
            let root = match made {
                Ok(root) => root,
                Err(err) => {
                    if !e.materialise_failed {
                        e.materialise_failed = true;
                        tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not materialise pod volumes");
                        let msg = format!("MountVolume.SetUp failed: {err}");
                        self.record_event(e, "Warning", "FailedMount", &msg, None);
                    }
                    return false;
                }
            };
            // The sandbox (the pod's network) comes after the volumes, as on a kubelet.
            if let Some(net) = &self.config.network
                && e.net.is_none()
            {
                match net.pod(e.ip.parse().unwrap_or(NODE_IP)) {
                    Ok(n) => e.net = Some(n),
                    Err(err) => {
                        tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not create the pod's network");
                        if !e.materialise_failed {
                            e.materialise_failed = true;
                            let msg =
                                format!("Failed to create pod sandbox: {}", error_chain(&err));
                            self.record_event(e, "Warning", "FailedCreatePodSandBox", &msg, None);
                        }
                        return false;
                    }
                }
            }
            e.root = Some(root);
        }
        true
    }

    /// The nodes' address as pods see it.
    pub(super) fn host_ip(&self) -> &'static str {
        if self.config.network.is_some() {
            NODE_IP_STR
        } else {
            HOST_IP
        }
    }

    /// The URL a pod's processes reach the API server at: the `kubernetes` Service with their
    /// own network (HTTPS when the API server has a CA, as in a cluster), kubesim's own address
    /// without.
    pub(super) fn in_cluster_url(&self) -> Option<String> {
        let url = self.config.api_url.as_ref()?;
        if self.config.network.is_none() {
            return Some(url.clone());
        }
        let scheme = match self.config.ca_pem {
            Some(_) => "https",
            None => url.split("://").next().unwrap_or("http"),
        };
        Some(format!(
            "{scheme}://{}:{}",
            crate::net::addr::KUBERNETES_SERVICE_IP,
            crate::net::addr::KUBERNETES_SERVICE_PORT
        ))
    }

    /// Writes the files a pod's processes see at their real paths (`/etc/hosts`,
    /// `/etc/resolv.conf`, `/etc/hostname`, the service-account volume) under `<dir>/world/`.
    pub(super) fn write_pod_world(
        &self,
        e: &PodEntry,
        dir: &std::path::Path,
        token: Option<&str>,
    ) -> std::io::Result<()> {
        if self.config.network.is_none() {
            return Ok(());
        }
        let world = dir.join("world");
        std::fs::create_dir_all(&world)?;
        let records = self
            .config
            .services
            .as_ref()
            .map(|s| s.borrow().records())
            .unwrap_or_default();
        let hosts = PodHosts::of(&e.pod, &e.ip);
        std::fs::write(world.join("hosts"), hosts_file(&hosts, &records))?;
        std::fs::write(world.join("resolv.conf"), resolv_conf(&e.ns))?;
        std::fs::write(world.join("hostname"), format!("{}\n", hosts.hostname))?;
        // Mounted over the host's `/var/run/secrets` even when empty, so a pod without a
        // token never sees the host's.
        std::fs::create_dir_all(world.join("secrets"))?;
        if let Some(token) = token {
            atomic::write(
                &world.join(SERVICE_ACCOUNT_VOLUME),
                &self.service_account_files(e, token),
            )?;
        }
        Ok(())
    }

    /// Whether the pod gets its service-account token: not when the pod, or else its service
    /// account, turns automounting off.
    pub(super) fn automounts(&self, e: &PodEntry) -> bool {
        let sa = service_account_name(&e.pod);
        e.pod
            .at("/spec/automountServiceAccountToken")
            .and_then(Value::as_bool)
            .or_else(|| {
                self.store
                    .get_raw("", "serviceaccounts", &e.ns, sa)?
                    .get("automountServiceAccountToken")?
                    .as_bool()
            })
            .unwrap_or(true)
    }

    /// The service-account volume's files: `token`, `namespace` and, with a CA, `ca.crt`.
    pub(super) fn service_account_files(&self, e: &PodEntry, token: &str) -> atomic::Files {
        let mut files = atomic::Files::new();
        files.insert("token".into(), token.as_bytes().to_vec());
        files.insert("namespace".into(), e.ns.clone().into_bytes());
        if let Some(ca) = &self.config.ca_pem {
            files.insert("ca.crt".into(), ca.clone().into_bytes());
        }
        files
    }

    /// What the pod's processes authenticate with; `None`: nothing (the token is not mounted).
    ///
    /// With their own network: a service-account token for the pod's `serviceAccountName`,
    /// bound to the pod (it dies with the pod) and naming its node (a partition cuts its
    /// requests off), issued on first use and renewed by [`Self::renew_token`]. On the host's
    /// network (kept for compatibility), or without an authenticator: the node token, which
    /// stays privileged.
    pub(super) fn pod_token(&self, e: &mut PodEntry) -> Result<Option<String>, IssueError> {
        let Some(auth) = self.service_account_tokens() else {
            return Ok(Some(node_token::for_pod(&e.node, &e.ns, &e.name)));
        };
        if !self.automounts(e) {
            return Ok(None);
        }
        if let Some(t) = &e.token {
            return Ok(Some(t.token.clone()));
        }
        let t = issue_pod_token(auth, e, SystemTime::now())?;
        let token = t.token.clone();
        e.token = Some(t);
        Ok(Some(token))
    }

    /// The authenticator, when pods get service-account tokens (their own network).
    pub(super) fn service_account_tokens(&self) -> Option<&Authenticator> {
        self.config
            .tokens
            .as_deref()
            .filter(|_| self.config.network.is_some())
    }

    /// Renews a pod's token when it is due, as the kubelet's token manager does: the new token
    /// replaces the old in the service-account volume (one rename, so readers see one or the
    /// other) and in the pod's kubeconfig. A failed renewal keeps the old token (it stays
    /// valid far beyond its renewal time) and is tried again a minute later.
    pub(super) fn renew_token(&self, e: &mut PodEntry, dir: &std::path::Path, now: SystemTime) {
        let (Some(auth), Some(current)) = (self.service_account_tokens(), &e.token) else {
            return;
        };
        if now < current.refresh_at {
            return;
        }
        let renewed = match issue_pod_token(auth, e, now) {
            Ok(t) => t,
            Err(err) => {
                tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not renew the service-account token");
                if let Some(t) = e.token.as_mut() {
                    t.refresh_at = now + TOKEN_RETRY;
                }
                return;
            }
        };
        let files = self.service_account_files(e, &renewed.token);
        if let Err(err) = atomic::write(&dir.join("world").join(SERVICE_ACCOUNT_VOLUME), &files) {
            tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not write the renewed token");
        }
        if let (Some(url), Some(root)) = (self.in_cluster_url(), &e.root)
            && let Err(err) = write_pod_kubeconfig(
                root,
                &url,
                Some(&renewed.token),
                self.config.ca_pem.as_deref(),
                &e.ns,
            )
        {
            tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not write the renewed kubeconfig");
        }
        e.token = Some(renewed);
    }

    /// Keeps what running pods see up to date: hosts files when Services change, mounted
    /// ConfigMaps and Secrets when they do.
    pub(super) fn refresh_worlds(&self, st: &mut State) {
        let table = self.config.services.as_ref().map(|s| s.borrow().clone());
        let hosts_changed = match (&table, &st.hosts_version) {
            (Some(t), Some(old)) => !Arc::ptr_eq(t, old),
            (Some(_), None) => true,
            _ => false,
        };
        // Only pods with a root on disk (real processes) have a hosts file to rewrite: a
        // cluster of scripted pods does not pay for the records of every Service per change.
        let State {
            pods,
            processes,
            hosts_version,
            ..
        } = st;
        let rooted = || {
            processes
                .iter()
                .filter_map(|uid| pods.get(uid))
                .filter(|e| e.root.is_some())
        };
        let any_rooted = rooted().next().is_some();
        let records = match (
            &table,
            hosts_changed && self.config.network.is_some() && any_rooted,
        ) {
            (Some(t), true) => Some(t.records()),
            _ => None,
        };
        if hosts_changed {
            *hosts_version = table;
        }
        let now = SystemTime::now();
        // Only pods with a real process have a folder.
        for uid in processes.iter() {
            let Some(e) = pods.get_mut(uid) else {
                continue;
            };
            let Some(dir) = e.root.as_ref().and_then(|r| r.parent()).map(PathBuf::from) else {
                continue;
            };
            self.renew_token(e, &dir, now);
            if let Some(records) = &records {
                let text = hosts_file(&PodHosts::of(&e.pod, &e.ip), records);
                // In place: the file is bind-mounted, so it must stay the same file.
                if let Err(err) = write_in_place(&dir.join("world/hosts"), text.as_bytes()) {
                    tracing::debug!(pod = %e.name, error = %err, "could not update the hosts file");
                }
            }
            if std::mem::take(&mut e.volumes_stale) {
                let lookup = |plural: &str, name: &str| self.store.get_raw("", plural, &e.ns, name);
                let addrs = env::PodAddrs {
                    pod_ip: &e.ip,
                    host_ip: self.host_ip(),
                };
                if let Err(err) = volumes::refresh(&e.pod, &dir, &lookup, addrs) {
                    tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not update pod volumes");
                }
            }
        }
    }

    /// The file system of a container of the pod whose folder is `dir`: the image's layers, then
    /// the container's volumes at their mount paths and the kubelet's files, parents first.
    pub(super) fn file_view(
        &self,
        e: &PodEntry,
        dir: &std::path::Path,
        container: &Value,
        cref: CRef,
        run: ImageRun<'_>,
    ) -> FileView {
        let layers = run.files.iter().map(|(at, from)| Mount {
            source: from.clone(),
            target: at.clone(),
            kind: MountKind::Layer,
        });
        let mut mounts: Vec<Mount> =
            volumes::container_mounts(&e.pod, container, &dir.join("volumes"));
        let world = dir.join("world");
        for (file, target) in [
            ("hosts", "/etc/hosts"),
            ("resolv.conf", "/etc/resolv.conf"),
            ("hostname", "/etc/hostname"),
        ] {
            // A bind mount needs something to mount on; a host without the file keeps none.
            if std::path::Path::new(target).exists() {
                mounts.push(Mount {
                    source: world.join(file),
                    target: PathBuf::from(target),
                    kind: MountKind::Bind { read_only: false },
                });
            }
        }
        let secrets = world.join("secrets");
        if secrets.exists() && ensure_mount_point(SECRETS_MOUNT_POINT).is_ok() {
            mounts.push(Mount {
                source: secrets,
                target: PathBuf::from(SECRETS_MOUNT_POINT),
                kind: MountKind::Bind { read_only: false },
            });
        }
        // Volumes and files over the image, parents first (a stable sort keeps spec order).
        mounts.sort_by_key(|m| crate::net::rootfs::depth(&m.target));
        let working_dir = container
            .get("workingDir")
            .and_then(Value::as_str)
            .filter(|w| !w.is_empty())
            .or(run.working_dir)
            .map(PathBuf::from);
        let section = match cref.section {
            Section::Init => "init",
            Section::Main => "main",
        };
        FileView {
            mounts: layers.chain(mounts).collect(),
            scratch: dir.join("rootfs").join(format!("{section}-{}", cref.index)),
            working_dir,
            hostname: PodHosts::of(&e.pod, &e.ip).hostname.to_string(),
            read_only_root: container
                .at("/securityContext/readOnlyRootFilesystem")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }
}

pub(super) const KUBECONFIG: &str = "KUBECONFIG";

/// Where a real-process pod's kubeconfig lives, relative to the pod root.
pub const POD_KUBECONFIG: &str = ".kubesim/kubeconfig";

/// Writes the pod's kubeconfig (atomically: a sibling container may be reading it while a
/// restarting one rewrites it) and returns its path.
pub(super) fn write_pod_kubeconfig(
    root: &std::path::Path,
    url: &str,
    token: Option<&str>,
    ca_pem: Option<&str>,
    namespace: &str,
) -> std::io::Result<PathBuf> {
    let path = root.join(POD_KUBECONFIG);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let text = match ca_pem {
        Some(ca) if url.starts_with("https://") => {
            let credentials = match token {
                Some(t) => kubeconfig::Credentials::Token(t),
                None => kubeconfig::Credentials::Anonymous,
            };
            kubeconfig::render_https(url, ca, credentials, namespace)
        }
        _ => kubeconfig::render_with_token(url, token),
    };
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// `198.18.0.1` as text.
pub(super) const NODE_IP_STR: &str = "198.18.0.1";

/// Where the service-account volume is mounted: `/var/run/secrets`, so the pod sees
/// `kubernetes.io/serviceaccount/{token,ca.crt,namespace}` below it and nothing of the host's.
pub(super) const SECRETS_MOUNT_POINT: &str = "/var/run/secrets";

/// A bind mount needs a folder to mount on: the one thing kubesim may add to the host is this
/// empty folder, and only when the host has none.
pub(super) fn ensure_mount_point(path: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}

/// Where the service-account volume lives below a pod's `world/` folder (and so below
/// `/var/run/secrets` in its containers).
pub(super) const SERVICE_ACCOUNT_VOLUME: &str = "secrets/kubernetes.io/serviceaccount";

/// The name events give the service-account token volume (a real pod's is
/// `kube-api-access-<random>`, added by admission).
pub(super) const TOKEN_VOLUME: &str = "kube-api-access";

/// How long a failed token renewal waits before the next try.
pub(super) const TOKEN_RETRY: Duration = Duration::from_secs(60);

/// A pod's service-account token and when the kubelet renews it.
pub(super) struct PodToken {
    pub(super) token: String,
    pub(super) refresh_at: SystemTime,
}

/// The pod's service account (`default` when it names none).
pub(super) fn service_account_name(pod: &Value) -> &str {
    pod.at("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
}

/// Issues the pod's token as the kubelet asks for it: the API server's audience, an hour and
/// 7 s, bound to the pod and its node.
pub(super) fn issue_pod_token(
    auth: &Authenticator,
    e: &PodEntry,
    now: SystemTime,
) -> Result<PodToken, IssueError> {
    let issued = auth.issue(&TokenSpec {
        namespace: e.ns.clone(),
        service_account: service_account_name(&e.pod).to_string(),
        audiences: Vec::new(),
        expiration_seconds: crate::auth::KUBELET_EXPIRATION_SECONDS,
        bound_pod: Some(BoundPod {
            name: e.name.clone(),
            uid: e.uid.clone(),
            node: Some(e.node.clone()),
        }),
    })?;
    let lifetime = Duration::from_secs(crate::auth::KUBELET_EXPIRATION_SECONDS.unsigned_abs());
    Ok(PodToken {
        token: issued.token,
        refresh_at: now + token_refresh_after(lifetime),
    })
}

/// How long after issuing the kubelet renews a token of `lifetime`: at 80% of it, and at least
/// daily (the kubelet's token manager).
pub(super) fn token_refresh_after(lifetime: Duration) -> Duration {
    (lifetime / 5 * 4).min(Duration::from_secs(24 * 3600))
}

/// Rewrites `path` keeping its inode (a bind mount holds the inode, not the name).
pub(super) fn write_in_place(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(bytes)?;
    f.set_len(bytes.len() as u64)?;
    Ok(())
}
