//! The caller's submissions, a page at a time: `GET /api/v1/spark-submit`.
//!
//! Served from the watch caches (no request to the API server): every driver pod of ours, and
//! every retention record whose pod is gone (a retained success, a kill), one item per
//! (namespace, submission id), as a status look-up would answer it. Only namespaces the
//! caller's policy lets it read are listed; naming one it may not read is a 403.
//!
//! Paging: the items are in one stable order, by namespace then submission id, and the
//! `continue` token is the position of a page's last item (not an offset). The next page starts
//! after it, whatever came and went meanwhile, so an item present throughout a listing is on
//! exactly one page, and nothing is listed twice; an item added or removed during the listing
//! may or may not show, as with any paged list of a changing set.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use thiserror::Error;

use crate::policy::PolicyError;
use crate::record::{self, Outcome, Record};
use crate::state::AppState;
use crate::status::{Located, LookupError};
use crate::tls::PeerIdentity;
use submission::api::{DriverStatus, ListQuery, ListResponse, QueryError};
use submission::meta::annotations;

/// Version of the token's layout; a token of another is refused, never misread.
const TOKEN_VERSION: &str = "1.";

/// Why a page could not be listed.
#[derive(Debug, Error)]
pub enum ListError {
    #[error("invalid list options")]
    Options(#[source] QueryError),
    #[error("the continue token is not one this service gave")]
    Continue,
    #[error("the client may not list these submissions")]
    Denied(#[source] PolicyError),
    #[error("the watch caches have not synced yet")]
    NotSynced,
}

impl ListError {
    pub fn kind(&self) -> &'static str {
        match self {
            ListError::Options(_) => "options",
            ListError::Continue => "continue",
            ListError::Denied(_) => "denied",
            ListError::NotSynced => LookupError::NotSynced.kind(),
        }
    }
}

/// A place in the list's order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub namespace: String,
    pub submission_id: String,
}

impl Position {
    /// The opaque token for this position: hex, so it needs no escaping in a query.
    pub fn token(&self) -> String {
        let text = format!("{}/{}", self.namespace, self.submission_id);
        let hex = submission::naming::hex(text.as_bytes());
        format!("{TOKEN_VERSION}{hex}")
    }

    /// The position a token names.
    pub fn parse(token: &str) -> Result<Position, ListError> {
        let hex = token
            .strip_prefix(TOKEN_VERSION)
            .ok_or(ListError::Continue)?;
        if hex.len() % 2 != 0 {
            return Err(ListError::Continue);
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(hex.get(at..at + 2).unwrap_or("?"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| ListError::Continue)?;
        let text = String::from_utf8(bytes).map_err(|_| ListError::Continue)?;
        // A namespace holds no '/'; a submission id may.
        let (namespace, submission_id) = text.split_once('/').ok_or(ListError::Continue)?;
        Ok(Position {
            namespace: namespace.to_owned(),
            submission_id: submission_id.to_owned(),
        })
    }
}

/// One page: up to `size` of the items after `after` that `keep` keeps, in order, and the
/// position to continue from when more are kept beyond them. Pure.
pub fn page<T>(
    items: &BTreeMap<Position, T>,
    after: Option<&Position>,
    size: usize,
    mut keep: impl FnMut(&Position, &T) -> Option<DriverStatus>,
) -> (Vec<DriverStatus>, Option<Position>) {
    let start = after.map_or(Bound::Unbounded, Bound::Excluded);
    let mut kept = items
        .range((start, Bound::Unbounded))
        .filter_map(|(position, item)| keep(position, item).map(|status| (position, status)));
    let mut page = Vec::with_capacity(size.min(items.len()));
    let mut last = None;
    for (position, status) in kept.by_ref().take(size) {
        page.push(status);
        last = Some(position);
    }
    let more = kept.next().is_some();
    (page, last.filter(|_| more).cloned())
}

/// One page of the submissions `peer` may see, by `query`.
pub fn list(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    query: &ListQuery,
) -> Result<ListResponse, ListError> {
    query.check().map_err(ListError::Options)?;
    let after = query
        .continue_token
        .as_deref()
        .map(Position::parse)
        .transpose()?;
    match &query.namespace {
        Some(namespace) => state.access.may_read(peer, namespace),
        None => state.access.may_list(peer),
    }
    .map_err(ListError::Denied)?;
    let caches = state.synced_caches().ok_or(ListError::NotSynced)?;
    let items = located(caches.pods.state(), &caches.config_maps.state());
    let mut readable: HashMap<String, bool> = HashMap::new();
    let (items, next) = page(
        &items,
        after.as_ref(),
        query.page_size(),
        |position, found| {
            if query
                .namespace
                .as_ref()
                .is_some_and(|namespace| *namespace != position.namespace)
            {
                return None;
            }
            let may = *readable
                .entry(position.namespace.clone())
                .or_insert_with(|| state.access.may_read(peer, &position.namespace).is_ok());
            let status = may.then(|| found.status())?;
            query
                .phase
                .is_none_or(|phase| phase == status.phase)
                .then_some(status)
        },
    );
    Ok(ListResponse {
        items,
        continue_token: next.map(|position| position.token()),
    })
}

/// Every submission the caches know, by position: its pod (with its kill's record), else its
/// newest record.
fn located(
    pods: Vec<Arc<Pod>>,
    config_maps: &[Arc<k8s_openapi::api::core::v1::ConfigMap>],
) -> BTreeMap<Position, Located> {
    let mut records: BTreeMap<Position, Record> = BTreeMap::new();
    for record in config_maps.iter().filter_map(|cm| record::read(cm)) {
        let position = Position {
            namespace: record.namespace.clone(),
            submission_id: record.submission_id.clone(),
        };
        match records.get(&position) {
            Some(known) if known.finished_at >= record.finished_at => {}
            _ => {
                records.insert(position, record);
            }
        }
    }
    let mut items: BTreeMap<Position, Located> = BTreeMap::new();
    for pod in pods {
        let meta = &pod.metadata;
        let Some(submission_id) = meta
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(annotations::SUBMISSION_ID))
        else {
            continue;
        };
        let position = Position {
            namespace: meta.namespace.clone().unwrap_or_default(),
            submission_id: submission_id.clone(),
        };
        let uid = meta.uid.as_deref().unwrap_or_default();
        let killed = records
            .get(&position)
            .filter(|record| record.outcome == Outcome::Killed && record.uid == uid)
            .cloned();
        items.insert(position, Located::Pod { pod, killed });
    }
    for (position, record) in records {
        items.entry(position).or_insert(Located::Retained(record));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(namespace: &str, id: &str) -> Position {
        Position {
            namespace: namespace.into(),
            submission_id: id.into(),
        }
    }

    fn status(position: &Position) -> DriverStatus {
        DriverStatus::new(
            submission::api::DriverIdentity {
                submission_id: Some(position.submission_id.clone()),
                namespace: position.namespace.clone(),
                ..Default::default()
            },
            submission::driver::DriverObservation::absent(false),
        )
    }

    fn ids(page: &[DriverStatus]) -> Vec<String> {
        page.iter()
            .map(|s| format!("{}/{}", s.namespace, s.submission_id.as_deref().unwrap()))
            .collect()
    }

    #[test]
    fn tokens_round_trip_and_foreign_tokens_are_refused() {
        for (namespace, id) in [
            ("spark", "run-1"),
            ("a", "with/slash and spaces"),
            ("b", "é"),
        ] {
            let at = position(namespace, id);
            assert_eq!(Position::parse(&at.token()).unwrap(), at);
        }
        for bad in ["", "1.", "1.zz", "1.616", "2.61", "61", "1.61"] {
            assert!(Position::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pages_follow_positions_so_items_added_or_removed_between_pages_shift_nothing() {
        let mut items: BTreeMap<Position, ()> = ["a/1", "a/2", "b/1", "b/3", "c/1"]
            .iter()
            .map(|key| {
                let (namespace, id) = key.split_once('/').unwrap();
                (position(namespace, id), ())
            })
            .collect();
        let keep = |position: &Position, _: &()| Some(status(position));
        let (first, next) = page(&items, None, 2, keep);
        assert_eq!(ids(&first), ["a/1", "a/2"]);
        // Between pages: one before the position goes, one after it comes, one before comes.
        items.remove(&position("a", "1"));
        items.insert(position("b", "2"), ());
        items.insert(position("a", "0"), ());
        let (second, next) = page(&items, next.as_ref(), 2, keep);
        assert_eq!(ids(&second), ["b/1", "b/2"]);
        let (third, next) = page(&items, next.as_ref(), 2, keep);
        assert_eq!(ids(&third), ["b/3", "c/1"]);
        assert_eq!(next, None, "the last page says so");
    }

    #[test]
    fn a_filtered_page_ends_only_when_nothing_more_is_kept() {
        let items: BTreeMap<Position, bool> =
            [("a", true), ("b", false), ("c", true), ("d", false)]
                .into_iter()
                .map(|(id, kept)| (position("ns", id), kept))
                .collect();
        let keep = |position: &Position, kept: &bool| kept.then(|| status(position));
        let (first, next) = page(&items, None, 1, keep);
        assert_eq!(ids(&first), ["ns/a"]);
        let (second, next) = page(&items, next.as_ref(), 1, keep);
        assert_eq!(ids(&second), ["ns/c"]);
        assert_eq!(next, None);
    }
}
