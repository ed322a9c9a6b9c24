//! `spark.kubernetes.{driver,executor}.volumes.[type].[name].*` as `KubernetesVolumeUtils`
//! parses them, and the volumes, mounts and on-demand claims `MountVolumesFeatureStep` makes.

use std::ops::Not;

use serde_json::{Map, Value, json};

use super::BuildError;
use super::java;
use crate::conf::SparkConf;

pub(crate) const DRIVER_PREFIX: &str = "spark.kubernetes.driver.volumes.";
pub(crate) const EXECUTOR_PREFIX: &str = "spark.kubernetes.executor.volumes.";

const ON_DEMAND: &str = "OnDemand";

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VolumeKind {
    HostPath {
        path: String,
        host_path_type: String,
    },
    Pvc {
        claim_name: String,
        storage_class: Option<String>,
        size_limit: Option<String>,
        labels: Vec<(String, String)>,
        annotations: Vec<(String, String)>,
    },
    EmptyDir {
        medium: Option<String>,
        size_limit: Option<String>,
    },
    Nfs {
        path: String,
        server: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VolumeSpec {
    pub name: String,
    pub mount_path: String,
    pub sub_path: String,
    pub sub_path_expr: String,
    pub read_only: bool,
    pub kind: VolumeKind,
}

/// `parseVolumesWithPrefix`: one spec per distinct `type.name`, in order of first appearance
/// (Spark's is a hash set's order).
pub(crate) fn parse(conf: &SparkConf, prefix: &str) -> Result<Vec<VolumeSpec>, BuildError> {
    let props: Vec<(&str, &str)> = conf.with_prefix(prefix).collect();
    let get = |key: &str| props.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (key, _) in &props {
        let parts = java::split(key, '.');
        if let [volume_type, name, ..] = parts.as_slice()
            && !seen.contains(&(volume_type, name))
        {
            seen.push((volume_type, name));
        }
    }
    let mut specs = Vec::with_capacity(seen.len());
    for (volume_type, name) in seen {
        let key = |suffix: &str| format!("{volume_type}.{name}.{suffix}");
        let full = |k: &str| format!("{prefix}{k}");
        let (sub_path_key, sub_path_expr_key) = (key("mount.subPath"), key("mount.subPathExpr"));
        if get(&sub_path_key).is_some() && get(&sub_path_expr_key).is_some() {
            return Err(BuildError::InvalidVolume {
                name: name.to_owned(),
                reason: format!(
                    "{} and {} are mutually exclusive",
                    full(&sub_path_key),
                    full(&sub_path_expr_key)
                ),
            });
        }
        let mount_path_key = key("mount.path");
        let mount_path = get(&mount_path_key).ok_or_else(|| BuildError::MissingVolumeOption {
            key: full(&mount_path_key),
            volume_type: volume_type.to_owned(),
        })?;
        let read_only_key = key("mount.readOnly");
        let read_only = match get(&read_only_key) {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(BuildError::InvalidConf {
                    key: full(&read_only_key),
                    reason: format!("{v:?} is not a boolean"),
                });
            }
        };
        let required = |option: &str| {
            let k = key(option);
            get(&k)
                .map(str::to_owned)
                .ok_or_else(|| BuildError::MissingVolumeOption {
                    key: full(&k),
                    volume_type: volume_type.to_owned(),
                })
        };
        let optional = |option: &str| get(&key(option)).map(str::to_owned);
        let kind = match volume_type {
            "hostPath" => VolumeKind::HostPath {
                path: required("options.path")?,
                host_path_type: optional("options.type").unwrap_or_default(),
            },
            "persistentVolumeClaim" => {
                let claim_name = required("options.claimName")?;
                let size_limit = optional("options.sizeLimit");
                verify_size(name, size_limit.as_deref())?;
                let sub_map = |infix: &str| -> Vec<(String, String)> {
                    let start = key(infix);
                    props
                        .iter()
                        .filter_map(|(k, v)| {
                            k.strip_prefix(start.as_str())
                                .map(|rest| (rest.to_owned(), (*v).to_owned()))
                        })
                        .collect()
                };
                VolumeKind::Pvc {
                    claim_name,
                    storage_class: optional("options.storageClass"),
                    size_limit,
                    labels: sub_map("label."),
                    annotations: sub_map("annotation."),
                }
            }
            "emptyDir" => {
                let size_limit = optional("options.sizeLimit");
                verify_size(name, size_limit.as_deref())?;
                VolumeKind::EmptyDir {
                    medium: optional("options.medium"),
                    size_limit,
                }
            }
            "nfs" => VolumeKind::Nfs {
                path: required("options.path")?,
                server: required("options.server")?,
            },
            other => {
                return Err(BuildError::UnsupportedVolumeType {
                    volume_type: other.to_owned(),
                });
            }
        };
        specs.push(VolumeSpec {
            name: name.to_owned(),
            mount_path: mount_path.to_owned(),
            sub_path: optional("mount.subPath").unwrap_or_default(),
            sub_path_expr: optional("mount.subPathExpr").unwrap_or_default(),
            read_only,
            kind,
        });
    }
    Ok(specs)
}

/// `verifySize`: a bare number below 1024 bytes is most likely a missing unit.
fn verify_size(name: &str, size: Option<&str>) -> Result<(), BuildError> {
    // Long.parseLong fails on "" and beyond i64, which Spark reports as an error too.
    if let Some(v) = size
        && v.chars().all(|c| c.is_ascii_digit())
        && v.parse::<i64>().is_ok_and(|n| n >= 1024).not()
    {
        return Err(BuildError::InvalidVolume {
            name: name.to_owned(),
            reason: format!("volume size `{v}` is smaller than 1KiB. Missing units?"),
        });
    }
    Ok(())
}

/// What the driver gets from its volume confs.
pub(crate) struct DriverVolumes {
    pub mounts: Vec<Value>,
    pub volumes: Vec<Value>,
    /// `PersistentVolumeClaim`s to create for on-demand claims.
    pub claims: Vec<Value>,
}

/// `MountVolumesFeatureStep.constructVolumes` for the driver.
pub(crate) fn driver_volumes(
    specs: &[VolumeSpec],
    prefix: &str,
    app_id: &str,
    read_write_once: bool,
) -> Result<DriverVolumes, BuildError> {
    let mut duplicates: Vec<String> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let path = &spec.mount_path;
        let quoted = format!("'{path}'");
        if specs[..i].iter().any(|s| &s.mount_path == path) && !duplicates.contains(&quoted) {
            duplicates.push(quoted);
        }
    }
    if !duplicates.is_empty() {
        return Err(BuildError::DuplicateMountPath {
            paths: duplicates.join(", "),
        });
    }
    let mut out = DriverVolumes {
        mounts: Vec::with_capacity(specs.len()),
        volumes: Vec::with_capacity(specs.len()),
        claims: Vec::new(),
    };
    for (i, spec) in specs.iter().enumerate() {
        out.mounts.push(json!({
            "mountPath": spec.mount_path,
            "name": spec.name,
            "readOnly": spec.read_only,
            "subPath": spec.sub_path,
            "subPathExpr": spec.sub_path_expr,
        }));
        let mut volume = Map::new();
        volume.insert("name".into(), json!(spec.name));
        match &spec.kind {
            VolumeKind::HostPath {
                path,
                host_path_type,
            } => {
                volume.insert(
                    "hostPath".into(),
                    json!({"path": path, "type": host_path_type}),
                );
            }
            VolumeKind::Pvc {
                claim_name,
                storage_class,
                size_limit,
                labels,
                annotations,
            } => {
                let claim_name = claim_name.replace(ON_DEMAND, &format!("{prefix}-driver-pvc-{i}"));
                if let (Some(storage_class), Some(size)) = (storage_class, size_limit) {
                    let mut claim_labels = Map::new();
                    for (k, v) in labels {
                        claim_labels.insert(k.clone(), json!(v));
                    }
                    claim_labels.insert(crate::meta::labels::SPARK_APP_ID.into(), json!(app_id));
                    let mut metadata = Map::new();
                    metadata.insert("name".into(), json!(claim_name));
                    metadata.insert("labels".into(), Value::Object(claim_labels));
                    if !annotations.is_empty() {
                        let map: Map<String, Value> = annotations
                            .iter()
                            .map(|(k, v)| (k.clone(), json!(v)))
                            .collect();
                        metadata.insert("annotations".into(), Value::Object(map));
                    }
                    let access_mode = if read_write_once {
                        "ReadWriteOnce"
                    } else {
                        "ReadWriteOncePod"
                    };
                    out.claims.push(json!({
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": metadata,
                        "spec": {
                            "accessModes": [access_mode],
                            "resources": {"requests": {"storage": size}},
                            "storageClassName": storage_class,
                        },
                    }));
                }
                volume.insert(
                    "persistentVolumeClaim".into(),
                    json!({"claimName": claim_name, "readOnly": spec.read_only}),
                );
            }
            VolumeKind::EmptyDir { medium, size_limit } => {
                let mut empty_dir = Map::new();
                empty_dir.insert("medium".into(), json!(medium.clone().unwrap_or_default()));
                if let Some(size) = size_limit {
                    empty_dir.insert("sizeLimit".into(), json!(size));
                }
                volume.insert("emptyDir".into(), Value::Object(empty_dir));
            }
            VolumeKind::Nfs { path, server } => {
                volume.insert("nfs".into(), json!({"path": path, "server": server}));
            }
        }
        out.volumes.push(Value::Object(volume));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> SparkConf {
        pairs.iter().copied().collect()
    }

    #[test]
    fn each_kind_is_parsed() {
        let c = conf(&[
            (
                "spark.kubernetes.driver.volumes.hostPath.h.mount.path",
                "/h",
            ),
            (
                "spark.kubernetes.driver.volumes.hostPath.h.options.path",
                "/host",
            ),
            (
                "spark.kubernetes.driver.volumes.emptyDir.e.mount.path",
                "/e",
            ),
            (
                "spark.kubernetes.driver.volumes.emptyDir.e.options.sizeLimit",
                "1Gi",
            ),
            ("spark.kubernetes.driver.volumes.nfs.n.mount.path", "/n"),
            (
                "spark.kubernetes.driver.volumes.nfs.n.options.path",
                "/export",
            ),
            (
                "spark.kubernetes.driver.volumes.nfs.n.options.server",
                "nfs.local",
            ),
            (
                "spark.kubernetes.driver.volumes.persistentVolumeClaim.p.mount.path",
                "/p",
            ),
            (
                "spark.kubernetes.driver.volumes.persistentVolumeClaim.p.mount.readOnly",
                "TRUE",
            ),
            (
                "spark.kubernetes.driver.volumes.persistentVolumeClaim.p.options.claimName",
                "OnDemand",
            ),
            (
                "spark.kubernetes.driver.volumes.persistentVolumeClaim.p.options.storageClass",
                "std",
            ),
            (
                "spark.kubernetes.driver.volumes.persistentVolumeClaim.p.options.sizeLimit",
                "5Gi",
            ),
        ]);
        let specs = parse(&c, DRIVER_PREFIX).unwrap();
        assert_eq!(specs.len(), 4);
        let built = driver_volumes(&specs, "app-1", "spark-x", false).unwrap();
        assert_eq!(
            built.volumes[0],
            json!({"name": "h", "hostPath": {"path": "/host", "type": ""}})
        );
        assert_eq!(
            built.volumes[1],
            json!({"name": "e", "emptyDir": {"medium": "", "sizeLimit": "1Gi"}})
        );
        assert_eq!(
            built.volumes[3],
            json!({"name": "p", "persistentVolumeClaim": {"claimName": "app-1-driver-pvc-3", "readOnly": true}})
        );
        assert_eq!(built.claims.len(), 1);
        assert_eq!(built.claims[0]["metadata"]["name"], "app-1-driver-pvc-3");
    }

    #[test]
    fn bad_volume_confs_are_refused() {
        let kind = |pairs: &[(&str, &str)]| {
            parse(&conf(pairs), DRIVER_PREFIX)
                .and_then(|s| driver_volumes(&s, "p", "a", false).map(|_| ()))
                .unwrap_err()
                .kind()
        };
        assert_eq!(
            kind(&[(
                "spark.kubernetes.driver.volumes.hostPath.h.options.path",
                "/x"
            )]),
            "missing_volume_option"
        );
        assert_eq!(
            kind(&[(
                "spark.kubernetes.driver.volumes.hostPath.h.mount.path",
                "/x"
            )]),
            "missing_volume_option"
        );
        assert_eq!(
            kind(&[("spark.kubernetes.driver.volumes.foo.h.mount.path", "/x")]),
            "unsupported_volume_type"
        );
        assert_eq!(
            kind(&[
                (
                    "spark.kubernetes.driver.volumes.emptyDir.a.mount.path",
                    "/x"
                ),
                (
                    "spark.kubernetes.driver.volumes.emptyDir.b.mount.path",
                    "/x"
                ),
            ]),
            "duplicate_mount_path"
        );
        assert_eq!(
            kind(&[
                (
                    "spark.kubernetes.driver.volumes.emptyDir.a.mount.path",
                    "/x"
                ),
                (
                    "spark.kubernetes.driver.volumes.emptyDir.a.options.sizeLimit",
                    "10"
                ),
            ]),
            "invalid_volume"
        );
    }
}
