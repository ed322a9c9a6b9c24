//! The checks made while the soak runs: every half second, what `kubectl get` would show
//! (applications, then pods, in that order), judged by the pure checks of `invariants`; every
//! fourth poll ConfigMaps and Services too, for orphans and drivers without their objects. It
//! also counts completions, samples memory and prints a progress line every minute.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{Api, ListParams};
use operator::crd::ApplicationStateType;
use tokio::sync::watch;

use super::invariants::{self, Objects, Tally};
use super::ledger::Ledger;
use super::memory::{self, Memory};
use super::workload::applications::apps_api;
use super::{Progress, faults};
use crate::Sandbox;

/// How often the monitor looks.
const POLL: Duration = Duration::from_millis(500);
/// Every this many polls it also lists ConfigMaps and Services.
const OBJECTS_EVERY: u64 = 4;
/// How long an object may stay an orphan while the soak runs: the sweep's grace and a few of
/// its passes, doubled for faults that slow it (a submitter down, API errors on its deletes).
pub const ORPHAN_PATIENCE: Duration = Duration::from_secs(
    2 * (super::stack::SWEEP_GRACE.as_secs() + 3 * super::stack::SWEEP_INTERVAL.as_secs() + 5),
);
/// How often a progress line is printed and `workload_progress` checked.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(60);

/// Operation names of the completions the monitor counts.
pub const APPS_COMPLETED: &str = "apps_completed";
pub const REST_DRIVERS_SUCCEEDED: &str = "rest_drivers_succeeded";
/// Polls that saw an application SUBMISSION_FAILED beside a live driver of its current run.
pub const SUBMISSION_FAILED_WITH_LIVE_DRIVER: &str = "polls_submission_failed_with_live_driver";

/// What one poll carries to the next.
#[derive(Default)]
struct Seen {
    /// Drivers found without a ConfigMap they mount, by uid: a violation if still so next time.
    unmounted: BTreeMap<String, String>,
    /// Orphans by uid: since when, and what.
    orphans: BTreeMap<String, (Instant, String)>,
    completed_apps: BTreeSet<String>,
    succeeded_rest: BTreeSet<String>,
    apps_seen: BTreeSet<String>,
}

/// Every pod in every namespace.
pub async fn all_pods(sandbox: &Sandbox) -> Result<Vec<Pod>, kube::Error> {
    Ok(Api::<Pod>::all(sandbox.client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// ConfigMaps and Services in every namespace.
pub async fn configmaps_and_services(
    sandbox: &Sandbox,
) -> Result<(Vec<ConfigMap>, Vec<Service>), kube::Error> {
    let lp = ListParams::default();
    let configmaps = Api::<ConfigMap>::all(sandbox.client.clone())
        .list(&lp)
        .await?
        .items;
    let services = Api::<Service>::all(sandbox.client.clone())
        .list(&lp)
        .await?
        .items;
    Ok((configmaps, services))
}

pub fn is_driver(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(submission::meta::labels::SPARK_ROLE))
        .is_some_and(|r| r == submission::meta::labels::DRIVER_ROLE)
}

/// Polls until `finished`; prints a progress line every [`PROGRESS_EVERY`] through `progress`
/// and, while `stopped` is false (the fault window), checks that completions went on.
pub async fn run(
    sandbox: &Sandbox,
    tally: &Tally,
    ledger: &Ledger,
    progress: &Progress<'_>,
    stopped: watch::Receiver<bool>,
    mut finished: watch::Receiver<bool>,
) {
    let mut seen = Seen::default();
    let mut next_mark = Instant::now() + PROGRESS_EVERY;
    let mut completions_at_mark = 0;
    for poll in 0u64.. {
        // A failed list (the API fails on purpose) checks nothing.
        let objects = if poll.is_multiple_of(OBJECTS_EVERY) {
            configmaps_and_services(sandbox).await.ok()
        } else {
            None
        };
        if let Ok(apps) = apps_api(sandbox).list(&ListParams::default()).await
            && let Ok(pods) = all_pods(sandbox).await
        {
            let apps = apps.items;
            let drivers: Vec<Pod> = pods.iter().filter(|p| is_driver(p)).cloned().collect();
            check_drivers(&apps, &drivers, tally, ledger);
            count_completions(&apps, &drivers, tally, &mut seen);
            if let Some((configmaps, services)) = objects {
                let objects = Objects {
                    pods,
                    configmaps,
                    services,
                    apps,
                };
                check_objects(&objects, &drivers, tally, &mut seen);
            }
        }
        if Instant::now() >= next_mark {
            next_mark += PROGRESS_EVERY;
            let completions = tally.operation_count(APPS_COMPLETED)
                + tally.operation_count(REST_DRIVERS_SUCCEEDED);
            if !*stopped.borrow() {
                tally.check(
                    invariants::WORKLOAD_PROGRESS,
                    (completions == completions_at_mark).then(|| {
                        format!(
                            "nothing completed in the {PROGRESS_EVERY:?} before {:.0}s",
                            progress.elapsed().as_secs_f64()
                        )
                    }),
                );
            }
            completions_at_mark = completions;
            progress.line(&line(tally, &seen));
        }
        if tokio::time::timeout(POLL, finished.wait_for(|s| *s))
            .await
            .is_ok()
        {
            return;
        }
    }
}

/// The checks on applications and drivers listed together.
fn check_drivers(
    apps: &[operator::crd::SparkApplication],
    drivers: &[Pod],
    tally: &Tally,
    ledger: &Ledger,
) {
    tally.check_all(
        invariants::ONE_LIVE_DRIVER,
        invariants::two_live_drivers(drivers),
    );
    tally.check_all(
        invariants::NO_FAILED_APP_WITH_LIVE_DRIVER,
        invariants::failed_with_live_driver(apps, drivers, ApplicationStateType::Failed),
    );
    // SUBMISSION_FAILED beside a live driver: an answer lost after the driver was made, which
    // the operator's retry adopts; not FAILED, but what a user sees meanwhile, so counted.
    let waiting =
        invariants::failed_with_live_driver(apps, drivers, ApplicationStateType::SubmissionFailed);
    tally.operations(SUBMISSION_FAILED_WITH_LIVE_DRIVER, waiting.len() as u64);
    for detail in waiting {
        tracing::warn!(%detail, "SUBMISSION_FAILED beside a live driver");
    }
    let killed = ledger.kills();
    if !killed.is_empty() {
        tally.check_all(
            invariants::KILLED_STAYS_KILLED,
            invariants::killed_but_replaced(drivers, &killed),
        );
    }
}

fn count_completions(
    apps: &[operator::crd::SparkApplication],
    drivers: &[Pod],
    tally: &Tally,
    seen: &mut Seen,
) {
    for app in apps {
        let name = app.metadata.name.clone().unwrap_or_default();
        seen.apps_seen.insert(name.clone());
        let completed = app
            .status
            .as_ref()
            .is_some_and(|s| s.app_state.state == ApplicationStateType::Completed);
        if completed && seen.completed_apps.insert(name) {
            tally.operation(APPS_COMPLETED);
        }
    }
    for pod in drivers {
        let rest = !pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(operator::labels::APP_NAME));
        let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        if rest
            && succeeded
            && seen
                .succeeded_rest
                .insert(pod.metadata.uid.clone().unwrap_or_default())
        {
            tally.operation(REST_DRIVERS_SUCCEEDED);
        }
    }
}

/// Drivers without their ConfigMaps (confirmed on the next listing) and orphans that stay.
fn check_objects(objects: &Objects, drivers: &[Pod], tally: &Tally, seen: &mut Seen) {
    let unmounted: BTreeMap<String, String> =
        invariants::drivers_without_config_maps(drivers, &objects.configmaps)
            .into_iter()
            .collect();
    // The ConfigMaps were listed after the previous poll's pods: a driver seen then must have
    // had its ConfigMaps by now, unless something deleted them under it.
    let confirmed: Vec<String> = unmounted
        .iter()
        .filter(|(uid, _)| seen.unmounted.contains_key(*uid))
        .map(|(_, detail)| detail.clone())
        .collect();
    tally.check_all(invariants::DRIVER_OBJECTS_PRESENT, confirmed);
    seen.unmounted = unmounted;

    let now = Instant::now();
    let mut orphans = BTreeMap::new();
    let mut overdue = Vec::new();
    for orphan in invariants::orphans(objects) {
        if orphan.beside_its_driver {
            continue;
        }
        let since = seen
            .orphans
            .get(&orphan.uid)
            .map_or(now, |(since, _)| *since);
        if now.duration_since(since) > ORPHAN_PATIENCE {
            overdue.push(format!(
                "{} for {}s",
                orphan.detail,
                now.duration_since(since).as_secs()
            ));
        }
        orphans.insert(orphan.uid, (since, orphan.detail));
    }
    tally.check_all(invariants::NO_ORPHANS, overdue);
    seen.orphans = orphans;
}

/// A progress line: faults, applications, REST traffic, logs, violations, memory.
fn line(tally: &Tally, seen: &Seen) -> String {
    let op = |name: &str| tally.operation_count(name);
    let memory = Memory::now().unwrap_or_default();
    format!(
        "faults: {}; apps: {} seen, {} completed; rest: {} created, {} duplicates, {} succeeded, {} killed; logs: {} read to the end, {} cut; violations: {}; memory: {} (peak {})",
        faults::summary(&tally.faults()),
        seen.apps_seen.len(),
        op(APPS_COMPLETED),
        op("submit_created"),
        op("submit_duplicate"),
        op(REST_DRIVERS_SUCCEEDED),
        op("kill_api_killed"),
        op("log_to_end_ended"),
        op("log_cut_hung_up"),
        tally.violations().len(),
        memory::mib(memory.rss_kib),
        memory::mib(memory.peak_kib),
    )
}
