//! Pod volumes: the existence check that gates container start (`FailedMount`), and for pods
//! with real processes, volumes materialised as folders and mounts as symlinks under a per-pod
//! root directory.

use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::atomic::{self, Files};
use super::env::{Lookup, PodAddrs, field_ref, object_entries, object_key};
use super::safe_path::safe_join;
use crate::meta::At;
use crate::net::rootfs::{Mount, MountKind};

/// The first volume that cannot be mounted: (volume name, Kubernetes' message).
pub fn missing_volume(
    pod: &Value,
    exists: &dyn Fn(&str, &str) -> bool,
) -> Option<(String, String)> {
    for v in volumes(pod) {
        let vol = v.get("name").and_then(Value::as_str).unwrap_or("");
        for (plural, name, optional) in sources(v) {
            if !optional && !exists(plural, name) {
                let word = if plural == "secrets" {
                    "secret"
                } else {
                    "configmap"
                };
                return Some((
                    vol.to_string(),
                    format!(
                        "MountVolume.SetUp failed for volume \"{vol}\" : {word} \"{name}\" not found"
                    ),
                ));
            }
        }
    }
    None
}

fn volumes(pod: &Value) -> impl Iterator<Item = &Value> {
    pod.at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The ConfigMaps and Secrets a volume reads: (plural, name, optional).
fn sources(v: &Value) -> Vec<(&'static str, &str, bool)> {
    fn one<'a>(
        src: &'a Value,
        plural: &'static str,
        name_field: &str,
    ) -> (&'static str, &'a str, bool) {
        (
            plural,
            src.get(name_field).and_then(Value::as_str).unwrap_or(""),
            src.get("optional").and_then(Value::as_bool) == Some(true),
        )
    }
    let mut out = Vec::new();
    if let Some(cm) = v.get("configMap") {
        out.push(one(cm, "configmaps", "name"));
    }
    if let Some(s) = v.get("secret") {
        out.push(one(s, "secrets", "secretName"));
    }
    for src in v
        .at("/projected/sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(cm) = src.get("configMap") {
            out.push(one(cm, "configmaps", "name"));
        }
        if let Some(s) = src.get("secret") {
            out.push(one(s, "secrets", "name"));
        }
    }
    out
}

fn put(files: &mut Files, rel: &str, bytes: Vec<u8>) {
    files.insert(rel.trim_start_matches('/').to_string(), bytes);
}

/// Adds a ConfigMap's or Secret's keys, honouring `items` (key → path).
fn add_object(files: &mut Files, plural: &str, obj: &Value, items: Option<&Vec<Value>>) {
    match items {
        Some(items) => {
            for item in items {
                let key = item.get("key").and_then(Value::as_str).unwrap_or("");
                let path = item.get("path").and_then(Value::as_str).unwrap_or(key);
                if let Some(bytes) = object_key(plural, obj, key) {
                    put(files, path, bytes);
                }
            }
        }
        None => {
            for (k, v) in object_entries(plural, obj) {
                put(files, &k, v);
            }
        }
    }
}

fn add_downward(files: &mut Files, pod: &Value, items: &[Value], addrs: PodAddrs<'_>) {
    for item in items {
        let path = item.get("path").and_then(Value::as_str).unwrap_or("");
        let field = item
            .at("/fieldRef/fieldPath")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(v) = field_ref(pod, field, addrs) {
            put(files, path, v.into_bytes());
        }
    }
}

/// The files of a ConfigMap, Secret, downward API or projected volume as they are now; `None`
/// for other volumes (emptyDir, hostPath), whose content is not the kubelet's.
pub fn render(v: &Value, pod: &Value, lookup: Lookup<'_>, addrs: PodAddrs<'_>) -> Option<Files> {
    let items = |src: &Value| src.get("items").and_then(Value::as_array).cloned();
    let mut files = Files::new();
    if let Some(cm) = v.get("configMap") {
        let n = cm.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(obj) = lookup("configmaps", n) {
            add_object(&mut files, "configmaps", &obj, items(cm).as_ref());
        }
    } else if let Some(s) = v.get("secret") {
        let n = s.get("secretName").and_then(Value::as_str).unwrap_or("");
        if let Some(obj) = lookup("secrets", n) {
            add_object(&mut files, "secrets", &obj, items(s).as_ref());
        }
    } else if let Some(d) = v.at("/downwardAPI/items").and_then(Value::as_array) {
        add_downward(&mut files, pod, d, addrs);
    } else if let Some(sources) = v.at("/projected/sources").and_then(Value::as_array) {
        for src in sources {
            for (field, plural) in [("configMap", "configmaps"), ("secret", "secrets")] {
                if let Some(s) = src.get(field) {
                    let n = s.get("name").and_then(Value::as_str).unwrap_or("");
                    if let Some(obj) = lookup(plural, n) {
                        add_object(&mut files, plural, &obj, items(s).as_ref());
                    }
                }
            }
            if let Some(d) = src.at("/downwardAPI/items").and_then(Value::as_array) {
                add_downward(&mut files, pod, d, addrs);
            }
        }
    } else {
        return None;
    }
    Some(files)
}

fn volume_dir(vol_root: &Path, name: &str) -> io::Result<PathBuf> {
    safe_join(vol_root, name).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid volume name {name:?}"),
        )
    })
}

/// Creates `<pod_dir>/volumes/<volume>` for every volume and a symlink at
/// `<pod_dir>/root/<mountPath>` (to `<volume>/<subPath>` when given) for every mount of every
/// container; returns the root. The pod folder is recreated from scratch so a new pod with an
/// old name never sees its predecessor's files. ConfigMap, Secret, downward API and projected
/// volumes are written as the kubelet's AtomicWriter writes them ([`atomic`]).
pub fn materialise(
    pod: &Value,
    pod_dir: &Path,
    lookup: Lookup<'_>,
    addrs: PodAddrs<'_>,
) -> io::Result<PathBuf> {
    if pod_dir.exists() {
        std::fs::remove_dir_all(pod_dir)?;
    }
    let vol_root = pod_dir.join("volumes");
    let root = pod_dir.join("root");
    std::fs::create_dir_all(&vol_root)?;
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(pod_dir.join("logs"))?;
    for v in volumes(pod) {
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        let dir = volume_dir(&vol_root, name)?;
        if let Some(host) = v.at("/hostPath/path").and_then(Value::as_str) {
            // A hostPath volume is the host folder itself.
            std::os::unix::fs::symlink(host, &dir)?;
            continue;
        }
        match render(v, pod, lookup, addrs) {
            Some(files) => {
                atomic::write(&dir, &files)?;
            }
            None => std::fs::create_dir_all(&dir)?,
        }
    }
    for field in ["initContainers", "containers"] {
        for c in pod
            .at(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for m in c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                mount(&root, &vol_root, m)?;
            }
        }
    }
    Ok(root)
}

/// Brings the pod's ConfigMap, Secret, downward API and projected volumes up to date (the
/// kubelet's periodic sync); `true` when a volume changed.
pub fn refresh(
    pod: &Value,
    pod_dir: &Path,
    lookup: Lookup<'_>,
    addrs: PodAddrs<'_>,
) -> io::Result<bool> {
    let vol_root = pod_dir.join("volumes");
    let mut changed = false;
    for v in volumes(pod) {
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(files) = render(v, pod, lookup, addrs) {
            changed |= atomic::write(&volume_dir(&vol_root, name)?, &files)?;
        }
    }
    Ok(changed)
}

/// Whether the pod mounts ConfigMap `configmaps`/`secrets` object `name` in a volume.
pub fn uses(pod: &Value, plural: &str, name: &str) -> bool {
    volumes(pod).any(|v| {
        sources(v)
            .iter()
            .any(|(p, n, _)| *p == plural && *n == name)
    })
}

fn mount(root: &Path, vol_root: &Path, m: &Value) -> io::Result<()> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
    let name = m.get("name").and_then(Value::as_str).unwrap_or("");
    let mount_path = m.get("mountPath").and_then(Value::as_str).unwrap_or("");
    let sub = m.get("subPath").and_then(Value::as_str).unwrap_or("");
    let mut src = safe_join(vol_root, name).ok_or_else(|| invalid("invalid volume name"))?;
    if !sub.is_empty() {
        src = safe_join(&src, sub).ok_or_else(|| invalid("invalid subPath"))?;
        if !src.exists() {
            // Kubernetes creates a missing subPath as a directory.
            std::fs::create_dir_all(&src)?;
        }
    }
    let target = safe_join(root, mount_path).ok_or_else(|| invalid("invalid mountPath"))?;
    if target == root || target.symlink_metadata().is_ok() {
        // Two containers mounting the same path share one pod root: the first mount wins.
        return Ok(());
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let link = match target.parent() {
        Some(parent) => relative(parent, &src),
        None => src,
    };
    std::os::unix::fs::symlink(link, &target)
}

/// A container's volume mounts at their mount paths: the pod's volume folders (their `subPath`
/// within) under `vol_root`. ConfigMap, Secret, downward API and projected volumes are always
/// read-only, as the kubelet mounts them; others when the mount says `readOnly`.
pub fn container_mounts(pod: &Value, container: &Value, vol_root: &Path) -> Vec<Mount> {
    let mut out = Vec::new();
    for m in container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = m.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(path) = m.get("mountPath").and_then(Value::as_str) else {
            continue;
        };
        let sub = m.get("subPath").and_then(Value::as_str).unwrap_or("");
        let Some(mut source) = safe_join(vol_root, name) else {
            continue;
        };
        if !sub.is_empty() {
            match safe_join(&source, sub) {
                Some(s) => source = s,
                None => continue,
            }
        }
        let kubelet_written = volumes(pod)
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
            .is_some_and(|v| {
                ["configMap", "secret", "downwardAPI", "projected"]
                    .iter()
                    .any(|k| v.get(k).is_some())
            });
        let read_only = kubelet_written || m.get("readOnly").and_then(Value::as_bool) == Some(true);
        out.push(Mount {
            source,
            target: PathBuf::from(path),
            kind: MountKind::OptionalBind { read_only },
        });
    }
    out
}

/// The path of `to` relative to the folder `from` (both absolute or both relative to the same
/// base, as here where both lie under the pod folder).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to[common..] {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_configmap_and_secret_are_reported_unless_optional() {
        let pod = json!({"spec": {"volumes": [
            {"name": "opt", "configMap": {"name": "gone", "optional": true}},
            {"name": "conf", "configMap": {"name": "cm"}},
            {"name": "creds", "secret": {"secretName": "s"}},
        ]}});
        let msg = missing_volume(&pod, &|_, _| false);
        assert_eq!(
            msg,
            Some((
                "conf".into(),
                "MountVolume.SetUp failed for volume \"conf\" : configmap \"cm\" not found".into()
            ))
        );
        let msg = missing_volume(&pod, &|p, _| p == "configmaps");
        assert_eq!(
            msg.map(|m| m.1),
            Some("MountVolume.SetUp failed for volume \"creds\" : secret \"s\" not found".into())
        );
        assert_eq!(missing_volume(&pod, &|_, _| true), None);
    }

    #[test]
    fn relative_paths_climb_to_the_common_folder() {
        assert_eq!(
            relative(Path::new("/p/root/etc"), Path::new("/p/volumes/cfg")),
            PathBuf::from("../../volumes/cfg")
        );
        assert_eq!(
            relative(Path::new("/p/root"), Path::new("/p/volumes/v/sub")),
            PathBuf::from("../volumes/v/sub")
        );
    }

    #[test]
    fn materialises_volumes_and_mounts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pod = json!({"metadata": {"name": "p"}, "spec": {
        "volumes": [
            {"name": "conf", "configMap": {"name": "cm", "items": [{"key": "k", "path": "sub/k.txt"}]}},
            {"name": "all", "configMap": {"name": "cm"}},
            {"name": "creds", "secret": {"secretName": "s"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        "containers": [{"name": "a", "volumeMounts": [
            {"name": "conf", "mountPath": "/etc/conf"},
            {"name": "all", "mountPath": "/etc/one", "subPath": "k"},
            {"name": "creds", "mountPath": "/etc/creds"},
            {"name": "scratch", "mountPath": "/tmp/scratch"},
        ]}]}});
        let lookup = |plural: &str, _: &str| -> Option<Value> {
            match plural {
                "configmaps" => Some(json!({"data": {"k": "v", "other": "o"}})),
                _ => Some(json!({"data": {"pw": crate::base64::encode(b"secret!")}})),
            }
        };
        let addrs = PodAddrs {
            pod_ip: "10.244.0.1",
            host_ip: "127.0.0.1",
        };
        let pod_dir = dir.path().join("pod");
        let root = materialise(&pod, &pod_dir, &lookup, addrs).expect("materialise");
        let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
        assert_eq!(read("etc/conf/sub/k.txt"), "v");
        assert_eq!(read("etc/one"), "v");
        assert_eq!(read("etc/creds/pw"), "secret!");
        std::fs::write(root.join("tmp/scratch/f"), "x").expect("write to emptyDir");
        assert!(pod_dir.join("volumes/scratch/f").exists());
        // Moved aside, the folder still works for the processes that use it.
        let aside = dir.path().join("aside");
        std::fs::rename(&pod_dir, &aside).expect("rename");
        assert_eq!(
            std::fs::read_to_string(aside.join("root/etc/conf/sub/k.txt")).expect("read"),
            "v"
        );
    }
}
