//! `spark.kubernetes.{driver,executor}.volumes.[type].[name].*` as `KubernetesVolumeUtils`
//! parses them, and the volumes, mounts and on-demand claims `MountVolumesFeatureStep` makes.

mod hash_order;

use std::ops::Not;

use serde_json::{Map, Value, json};

use super::BuildError;
use super::java;
use super::version::SparkLine;
use crate::conf::SparkConf;
use hash_order::Scala;

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

impl VolumeSpec {
    /// Spark's `KubernetesVolumeSpec.hashCode` (a case class of strings, a boolean and the
    /// type's own case class), which decides where the spec sits in a hash set. The fields are
    /// the release's: Spark 4.0 added `mountSubPathExpr`, the hostPath `volumeType` and the
    /// claim's labels and annotations.
    fn scala_hash(&self, line: SparkLine) -> i32 {
        use hash_order::{
            bool_hash, option_hash, option_string_hash, product_hash, string_hash, string_map_hash,
        };
        let scala = scala_of(line);
        let spark_4 = line >= SparkLine::V4_0;
        let pairs = |v: &[(String, String)]| -> i32 {
            string_map_hash(v.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        };
        let conf = match &self.kind {
            VolumeKind::HostPath {
                path,
                host_path_type,
            } => {
                let mut fields = vec![string_hash(path)];
                if spark_4 {
                    fields.push(string_hash(host_path_type));
                }
                product_hash(scala, "KubernetesHostPathVolumeConf", &fields)
            }
            VolumeKind::Pvc {
                claim_name,
                storage_class,
                size_limit,
                labels,
                annotations,
            } => {
                let mut fields = vec![
                    string_hash(claim_name),
                    option_string_hash(scala, storage_class.as_deref()),
                    option_string_hash(scala, size_limit.as_deref()),
                ];
                if spark_4 {
                    // Spark always wraps both maps in `Some`, empty or not.
                    fields.push(option_hash(scala, Some(pairs(labels))));
                    fields.push(option_hash(scala, Some(pairs(annotations))));
                }
                product_hash(scala, "KubernetesPVCVolumeConf", &fields)
            }
            VolumeKind::EmptyDir { medium, size_limit } => product_hash(
                scala,
                "KubernetesEmptyDirVolumeConf",
                &[
                    option_string_hash(scala, medium.as_deref()),
                    option_string_hash(scala, size_limit.as_deref()),
                ],
            ),
            VolumeKind::Nfs { path, server } => product_hash(
                scala,
                "KubernetesNFSVolumeConf",
                &[string_hash(path), string_hash(server)],
            ),
        };
        let mut fields = vec![
            string_hash(&self.name),
            string_hash(&self.mount_path),
            string_hash(&self.sub_path),
        ];
        if spark_4 {
            fields.push(string_hash(&self.sub_path_expr));
        }
        fields.extend([bool_hash(self.read_only), conf]);
        product_hash(scala, "KubernetesVolumeSpec", &fields)
    }
}

fn scala_of(line: SparkLine) -> Scala {
    if line.scala_2_12() {
        Scala::V2_12
    } else {
        Scala::V2_13
    }
}

/// `parseVolumesWithPrefix`: one spec per distinct `type.name`, in Spark's order, which is what
/// Scala collections make of it (see [`hash_order`]):
/// 1. the keys under `prefix` become an immutable `Map`; its keys are iterated;
/// 2. each key's `(type, name)` goes into a `Set`, so the pairs come in order of first
///    appearance in that iteration (up to four) or in hash order of the tuples (five or more);
/// 3. the specs built from the pairs are mapped into another `Set`, so up to four keep the
///    pairs' order and five or more come in hash order of `KubernetesVolumeSpec.hashCode`.
///
/// Step 1 starts from `getAllWithPrefix`, whose order is that of a mutable hash set of all the
/// settings of `spark_conf` (Spark's whole conf); it shows only when at most four keys are under
/// `prefix` (a `Map1`..`Map4` keeps it).
///
/// `line` picks the release's Scala (2.12 for Spark 3.5, 2.13 after) and the options it reads:
/// Spark 3.5 has no `mount.subPathExpr`, hostPath `options.type` or claim `label.*` /
/// `annotation.*` (they came with 4.0), so it ignores them.
pub(crate) fn parse(
    conf: &SparkConf,
    prefix: &str,
    spark_conf: &[(String, String)],
    line: SparkLine,
) -> Result<Vec<VolumeSpec>, BuildError> {
    let scala = scala_of(line);
    let spark_4 = line >= SparkLine::V4_0;
    // SparkConf keys are unique, so once ordered this is the map `getAllWithPrefix(..).toMap`
    // makes. `spark_conf` holds `conf` and a few settings Spark adds.
    let props: Vec<(&str, &str)> = hash_order::get_all_order(scala, spark_conf)
        .into_iter()
        .filter_map(|i| {
            let (k, v) = &spark_conf[i];
            k.strip_prefix(prefix).map(|rest| (rest, v.as_str()))
        })
        .collect();
    debug_assert_eq!(props.len(), conf.with_prefix(prefix).count());
    let get = |key: &str| props.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let key_hashes: Vec<i32> = props
        .iter()
        .map(|(k, _)| hash_order::string_hash(k))
        .collect();
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for i in hash_order::immutable_order(scala, &key_hashes) {
        let parts = java::split(props[i].0, '.');
        if let [volume_type, name, ..] = parts.as_slice()
            && !pairs.contains(&(volume_type, name))
        {
            pairs.push((volume_type, name));
        }
    }
    let pair_hashes: Vec<i32> = pairs
        .iter()
        .map(|(t, n)| hash_order::string_pair_hash(scala, t, n))
        .collect();
    let seen: Vec<(&str, &str)> = hash_order::immutable_order(scala, &pair_hashes)
        .into_iter()
        .map(|i| pairs[i])
        .collect();
    let mut specs = Vec::with_capacity(seen.len());
    for (volume_type, name) in seen {
        let key = |suffix: &str| format!("{volume_type}.{name}.{suffix}");
        let full = |k: &str| format!("{prefix}{k}");
        let (sub_path_key, sub_path_expr_key) = (key("mount.subPath"), key("mount.subPathExpr"));
        if spark_4 && get(&sub_path_key).is_some() && get(&sub_path_expr_key).is_some() {
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
                host_path_type: optional("options.type")
                    .filter(|_| spark_4)
                    .unwrap_or_default(),
            },
            "persistentVolumeClaim" => {
                let claim_name = required("options.claimName")?;
                let size_limit = optional("options.sizeLimit");
                // Spark 4.0 began refusing sizes without a unit.
                if spark_4 {
                    verify_size(name, size_limit.as_deref())?;
                }
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
                let (labels, annotations) = if spark_4 {
                    (sub_map("label."), sub_map("annotation."))
                } else {
                    (Vec::new(), Vec::new())
                };
                VolumeKind::Pvc {
                    claim_name,
                    storage_class: optional("options.storageClass"),
                    size_limit,
                    labels,
                    annotations,
                }
            }
            "emptyDir" => {
                let size_limit = optional("options.sizeLimit");
                // Spark 4.0 began refusing sizes without a unit.
                if spark_4 {
                    verify_size(name, size_limit.as_deref())?;
                }
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
            sub_path_expr: optional("mount.subPathExpr")
                .filter(|_| spark_4)
                .unwrap_or_default(),
            read_only,
            kind,
        });
    }
    let spec_hashes: Vec<i32> = specs.iter().map(|s| s.scala_hash(line)).collect();
    let mut slots: Vec<Option<VolumeSpec>> = specs.into_iter().map(Some).collect();
    Ok(hash_order::immutable_order(scala, &spec_hashes)
        .into_iter()
        .filter_map(|i| slots[i].take())
        .collect())
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
    line: SparkLine,
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
        let mut mount = json!({
            "mountPath": spec.mount_path,
            "name": spec.name,
            "readOnly": spec.read_only,
            "subPath": spec.sub_path,
        });
        // Spark 4.0 added subPathExpr (always written, "" when unset).
        if line >= SparkLine::V4_0 {
            mount["subPathExpr"] = json!(spec.sub_path_expr);
        }
        out.mounts.push(mount);
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

    /// `parse` of the driver volumes of `conf` in a Spark conf of `size` settings (`conf` and
    /// fillers outside the prefix).
    fn parse_sized(
        conf: &SparkConf,
        size: usize,
        line: SparkLine,
    ) -> Result<Vec<VolumeSpec>, BuildError> {
        let mut entries: Vec<(String, String)> = conf
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        for i in entries.len()..size {
            entries.push((format!("spark.test.filler{i}"), String::new()));
        }
        parse(conf, DRIVER_PREFIX, &entries, line)
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
        let specs = parse_sized(&c, c.len(), SparkLine::V4_3).unwrap();
        // Spark's order for these twelve keys (see `volumes_come_in_sparks_order`).
        assert_eq!(names(&specs), ["p", "e", "n", "h"]);
        let built = driver_volumes(&specs, "app-1", "spark-x", false, SparkLine::V4_3).unwrap();
        assert_eq!(
            built.volumes[0],
            json!({"name": "p", "persistentVolumeClaim": {"claimName": "app-1-driver-pvc-0", "readOnly": true}})
        );
        assert_eq!(
            built.volumes[1],
            json!({"name": "e", "emptyDir": {"medium": "", "sizeLimit": "1Gi"}})
        );
        assert_eq!(
            built.volumes[2],
            json!({"name": "n", "nfs": {"path": "/export", "server": "nfs.local"}})
        );
        assert_eq!(
            built.volumes[3],
            json!({"name": "h", "hostPath": {"path": "/host", "type": ""}})
        );
        assert_eq!(built.claims.len(), 1);
        assert_eq!(built.claims[0]["metadata"]["name"], "app-1-driver-pvc-0");
    }

    fn names(specs: &[VolumeSpec]) -> Vec<&str> {
        specs.iter().map(|s| s.name.as_str()).collect()
    }

    /// `type.name.option=value` lines under the driver prefix.
    fn driver_conf(lines: &str) -> SparkConf {
        lines
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').expect("key=value");
                (format!("{DRIVER_PREFIX}{k}"), v.to_owned())
            })
            .collect()
    }

    /// Expected orders come from Spark 4.3.0 itself: `KubernetesVolumeUtils.parseVolumesWithPrefix`
    /// called on the same conf, and the corpus goldens of real spark-submit
    /// (`volumes-five-mixed`, `volumes-three-on-demand-key-order`).
    #[test]
    fn volumes_come_in_sparks_order() {
        let cases: [(&str, &str, &[&str]); 4] = [
            (
                "five emptyDirs: a hash set of specs, not argv order",
                "emptyDir.a.mount.path=/a
                 emptyDir.b.mount.path=/b
                 emptyDir.c.mount.path=/c
                 emptyDir.d.mount.path=/d
                 emptyDir.e.mount.path=/e",
                &["e", "d", "c", "a", "b"],
            ),
            (
                "five mixed types with an on-demand claim",
                "hostPath.host-logs.mount.path=/var/log/app
                 hostPath.host-logs.options.path=/var/log
                 hostPath.host-logs.options.type=Directory
                 emptyDir.scratch.mount.path=/scratch
                 emptyDir.scratch.options.medium=Memory
                 emptyDir.scratch.options.sizeLimit=1Gi
                 nfs.shared.mount.path=/shared
                 nfs.shared.mount.readOnly=true
                 nfs.shared.options.path=/exports/shared
                 nfs.shared.options.server=nfs.example.com
                 persistentVolumeClaim.reference.mount.path=/reference
                 persistentVolumeClaim.reference.mount.readOnly=true
                 persistentVolumeClaim.reference.options.claimName=reference-data
                 persistentVolumeClaim.checkpoint.mount.path=/checkpoint
                 persistentVolumeClaim.checkpoint.options.claimName=OnDemand
                 persistentVolumeClaim.checkpoint.options.storageClass=standard
                 persistentVolumeClaim.checkpoint.options.sizeLimit=10Gi",
                &["scratch", "checkpoint", "reference", "shared", "host-logs"],
            ),
            (
                "labels and annotations are part of a claim's hash",
                "persistentVolumeClaim.spill.mount.path=/spill
                 persistentVolumeClaim.spill.options.claimName=OnDemand
                 persistentVolumeClaim.spill.options.storageClass=fast
                 persistentVolumeClaim.spill.options.sizeLimit=50Gi
                 persistentVolumeClaim.state.mount.path=/state
                 persistentVolumeClaim.state.options.claimName=OnDemand
                 persistentVolumeClaim.state.options.storageClass=standard
                 persistentVolumeClaim.state.options.sizeLimit=5Gi
                 persistentVolumeClaim.state.label.tier=hot
                 persistentVolumeClaim.state.label.team=data
                 persistentVolumeClaim.state.annotation.example.com/backup=daily
                 persistentVolumeClaim.output.mount.path=/output
                 persistentVolumeClaim.output.mount.subPath=run-1
                 persistentVolumeClaim.output.options.claimName=OnDemand
                 persistentVolumeClaim.output.options.storageClass=standard
                 persistentVolumeClaim.output.options.sizeLimit=20Gi
                 emptyDir.tmp.mount.path=/tmp/work
                 hostPath.docker.mount.path=/var/run/docker.sock
                 hostPath.docker.options.path=/var/run/docker.sock
                 hostPath.docker.options.type=Socket
                 nfs.home.mount.path=/home/spark
                 nfs.home.mount.subPathExpr=$(SPARK_USER)
                 nfs.home.options.path=/exports/home
                 nfs.home.options.server=10.0.0.5",
                &["state", "spill", "tmp", "output", "docker", "home"],
            ),
            (
                "three volumes over five keys: first appearance in the hashed key map",
                "emptyDir.gamma.mount.path=/gamma
                 persistentVolumeClaim.beta.mount.path=/beta
                 persistentVolumeClaim.beta.options.claimName=OnDemand
                 persistentVolumeClaim.beta.options.storageClass=standard
                 persistentVolumeClaim.beta.options.sizeLimit=1Gi
                 persistentVolumeClaim.alpha.mount.path=/alpha
                 persistentVolumeClaim.alpha.options.claimName=OnDemand
                 persistentVolumeClaim.alpha.options.storageClass=standard
                 persistentVolumeClaim.alpha.options.sizeLimit=1Gi",
                &["alpha", "beta", "gamma"],
            ),
        ];
        for (what, lines, expected) in cases {
            let specs = parse_sized(&driver_conf(lines), 20, SparkLine::V4_3).unwrap();
            assert_eq!(names(&specs), expected, "{what}");
        }
    }

    /// Corpus case `volumes-eight-mixed`: real spark-submit named p2's claim `-pvc-1` and p1's
    /// `-pvc-7`, and created them in that order.
    /// With at most four keys the conf's own hash order shows, and it depends on how many
    /// settings the whole conf has (corpus cases `volumes-two-empty-dirs-conf-hash-order` with
    /// 11 and `volumes-two-empty-dirs-template-counts-in-conf-size` with 12).
    #[test]
    fn few_keys_come_in_the_order_of_sparks_conf_hash_set() {
        let c = driver_conf(
            "emptyDir.cache.mount.path=/cache
             emptyDir.tmp.mount.path=/tmp",
        );
        let order = |size| names(&parse_sized(&c, size, SparkLine::V4_3).unwrap()).join(",");
        assert_eq!(order(11), "tmp,cache");
        assert_eq!(order(12), "cache,tmp");
    }

    #[test]
    fn on_demand_claims_are_numbered_by_sparks_position() {
        let c = driver_conf(
            "hostPath.h1.mount.path=/h1
             hostPath.h1.options.path=/mnt/h1
             hostPath.h2.mount.path=/h2
             hostPath.h2.mount.readOnly=true
             hostPath.h2.options.path=/mnt/h2
             hostPath.h2.options.type=DirectoryOrCreate
             emptyDir.e1.mount.path=/e1
             emptyDir.e2.mount.path=/e2
             emptyDir.e2.options.sizeLimit=512Mi
             nfs.n1.mount.path=/n1
             nfs.n1.options.path=/exports/n1
             nfs.n1.options.server=nfs-1.example.com
             nfs.n2.mount.path=/n2
             nfs.n2.options.path=/exports/n2
             nfs.n2.options.server=nfs-2.example.com
             persistentVolumeClaim.p1.mount.path=/p1
             persistentVolumeClaim.p1.options.claimName=OnDemand
             persistentVolumeClaim.p1.options.storageClass=standard
             persistentVolumeClaim.p1.options.sizeLimit=1Gi
             persistentVolumeClaim.p2.mount.path=/p2
             persistentVolumeClaim.p2.options.claimName=OnDemand
             persistentVolumeClaim.p2.options.storageClass=standard
             persistentVolumeClaim.p2.options.sizeLimit=2Gi",
        );
        let specs = parse_sized(&c, c.len(), SparkLine::V4_3).unwrap();
        assert_eq!(
            names(&specs),
            ["n1", "p2", "h1", "e1", "e2", "n2", "h2", "p1"]
        );
        let built = driver_volumes(&specs, "app", "spark-x", false, SparkLine::V4_3).unwrap();
        let claim_of = |name: &str| {
            built
                .volumes
                .iter()
                .find(|v| v["name"] == name)
                .map(|v| v["persistentVolumeClaim"]["claimName"].clone())
        };
        assert_eq!(claim_of("p2"), Some(json!("app-driver-pvc-1")));
        assert_eq!(claim_of("p1"), Some(json!("app-driver-pvc-7")));
        let created: Vec<&Value> = built
            .claims
            .iter()
            .map(|c| &c["metadata"]["name"])
            .collect();
        assert_eq!(
            created,
            [&json!("app-driver-pvc-1"), &json!("app-driver-pvc-7")]
        );
    }

    /// `KubernetesVolumeSpec.hashCode()` as the JVM computes it for these specs.
    #[test]
    fn spec_hash_is_sparks_hash_code() {
        let specs = parse_sized(
            &driver_conf(
                "emptyDir.a.mount.path=/a
                 emptyDir.b.mount.path=/b
                 emptyDir.c.mount.path=/c
                 emptyDir.d.mount.path=/d
                 emptyDir.e.mount.path=/e",
            ),
            20,
            SparkLine::V4_3,
        )
        .unwrap();
        let hashes: Vec<(&str, i32)> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.scala_hash(SparkLine::V4_3)))
            .collect();
        assert_eq!(
            hashes,
            [
                ("e", 1_945_188_440),
                ("d", 589_703_253),
                ("c", -503_596_463),
                ("a", -1_399_722_767),
                ("b", 404_579_084),
            ]
        );
        let state = parse_sized(
            &driver_conf(
                "persistentVolumeClaim.state.mount.path=/state
                 persistentVolumeClaim.state.options.claimName=OnDemand
                 persistentVolumeClaim.state.options.storageClass=standard
                 persistentVolumeClaim.state.options.sizeLimit=5Gi
                 persistentVolumeClaim.state.label.tier=hot
                 persistentVolumeClaim.state.label.team=data
                 persistentVolumeClaim.state.annotation.example.com/backup=daily",
            ),
            20,
            SparkLine::V4_3,
        )
        .unwrap();
        assert_eq!(state[0].scala_hash(SparkLine::V4_3), -1_398_178_696);
    }

    proptest::proptest! {
        /// With five or more keys every collection involved is a hash trie, so the conf's own
        /// order (argv order) cannot matter.
        #[test]
        fn order_does_not_depend_on_conf_order(seed in proptest::collection::vec(0u32..1000, 17)) {
            let lines = [
                "hostPath.host-logs.mount.path=/var/log/app",
                "hostPath.host-logs.options.path=/var/log",
                "hostPath.host-logs.options.type=Directory",
                "emptyDir.scratch.mount.path=/scratch",
                "emptyDir.scratch.options.medium=Memory",
                "emptyDir.scratch.options.sizeLimit=1Gi",
                "nfs.shared.mount.path=/shared",
                "nfs.shared.mount.readOnly=true",
                "nfs.shared.options.path=/exports/shared",
                "nfs.shared.options.server=nfs.example.com",
                "persistentVolumeClaim.reference.mount.path=/reference",
                "persistentVolumeClaim.reference.mount.readOnly=true",
                "persistentVolumeClaim.reference.options.claimName=reference-data",
                "persistentVolumeClaim.checkpoint.mount.path=/checkpoint",
                "persistentVolumeClaim.checkpoint.options.claimName=OnDemand",
                "persistentVolumeClaim.checkpoint.options.storageClass=standard",
                "persistentVolumeClaim.checkpoint.options.sizeLimit=10Gi",
            ];
            let mut shuffled: Vec<(u32, &str)> = seed.into_iter().zip(lines).collect();
            shuffled.sort_by_key(|&(k, _)| k);
            let text: Vec<&str> = shuffled.into_iter().map(|(_, l)| l).collect();
            let specs = parse_sized(&driver_conf(&text.join("\n")), 30, SparkLine::V4_3).unwrap();
            proptest::prop_assert_eq!(
                names(&specs),
                ["scratch", "checkpoint", "reference", "shared", "host-logs"]
            );
        }
    }

    /// Every configuration of tests/corpus/volume-order/<release>.txt, recorded from that
    /// release's own `parseVolumesWithPrefix` (tests/corpus/tools/volume_order.py): mixed volumes
    /// (trie order) and two to four bare emptyDirs among up to 50 other settings (the order of
    /// the conf's hash set, Scala 2.12's open-addressing table for 3.5).
    #[test]
    fn volume_order_matches_each_releases_own_parser() {
        for line in SparkLine::ALL {
            let release = line.newest_release();
            let path = format!(
                "{}/../tests/corpus/volume-order/{release}.txt",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).expect("volume-order fixture");
            let mut checked = 0;
            for block in text.split("\n\n").filter(|b| b.contains("=> ")) {
                let mut entries: Vec<(String, String)> = Vec::new();
                let mut expected = "";
                for l in block.lines().filter(|l| !l.starts_with('#')) {
                    if let Some(fill) = l.strip_prefix("fill ") {
                        let n: usize = fill.parse().unwrap();
                        entries.extend((0..n).map(|i| (format!("spark.fill.{i}"), i.to_string())));
                    } else if let Some(answer) = l.strip_prefix("=> ") {
                        expected = answer;
                    } else {
                        let (k, v) = l.split_once('=').unwrap();
                        entries.push((format!("{DRIVER_PREFIX}{k}"), v.to_owned()));
                    }
                }
                let conf: SparkConf = entries.iter().cloned().collect();
                let ours = match parse(&conf, DRIVER_PREFIX, &entries, line) {
                    Ok(specs) => names(&specs).join(","),
                    Err(_) => "!".to_owned(),
                };
                let spark = if expected.starts_with('!') {
                    "!"
                } else {
                    expected
                };
                assert_eq!(ours, spark, "Spark {release}:\n{block}");
                checked += 1;
            }
            assert!(checked >= 200, "{path}: {checked} configurations");
        }
    }

    #[test]
    fn bad_volume_confs_are_refused() {
        let kind = |pairs: &[(&str, &str)]| {
            parse_sized(&conf(pairs), pairs.len(), SparkLine::V4_3)
                .and_then(|s| driver_volumes(&s, "p", "a", false, SparkLine::V4_3).map(|_| ()))
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
