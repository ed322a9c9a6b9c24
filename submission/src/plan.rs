//! Decide, purely, what a submission must do given what already exists.
//!
//! Input: the built objects (the driver pod first, then its dependents, in Spark's order) and,
//! for each, what a GET found, already classified by [`classify`]. Output: a [`Decision`], whose
//! effects the executor performs in the order given. No I/O, no clock: every rule below is tested
//! here with plain values.
//!
//! The rules (docs/submitter.md, "Creating a driver"):
//! - Anything carrying another submission id, or none, is not ours: 409, nothing is touched.
//! - Pod absent (a first attempt): what the pod mounts (the ConfigMaps) first, without owner, so
//!   the driver never waits on `FailedMount`; then the pod, by POST, so a concurrent duplicate
//!   fails instead of merging; then the other dependents already owned by the pod; last, the
//!   ConfigMaps get the pod as owner. ConfigMaps of ours left by an earlier, crashed attempt are
//!   reused as they are (ConfigMaps are immutable in data and the same id builds the same ones).
//! - Pod present with our id (a repeat): a duplicate; whatever is missing is created owned by the
//!   existing pod and ownerless ones get it as owner (a crash between steps leaves such gaps).
//! - An object of ours owned by a pod that is not the current one belongs to an earlier
//!   incarnation of the driver and is being garbage collected: it is deleted (uid precondition)
//!   and created again rather than raced with the collector.
//! - Pod of ours that is being deleted (a rollback or a user's delete): nothing now, retry later.

use serde_json::Value;

use crate::meta::annotations;

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
    },
    /// Carries another submission id, or none (not created by the submitter).
    Foreign {
        submission_id: Option<String>,
    },
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
    }
}

/// One step of a submission. Indices are into the built objects (0 is the pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Delete an object of an earlier driver incarnation, with a uid precondition.
    DeleteStale { index: usize, uid: String },
    /// POST the object; `owned`: with the driver pod as owner (its uid is known by then).
    Create { index: usize, owned: bool },
    /// POST the driver pod.
    CreatePod,
    /// Merge-patch `metadata.ownerReferences` to the driver pod.
    AttachOwner { index: usize },
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The object at `index` belongs to another submission (or to nobody we know): 409.
    Conflict {
        index: usize,
        submission_id: Option<String>,
    },
    /// Our pod exists but is being deleted; a retry after it is gone creates a new one.
    PodTerminating,
    /// First attempt: create the driver.
    Create { effects: Vec<Effect> },
    /// Repeat: the pod exists with `pod_uid`; `effects` repair what is missing.
    Repair {
        pod_uid: String,
        effects: Vec<Effect>,
    },
}

/// Whether the pod needs the object before it can start (it mounts it): created before the pod.
pub fn needed_before_pod(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("ConfigMap")
}

/// Decides what to do. `objects[0]` is the pod; `found` has one entry per object.
///
/// # Panics
/// If `found` and `objects` differ in length or are empty (a caller bug).
pub fn decide(objects: &[Value], found: &[Found]) -> Decision {
    assert!(
        !objects.is_empty() && objects.len() == found.len(),
        "one observation per built object, the pod first"
    );
    if let Some((index, submission_id)) = found.iter().enumerate().find_map(|(i, f)| match f {
        Found::Foreign { submission_id } => Some((i, submission_id.clone())),
        _ => None,
    }) {
        return Decision::Conflict {
            index,
            submission_id,
        };
    }
    let dependents = || (1..objects.len()).filter(|i| !matches!(found[*i], Found::Foreign { .. }));
    let (before, after): (Vec<usize>, Vec<usize>) =
        dependents().partition(|i| needed_before_pod(&objects[*i]));

    match &found[0] {
        Found::Foreign { .. } => unreachable!("handled above"),
        Found::Ours {
            terminating: true, ..
        } => Decision::PodTerminating,
        Found::Ours { uid: pod_uid, .. } => {
            let mut effects = Vec::new();
            // Mounted objects first: the existing pod may be waiting on them.
            for index in before.into_iter().chain(after) {
                match &found[index] {
                    Found::Absent => effects.push(Effect::Create { index, owned: true }),
                    Found::Ours { owners, .. } if owners.is_empty() => {
                        effects.push(Effect::AttachOwner { index });
                    }
                    Found::Ours { owners, .. } if owners.contains(pod_uid) => {}
                    Found::Ours { uid, .. } => {
                        effects.push(Effect::DeleteStale {
                            index,
                            uid: uid.clone(),
                        });
                        effects.push(Effect::Create { index, owned: true });
                    }
                    Found::Foreign { .. } => unreachable!("handled above"),
                }
            }
            Decision::Repair {
                pod_uid: pod_uid.clone(),
                effects,
            }
        }
        Found::Absent => {
            let mut effects = Vec::new();
            for &index in &before {
                match &found[index] {
                    Found::Absent => effects.push(Effect::Create {
                        index,
                        owned: false,
                    }),
                    // Left by a crashed attempt: reuse, the owner comes after the pod.
                    Found::Ours { owners, .. } if owners.is_empty() => {}
                    // Owned by a pod that no longer exists: the collector is taking it.
                    Found::Ours { uid, .. } => {
                        effects.push(Effect::DeleteStale {
                            index,
                            uid: uid.clone(),
                        });
                        effects.push(Effect::Create {
                            index,
                            owned: false,
                        });
                    }
                    Found::Foreign { .. } => unreachable!("handled above"),
                }
            }
            effects.push(Effect::CreatePod);
            for &index in &after {
                match &found[index] {
                    Found::Absent => effects.push(Effect::Create { index, owned: true }),
                    Found::Ours { owners, .. } if owners.is_empty() => {
                        effects.push(Effect::AttachOwner { index });
                    }
                    Found::Ours { uid, .. } => {
                        effects.push(Effect::DeleteStale {
                            index,
                            uid: uid.clone(),
                        });
                        effects.push(Effect::Create { index, owned: true });
                    }
                    Found::Foreign { .. } => unreachable!("handled above"),
                }
            }
            effects.extend(
                before
                    .into_iter()
                    .map(|index| Effect::AttachOwner { index }),
            );
            Decision::Create { effects }
        }
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

    fn ours(uid: &str, owners: &[&str]) -> Found {
        Found::Ours {
            uid: uid.into(),
            owners: owners.iter().map(|o| (*o).to_owned()).collect(),
            terminating: false,
        }
    }

    use Effect::*;

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
                terminating: true
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
        let decision = decide(&objects(), &vec![Found::Absent; 5]);
        assert_eq!(
            decision,
            Decision::Create {
                effects: vec![
                    Create {
                        index: 3,
                        owned: false
                    },
                    Create {
                        index: 4,
                        owned: false
                    },
                    CreatePod,
                    Create {
                        index: 1,
                        owned: true
                    },
                    Create {
                        index: 2,
                        owned: true
                    },
                    AttachOwner { index: 3 },
                    AttachOwner { index: 4 },
                ]
            }
        );
    }

    #[test]
    fn config_maps_left_by_a_crash_are_reused_and_adopted() {
        let found = vec![
            Found::Absent,
            Found::Absent,
            Found::Absent,
            ours("c3", &[]),
            Found::Absent,
        ];
        let Decision::Create { effects } = decide(&objects(), &found) else {
            panic!("a first attempt");
        };
        assert_eq!(
            effects[0],
            Create {
                index: 4,
                owned: false
            }
        );
        assert_eq!(effects[1], CreatePod);
        assert!(effects.contains(&AttachOwner { index: 3 }));
        assert!(!effects.contains(&Create {
            index: 3,
            owned: false
        }));
    }

    #[test]
    fn pod_of_another_submission_is_a_conflict() {
        let mut found = vec![Found::Absent; 5];
        found[0] = Found::Foreign {
            submission_id: Some("other".into()),
        };
        assert_eq!(
            decide(&objects(), &found),
            Decision::Conflict {
                index: 0,
                submission_id: Some("other".into())
            }
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
                decide(&objects(), &found),
                Decision::Conflict {
                    index: 4,
                    submission_id: None
                }
            );
        }
    }

    #[test]
    fn complete_duplicate_needs_nothing() {
        let found = vec![
            ours("p", &[]),
            ours("s", &["p"]),
            ours("n", &["p"]),
            ours("c3", &["p"]),
            ours("c4", &["p"]),
        ];
        assert_eq!(
            decide(&objects(), &found),
            Decision::Repair {
                pod_uid: "p".into(),
                effects: vec![]
            }
        );
    }

    #[test]
    fn duplicate_after_a_crash_repairs_mounted_objects_first() {
        let found = vec![
            ours("p", &[]),
            Found::Absent,
            ours("n", &["p"]),
            ours("c3", &[]),
            Found::Absent,
        ];
        assert_eq!(
            decide(&objects(), &found),
            Decision::Repair {
                pod_uid: "p".into(),
                effects: vec![
                    AttachOwner { index: 3 },
                    Create {
                        index: 4,
                        owned: true
                    },
                    Create {
                        index: 1,
                        owned: true
                    },
                ]
            }
        );
    }

    #[test]
    fn objects_of_an_earlier_incarnation_are_replaced() {
        let found = vec![
            ours("p2", &[]),
            ours("s", &["p1"]),
            ours("n", &["p2"]),
            ours("c3", &["p2"]),
            ours("c4", &["p2"]),
        ];
        let Decision::Repair { effects, .. } = decide(&objects(), &found) else {
            panic!("a repeat");
        };
        assert_eq!(
            effects,
            vec![
                DeleteStale {
                    index: 1,
                    uid: "s".into()
                },
                Create {
                    index: 1,
                    owned: true
                }
            ]
        );
        let found = vec![
            Found::Absent,
            Found::Absent,
            Found::Absent,
            ours("c3", &["gone"]),
            Found::Absent,
        ];
        let Decision::Create { effects } = decide(&objects(), &found) else {
            panic!("a first attempt");
        };
        assert_eq!(
            &effects[..2],
            &[
                DeleteStale {
                    index: 3,
                    uid: "c3".into()
                },
                Create {
                    index: 3,
                    owned: false
                }
            ]
        );
    }

    #[test]
    fn terminating_pod_of_ours_waits() {
        let mut found = vec![Found::Absent; 5];
        found[0] = Found::Ours {
            uid: "p".into(),
            owners: vec![],
            terminating: true,
        };
        assert_eq!(decide(&objects(), &found), Decision::PodTerminating);
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
                let decision = decide(&objects(), &found);
                let effects = match &decision {
                    Decision::Create { effects } | Decision::Repair { effects, .. } => effects,
                    other => panic!("{other:?}"),
                };
                for (index, f) in found.iter().enumerate().skip(1) {
                    let creates = effects
                        .iter()
                        .filter(|e| matches!(e, Create { index: i, .. } if *i == index))
                        .count();
                    let expected = usize::from(*f == Found::Absent)
                        + usize::from(pod_state == Found::Absent && *f == ours("x", &["p"]));
                    assert_eq!(creates, expected, "{found:?}");
                }
                if let Some(pod_at) = effects.iter().position(|e| *e == CreatePod) {
                    for (at, effect) in effects.iter().enumerate() {
                        if let Create { index, owned } = effect {
                            assert_eq!(at < pod_at, !owned);
                            assert_eq!(at < pod_at, needed_before_pod(&objects()[*index]));
                        }
                    }
                }
            }
        }
    }
}
