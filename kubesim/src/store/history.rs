//! Each stored type's recent events, kept for watch resumption and continue tokens.
//!
//! The API server keeps a watch cache per resource, so a busy type (events, pods) does not push
//! another type's history out; so does this.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::key::key;
use super::{Event, Scope, TypeKey};

/// Every type's recent events.
pub(super) struct Histories {
    of_type: HashMap<TypeKey, History>,
    /// Events each type's history keeps.
    capacity: usize,
    /// Every event with rv <= this is gone from every history (`forget_through`).
    compacted_through: u64,
}

/// One type's recent events.
#[derive(Default)]
struct History {
    events: VecDeque<Arc<Event>>,
    /// Every event of the type with rv <= this is gone from `events`.
    dropped_through: u64,
}

impl Histories {
    /// Histories keeping `capacity` events of each type (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            of_type: HashMap::new(),
            capacity: capacity.max(1),
            compacted_through: 0,
        }
    }

    /// The rv through which events are gone: of one type, or of any type (`None`).
    pub(super) fn gone_through(&self, of_type: Option<(&str, &str)>) -> u64 {
        let dropped = match of_type {
            Some(pair) => self
                .of_type
                .get(key(&pair))
                .map_or(0, |h| h.dropped_through),
            None => self
                .of_type
                .values()
                .map(|h| h.dropped_through)
                .max()
                .unwrap_or(0),
        };
        dropped.max(self.compacted_through)
    }

    /// Keeps `event` in its type's history, dropping the type's oldest when full.
    pub(super) fn remember(&mut self, event: &Arc<Event>) {
        let pair = (event.group.as_str(), event.plural.as_str());
        let history = match self.of_type.get_mut(key(&pair)) {
            Some(history) => history,
            None => self
                .of_type
                .entry((event.group.clone(), event.plural.clone()))
                .or_default(),
        };
        if history.events.len() == self.capacity
            && let Some(old) = history.events.pop_front()
        {
            history.dropped_through = old.rv;
        }
        history.events.push_back(Arc::clone(event));
    }

    /// The remembered events after `rv` that `scope` accepts, of one type or of all, in order.
    /// The caller has checked `rv` against `gone_through`.
    pub(super) fn after(
        &self,
        of_type: Option<(&str, &str)>,
        rv: u64,
        scope: Scope<'_>,
    ) -> Vec<Arc<Event>> {
        let histories: Vec<&History> = match of_type {
            Some(pair) => self.of_type.get(key(&pair)).into_iter().collect(),
            None => self.of_type.values().collect(),
        };
        // Each history is in rv order: a resume reads from its first later event on, not
        // through the whole history (this runs under the store's lock).
        let mut replay: Vec<Arc<Event>> = histories
            .into_iter()
            .flat_map(|h| h.events.range(h.events.partition_point(|e| e.rv <= rv)..))
            .filter(|e| scope(&e.group, &e.plural, &e.namespace))
            .cloned()
            .collect();
        if of_type.is_none() {
            // Several types' histories, each in order: merged back into one.
            replay.sort_unstable_by_key(|e| e.rv);
        }
        replay
    }

    /// Forgets every event: anything at or before `rv` is gone.
    pub(super) fn forget_through(&mut self, rv: u64) {
        self.compacted_through = rv;
        self.of_type.clear();
    }
}
