//! The bench's view of the run: SparkApplications followed in kubesim's event log, behind the
//! API (the bench adds no requests), with the time each app was created, first reached
//! SUBMITTED (or a later state) and reached a terminal state.
//!
//! The log is read through the store's live broadcast. A follower that falls behind it (the
//! broadcast is bounded; the bench shares two cores with kubesim, the submitter and the
//! operator) loses events; it then resumes from the last resourceVersion it saw, out of the
//! store's history, exactly as a watch does, or, when that history is gone too, from a snapshot
//! of every app. Transitions read back that way are stamped when they are read, so their
//! latencies are upper bounds; how many apps that touched is reported.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubesim::store::{Event, EventType, Store, WatchFrom};
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

const PLURAL: &str = "sparkapplications";

/// Longest wait for one event before the loop looks at its deadline again.
const RECV_TIMEOUT: Duration = Duration::from_secs(1);
const PROGRESS_EVERY: Duration = Duration::from_secs(30);
/// Distinct failure messages kept (the rest are counted under one key).
const MAX_REASONS: usize = 8;

#[derive(Debug, Default)]
struct AppTimes {
    added: Option<Instant>,
    submitted: Option<Duration>,
    done: Option<(bool, Duration)>,
    /// A transition of this app was read after the follower had lost events.
    late: bool,
    /// The state after each change of the app, in order (a change that kept the state shows it
    /// again): which writes each app got.
    path: Vec<String>,
}

/// Outcome of a drain.
#[derive(Debug, Default)]
pub struct Drained {
    pub completed: usize,
    pub failed: usize,
    /// Created → first SUBMITTED (or later) state, sorted.
    pub to_submitted: Vec<Duration>,
    /// Created → COMPLETED or FAILED, sorted.
    pub to_done: Vec<Duration>,
    /// Times the follower fell behind and caught up.
    pub catch_ups: usize,
    /// Apps with a transition stamped after a catch-up (their latencies are upper bounds).
    pub late_apps: usize,
    /// `status.applicationState.errorMessage` of failed apps, counted.
    pub failures: BTreeMap<String, usize>,
    /// MODIFIED events of apps: the writes to them that took effect (a write that lost a race,
    /// 409, makes none).
    pub app_changes: u64,
    /// The apps' state paths (see `AppTimes::path`), counted.
    pub paths: BTreeMap<String, usize>,
}

pub struct Tracker {
    store: Arc<Store>,
    live: Receiver<Arc<Event>>,
    last_rv: u64,
    apps: HashMap<String, AppTimes>,
    done: usize,
    submitted: usize,
    catch_ups: usize,
    /// Set while replaying what the follower missed.
    replaying: bool,
    failures: BTreeMap<String, usize>,
    app_changes: u64,
}

impl Tracker {
    /// Follows every change from now on.
    pub fn new(store: Arc<Store>) -> anyhow::Result<Tracker> {
        let subscription = store
            .subscribe(&|_, _, _| false, WatchFrom::Now)
            .map_err(|e| anyhow::anyhow!("cannot subscribe to kubesim's event log: {e:?}"))?;
        Ok(Tracker {
            store,
            live: subscription.live,
            last_rv: subscription.at,
            apps: HashMap::new(),
            done: 0,
            submitted: 0,
            catch_ups: 0,
            replaying: false,
            failures: BTreeMap::new(),
            app_changes: 0,
        })
    }

    fn on_event(&mut self, event: &Event, now: Instant) {
        self.last_rv = self.last_rv.max(event.rv);
        if event.plural != PLURAL || event.kind == EventType::Deleted {
            return;
        }
        let Some(name) = event.object["metadata"]["name"].as_str() else {
            return;
        };
        if event.kind == EventType::Modified {
            self.app_changes += 1;
        }
        let times = self.apps.entry(name.to_owned()).or_default();
        let added = *times.added.get_or_insert(now);
        let state = event.object["status"]["applicationState"]["state"]
            .as_str()
            .unwrap_or("");
        times
            .path
            .push(if state.is_empty() { "-" } else { state }.to_owned());
        let (submitted, terminal) = match state {
            "SUBMITTED" | "RUNNING" | "SUCCEEDING" | "FAILING" => (true, None),
            "COMPLETED" => (true, Some(true)),
            "FAILED" => (true, Some(false)),
            // SUBMISSION_FAILED is not terminal: the operator moves it to FAILED when its
            // policy does not retry, or submits again.
            _ => (false, None),
        };
        if submitted && times.submitted.is_none() {
            times.submitted = Some(now - added);
            times.late |= self.replaying;
            self.submitted += 1;
        }
        if let Some(completed) = terminal
            && times.done.is_none()
        {
            times.done = Some((completed, now - added));
            times.late |= self.replaying;
            self.done += 1;
            if !completed {
                let message = event.object["status"]["applicationState"]["errorMessage"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(160)
                    .collect::<String>();
                let key =
                    if self.failures.len() < MAX_REASONS || self.failures.contains_key(&message) {
                        format!("{state}: {message}")
                    } else {
                        "(other messages)".to_owned()
                    };
                *self.failures.entry(key).or_default() += 1;
            }
        }
    }

    /// After lost events: resume from the last resourceVersion seen, or from a snapshot when
    /// the store's history no longer reaches back that far.
    fn catch_up(&mut self) -> anyhow::Result<()> {
        self.catch_ups += 1;
        let scope = |_: &str, plural: &str, _: &str| plural == PLURAL;
        let subscription = match self.store.subscribe(&scope, WatchFrom::After(self.last_rv)) {
            Ok(subscription) => subscription,
            Err(_) => self
                .store
                .subscribe(&scope, WatchFrom::Now)
                .map_err(|e| anyhow::anyhow!("cannot re-subscribe to kubesim's log: {e:?}"))?,
        };
        self.live = subscription.live;
        let now = Instant::now();
        self.replaying = true;
        for event in &subscription.replay {
            self.on_event(event, now);
        }
        self.replaying = false;
        self.last_rv = self.last_rv.max(subscription.at);
        Ok(())
    }

    /// Follows the log until `expected` apps are terminal or `deadline` passes; `progress`
    /// (elapsed, submitted, terminal) every 30 s.
    pub async fn drain(
        mut self,
        expected: usize,
        deadline: Instant,
        progress: impl Fn(Duration, usize, usize) + Send + 'static,
    ) -> anyhow::Result<Drained> {
        let start = Instant::now();
        let mut last_report = start;
        while self.done < expected && Instant::now() < deadline {
            match tokio::time::timeout(RECV_TIMEOUT, self.live.recv()).await {
                Ok(Ok(event)) => self.on_event(&event, Instant::now()),
                Ok(Err(RecvError::Lagged(missed))) => {
                    eprintln!(
                        "  the bench's event follower lost {missed} events; resuming after resourceVersion {}",
                        self.last_rv
                    );
                    self.catch_up()?;
                }
                Ok(Err(RecvError::Closed)) => anyhow::bail!("kubesim's event log closed"),
                Err(_) => {}
            }
            if last_report.elapsed() >= PROGRESS_EVERY {
                last_report = Instant::now();
                progress(start.elapsed(), self.submitted, self.done);
            }
        }
        let mut out = Drained {
            catch_ups: self.catch_ups,
            failures: self.failures,
            app_changes: self.app_changes,
            ..Drained::default()
        };
        for times in self.apps.values() {
            if let Some(d) = times.submitted {
                out.to_submitted.push(d);
            }
            if let Some((completed, d)) = times.done {
                out.to_done.push(d);
                if completed {
                    out.completed += 1;
                } else {
                    out.failed += 1;
                }
            }
            out.late_apps += usize::from(times.late);
            *out.paths.entry(times.path.join(" > ")).or_default() += 1;
        }
        out.to_submitted.sort();
        out.to_done.sort();
        Ok(out)
    }
}

/// The `p`th percentile (nearest rank) of sorted durations; zero when there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
