//! Which pods the kubelet's next tick looks at: those something happened to (the pod changed,
//! a process exited, a probe reported, a kill), and those whose own timer (a scripted container
//! due to exit) has come. Every other pod is quiet until one of those happens, so a tick costs
//! the pods that may move, not every pod on the nodes.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::SystemTime;

/// Pods to look at on the next tick, and pods to look at once a time has come.
#[derive(Debug, Default)]
pub(super) struct Wakeups {
    awake: HashSet<String>,
    timers: BTreeSet<(SystemTime, String)>,
    /// Each pod's one timer, so a new one replaces it and a forgotten pod leaves none.
    at: HashMap<String, SystemTime>,
}

impl Wakeups {
    /// The pod is looked at on the next tick.
    pub(super) fn wake(&mut self, uid: &str) {
        if !self.awake.contains(uid) {
            self.awake.insert(uid.to_string());
        }
    }

    /// The pod is looked at on the first tick at or after `at` (its earlier timer is dropped).
    pub(super) fn wake_at(&mut self, uid: &str, at: SystemTime) {
        if self.at.get(uid) == Some(&at) {
            return;
        }
        if let Some(old) = self.at.insert(uid.to_string(), at) {
            self.timers.remove(&(old, uid.to_string()));
        }
        self.timers.insert((at, uid.to_string()));
    }

    /// The pod is gone: nothing of it is kept.
    pub(super) fn forget(&mut self, uid: &str) {
        self.awake.remove(uid);
        if let Some(at) = self.at.remove(uid) {
            self.timers.remove(&(at, uid.to_string()));
        }
    }

    /// The pods to look at now: every pod woken since the last call and every pod whose timer
    /// has come, each once, in uid order.
    pub(super) fn take_due(&mut self, now: SystemTime) -> BTreeSet<String> {
        let mut due: BTreeSet<String> = self.awake.drain().collect();
        while let Some((at, _)) = self.timers.first()
            && *at <= now
        {
            if let Some((_, uid)) = self.timers.pop_first() {
                self.at.remove(&uid);
                due.insert(uid);
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn names(set: BTreeSet<String>) -> Vec<String> {
        set.into_iter().collect()
    }

    #[test]
    fn a_woken_pod_is_due_once() {
        let mut w = Wakeups::default();
        w.wake("a");
        w.wake("a");
        assert_eq!(names(w.take_due(t(0))), ["a"]);
        assert!(w.take_due(t(0)).is_empty());
    }

    #[test]
    fn a_timer_is_due_when_its_time_comes_and_not_before() {
        let mut w = Wakeups::default();
        w.wake_at("a", t(10));
        w.wake_at("b", t(20));
        assert!(w.take_due(t(9)).is_empty());
        assert_eq!(names(w.take_due(t(10))), ["a"]);
        assert_eq!(names(w.take_due(t(30))), ["b"]);
        assert!(w.take_due(t(40)).is_empty());
    }

    #[test]
    fn a_new_timer_replaces_the_pods_earlier_one() {
        let mut w = Wakeups::default();
        w.wake_at("a", t(10));
        w.wake_at("a", t(20));
        assert!(w.take_due(t(15)).is_empty());
        assert_eq!(names(w.take_due(t(20))), ["a"]);
    }

    #[test]
    fn a_forgotten_pod_is_never_due() {
        let mut w = Wakeups::default();
        w.wake("a");
        w.wake_at("b", t(10));
        w.forget("a");
        w.forget("b");
        assert!(w.take_due(t(100)).is_empty());
        assert!(w.timers.is_empty() && w.at.is_empty());
    }

    #[test]
    fn a_pod_both_woken_and_due_is_looked_at_once() {
        let mut w = Wakeups::default();
        w.wake_at("a", t(10));
        w.wake("a");
        assert_eq!(names(w.take_due(t(10))), ["a"]);
        assert!(w.take_due(t(20)).is_empty());
    }
}
