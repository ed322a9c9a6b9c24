//! One submission id, one driver, whatever the race: the I/O of claims ([`crate::record`]).
//!
//! A fresh submission claims its id (POST of the claim, named from the id alone, in the
//! submitter's namespace) before it creates any driver object. The API server lets exactly one
//! POST of a name succeed, so of two first submissions of one id, into two namespaces, on two
//! replicas, or across a restart, one wins and the other finds the claim ([`reserve`]): naming
//! its own driver (a concurrent duplicate: it goes on, and the driver's objects arbitrate as
//! before), another driver (it refuses with 409 `SUBMISSION_ID_CONFLICT`, having created
//! nothing), or its own driver ended (it answers from the record). When a driver ends, its
//! claim becomes its record ([`end`]): one more write of the same object, by the retention
//! recorder for a success and by the kill.
//!
//! A claim found after `AlreadyExists` is read from the watch caches once they show it (the
//! wait is bounded by the submission's catch-up time), else with one GET.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use crate::caches::WatchCaches;
use crate::kube_api::{CallError, KubeApi};
use crate::record::{self, Claim, Record};

/// A submission's claim, ready to write.
#[derive(Debug, Clone)]
pub struct ClaimToWrite {
    /// The submitter's namespace, where claims live.
    pub home: String,
    pub claim: Claim,
    /// The claim as an object ([`record::claim`]).
    pub object: ConfigMap,
}

/// What claiming an id found.
#[derive(Debug, Clone, PartialEq)]
pub enum Reserved {
    /// This call created the claim; its uid, for a rollback.
    Created { uid: String },
    /// The claim names this very driver: an earlier attempt's, or a concurrent duplicate's.
    Ours,
    /// The claim names this driver, which has ended (its record): nothing may be created.
    Ended(Box<Record>),
    /// The claim binds the id to another driver.
    Bound { namespace: String, pod: String },
    /// The claim went away between the create and the read: observe again.
    Vanished,
}

/// Claims `to_write.claim`'s id for its driver; see the module documentation.
pub async fn reserve(
    api: &KubeApi,
    caches: Option<&WatchCaches>,
    catch_up: Duration,
    to_write: &ClaimToWrite,
) -> Result<Reserved, CallError> {
    let error = match api
        .create_config_map(&to_write.home, &to_write.object)
        .await
    {
        Ok(created) => return Ok(Reserved::Created { uid: created.uid }),
        Err(error) => error,
    };
    let id = &to_write.claim.submission_id;
    if error.is_already_exists() {
        let found = find(api, caches, catch_up, &to_write.home, id).await?;
        return Ok(judge(found.as_ref(), &to_write.claim));
    }
    if error.is_definite() {
        return Err(error);
    }
    // The answer was lost: the create may have happened. What is there says.
    let found = api
        .get_config_map(&to_write.home, &record::claim_name(id))
        .await?;
    match found {
        Some(cm)
            if judge(Some(&cm), &to_write.claim) == Reserved::Ours && record::is_reserved(&cm) =>
        {
            Ok(Reserved::Created {
                uid: cm.metadata.uid.unwrap_or_default(),
            })
        }
        Some(cm) => Ok(judge(Some(&cm), &to_write.claim)),
        None => Err(error),
    }
}

/// The id's claim read live and judged for `to_write`'s driver: whether a round that found
/// the claim rather than made it (perhaps in a cache still behind a kill) may keep the pod it
/// has just created.
pub async fn confirm(api: &KubeApi, to_write: &ClaimToWrite) -> Result<Reserved, CallError> {
    let id = &to_write.claim.submission_id;
    let found = find(api, None, Duration::ZERO, &to_write.home, id).await?;
    Ok(judge(found.as_ref(), &to_write.claim))
}

/// What a found claim means for `ours`.
fn judge(found: Option<&ConfigMap>, ours: &Claim) -> Reserved {
    let Some(cm) = found else {
        return Reserved::Vanished;
    };
    match record::read_claim(cm) {
        Some(claim) if claim.names(&ours.namespace, &ours.pod) => match record::read(cm) {
            Some(ended) => Reserved::Ended(Box::new(ended)),
            None => Reserved::Ours,
        },
        Some(claim) => Reserved::Bound {
            namespace: claim.namespace,
            pod: claim.pod,
        },
        // Not a claim we can read under our name: nobody's, so nobody wins by it; a later
        // round finds it gone (the sweeper) or still there (an error the caller reports).
        None => Reserved::Vanished,
    }
}

/// The claim of `submission_id`: from the caches once they show it (waiting up to
/// `catch_up`), else read live.
pub async fn find(
    api: &KubeApi,
    caches: Option<&WatchCaches>,
    catch_up: Duration,
    home: &str,
    submission_id: &str,
) -> Result<Option<ConfigMap>, CallError> {
    let name = record::claim_name(submission_id);
    if let Some(caches) = caches {
        let deadline = tokio::time::Instant::now() + catch_up;
        if caches
            .wait_until(deadline, |caches| caches.config_map(home, &name).is_some())
            .await
            && let Some(cm) = caches.config_map(home, &name)
        {
            return Ok(Some(cm.as_ref().clone()));
        }
    }
    api.get_config_map(home, &name).await
}

/// Gives the id back after a failed first attempt: deletes the claim this attempt created
/// (`uid`), if it is still that one.
pub async fn release(api: &KubeApi, home: &str, name: &str, uid: &str) -> Result<(), CallError> {
    api.delete_config_map(home, name, uid).await
}

/// How ending a driver's claim went.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// `record` was written: over the claim, or as a new object (a driver from before claims).
    Written,
    /// The driver had ended already: its record.
    Already(Box<Record>),
    /// The id is claimed for another driver: nothing was written.
    Other,
}

/// Writes at most this many times: a claim changes once, so a second conflict is a third
/// writer's, which has ended it.
const END_ATTEMPTS: usize = 3;

/// Ends the claim of `record`'s driver with `record` (a success, a kill): an update of the
/// claim when it is reserved for that driver, with its resourceVersion (a concurrent end wins
/// once, the other finds it ended), else a create.
pub async fn end(
    api: &KubeApi,
    caches: Option<&WatchCaches>,
    home: &str,
    record: &Record,
) -> Result<Ended, CallError> {
    let name = record::claim_name(&record.submission_id);
    let mut existing = match caches.and_then(|caches| caches.config_map(home, &name)) {
        Some(cm) => Some(cm.as_ref().clone()),
        None => api.get_config_map(home, &name).await?,
    };
    let mut attempt = 1;
    loop {
        let written = match &existing {
            Some(cm) => {
                if let Some(ended) = record::read(cm) {
                    return Ok(Ended::Already(Box::new(ended)));
                }
                if !record::read_claim(cm).is_some_and(|c| c.names(&record.namespace, &record.pod))
                {
                    return Ok(Ended::Other);
                }
                let Some(update) = record::over_claim(cm, record) else {
                    return Ok(Ended::Other);
                };
                api.replace_config_map(home, &name, &update).await.map(drop)
            }
            None => {
                let Some(create) = record::build(record, home) else {
                    return Ok(Ended::Other);
                };
                api.create_config_map(home, &create).await.map(drop)
            }
        };
        match written {
            Ok(_) => return Ok(Ended::Written),
            // Changed, made or removed meanwhile: read what is there now, and judge again.
            Err(error)
                if attempt < END_ATTEMPTS
                    && (error.is_conflict()
                        || error.is_already_exists()
                        || error.is_not_found()) =>
            {
                existing = api.get_config_map(home, &name).await?;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}
