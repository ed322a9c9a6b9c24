//! Decide, purely, what a submission must do given what already exists.
//!
//! Input: the built objects (the driver pod first, then its dependents, in Spark's order) and,
//! for each, what a GET found, already classified by [`classify`]. Output: a [`Plan`] whose
//! steps the executor performs in the order given (the types say which steps run before the pod
//! exists and which need it), or the [`Refusal`] that stops the submission. No I/O, no clock: every rule below is tested
//! here with plain values.
//!
//! The rules (docs/submitter.md, "Creating a driver"):
//! - Anything carrying another submission id, or none, is not ours: 409, nothing is touched.
//! - An object of ours built for another driver pod (the spark-conf ConfigMap names its pod, and
//!   its name derives from the submission id alone, so every attempt of one id in one namespace
//!   meets it): the id is bound to that driver, 409, nothing is touched. One id, one driver.
//! - Pod absent (a first attempt): what the pod mounts (the ConfigMaps) first, without owner, so
//!   the driver never waits on `FailedMount`; then the pod, by POST, so a concurrent duplicate
//!   fails instead of merging; then the other dependents already owned by the pod; last, the
//!   ConfigMaps get the pod as owner. ConfigMaps of ours left by an earlier, crashed attempt are
//!   reused as they are (ConfigMaps are immutable in data and the same id builds the same ones).
//! - Pod present with our id (a repeat): a duplicate; whatever is missing is created owned by the
//!   existing pod and ownerless ones get it as owner (a crash between steps leaves such gaps).
//! - In every plan the mounted objects (ConfigMaps) get the pod as owner last, after every other
//!   dependent exists: a mounted object missing or stale is created without owner and adopted at
//!   the end. So "every ConfigMap of the driver is owned by its pod" proves the driver complete,
//!   and a watch cache of pods and ConfigMaps alone can tell a complete duplicate
//!   ([`observe_uncached`]) without reading the Service or NetworkPolicy.
//! - An object of ours owned by a pod that is not the current one belongs to an earlier
//!   incarnation of the driver and is being garbage collected: it is deleted (uid precondition)
//!   and created again rather than raced with the collector.
//! - Pod of ours that is being deleted (a rollback or a user's delete): nothing now, retry later.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::builder::conf_keys;
use crate::meta::annotations;

/// The spark-conf ConfigMap's data key holding the driver's properties.
const PROPERTIES_KEY: &str = "spark.properties";

/// What a GET found for one object, as far as a submission is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    /// Carries our submission id.
    Ours {
        uid: String,
        /// The uids of its `ownerReferences`.
        owners: Vec<String>,
        /// `metadata.deletionTimestamp` is set.
        terminating: bool,
        /// The driver pod it was built for, when it says: the pod its spark properties name
        /// (`spark.kubernetes.driver.pod.name`), else the pod that owns it.
        driver_pod: Option<String>,
    },
    /// Carries another submission id, or none (not created by the submitter).
    Foreign {
        submission_id: Option<String>,
    },
}

/// Classifies a cached object (typed metadata; `properties`: the spark-conf ConfigMap's
/// `spark.properties`, or what the cache kept of it) against `submission_id`: the same rule as
/// [`classify`].
pub fn classify_meta(
    metadata: &ObjectMeta,
    properties: Option<&str>,
    submission_id: &str,
) -> Found {
    let theirs = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::SUBMISSION_ID))
        .map(String::as_str);
    if theirs != Some(submission_id) {
        return Found::Foreign {
            submission_id: theirs.map(str::to_owned),
        };
    }
    let owner_refs = metadata.owner_references.as_deref().unwrap_or_default();
    let owning_pod = owner_refs
        .iter()
        .find(|owner| owner.kind == "Pod")
        .map(|owner| owner.name.clone());
    Found::Ours {
        uid: metadata.uid.clone().unwrap_or_default(),
        owners: owner_refs.iter().map(|owner| owner.uid.clone()).collect(),
        terminating: metadata.deletion_timestamp.is_some(),
        driver_pod: properties.and_then(driver_pod_in).or(owning_pod),
    }
}

/// The driver pod named in spark properties text.
fn driver_pod_in(properties: &str) -> Option<String> {
    properties.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key == conf_keys::DRIVER_POD_NAME).then(|| value.to_owned())
    })
}

/// The line of `spark.properties` that names the driver pod, all a cache needs to keep of it
/// for [`classify_meta`].
pub fn driver_pod_line(properties: &str) -> Option<&str> {
    properties.lines().find(|line| {
        line.split_once('=')
            .is_some_and(|(key, _)| key == conf_keys::DRIVER_POD_NAME)
    })
}

/// Classifies an object read from the API server against `submission_id`.
pub fn classify(object: Option<&Value>, submission_id: &str) -> Found {
    let Some(object) = object else {
        return Found::Absent;
    };
    let metadata = object.get("metadata");
    let theirs = metadata
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(annotations::SUBMISSION_ID))
        .and_then(Value::as_str);
    if theirs != Some(submission_id) {
        return Found::Foreign {
            submission_id: theirs.map(str::to_owned),
        };
    }
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let owners = metadata
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|owners| {
            owners
                .iter()
                .filter_map(|owner| owner.get("uid").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Found::Ours {
        uid: text("uid").unwrap_or_default(),
        owners,
        terminating: text("deletionTimestamp").is_some(),
        driver_pod: driver_pod_of(object),
    }
}

/// The driver pod an object of ours was built for: named in its spark properties (the
/// spark-conf ConfigMap), else its owning pod.
fn driver_pod_of(object: &Value) -> Option<String> {
    let named = object
        .get("data")
        .and_then(|data| data.get(PROPERTIES_KEY))
        .and_then(Value::as_str)
        .and_then(driver_pod_in);
    named.or_else(|| {
        crate::pointer::at(object, "/metadata/ownerReferences")?
            .as_array()?
            .iter()
            .find(|owner| owner.get("kind").and_then(Value::as_str) == Some("Pod"))?
            .get("name")?
            .as_str()
            .map(str::to_owned)
    })
}

/// A step before the driver pod exists. Indices are into the built objects (0 is the pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeforePod {
    /// Delete an object of an earlier driver incarnation, with a uid precondition.
    DeleteStale { index: usize, uid: String },
    /// POST the object without owner (the pod that will own it does not exist yet).
    Create { index: usize },
}

/// A step that needs the driver pod: its uid is the owner of what is created or adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WithPod {
    /// Delete an object of an earlier driver incarnation, with a uid precondition.
    DeleteStale { index: usize, uid: String },
    /// POST the object with the driver pod as owner.
    CreateOwned { index: usize },
    /// POST a mounted object without owner; a later `AttachOwner` adopts it (see the module
    /// documentation: mounted objects are adopted last).
    CreateUnowned { index: usize },
    /// Merge-patch `metadata.ownerReferences` to the driver pod.
    AttachOwner { index: usize },
}

/// What to do, when something is to be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// First attempt: `before`, then POST the driver pod, then `after` with the new pod.
    Create {
        before: Vec<BeforePod>,
        after: Vec<WithPod>,
    },
    /// Repeat: the pod exists with `pod_uid`; `effects` repair what is missing.
    Repair {
        pod_uid: String,
        effects: Vec<WithPod>,
    },
}

/// Why nothing may be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The object at `index` belongs to another submission (or to nobody we know): 409.
    Conflict {
        index: usize,
        submission_id: Option<String>,
    },
    /// Our pod exists but is being deleted; a retry after it is gone creates a new one.
    PodTerminating,
    /// The object at `index` is ours but was built for the driver pod `pod`: the submission id
    /// is bound to that driver.
    BoundToAnotherDriver { index: usize, pod: String },
}

/// One observed dependent of the pod: whether the pod mounts it, and what a GET found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependent {
    pub mounted: bool,
    pub found: Found,
}

impl Dependent {
    /// The observation of a built object (`mounted` from its kind, see [`needed_before_pod`]).
    pub fn of(object: &Value, found: Found) -> Dependent {
        Dependent {
            mounted: needed_before_pod(object),
            found,
        }
    }
}

/// Whether the pod needs the object before it can start (it mounts it): created before the pod.
pub fn needed_before_pod(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("ConfigMap")
}

/// Completes an observation made from watch caches that hold the pod and the mounted
/// dependents but not the other kinds (`cached[i]` is `None` for those): `None` when the
/// caches cannot tell, and the objects must be read from the API server.
///
/// - Pod absent: the others are taken as absent. A first attempt then creates them, and the
///   API server's `AlreadyExists` corrects a wrong guess (the executor observes again).
/// - Pod ours and every cached dependent owned by it: the driver is complete (mounted objects
///   are adopted last, see the module documentation), so the others exist, owned by the pod.
/// - Pod ours otherwise (a creation under way or interrupted): the caches cannot tell.
/// - Pod foreign or terminating: the others do not matter, `decide` refuses; a refusal from a
///   cache is confirmed against the API server by the caller.
pub fn observe_uncached(pod: &Found, cached: &[Option<Found>]) -> Option<Vec<Found>> {
    let guess = match pod {
        Found::Absent
        | Found::Foreign { .. }
        | Found::Ours {
            terminating: true, ..
        } => Found::Absent,
        Found::Ours { uid, .. } => {
            let owned = |found: &Found| matches!(found, Found::Ours { owners, .. } if owners.iter().any(|o| o == uid));
            if !cached.iter().flatten().all(owned) {
                return None;
            }
            Found::Ours {
                uid: String::new(),
                owners: vec![uid.clone()],
                terminating: false,
                driver_pod: None,
            }
        }
    };
    Some(
        cached
            .iter()
            .map(|found| found.clone().unwrap_or_else(|| guess.clone()))
            .collect(),
    )
}

/// An object of ours, or none: what is left once foreign objects have been refused.
enum Mine<'a> {
    Absent,
    Ours {
        uid: &'a str,
        owners: &'a [String],
        terminating: bool,
    },
}

/// Decides what to do given what was found for the pod named `pod_name` and for each dependent
/// (index `i` of `dependents` is built object `i + 1`).
pub fn decide(pod_name: &str, pod: &Found, dependents: &[Dependent]) -> Result<Plan, Refusal> {
    let (pod_uid, pod_terminating) = match of_ours(pod, 0)? {
        Mine::Absent => (None, false),
        Mine::Ours {
            uid, terminating, ..
        } => (Some(uid), terminating),
    };
    let mut mine = Vec::with_capacity(dependents.len());
    for (at, dependent) in dependents.iter().enumerate() {
        mine.push((
            at + 1,
            dependent.mounted,
            of_ours(&dependent.found, at + 1)?,
        ));
    }
    for (at, dependent) in dependents.iter().enumerate() {
        if let Found::Ours {
            driver_pod: Some(bound),
            ..
        } = &dependent.found
            && bound != pod_name
        {
            return Err(Refusal::BoundToAnotherDriver {
                index: at + 1,
                pod: bound.clone(),
            });
        }
    }
    if pod_terminating {
        return Err(Refusal::PodTerminating);
    }
    let (before, after): (Vec<_>, Vec<_>) = mine.into_iter().partition(|(_, mounted, _)| *mounted);
    let Some(pod_uid) = pod_uid else {
        return Ok(create(&before, &after));
    };
    let mut effects = Vec::new();
    let mut adopt = Vec::new();
    // Mounted objects first: the existing pod may be waiting on them. They are created without
    // owner and adopted last, after every other dependent exists.
    for (index, mounted, found) in before.iter().chain(&after) {
        let index = *index;
        let create = if *mounted {
            WithPod::CreateUnowned { index }
        } else {
            WithPod::CreateOwned { index }
        };
        let owned = match found {
            Mine::Absent => {
                effects.push(create);
                false
            }
            Mine::Ours { owners: [], .. } => false,
            Mine::Ours { owners, .. } if owners.iter().any(|o| o == pod_uid) => true,
            Mine::Ours { uid, .. } => {
                effects.push(WithPod::DeleteStale {
                    index,
                    uid: (*uid).to_owned(),
                });
                effects.push(create);
                false
            }
        };
        if !owned && (*mounted || matches!(found, Mine::Ours { owners: [], .. })) {
            adopt.push(WithPod::AttachOwner { index });
        }
    }
    effects.extend(adopt);
    Ok(Plan::Repair {
        pod_uid: pod_uid.to_owned(),
        effects,
    })
}

/// A dependent of ours or absent; anything else refuses the whole submission.
fn of_ours(found: &Found, index: usize) -> Result<Mine<'_>, Refusal> {
    match found {
        Found::Absent => Ok(Mine::Absent),
        Found::Ours {
            uid,
            owners,
            terminating,
            ..
        } => Ok(Mine::Ours {
            uid,
            owners,
            terminating: *terminating,
        }),
        Found::Foreign { submission_id } => Err(Refusal::Conflict {
            index,
            submission_id: submission_id.clone(),
        }),
    }
}

/// The first attempt: mounted objects before the pod, the rest after it, owners last.
fn create(before: &[(usize, bool, Mine<'_>)], after: &[(usize, bool, Mine<'_>)]) -> Plan {
    let mut prepare = Vec::new();
    for (index, _, found) in before {
        let index = *index;
        match found {
            Mine::Absent => prepare.push(BeforePod::Create { index }),
            // Left by a crashed attempt: reuse, the owner comes after the pod.
            Mine::Ours { owners: [], .. } => {}
            // Owned by a pod that no longer exists: the collector is taking it.
            Mine::Ours { uid, .. } => {
                prepare.push(BeforePod::DeleteStale {
                    index,
                    uid: (*uid).to_owned(),
                });
                prepare.push(BeforePod::Create { index });
            }
        }
    }
    let mut complete = Vec::new();
    for (index, _, found) in after {
        let index = *index;
        match found {
            Mine::Absent => complete.push(WithPod::CreateOwned { index }),
            Mine::Ours { owners: [], .. } => {
                complete.push(WithPod::AttachOwner { index });
            }
            Mine::Ours { uid, .. } => {
                complete.push(WithPod::DeleteStale {
                    index,
                    uid: (*uid).to_owned(),
                });
                complete.push(WithPod::CreateOwned { index });
            }
        }
    }
    complete.extend(
        before
            .iter()
            .map(|(index, _, _)| WithPod::AttachOwner { index: *index }),
    );
    Plan::Create {
        before: prepare,
        after: complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "sub-1";

    /// Pod, Service, NetworkPolicy, pod-template ConfigMap, spark-conf ConfigMap.
    fn objects() -> Vec<Value> {
        ["Pod", "Service", "NetworkPolicy", "ConfigMap", "ConfigMap"]
            .iter()
            .enumerate()
            .map(|(i, kind)| json!({"kind": kind, "metadata": {"name": format!("o{i}")}}))
            .collect()
    }

    /// `decide` over the five objects, `found[0]` being the pod's.
    fn decide_all(found: &[Found]) -> Result<Plan, Refusal> {
        let dependents: Vec<Dependent> = objects()
            .iter()
            .zip(found)
            .skip(1)
            .map(|(object, found)| Dependent::of(object, found.clone()))
            .collect();
        decide("o0", &found[0], &dependents)
    }

    fn ours(uid: &str, owners: &[&str]) -> Found {
        Found::Ours {
            uid: uid.into(),
            owners: owners.iter().map(|o| (*o).to_owned()).collect(),
            terminating: false,
            driver_pod: None,
        }
    }

    fn built_for(pod: &str) -> Found {
        Found::Ours {
            uid: "c".into(),
            owners: vec![],
            terminating: false,
            driver_pod: Some(pod.into()),
        }
    }

    #[test]
    fn classify_reads_the_driver_pod_from_the_spark_properties_or_the_owning_pod() {
        let marked = |extra: Value| {
            let mut object = json!({"metadata": {"uid": "u",
                "annotations": {annotations::SUBMISSION_ID: ID}}});
            object
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            object
        };
        let driver_pod = |object: &Value| match classify(Some(object), ID) {
            Found::Ours { driver_pod, .. } => driver_pod,
            other => panic!("{other:?}"),
        };
        let conf = marked(json!({"data": {"spark.properties":
            "#comment\nspark.app.name=pi\nspark.kubernetes.driver.pod.name=pi-driver\n"}}));
        assert_eq!(driver_pod(&conf).as_deref(), Some("pi-driver"));
        let mut owned = marked(json!({}));
        owned["metadata"]["ownerReferences"] =
            json!([{"kind": "Pod", "name": "pi-driver", "uid": "p"}]);
        assert_eq!(driver_pod(&owned).as_deref(), Some("pi-driver"));
        assert_eq!(driver_pod(&marked(json!({"data": {"other": "x"}}))), None);
    }

    #[test]
    fn an_object_of_this_submission_built_for_another_pod_binds_the_id_to_that_pod() {
        for pod in [Found::Absent, ours("p", &[])] {
            let found = [
                pod,
                Found::Absent,
                Found::Absent,
                Found::Absent,
                built_for("first-driver"),
            ];
            assert_eq!(
                decide_all(&found),
                Err(Refusal::BoundToAnotherDriver {
                    index: 4,
                    pod: "first-driver".into()
                })
            );
        }
        // Built for this very pod: no refusal.
        let found = [
            Found::Absent,
            Found::Absent,
            Found::Absent,
            Found::Absent,
            built_for("o0"),
        ];
        assert!(decide_all(&found).is_ok());
        // Something foreign is refused as such first.
        let found = [
            Found::Foreign {
                submission_id: None,
            },
            Found::Absent,
            Found::Absent,
            Found::Absent,
            built_for("first-driver"),
        ];
        assert!(matches!(
            decide_all(&found),
            Err(Refusal::Conflict { index: 0, .. })
        ));
    }

    #[test]
    fn classify_reads_the_annotation_owners_and_deletion() {
        assert_eq!(classify(None, ID), Found::Absent);
        let object = json!({"metadata": {"uid": "u", "annotations": {annotations::SUBMISSION_ID: ID},
            "ownerReferences": [{"uid": "p"}], "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            classify(Some(&object), ID),
            Found::Ours {
                uid: "u".into(),
                owners: vec!["p".into()],
                terminating: true,
                driver_pod: None,
            }
        );
        let other = json!({"metadata": {"annotations": {annotations::SUBMISSION_ID: "x"}}});
        assert_eq!(
            classify(Some(&other), ID),
            Found::Foreign {
                submission_id: Some("x".into())
            }
        );
        let unmarked = json!({"metadata": {"name": "n"}});
        assert_eq!(
            classify(Some(&unmarked), ID),
            Found::Foreign {
                submission_id: None
            }
        );
    }

    #[test]
    fn nothing_exists_mounted_config_maps_first_then_pod_then_owned_dependents_then_owners() {
        assert_eq!(
            decide_all(&[
                Found::Absent,
                Found::Absent,
                Found::Absent,
                Found::Absent,
                Found::Absent
            ]),
            Ok(Plan::Create {
                before: vec![
                    BeforePod::Create { index: 3 },
                    BeforePod::Create { index: 4 }
                ],
                after: vec![
                    WithPod::CreateOwned { index: 1 },
                    WithPod::CreateOwned { index: 2 },
                    WithPod::AttachOwner { index: 3 },
                    WithPod::AttachOwner { index: 4 },
                ]
            })
        );
    }

    #[test]
    fn config_maps_left_by_a_crash_are_reused_and_adopted() {
        let found = [
            Found::Absent,
            Found::Absent,
            Found::Absent,
            ours("c3", &[]),
            Found::Absent,
        ];
        let Ok(Plan::Create { before, after }) = decide_all(&found) else {
            panic!("a first attempt");
        };
        assert_eq!(before, [BeforePod::Create { index: 4 }]);
        assert!(after.contains(&WithPod::AttachOwner { index: 3 }));
    }

    #[test]
    fn pod_of_another_submission_is_a_conflict() {
        let mut found = vec![Found::Absent; 5];
        found[0] = Found::Foreign {
            submission_id: Some("other".into()),
        };
        // A foreign dependent too: the pod, first in order, is the one named.
        found[4] = Found::Foreign {
            submission_id: None,
        };
        assert_eq!(
            decide_all(&found),
            Err(Refusal::Conflict {
                index: 0,
                submission_id: Some("other".into())
            })
        );
    }

    #[test]
    fn dependent_of_another_submission_is_a_conflict_even_when_the_pod_is_ours() {
        for pod in [Found::Absent, ours("p", &[])] {
            let mut found = vec![pod, Found::Absent, Found::Absent, Found::Absent];
            found.push(Found::Foreign {
                submission_id: None,
            });
            assert_eq!(
                decide_all(&found),
                Err(Refusal::Conflict {
                    index: 4,
                    submission_id: None
                })
            );
        }
    }

    #[test]
    fn complete_duplicate_needs_nothing() {
        let found = [
            ours("p", &[]),
            ours("s", &["p"]),
            ours("n", &["p"]),
            ours("c3", &["p"]),
            ours("c4", &["p"]),
        ];
        assert_eq!(
            decide_all(&found),
            Ok(Plan::Repair {
                pod_uid: "p".into(),
                effects: vec![]
            })
        );
    }

    #[test]
    fn duplicate_after_a_crash_repairs_mounted_objects_first_and_adopts_them_last() {
        let found = [
            ours("p", &[]),
            Found::Absent,
            ours("n", &["p"]),
            ours("c3", &[]),
            Found::Absent,
        ];
        assert_eq!(
            decide_all(&found),
            Ok(Plan::Repair {
                pod_uid: "p".into(),
                effects: vec![
                    WithPod::CreateUnowned { index: 4 },
                    WithPod::CreateOwned { index: 1 },
                    WithPod::AttachOwner { index: 3 },
                    WithPod::AttachOwner { index: 4 },
                ]
            })
        );
    }

    #[test]
    fn objects_of_an_earlier_incarnation_are_replaced() {
        let found = [
            ours("p2", &[]),
            ours("s", &["p1"]),
            ours("n", &["p2"]),
            ours("c3", &["p2"]),
            ours("c4", &["p2"]),
        ];
        let Ok(Plan::Repair { effects, .. }) = decide_all(&found) else {
            panic!("a repeat");
        };
        assert_eq!(
            effects,
            vec![
                WithPod::DeleteStale {
                    index: 1,
                    uid: "s".into()
                },
                WithPod::CreateOwned { index: 1 }
            ]
        );
        let found = [
            Found::Absent,
            Found::Absent,
            Found::Absent,
            ours("c3", &["gone"]),
            Found::Absent,
        ];
        let Ok(Plan::Create { before, .. }) = decide_all(&found) else {
            panic!("a first attempt");
        };
        assert_eq!(
            &before[..2],
            &[
                BeforePod::DeleteStale {
                    index: 3,
                    uid: "c3".into()
                },
                BeforePod::Create { index: 3 }
            ]
        );
    }

    #[test]
    fn mounted_objects_are_adopted_only_after_every_other_dependent_exists() {
        // Exhaustive over Absent / ours-unowned / ours-owned-by-pod / ours-of-an-earlier-pod.
        let states = [
            Found::Absent,
            ours("x", &[]),
            ours("x", &["p"]),
            ours("x", &["old"]),
        ];
        for pod_state in [Found::Absent, ours("p", &[])] {
            for code in 0..256 {
                let mut found = vec![pod_state.clone()];
                let mut c = code;
                for _ in 0..4 {
                    found.push(states[c % 4].clone());
                    c /= 4;
                }
                let steps: Vec<WithPod> = match decide_all(&found).unwrap() {
                    Plan::Create { after, .. } => after,
                    Plan::Repair { effects, .. } => effects,
                };
                let mounted = |index: usize| needed_before_pod(&objects()[index]);
                let last_write = steps.iter().rposition(|step| {
                    matches!(
                        step,
                        WithPod::CreateOwned { .. }
                            | WithPod::CreateUnowned { .. }
                            | WithPod::DeleteStale { .. }
                    )
                });
                for (at, step) in steps.iter().enumerate() {
                    match step {
                        WithPod::CreateOwned { index } => {
                            assert!(!mounted(*index), "{found:?}: {steps:?}");
                        }
                        WithPod::AttachOwner { index } if mounted(*index) => {
                            assert!(last_write.is_none_or(|w| w < at), "{found:?}: {steps:?}");
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    #[test]
    fn typed_metadata_classifies_like_the_json_object() {
        let objects = [
            json!({"metadata": {"uid": "u", "annotations": {annotations::SUBMISSION_ID: ID},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pi-driver", "uid": "p"}],
                "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            json!({"metadata": {"uid": "u", "annotations": {annotations::SUBMISSION_ID: ID}},
                "data": {"spark.properties": "a=b\nspark.kubernetes.driver.pod.name=named\n"}}),
            json!({"metadata": {"annotations": {annotations::SUBMISSION_ID: "x"}}}),
            json!({"metadata": {"name": "n"}}),
        ];
        for object in objects {
            let metadata: ObjectMeta = serde_json::from_value(object["metadata"].clone()).unwrap();
            let properties = object
                .pointer("/data/spark.properties")
                .and_then(Value::as_str);
            assert_eq!(
                classify_meta(&metadata, properties, ID),
                classify(Some(&object), ID),
                "{object}"
            );
            // What a cache keeps of the properties is enough.
            assert_eq!(
                classify_meta(&metadata, properties.and_then(driver_pod_line), ID),
                classify(Some(&object), ID),
                "{object}"
            );
        }
    }

    #[test]
    fn caches_of_pods_and_config_maps_tell_a_complete_driver_or_say_they_cannot() {
        let owned = ours("c", &["p"]);
        let unowned = ours("c", &[]);
        let pod = ours("p", &[]);
        let guessed_owned = Found::Ours {
            uid: String::new(),
            owners: vec!["p".into()],
            terminating: false,
            driver_pod: None,
        };
        // (pod, cached dependents: None for a kind the caches do not hold, expected)
        type Case = (Found, Vec<Option<Found>>, Option<Vec<Found>>);
        let cases: Vec<Case> = vec![
            (
                Found::Absent,
                vec![None, Some(Found::Absent)],
                Some(vec![Found::Absent, Found::Absent]),
            ),
            (
                Found::Absent,
                vec![None, Some(unowned.clone())],
                Some(vec![Found::Absent, unowned.clone()]),
            ),
            (
                pod.clone(),
                vec![None, Some(owned.clone())],
                Some(vec![guessed_owned, owned.clone()]),
            ),
            (pod.clone(), vec![None, Some(unowned)], None),
            (pod.clone(), vec![None, Some(Found::Absent)], None),
            (pod, vec![None, Some(ours("c", &["old"]))], None),
        ];
        for (pod, cached, expected) in cases {
            assert_eq!(
                observe_uncached(&pod, &cached),
                expected,
                "{pod:?} {cached:?}"
            );
        }
        // A complete driver so observed needs nothing.
        let observed = observe_uncached(
            &ours("p", &[]),
            &[None, None, Some(owned.clone()), Some(owned)],
        )
        .unwrap();
        let mut found = vec![ours("p", &[])];
        found.extend(observed);
        assert_eq!(
            decide_all(&found),
            Ok(Plan::Repair {
                pod_uid: "p".into(),
                effects: vec![]
            })
        );
    }

    #[test]
    fn terminating_pod_of_ours_waits() {
        let mut found = vec![Found::Absent; 5];
        found[0] = Found::Ours {
            uid: "p".into(),
            owners: vec![],
            terminating: true,
            driver_pod: None,
        };
        assert_eq!(decide_all(&found), Err(Refusal::PodTerminating));
    }

    #[test]
    fn every_absent_object_is_created_exactly_once_and_the_pod_follows_what_it_mounts() {
        // Exhaustive over Absent / ours-unowned / ours-owned-by-pod for each dependent.
        let states = |pod: &str| vec![Found::Absent, ours("x", &[]), ours("x", &[pod])];
        for pod_state in [Found::Absent, ours("p", &[])] {
            for code in 0..81 {
                let mut found = vec![pod_state.clone()];
                let mut c = code;
                for _ in 0..4 {
                    found.push(states("p")[c % 3].clone());
                    c /= 3;
                }
                let plan = decide_all(&found).expect("nothing foreign, nothing terminating");
                // (index, created before the pod, created owned)
                let creates: Vec<(usize, bool)> = match &plan {
                    Plan::Create { before, after } => before
                        .iter()
                        .filter_map(|step| match step {
                            BeforePod::Create { index } => Some((*index, true)),
                            BeforePod::DeleteStale { .. } => None,
                        })
                        .chain(after.iter().filter_map(|step| match step {
                            WithPod::CreateOwned { index } => Some((*index, false)),
                            _ => None,
                        }))
                        .collect(),
                    Plan::Repair { effects, .. } => effects
                        .iter()
                        .filter_map(|step| match step {
                            WithPod::CreateOwned { index } | WithPod::CreateUnowned { index } => {
                                Some((*index, false))
                            }
                            _ => None,
                        })
                        .collect(),
                };
                for (index, f) in found.iter().enumerate().skip(1) {
                    let count = creates.iter().filter(|(i, _)| *i == index).count();
                    let expected = usize::from(*f == Found::Absent)
                        + usize::from(pod_state == Found::Absent && *f == ours("x", &["p"]));
                    assert_eq!(count, expected, "{found:?}");
                }
                if matches!(plan, Plan::Create { .. }) {
                    for (index, before_pod) in creates {
                        assert_eq!(before_pod, needed_before_pod(&objects()[index]));
                    }
                }
            }
        }
    }
}
