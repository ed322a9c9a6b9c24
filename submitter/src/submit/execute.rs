//! The I/O shell of a submission: observe, decide ([`plan::decide`]), execute the effects in
//! order, and on failure roll back what this attempt created.
//!
//! Observation costs no request when the service's watch caches have synced: the pod and the
//! ConfigMaps come from them, and what they do not hold (Service, NetworkPolicy) follows from
//! [`plan::observe_uncached`]: absent when the pod is, present when every ConfigMap is owned by
//! the pod. A fresh submission then makes only its writes (the claim of its id, Spark's creates
//! and the owner patch of each ConfigMap), and a complete duplicate none ([`Submission::complete_in_cache`]). The
//! caches may lag: the API server's `AlreadyExists` on a create says so, and the next round
//! waits (bounded) for the caches to show that object, else reads every object with a GET. A
//! refusal is never made on a cache's word: it is confirmed by reading the objects live.
//! Without caches (or before they sync) every round GETs every built object.
//!
//! Claim: before the first object of a new driver, the submission id is claimed for it
//! ([`crate::claim::reserve`]); a claim of another driver refuses with nothing created, one of
//! this driver makes the round observe again, and a rollback gives a claim it made back.
//!
//! Fencing: every create is a POST (a duplicate fails with `AlreadyExists`, it never merges);
//! every delete carries a uid precondition. When the cluster turns out to differ from what was
//! observed (`AlreadyExists` on a create, a uid precondition failing, an object gone before its
//! owner was attached), the round ends and the next one observes again, so replicas racing on
//! the same submission converge on the API server's answer.
//!
//! A create or patch that fails ambiguously (5xx, timeout, lost connection: it may have been
//! applied) is checked with one GET before it counts as failed: a lost reply is not a failure.
//!
//! Rollback of a first attempt: a pod this attempt created is deleted with its uid as
//! precondition (the garbage collector then removes everything owned by it) and the ConfigMaps
//! it created are deleted by uid. ConfigMaps stay when the pod's creation is ambiguous, since a
//! pod whose POST is still on its way would mount them; the sweeper removes them after its grace
//! period if no pod comes. Nothing is rolled back when the pod existed already (a repeat, or
//! another replica won the race): a running driver may use those objects.

use std::time::Duration;

use futures::future::join_all;
use kube::core::Request;
use serde_json::{Value, json};
use submission::pointer::{at, text};
use tracing::{debug, info, warn};

use super::fence::{self, Holder, Taken};
use super::owned::Owned;
use crate::caches::{PROPERTIES_KEY, WatchCaches};
use crate::claim::{self, ClaimToWrite, Reserved};
use crate::creation::driver_pod::DriverPod;
pub use crate::creation::{Failure, SubmitDriverError, Submitted};
use crate::kube_api::{CallError, KubeApi};
use submission::plan::{
    self, BeforePod, Dependent, Found, Plan, Refusal, WithPod, classify, classify_meta,
};

/// Extra rounds of observe → decide → execute, beyond one per object, before giving up on a
/// cluster that keeps changing. A replica racing another on the same submission can lose one
/// round per object it finds created under it, so the bound grows with the objects.
const EXTRA_ROUNDS: usize = 2;

fn kind_of(object: &Value) -> &str {
    text(object, "/kind")
}

fn name_of(object: &Value) -> &str {
    text(object, "/metadata/name")
}

/// The `ownerReferences` Spark gives dependents: the pod as controller.
fn owner_references(pod_name: &str, pod_uid: &str) -> Value {
    let mut probe = [json!({"kind": "ConfigMap", "metadata": {}})];
    submission::meta::attach_owner(&mut probe, pod_name, pod_uid);
    probe[0]["metadata"]["ownerReferences"].take()
}

/// A ConfigMap as the caches show it, classified against `submission_id`.
fn cached_config_map(
    caches: &WatchCaches,
    namespace: &str,
    name: &str,
    submission_id: &str,
) -> Found {
    caches
        .config_map(namespace, name)
        .map_or(Found::Absent, |cm| {
            let properties = cm
                .data
                .as_ref()
                .and_then(|data| data.get(PROPERTIES_KEY))
                .map(String::as_str);
            classify_meta(&cm.metadata, properties, submission_id)
        })
}

/// A complete driver told by the watch caches alone, from its names only (no built objects):
/// the pod `pod_name` of `submission_id` and the ConfigMaps it mounts (`config_maps`), all
/// ours and owned by the pod. The same answer as [`Submission::complete_in_cache`] for the
/// objects built under those names: the kinds the caches do not hold follow from the
/// ConfigMaps either way ([`plan::observe_uncached`]). `None` when the caches do not show it.
pub fn complete_in_cache_named(
    caches: &WatchCaches,
    namespace: &str,
    submission_id: &str,
    pod_name: &str,
    config_maps: &[String],
) -> Option<Submitted> {
    let pod = caches.pod(namespace, pod_name)?;
    let pod_found = classify_meta(&pod.metadata, None, submission_id);
    let cached: Vec<Option<Found>> = config_maps
        .iter()
        .map(|name| Some(cached_config_map(caches, namespace, name, submission_id)))
        .collect();
    let dependents: Vec<Dependent> = plan::observe_uncached(&pod_found, &cached)?
        .into_iter()
        // ConfigMaps, which the pod mounts.
        .map(|found| Dependent {
            mounted: true,
            found,
        })
        .collect();
    match plan::decide(pod_name, &pod_found, &dependents) {
        Ok(Plan::Repair { effects, .. }) if effects.is_empty() => Some(Submitted {
            created: false,
            pod: DriverPod::of_pod(&pod),
        }),
        _ => None,
    }
}

/// What this attempt created, for the rollback.
#[derive(Debug, Default)]
struct Ledger {
    /// Uid of the pod this attempt created.
    pod: Option<String>,
    /// The pod's POST failed ambiguously and no pod was seen afterwards.
    pod_ambiguous: bool,
    /// A pod existed that this attempt did not create: nothing may be rolled back.
    pod_not_ours_to_remove: bool,
    /// ConfigMaps this attempt created before the pod: (index, uid).
    config_maps: Vec<(usize, String)>,
    /// The id's claim is this driver's (made by this attempt or found): not asked again.
    claimed: bool,
    /// Uid of the claim this attempt created, for the rollback.
    claim: Option<String>,
    /// A step after the pod failed and whether it took effect could not be read: the driver
    /// may be complete, and a duplicate may have answered it.
    outcome_unknown: bool,
}

/// Why a round stopped.
enum Stop {
    /// The cluster differs from the observation: observe again. With the index of the built
    /// object whose create answered `AlreadyExists`, if that was how it showed.
    Stale(Option<usize>),
    Failed(SubmitDriverError),
    /// Failed, and whether the failed step took effect could not be read.
    Uncertain(SubmitDriverError),
}

/// Where a round's observation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The synced watch caches (no request); what they cannot tell is read live.
    Cache,
    /// A GET of every built object.
    Live,
}

/// What a round observed.
struct Observed {
    /// Each built object's classification (0 is the pod).
    found: Vec<Found>,
    /// The driver pod, when it exists.
    pod: Option<DriverPod>,
    source: Source,
}

/// One submission's objects and where they go.
pub struct Submission<'a> {
    pub api: &'a KubeApi,
    /// The built objects, the pod first.
    pub objects: &'a [Value],
    pub namespace: &'a str,
    pub submission_id: &'a str,
    /// Synced watch caches of our pods and ConfigMaps: observation without requests. `None`:
    /// every round reads the objects live.
    pub caches: Option<&'a WatchCaches>,
    /// How long to wait for the caches to show an object the API server said exists, before
    /// reading the objects live instead. Only the number of requests depends on it.
    pub catch_up: Duration,
    /// The id's claim, made before the first driver object is created ([`crate::claim`]).
    /// `None`: no claim (a dry run).
    pub claim: Option<&'a ClaimToWrite>,
}

impl Submission<'_> {
    fn pod_name(&self) -> &str {
        name_of(&self.objects[0])
    }

    fn api_of(&self, index: usize) -> Result<Request, SubmitDriverError> {
        let object = &self.objects[index];
        self.api.api_for(object, self.namespace).ok_or_else(|| {
            SubmitDriverError::UnsupportedObject {
                kind: kind_of(object).to_owned(),
                name: name_of(object).to_owned(),
            }
        })
    }

    fn describe(&self, index: usize) -> (String, String) {
        let object = &self.objects[index];
        (kind_of(object).to_owned(), name_of(object).to_owned())
    }

    /// GETs every built object, concurrently.
    async fn read_all(&self) -> Result<Vec<Option<Value>>, SubmitDriverError> {
        let reads = (0..self.objects.len()).map(|index| async move {
            let api = self.api_of(index)?;
            self.api
                .get(&api, name_of(&self.objects[index]))
                .await
                .map_err(|source| {
                    let (kind, name) = self.describe(index);
                    SubmitDriverError::ReadObject { kind, name, source }
                })
        });
        join_all(reads).await.into_iter().collect()
    }

    /// Observes every built object live.
    async fn observe_live(&self) -> Result<Observed, SubmitDriverError> {
        let read = self.read_all().await?;
        Ok(Observed {
            found: read
                .iter()
                .map(|object| classify(object.as_ref(), self.submission_id))
                .collect(),
            pod: read[0].as_ref().map(DriverPod::of_value),
            source: Source::Live,
        })
    }

    /// Observes from the watch caches, or `None` where they cannot tell (see
    /// [`plan::observe_uncached`]).
    fn observe_cached(&self, caches: &WatchCaches) -> Option<Observed> {
        let pod = caches.pod(self.namespace, self.pod_name());
        let pod_found = pod.as_ref().map_or(Found::Absent, |pod| {
            classify_meta(&pod.metadata, None, self.submission_id)
        });
        let cached: Vec<Option<Found>> = self.objects[1..]
            .iter()
            .map(|object| {
                (kind_of(object) == "ConfigMap").then(|| {
                    cached_config_map(caches, self.namespace, name_of(object), self.submission_id)
                })
            })
            .collect();
        let dependents = plan::observe_uncached(&pod_found, &cached)?;
        let mut found = Vec::with_capacity(self.objects.len());
        found.push(pod_found);
        found.extend(dependents);
        Some(Observed {
            found,
            pod: pod.map(|pod| DriverPod::of_pod(&pod)),
            source: Source::Cache,
        })
    }

    async fn observe(&self, source: Source) -> Result<Observed, SubmitDriverError> {
        if let (Source::Cache, Some(caches)) = (source, self.caches)
            && let Some(observed) = self.observe_cached(caches)
        {
            return Ok(observed);
        }
        self.observe_live().await
    }

    /// The pure decision over what was observed, its refusal as this module's error.
    fn decide(&self, found: &[Found]) -> Result<Plan, SubmitDriverError> {
        let dependents: Vec<Dependent> = (1..self.objects.len())
            .map(|index| Dependent::of(&self.objects[index], found[index].clone()))
            .collect();
        plan::decide(self.pod_name(), &found[0], &dependents)
            .map_err(|refusal| self.refusal(refusal))
    }

    fn refusal(&self, refusal: Refusal) -> SubmitDriverError {
        match refusal {
            Refusal::Conflict {
                index,
                submission_id,
            } => {
                let (kind, name) = self.describe(index);
                SubmitDriverError::ConflictingObject {
                    kind,
                    name,
                    other_submission_id: submission_id,
                }
            }
            Refusal::PodTerminating => SubmitDriverError::DriverPodTerminating {
                name: self.pod_name().to_owned(),
            },
            Refusal::BoundToAnotherDriver { pod, .. } => SubmitDriverError::BoundToAnotherDriver {
                namespace: self.namespace.to_owned(),
                pod,
            },
        }
    }

    /// A complete duplicate, told by the watch caches alone: the answer without any request.
    /// `None` when the caches do not show a complete driver of this submission.
    pub fn complete_in_cache(&self) -> Option<Submitted> {
        let observed = self.observe_cached(self.caches?)?;
        match self.decide(&observed.found) {
            Ok(Plan::Repair { effects, .. }) if effects.is_empty() => Some(Submitted {
                created: false,
                pod: observed.pod?,
            }),
            _ => None,
        }
    }

    /// Creates the driver, or finds it and repairs it. See the module documentation.
    pub async fn run(&self) -> Result<Submitted, Failure> {
        let mut ledger = Ledger::default();
        let rounds = self.objects.len() + EXTRA_ROUNDS;
        let mut source = if self.caches.is_some() {
            Source::Cache
        } else {
            Source::Live
        };
        for round in 0..rounds {
            let result = self.round(&mut ledger, source).await;
            ledger.outcome_unknown |= matches!(result, Err(Stop::Uncertain(_)));
            match result {
                Ok(submitted) => return Ok(submitted),
                Err(Stop::Stale(exists)) => {
                    // An object the caches did not show exists: once they show it, they can be
                    // asked again; else (or for any other surprise) the next round reads live.
                    source = match (self.caches, exists) {
                        (Some(caches), Some(index)) if self.catch_up(caches, index).await => {
                            Source::Cache
                        }
                        _ => Source::Live,
                    };
                    info!(submission_id = %self.submission_id, round, ?source, "cluster changed under the submission; observing again");
                }
                Err(Stop::Failed(error) | Stop::Uncertain(error)) => {
                    let rolled_back = self.rollback(&ledger).await;
                    return Err(Failure { error, rolled_back });
                }
            }
        }
        let rolled_back = self.rollback(&ledger).await;
        Err(Failure {
            error: SubmitDriverError::Unsettled { rounds },
            rolled_back,
        })
    }

    /// Waits (bounded) until the caches show built object `index`, which the API server said
    /// exists, and can tell the rest: every cached ConfigMap owned by a pod shows with that
    /// very pod (the two watches are not ordered with each other), and the observation is
    /// complete ([`plan::observe_uncached`]; a creation under way elsewhere is waited for).
    /// Whether they came to.
    async fn catch_up(&self, caches: &WatchCaches, index: usize) -> bool {
        let deadline = tokio::time::Instant::now() + self.catch_up;
        let namespace = self.namespace;
        let shows = |c: &WatchCaches, object: &Value| match kind_of(object) {
            "Pod" => c.pod(namespace, name_of(object)).is_some(),
            "ConfigMap" => c.config_map(namespace, name_of(object)).is_some(),
            _ => false,
        };
        let owners_shown = |c: &WatchCaches| {
            self.objects
                .iter()
                .filter(|object| kind_of(object) == "ConfigMap")
                .filter_map(|object| c.config_map(namespace, name_of(object)))
                .all(|cm| {
                    cm.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .filter(|owner| owner.kind == "Pod")
                        .all(|owner| {
                            c.pod(namespace, &owner.name).is_some_and(|pod| {
                                pod.metadata.uid.as_deref() == Some(owner.uid.as_str())
                            })
                        })
                })
        };
        if !matches!(kind_of(&self.objects[index]), "Pod" | "ConfigMap") {
            // Not a kind the caches hold: nothing to wait for.
            return false;
        }
        caches
            .wait_until(deadline, |c| {
                shows(c, &self.objects[index])
                    && owners_shown(c)
                    && self.observe_cached(c).is_some()
            })
            .await
    }

    async fn round(&self, ledger: &mut Ledger, source: Source) -> Result<Submitted, Stop> {
        let mut observed = self.observe(source).await.map_err(Stop::Failed)?;
        let plan = match self.decide(&observed.found) {
            Ok(plan) => plan,
            // A refusal is never made on a cache's word: confirmed by the API server.
            Err(_) if observed.source == Source::Cache => {
                observed = self.observe_live().await.map_err(Stop::Failed)?;
                self.decide(&observed.found).map_err(Stop::Failed)?
            }
            Err(error) => return Err(Stop::Failed(error)),
        };
        let (pod, steps) = match (plan, observed.pod) {
            (Plan::Repair { pod_uid, effects }, Some(pod)) => {
                if ledger.pod.as_deref() != Some(pod_uid.as_str()) {
                    ledger.pod_not_ours_to_remove = true;
                    if !effects.is_empty() {
                        self.fence_repair(&pod_uid).await?;
                    }
                }
                (pod, effects)
            }
            (Plan::Create { before, after }, _) => {
                self.reserve(ledger).await?;
                for step in before {
                    self.prepare(step, ledger).await?;
                }
                let pod = self.create_pod(ledger).await?;
                self.confirm_claim(ledger).await?;
                (pod, after)
            }
            // A repair is only decided for a pod that was observed.
            (Plan::Repair { .. }, None) => return Err(Stop::Stale(None)),
        };
        let owner = owner_references(self.pod_name(), &pod.uid);
        for step in steps {
            self.complete(step, &owner).await?;
        }
        let created = ledger.pod.as_deref() == Some(pod.uid.as_str());
        Ok(Submitted { created, pod })
    }

    /// Before completing a pod another attempt created: takes its fence ([`fence`]), so that
    /// attempt's rollback no longer deletes the pod this one will answer, then checks the pod is
    /// still there (a fence taken after its pod was deleted proves nothing).
    async fn fence_repair(&self, pod_uid: &str) -> Result<(), Stop> {
        let pod_name = self.pod_name();
        let taken = self
            .take_fence(pod_uid, Holder::Repair)
            .await
            .map_err(|source| {
                Stop::Failed(SubmitDriverError::CreateObject {
                    kind: "ConfigMap".into(),
                    name: fence::name(pod_uid),
                    source,
                })
            })?;
        if !taken.lets_repair() {
            info!(submission_id = %self.submission_id, pod = pod_name,
                "the attempt that created the driver pod is rolling it back");
            if taken == Taken::Held(Some(Holder::Rollback)) {
                // That attempt decided the pod's end, and nobody answered the pod (a repair
                // would hold the fence). It may have died before its delete: carry it out, and
                // the next round makes the driver anew.
                self.remove_rolled_back(pod_uid).await?;
            }
            return Err(Stop::Stale(None));
        }
        let pod = self
            .api
            .get_pod(self.namespace, pod_name)
            .await
            .map_err(|source| {
                Stop::Failed(SubmitDriverError::ReadObject {
                    kind: "Pod".into(),
                    name: pod_name.to_owned(),
                    source,
                })
            })?;
        let standing = pod.is_some_and(|pod| {
            pod.metadata.uid.as_deref() == Some(pod_uid)
                && pod.metadata.deletion_timestamp.is_none()
        });
        if standing {
            Ok(())
        } else {
            Err(Stop::Stale(None))
        }
    }

    /// Takes the fence of this submission's pod `pod_uid` for `holder`.
    async fn take_fence(&self, pod_uid: &str, holder: Holder) -> Result<Taken, CallError> {
        let (namespace, id) = (self.namespace, self.submission_id);
        fence::take(self.api, namespace, id, self.pod_name(), pod_uid, holder).await
    }

    /// Deletes the pod of `pod_uid`, whose creator's rollback holds its fence.
    async fn remove_rolled_back(&self, pod_uid: &str) -> Result<(), Stop> {
        let api = self.api_of(0).map_err(Stop::Failed)?;
        self.api
            .delete(&api, self.pod_name(), pod_uid)
            .await
            .or_else(|error| {
                if error.is_conflict() {
                    Ok(())
                } else {
                    Err(error)
                }
            })
            .map_err(|source| {
                Stop::Failed(SubmitDriverError::DeleteStaleObject {
                    kind: "Pod".into(),
                    name: self.pod_name().to_owned(),
                    source,
                })
            })
    }

    /// Before a rollback deletes the pod it created: takes the pod's fence. Lost, or not known
    /// to be won, the pod stays: a duplicate is completing it and may have answered it.
    async fn fence_rollback(&self, pod_uid: &str) -> bool {
        let taken = self.take_fence(pod_uid, Holder::Rollback).await;
        match taken {
            Ok(Taken::Won) => true,
            Ok(Taken::Held(_)) => {
                info!(submission_id = %self.submission_id, pod = %self.pod_name(),
                    "a duplicate is completing the driver pod; the rollback leaves it");
                false
            }
            Err(error) => {
                warn!(submission_id = %self.submission_id, pod = %self.pod_name(), error = %error,
                    "cannot tell whether a duplicate is completing the driver pod; the rollback leaves it");
                false
            }
        }
    }

    /// Claims the submission id for this driver before its first object is created: a claim
    /// of another driver refuses, an ended one answers from its record, and one that went away
    /// makes the round observe again.
    async fn reserve(&self, ledger: &mut Ledger) -> Result<(), Stop> {
        let Some(to_write) = self.claim.filter(|_| !ledger.claimed) else {
            return Ok(());
        };
        let reserved = claim::reserve(self.api, self.caches, self.catch_up, to_write)
            .await
            .map_err(|source| Stop::Failed(SubmitDriverError::ClaimId { source }))?;
        match reserved {
            Reserved::Created { uid } => ledger.claim = Some(uid),
            Reserved::Ours => {
                // Claimed for this driver already: a duplicate the caches have not caught up
                // with, or an attempt cut short. Observe again once they show the pod (bounded).
                ledger.claimed = true;
                return Err(Stop::Stale(Some(0)));
            }
            Reserved::Ended(record) => {
                return Err(Stop::Failed(SubmitDriverError::Ended { record }));
            }
            Reserved::Bound { namespace, pod } => {
                return Err(Stop::Failed(SubmitDriverError::BoundToAnotherDriver {
                    namespace,
                    pod,
                }));
            }
            Reserved::Vanished => return Err(Stop::Stale(None)),
        }
        ledger.claimed = true;
        Ok(())
    }

    /// After the pod's POST, under a claim this call found rather than made: reads the claim
    /// live, and stops (the rollback removes the new pod) if it has ended or names another
    /// driver. The claim may have been read from a cache still behind a kill that ended it
    /// and deleted the pod; a kill writes the end before the delete, and this POST of the same
    /// name succeeded only once that pod was gone, so the live read sees the end. A claim gone
    /// meanwhile (given back by an attempt that rolled back) is made again for this pod, or
    /// refuses if another driver claimed the id first: no driver stands without its claim.
    async fn confirm_claim(&self, ledger: &mut Ledger) -> Result<(), Stop> {
        let Some(to_write) = self.claim.filter(|_| ledger.claim.is_none()) else {
            return Ok(());
        };
        let confirmed = claim::confirm(self.api, to_write)
            .await
            .map_err(|source| Stop::Failed(SubmitDriverError::ClaimId { source }))?;
        match confirmed {
            Reserved::Ended(record) => Err(Stop::Failed(SubmitDriverError::Ended { record })),
            Reserved::Bound { namespace, pod } => {
                Err(Stop::Failed(SubmitDriverError::BoundToAnotherDriver {
                    namespace,
                    pod,
                }))
            }
            Reserved::Vanished => {
                ledger.claimed = false;
                self.reserve(ledger).await
            }
            Reserved::Ours | Reserved::Created { .. } => Ok(()),
        }
    }

    /// POSTs the driver pod; records it (or an ambiguous failure) for the rollback.
    async fn create_pod(&self, ledger: &mut Ledger) -> Result<DriverPod, Stop> {
        match self.create(0, None).await {
            Ok(pod) => {
                ledger.pod = Some(pod.uid.clone());
                ledger.pod_ambiguous = false;
                debug!(submission_id = %self.submission_id, pod = %self.pod_name(), "created driver pod");
                Ok(pod)
            }
            Err(Stop::Failed(error)) => {
                ledger.pod_ambiguous = error.call_error().is_some_and(|e| !e.is_definite());
                Err(Stop::Failed(error))
            }
            Err(stale) => Err(stale),
        }
    }

    /// Performs one step before the pod exists.
    async fn prepare(&self, step: BeforePod, ledger: &mut Ledger) -> Result<(), Stop> {
        match step {
            BeforePod::Create { index } => {
                let created = self.create(index, None).await?;
                ledger.config_maps.push((index, created.uid));
                Ok(())
            }
            BeforePod::DeleteStale { index, uid } => self.delete_stale(index, &uid).await,
        }
    }

    /// Performs one step that needs the pod (`owner`: its owner references).
    async fn complete(&self, step: WithPod, owner: &Value) -> Result<(), Stop> {
        match step {
            WithPod::CreateOwned { index } => self.create(index, Some(owner)).await.map(drop),
            WithPod::CreateUnowned { index } => self.create(index, None).await.map(drop),
            WithPod::AttachOwner { index } => self.attach_owner(index, owner).await,
            WithPod::DeleteStale { index, uid } => self.delete_stale(index, &uid).await,
        }
    }

    /// Deletes object `index` of an earlier incarnation if it still has `uid`.
    async fn delete_stale(&self, index: usize, uid: &str) -> Result<(), Stop> {
        let api = self.api_of(index).map_err(Stop::Failed)?;
        let name = name_of(&self.objects[index]);
        match self.api.delete(&api, name, uid).await {
            Ok(()) => Ok(()),
            Err(error) if error.is_conflict() => Err(Stop::Stale(None)),
            Err(source) => {
                let (kind, name) = self.describe(index);
                Err(Stop::Failed(SubmitDriverError::DeleteStaleObject {
                    kind,
                    name,
                    source,
                }))
            }
        }
    }

    /// POSTs object `index` (with `owner` as its `ownerReferences`); what the answer says of
    /// it. An ambiguous failure is checked with a GET: if our object is there, the create
    /// happened.
    async fn create(&self, index: usize, owner: Option<&Value>) -> Result<DriverPod, Stop> {
        let api = self.api_of(index).map_err(Stop::Failed)?;
        let object = &self.objects[index];
        let name = name_of(object);
        let created = match owner {
            None => self.api.create_head(&api, object).await,
            Some(owner) => self.api.create_head(&api, &Owned { object, owner }).await,
        };
        match created {
            Ok(created) => Ok(DriverPod::of_head(created)),
            Err(error) if error.is_already_exists() => Err(Stop::Stale(Some(index))),
            Err(error) if error.is_definite() => {
                let (kind, name) = self.describe(index);
                Err(Stop::Failed(SubmitDriverError::CreateObject {
                    kind,
                    name,
                    source: error,
                }))
            }
            Err(error) => match self.api.get(&api, name).await {
                Ok(Some(found))
                    if matches!(
                        classify(Some(&found), self.submission_id),
                        Found::Ours { .. }
                    ) =>
                {
                    warn!(submission_id = %self.submission_id, kind = kind_of(object), name,
                        error = %error, "create answered with an error but took effect");
                    Ok(DriverPod::of_value(&found))
                }
                Ok(Some(_)) => Err(Stop::Stale(None)),
                Ok(None) | Err(_) => {
                    let (kind, name) = self.describe(index);
                    Err(Stop::Failed(SubmitDriverError::CreateObject {
                        kind,
                        name,
                        source: error,
                    }))
                }
            },
        }
    }

    async fn attach_owner(&self, index: usize, owner: &Value) -> Result<(), Stop> {
        let api = self.api_of(index).map_err(Stop::Failed)?;
        let name = name_of(&self.objects[index]);
        let wanted = at(owner, "/0/uid").and_then(Value::as_str);
        match self.api.patch_owner(&api, name, owner).await {
            Ok(_) => Ok(()),
            // Gone since observed (swept, or deleted by hand): the next round creates it owned.
            Err(error) if error.is_not_found() => Err(Stop::Stale(None)),
            Err(error) if error.is_definite() => {
                let (kind, name) = self.describe(index);
                Err(Stop::Failed(SubmitDriverError::AttachOwner {
                    kind,
                    name,
                    source: error,
                }))
            }
            Err(error) => {
                let read = self.api.get(&api, name).await;
                let (kind, name) = self.describe(index);
                let failed = SubmitDriverError::AttachOwner {
                    kind,
                    name,
                    source: error,
                };
                match read {
                    Ok(Some(found))
                        if matches!(classify(Some(&found), self.submission_id),
                            Found::Ours { owners, .. } if wanted.is_some_and(|w| owners.iter().any(|o| o == w))) =>
                    {
                        Ok(())
                    }
                    Ok(_) => Err(Stop::Failed(failed)),
                    // The owner patches are a creation's last steps: this one may have
                    // completed the driver, which the caches may have shown to a duplicate.
                    Err(_) => Err(Stop::Uncertain(failed)),
                }
            }
        }
    }

    /// Undoes what this attempt created, as far as it safely can; true if anything was removed.
    async fn rollback(&self, ledger: &Ledger) -> bool {
        if ledger.pod_not_ours_to_remove {
            return false;
        }
        if ledger.outcome_unknown {
            warn!(submission_id = %self.submission_id, pod = %self.pod_name(),
                "the driver may be complete; it is left to the retries");
            return false;
        }
        let mut removed = false;
        if let Some(uid) = &ledger.pod {
            if !self.fence_rollback(uid).await {
                return false;
            }
            match self.api_of(0) {
                Ok(api) => match self.api.delete(&api, self.pod_name(), uid).await {
                    Ok(()) => removed = true,
                    Err(error) => {
                        // The pod stays; its dependents are owned, a retry repairs or the user
                        // deletes it. The ConfigMaps must stay too: the pod mounts them.
                        warn!(submission_id = %self.submission_id, pod = %self.pod_name(),
                            error = %error, "rollback could not delete the driver pod");
                        return false;
                    }
                },
                Err(_) => return false,
            }
        } else if ledger.pod_ambiguous {
            warn!(submission_id = %self.submission_id, pod = %self.pod_name(),
                "driver pod creation may still take effect; its ConfigMaps are left to the sweeper");
            return false;
        }
        for (index, uid) in &ledger.config_maps {
            let name = name_of(&self.objects[*index]);
            let Ok(api) = self.api_of(*index) else {
                continue;
            };
            match self.api.delete(&api, name, uid).await {
                Ok(()) => removed = true,
                Err(error) => {
                    warn!(submission_id = %self.submission_id, config_map = name,
                        error = %error, "rollback could not delete a ConfigMap; the sweeper will");
                }
            }
        }
        // No driver of this attempt is left: the id is free again.
        if let (Some(to_write), Some(uid)) = (self.claim, &ledger.claim) {
            let name = to_write.object.metadata.name.as_deref().unwrap_or_default();
            match claim::release(self.api, &to_write.home, name, uid).await {
                Ok(()) => removed = true,
                Err(error) => {
                    warn!(submission_id = %self.submission_id, error = %error,
                        "rollback could not release the submission id's claim; the sweeper will");
                }
            }
        }
        if removed {
            info!(submission_id = %self.submission_id, pod = %self.pod_name(), "rolled back a failed first attempt");
        }
        removed
    }

    /// Dry run: what a submission would create, validated by the API server (`dryRun=All`)
    /// and with the owners attached, as a `v1` List in Spark's order. Objects of ours that
    /// exist already are shown as they are; nothing is written.
    pub async fn dry_run(&self) -> Result<Value, SubmitDriverError> {
        let observed = self.read_all().await?;
        let found: Vec<Found> = observed
            .iter()
            .map(|object| classify(object.as_ref(), self.submission_id))
            .collect();
        self.decide(&found)?;
        let mut answers: Vec<Option<Value>> = observed;
        let order = {
            let (before, after): (Vec<usize>, Vec<usize>) =
                (1..self.objects.len()).partition(|i| plan::needed_before_pod(&self.objects[*i]));
            before
                .into_iter()
                .chain([0])
                .chain(after)
                .collect::<Vec<_>>()
        };
        let mut owner: Option<Value> = answers[0]
            .as_ref()
            .map(|pod| owner_references(self.pod_name(), text(pod, "/metadata/uid")));
        for index in order {
            if answers[index].is_some() {
                continue;
            }
            let api = self.api_of(index)?;
            let mut object = self.objects[index].clone();
            if let (Some(owner), Some(metadata)) = (&owner, object.get_mut("metadata")) {
                metadata["ownerReferences"] = owner.clone();
            }
            let answer = self
                .api
                .create(&api, &object, true)
                .await
                .map_err(|source| {
                    let (kind, name) = self.describe(index);
                    SubmitDriverError::CreateObject { kind, name, source }
                })?;
            if index == 0 {
                owner = Some(owner_references(
                    self.pod_name(),
                    text(&answer, "/metadata/uid"),
                ));
            }
            answers[index] = Some(answer);
        }
        let mut items: Vec<Value> = answers.into_iter().flatten().collect();
        // The ConfigMaps went before the pod, without owner; show them as they would end up.
        if let Some(owner) = owner {
            for item in items.iter_mut().skip(1) {
                if let Some(metadata) = item.get_mut("metadata")
                    && metadata.get("ownerReferences").is_none()
                {
                    metadata["ownerReferences"] = owner.clone();
                }
            }
        }
        Ok(json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}))
    }
}
