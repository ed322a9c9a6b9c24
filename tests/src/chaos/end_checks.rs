//! The checks at the end of a soak, once the faults are over and the applications had their
//! drain: every application judged, one driver in every answer for an id, every driver with its
//! objects, completions made, no log stream left open, and, once every application is deleted
//! and the sweep window has passed, no orphan.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};

use super::faults::Stack;
use super::invariants::{self, Objects, Tally};
use super::ledger::Ledger;
use super::monitor::{self, APPS_COMPLETED, REST_DRIVERS_SUCCEEDED};
use super::workload::applications::{self, CreatedApp, apps_api};
use super::{Progress, stack};
use crate::Sandbox;

/// Judges every application not judged yet (those still there: the workload deleted the
/// others once judged).
pub async fn applications(
    sandbox: &Sandbox,
    created: &[CreatedApp],
    tally: &Tally,
    ledger: &Ledger,
) {
    for app in created.iter().filter(|a| !ledger.judged(&a.name)) {
        match apps_api(sandbox).get_opt(&app.name).await {
            Ok(current) => {
                applications::judge(sandbox, app, current.as_ref(), tally, ledger).await;
            }
            Err(error) => tally.check(
                invariants::TERMINAL_AND_CONSISTENT,
                Some(format!("{}: cannot be read at the end: {error}", app.name)),
            ),
        }
    }
}

/// Every answer for one submission id (created, duplicate, killed) named one driver.
pub fn answers(tally: &Tally, ledger: &Ledger) {
    for (id, uids) in ledger.answers() {
        let mut distinct = uids.clone();
        distinct.sort();
        distinct.dedup();
        tally.check(
            invariants::ONE_DRIVER_PER_SUBMISSION,
            (distinct.len() > 1).then(|| format!("submission {id} answered drivers {distinct:?}")),
        );
    }
}

/// Every driver still there has the ConfigMaps it mounts and its Service.
pub async fn driver_objects(sandbox: &Sandbox, tally: &Tally) {
    let listed = async {
        let pods = monitor::all_pods(sandbox).await?;
        let (configmaps, services) = monitor::configmaps_and_services(sandbox).await?;
        Ok::<_, kube::Error>((configmaps, services, pods))
    };
    match listed.await {
        Ok((configmaps, services, pods)) => {
            let drivers: Vec<Pod> = pods.into_iter().filter(monitor::is_driver).collect();
            let mut missing: Vec<String> =
                invariants::drivers_without_config_maps(&drivers, &configmaps)
                    .into_iter()
                    .map(|(_, detail)| detail)
                    .collect();
            missing.extend(invariants::drivers_without_service(&drivers, &services));
            tally.check_all(invariants::DRIVER_OBJECTS_PRESENT, missing);
        }
        Err(error) => tally.check(
            invariants::DRIVER_OBJECTS_PRESENT,
            Some(format!(
                "cannot list the drivers' objects at the end: {error}"
            )),
        ),
    }
}

/// Applications completed and REST drivers succeeded, both: a soak where either path never
/// worked does not pass.
pub fn progress(tally: &Tally) {
    for (what, name) in [
        ("application completed", APPS_COMPLETED),
        ("REST driver succeeded", REST_DRIVERS_SUCCEEDED),
    ] {
        tally.check(
            invariants::WORKLOAD_PROGRESS,
            (tally.operation_count(name) == 0).then(|| format!("no {what} in the whole soak")),
        );
    }
}

/// How long the submitters may take to notice readers gone: the next chunk of a followed log
/// (a second away) finds the connection closed.
const STREAMS_RELEASE_WAIT: Duration = Duration::from_secs(30);

/// Every reader is done (hung up or read to the end): no submitter instance still holds a log
/// stream. Waits (bounded) for the count to fall, as a slot is freed when the service notices.
pub async fn log_streams(stack: &Stack<'_>, tally: &Tally) {
    let deadline = Instant::now() + STREAMS_RELEASE_WAIT;
    loop {
        let open = stack.log_streams_open();
        if open == 0 {
            tally.check(invariants::LOG_STREAMS_RELEASED, None);
            return;
        }
        if Instant::now() > deadline {
            tally.check(
                invariants::LOG_STREAMS_RELEASED,
                Some(format!(
                    "{open} log streams still open {STREAMS_RELEASE_WAIT:?} after every reader was done"
                )),
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How long after every application is deleted their objects may still be there: the orphan
/// sweep's grace and two of its passes, and the garbage collector.
const SWEEP_WINDOW: Duration =
    Duration::from_secs(stack::SWEEP_GRACE.as_secs() + 3 * stack::SWEEP_INTERVAL.as_secs() + 5);

/// What the orphan check reads: the monitor's listing, and the applications.
async fn objects(sandbox: &Sandbox) -> Result<Objects, kube::Error> {
    let pods = monitor::all_pods(sandbox).await?;
    let (configmaps, services) = monitor::configmaps_and_services(sandbox).await?;
    Ok(Objects {
        pods,
        configmaps,
        services,
        apps: apps_api(sandbox).list(&ListParams::default()).await?.items,
    })
}

/// Deletes every application, then waits the sweep window for their objects to go.
pub async fn orphans(sandbox: &Sandbox, tally: &Tally, progress: &Progress<'_>) {
    let apps = apps_api(sandbox);
    let _ = apps
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let start = Instant::now();
    let deadline = start + SWEEP_WINDOW;
    loop {
        match objects(sandbox).await.map(|o| invariants::orphans(&o)) {
            // Clean only counts once a submission cut short has had its grace: what it left
            // must be gone by then, not merely not yet made.
            Ok(found) if found.is_empty() && start.elapsed() >= stack::SWEEP_GRACE => {
                progress.line(&format!("no orphans after {:?}", start.elapsed()));
                tally.check(invariants::NO_ORPHANS, None);
                return;
            }
            Ok(found) if Instant::now() > deadline => {
                for orphan in found {
                    tally.check(invariants::NO_ORPHANS, Some(orphan.detail));
                }
                return;
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}
