//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas only one
//! reconciles (two would race on submissions and status writes; the submission id makes that
//! safe, but wasteful and noisy).
//!
//! The rule is pure ([`next_step`]); the shell reads and writes the Lease with its
//! resourceVersion, so two candidates taking over an expired lease at once cannot both win
//! (one write gets 409). A leader that cannot renew within the lease duration stops
//! reconciling before another replica may take over.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use thiserror::Error;
use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::controller::{self, RunConfig, RunError};
use crate::reconciler::Health;
use submission::error_chain::error_chain;

/// Where the lease lives and who we are.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    /// This replica (its pod name in a cluster).
    pub identity: String,
    /// A leader silent this long is replaced.
    pub lease_duration: Duration,
    /// How often the leader renews and a candidate retries.
    pub retry_period: Duration,
}

/// What to do with the lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No lease yet: create it holding it.
    Create,
    /// Ours: write a new renew time.
    Renew,
    /// Another holder's, expired or released: take it over.
    TakeOver,
    /// Another holder's and live: wait.
    Follow { holder: String },
}

/// The election rule. Pure: `now` is the only clock.
pub fn next_step(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Step {
    let Some(spec) = spec else {
        return Step::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == me {
        return Step::Renew;
    }
    if holder.is_empty() {
        return Step::TakeOver;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let live = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .is_some_and(|renewed| renewed.0 + duration > now);
    if live {
        Step::Follow {
            holder: holder.to_owned(),
        }
    } else {
        Step::TakeOver
    }
}

/// A lease read or write failed (other than losing a race, which is just "not leader").
#[derive(Debug, Error)]
pub enum LeaseError {
    #[error("cannot read lease {name}")]
    ReadLease {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write lease {name}")]
    WriteLease {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl LeaseError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            LeaseError::ReadLease { .. } => "read_lease",
            LeaseError::WriteLease { .. } => "write_lease",
        }
    }
}

fn lease_seconds(config: &LeaderConfig) -> i32 {
    i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// One attempt to acquire or renew: `Ok(true)` when we hold the lease afterwards.
pub async fn try_acquire(api: &Api<Lease>, config: &LeaderConfig) -> Result<bool, LeaseError> {
    let name = &config.lease_name;
    let lease = api
        .get_opt(name)
        .await
        .map_err(|source| LeaseError::ReadLease {
            name: name.clone(),
            source,
        })?;
    let now = Timestamp::now();
    // A Lease made ahead of us (the chart renders it, so that `helm uninstall` removes it) may
    // have no spec yet: it exists, held by no one.
    let unheld = LeaseSpec::default();
    let step = next_step(
        lease.as_ref().map(|l| l.spec.as_ref().unwrap_or(&unheld)),
        &config.identity,
        now,
    );
    let written = match (step, lease) {
        (Step::Follow { .. }, _) => return Ok(false),
        (Step::Create, _) | (_, None) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(config.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds(config)),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            api.create(&PostParams::default(), &lease).await
        }
        (step, Some(mut lease)) => {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if step == Step::TakeOver {
                spec.holder_identity = Some(config.identity.clone());
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions =
                    Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
            }
            spec.lease_duration_seconds = Some(lease_seconds(config));
            spec.renew_time = Some(MicroTime(now));
            // The resourceVersion read makes a concurrent takeover a 409 for one of us.
            api.replace(name, &PostParams::default(), &lease).await
        }
    };
    match written {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(LeaseError::WriteLease {
            name: name.clone(),
            source,
        }),
    }
}

/// Waits until this replica holds the lease.
async fn acquire(api: &Api<Lease>, config: &LeaderConfig) {
    let mut announced = false;
    loop {
        match try_acquire(api, config).await {
            Ok(true) => {
                info!(lease = %config.lease_name, identity = %config.identity, "became leader");
                return;
            }
            Ok(false) if !announced => {
                info!(lease = %config.lease_name, "another replica leads; standing by");
                announced = true;
            }
            Ok(false) => {}
            Err(error) => {
                warn!(kind = error.kind(), error = %error_chain(&error), "leader election failed")
            }
        }
        tokio::time::sleep(config.retry_period).await;
    }
}

/// Renews until the lease is lost or cannot be renewed for a whole lease duration.
async fn keep(api: &Api<Lease>, config: &LeaderConfig) {
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(config.retry_period).await;
        match try_acquire(api, config).await {
            Ok(true) => last = tokio::time::Instant::now(),
            Ok(false) => {
                warn!(lease = %config.lease_name, "lost the lease to another replica");
                return;
            }
            Err(error) => {
                warn!(kind = error.kind(), error = %error_chain(&error), "cannot renew the lease");
                // Stop before another replica may take over, so two never reconcile at once.
                if last.elapsed() + config.retry_period >= config.lease_duration {
                    warn!(lease = %config.lease_name, "lease renewal deadline passed");
                    return;
                }
            }
        }
    }
}

/// `operator run` behind leader election: stands by until it leads, reconciles while it leads,
/// and returns [`RunError::LostLeadership`] when it stops leading (the process should exit and be
/// restarted, with fresh caches).
pub async fn run_elected(
    client: Client,
    config: RunConfig,
    leader: LeaderConfig,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &leader.namespace);
    let mut shutdown = Box::pin(shutdown);
    tokio::select! {
        () = acquire(&api, &leader) => {}
        () = &mut shutdown => return Ok(()),
    }
    let (lost_tx, lost_rx) = oneshot::channel::<()>();
    // Aborted however this function ends (a dropped task included): a renewer outliving its
    // controller would keep the lease from the other replicas.
    let renew = AbortOnDrop(tokio::spawn({
        let api = api.clone();
        let leader = leader.clone();
        async move {
            keep(&api, &leader).await;
            let _ = lost_tx.send(());
        }
    }));
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = {
        let lost = lost.clone();
        async move {
            tokio::select! {
                result = lost_rx => {
                    if result.is_ok() {
                        lost.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                () = shutdown => {}
            }
        }
    };
    let result = controller::run(client, config, health, stop).await;
    drop(renew);
    result?;
    if lost.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(RunError::LostLeadership {
            lease: leader.lease_name,
        });
    }
    Ok(())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn spec(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(10),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn election_rule() {
        assert_eq!(next_step(None, "a", at(0)), Step::Create);
        assert_eq!(next_step(Some(&spec("a", 0)), "a", at(100)), Step::Renew);
        assert_eq!(
            next_step(Some(&spec("b", 0)), "a", at(9)),
            Step::Follow { holder: "b".into() }
        );
        assert_eq!(next_step(Some(&spec("b", 0)), "a", at(10)), Step::TakeOver);
        assert_eq!(next_step(Some(&spec("", 0)), "a", at(1)), Step::TakeOver);
    }
}
