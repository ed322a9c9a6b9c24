//! What the workload and the faults were told and did, kept for the invariants to judge: the
//! driver each submission id was answered with, the submissions killed, the applications whose
//! markers a Redis restart lost, the final state of every application.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Shared by the soak's tasks; every method takes the lock for one short step.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Driver pod uids answered per submission id.
    answers: Mutex<BTreeMap<String, Vec<String>>>,
    /// Submissions killed through the API: id to the uid of the driver killed.
    killed: Mutex<BTreeMap<String, String>>,
    /// Applications alive when Redis restarted empty.
    store_lost: Mutex<BTreeSet<String>>,
    /// `<restart policy> <recovery|plain>: <final state>` of every application checked.
    states: Mutex<BTreeMap<String, String>>,
    /// Partitions: node, cut at, healed at (`None`: still cut).
    partitions: Mutex<Vec<(String, Instant, Option<Instant>)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Ledger {
    /// Submission `id` was answered with driver `uid` (created or duplicate).
    pub fn answered(&self, id: &str, uid: &str) {
        lock(&self.answers)
            .entry(id.to_owned())
            .or_default()
            .push(uid.to_owned());
    }

    pub fn answers(&self) -> BTreeMap<String, Vec<String>> {
        lock(&self.answers).clone()
    }

    /// Submission `id`'s driver `uid` was killed (the kill answered 202 naming it killed).
    pub fn killed(&self, id: &str, uid: &str) {
        lock(&self.killed).insert(id.to_owned(), uid.to_owned());
    }

    pub fn kills(&self) -> BTreeMap<String, String> {
        lock(&self.killed).clone()
    }

    /// The uid of submission `id`'s killed driver, if it was killed.
    pub fn killed_driver(&self, id: &str) -> Option<String> {
        lock(&self.killed).get(id).cloned()
    }

    /// `apps` lost their markers with the store.
    pub fn store_lost(&self, apps: impl IntoIterator<Item = String>) {
        lock(&self.store_lost).extend(apps);
    }

    pub fn lost_store(&self, app: &str) -> bool {
        lock(&self.store_lost).contains(app)
    }

    /// Application `app` ended as `state` (`<policy> <recovery|plain>: <state>`).
    pub fn ended(&self, app: &str, state: String) {
        lock(&self.states).insert(app.to_owned(), state);
    }

    /// Whether `app` was already judged.
    pub fn judged(&self, app: &str) -> bool {
        lock(&self.states).contains_key(app)
    }

    pub fn states(&self) -> BTreeMap<String, String> {
        lock(&self.states).clone()
    }

    /// `node` was cut off from the API server now.
    pub fn partitioned(&self, node: &str) {
        lock(&self.partitions).push((node.to_owned(), Instant::now(), None));
    }

    /// `node` was healed now.
    pub fn healed(&self, node: &str) {
        let now = Instant::now();
        for (cut, _, healed) in lock(&self.partitions).iter_mut() {
            if cut == node && healed.is_none() {
                *healed = Some(now);
            }
        }
    }

    /// Whether `node` was cut off at any moment between `from` and `to`.
    pub fn partitioned_between(&self, node: &str, from: Instant, to: Instant) -> bool {
        lock(&self.partitions)
            .iter()
            .any(|(cut, at, healed)| cut == node && *at <= to && healed.is_none_or(|h| h >= from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_node_counts_as_partitioned_during_a_read_that_overlaps_its_cut() {
        let ledger = Ledger::default();
        let before = Instant::now();
        ledger.partitioned("node-1");
        let during = Instant::now();
        assert!(ledger.partitioned_between("node-1", before, before + Duration::from_secs(1)));
        assert!(!ledger.partitioned_between("node-2", before, during));
        ledger.healed("node-1");
        let after = Instant::now() + Duration::from_millis(1);
        assert!(ledger.partitioned_between("node-1", before, after));
        assert!(!ledger.partitioned_between("node-1", after, after + Duration::from_secs(1)));
    }
}
