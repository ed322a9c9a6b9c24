//! Which copy of an application a reconcile starts from, given this operator's last status write
//! to it: the cached copy once the cache shows that write, else a wait for the cache, else a live
//! read. Pure: the caller measures the time since the write.
//!
//! A reconcile woken by a driver pod's event right after a status write often finds the
//! application cache one version behind: the write's own watch event is still on its way.
//! Acting on the older copy would submit again and lose its write to a 409; reading the live
//! object costs a GET. Waiting costs neither: that watch event updates the cache and wakes the
//! application again (kube-runtime's scheduler keeps the earliest of a requeue and a trigger), so
//! the requeue is only a bound for when the event never shows that version (another writer
//! superseded it, a re-list skipped it).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How long a reconcile waits for the cache to show this operator's last status write before it
/// reads the live object. The write's watch event normally arrives within milliseconds.
pub const CACHE_CATCH_UP: Duration = Duration::from_secs(1);

/// What this operator last wrote to an application's status: the object (its uid), the version
/// the API server returned, and the object's generation then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastWrite {
    pub uid: Option<String>,
    pub version: String,
    pub generation: Option<i64>,
}

impl LastWrite {
    /// The write that returned `meta`; `None` without a resourceVersion.
    pub fn of(meta: &ObjectMeta) -> Option<LastWrite> {
        Some(LastWrite {
            uid: meta.uid.clone(),
            version: meta.resource_version.clone()?,
            generation: meta.generation,
        })
    }
}

/// Where a reconcile starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From the cached copy: it shows the last write, or something newer, or there was none.
    Cached,
    /// Nothing now; look again after this long, unless the cache's event comes first.
    WaitForCache(Duration),
    /// From the live object.
    ReadLive,
}

/// Where a reconcile of the cached copy `cached` starts, `since_write` after `last`.
pub fn start_from(
    cached: &ObjectMeta,
    last: Option<&LastWrite>,
    since_write: Duration,
    catch_up: Duration,
) -> Start {
    let Some(last) = last else {
        return Start::Cached;
    };
    // Another object of the same name (the written one was deleted and made again) owes
    // nothing to the write.
    if cached.resource_version.as_ref() == Some(&last.version) || cached.uid != last.uid {
        return Start::Cached;
    }
    // The generation only grows: a cached copy with a later one was written after ours (the
    // spec changed), so it is newer, not older, than the write.
    if let (Some(cached_gen), Some(written_gen)) = (cached.generation, last.generation)
        && cached_gen > written_gen
    {
        return Start::Cached;
    }
    match catch_up.checked_sub(since_write).filter(|d| !d.is_zero()) {
        Some(left) => Start::WaitForCache(left),
        None => Start::ReadLive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(version: &str, generation: i64) -> ObjectMeta {
        ObjectMeta {
            uid: Some("uid-1".into()),
            resource_version: Some(version.into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        }
    }

    fn write(version: &str, generation: i64) -> LastWrite {
        LastWrite::of(&meta(version, generation)).unwrap()
    }

    #[test]
    fn without_a_write_or_once_the_cache_shows_it_the_cached_copy_is_used() {
        let second = Duration::from_secs(1);
        assert_eq!(
            start_from(&meta("5", 1), None, Duration::ZERO, second),
            Start::Cached
        );
        assert_eq!(
            start_from(&meta("7", 1), Some(&write("7", 1)), Duration::ZERO, second),
            Start::Cached
        );
    }

    #[test]
    fn a_cache_behind_the_write_is_waited_for_then_read_past() {
        let second = Duration::from_secs(1);
        let behind = meta("6", 1);
        assert_eq!(
            start_from(
                &behind,
                Some(&write("7", 1)),
                Duration::from_millis(300),
                second
            ),
            Start::WaitForCache(Duration::from_millis(700)),
            "the write's own watch event normally brings it: no GET"
        );
        assert_eq!(
            start_from(&behind, Some(&write("7", 1)), second, second),
            Start::ReadLive,
            "a version the cache never shows is read live once the wait is over"
        );
        assert_eq!(
            start_from(
                &behind,
                Some(&write("7", 1)),
                Duration::ZERO,
                Duration::ZERO
            ),
            Start::ReadLive,
            "no wait: read at once"
        );
    }

    #[test]
    fn a_cached_copy_with_a_later_generation_or_another_uid_is_not_behind_the_write() {
        let changed = meta("9", 2);
        assert_eq!(
            start_from(
                &changed,
                Some(&write("7", 1)),
                Duration::ZERO,
                Duration::from_secs(1)
            ),
            Start::Cached,
            "a spec change after the write is acted on at once"
        );
        let recreated = ObjectMeta {
            uid: Some("uid-2".into()),
            ..meta("3", 1)
        };
        assert_eq!(
            start_from(
                &recreated,
                Some(&write("7", 1)),
                Duration::ZERO,
                Duration::from_secs(1)
            ),
            Start::Cached,
            "an application made again under the same name owes nothing to the old one's write"
        );
    }
}
