//! Who acts on a driver pod that one attempt created and another request found incomplete: the
//! creating attempt's rollback, or a duplicate's repair; never both.
//!
//! A duplicate (a client's retry, or the same request on another replica) that finds the driver
//! incomplete repairs it and answers it. The attempt that created that pod may meanwhile fail a
//! later step and roll back, deleting the pod the duplicate answered; a third request then makes
//! a second driver for the id. So the two race for one object instead: a ConfigMap named after
//! the pod's uid, in the pod's namespace, owned by the pod. The first POST wins; the other is
//! answered `AlreadyExists` and stands down. A rollback that loses leaves the driver to the
//! retries; a repair that loses to a rollback stops, and its next round finds the pod gone.
//!
//! Only these two rare paths make a fence: a fresh submission that completes, and a duplicate
//! that finds its driver complete, make none. A driver the caches show complete is safe to
//! answer without one: its creator's last steps are the owner patches, so a complete driver was
//! either completed by its creator (which then does not roll back) or by a repair (which took
//! the fence first). The garbage collector removes the fence with its pod; it carries no
//! submission label, so the watch caches and the sweeper never see it. It needs no grant beyond
//! what a submission has: get and create of ConfigMaps in the driver's namespace.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use submission::meta::annotations;

use crate::kube_api::{CallError, KubeApi};

/// The data key naming who holds a fence.
const HOLDER_KEY: &str = "holder";

/// Who took a driver pod's fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The attempt that created the pod, to delete it.
    Rollback,
    /// A duplicate, to complete the pod and answer it.
    Repair,
}

impl Holder {
    fn as_str(self) -> &'static str {
        match self {
            Holder::Rollback => "rollback",
            Holder::Repair => "repair",
        }
    }

    fn of(fence: &ConfigMap) -> Option<Holder> {
        match fence.data.as_ref()?.get(HOLDER_KEY)?.as_str() {
            "rollback" => Some(Holder::Rollback),
            "repair" => Some(Holder::Repair),
            _ => None,
        }
    }
}

/// How taking a fence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// This call created it.
    Won,
    /// It existed: held by `Some(holder)`, or gone again before it could be read (the pod is
    /// gone, and the collector took the fence with it).
    Held(Option<Holder>),
}

impl Taken {
    /// Whether a repair may go on: it won, or another repair holds the fence (both complete
    /// the same pod the same way).
    pub fn lets_repair(self) -> bool {
        matches!(self, Taken::Won | Taken::Held(Some(Holder::Repair)))
    }
}

/// The fence's name for the pod of `pod_uid`: one per pod incarnation, so a pod made again
/// under the same name never meets the fence of the one before it.
pub fn name(pod_uid: &str) -> String {
    format!("driver-fence-{pod_uid}")
}

/// The fence object: owned by the pod (the collector removes it with the pod), marked with the
/// submission id for whoever lists it, naming its holder.
pub fn object(
    submission_id: &str,
    pod_name: &str,
    pod_uid: &str,
    holder: Holder,
) -> Result<ConfigMap, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {
            "name": name(pod_uid),
            "annotations": {annotations::SUBMISSION_ID: submission_id},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": pod_uid,
                "controller": true,
            }],
        },
        "data": {HOLDER_KEY: holder.as_str()},
    }))
}

/// Takes the fence of pod `pod_name` (`pod_uid`) in `namespace` for `holder`. An error leaves
/// it unknown whether the fence was taken: the caller must act as if it lost.
pub async fn take(
    api: &KubeApi,
    namespace: &str,
    submission_id: &str,
    pod_name: &str,
    pod_uid: &str,
    holder: Holder,
) -> Result<Taken, CallError> {
    let fence =
        object(submission_id, pod_name, pod_uid, holder).map_err(|source| CallError::Request {
            source: kube::Error::SerdeError(source),
        })?;
    match api.create_config_map(namespace, &fence).await {
        Ok(_) => Ok(Taken::Won),
        Err(error) if error.is_already_exists() => {
            let found = api.get_config_map(namespace, &name(pod_uid)).await?;
            Ok(Taken::Held(found.as_ref().and_then(Holder::of)))
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_owned_by_its_pod_and_names_its_holder() {
        for holder in [Holder::Rollback, Holder::Repair] {
            let fence = object("id-1", "pi-driver", "uid-1", holder).unwrap();
            assert_eq!(fence.metadata.name.as_deref(), Some("driver-fence-uid-1"));
            let owner = &fence.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.name.as_str()),
                ("Pod", "pi-driver")
            );
            assert_eq!(owner.uid, "uid-1");
            assert_eq!(Holder::of(&fence), Some(holder));
            // Not a submission's object: no label puts it in the caches or the sweeper's view.
            assert!(fence.metadata.labels.is_none());
        }
    }

    #[test]
    fn a_repair_goes_on_unless_a_rollback_may_hold_the_fence() {
        assert!(Taken::Won.lets_repair());
        assert!(Taken::Held(Some(Holder::Repair)).lets_repair());
        assert!(!Taken::Held(Some(Holder::Rollback)).lets_repair());
        assert!(!Taken::Held(None).lets_repair());
    }

    #[test]
    fn each_pod_incarnation_has_its_own_fence() {
        assert_ne!(name("uid-1"), name("uid-2"));
    }
}
