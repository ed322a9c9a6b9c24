//! SparkApplications of every restart policy with recovery on and off: created while fewer
//! than the limit are unfinished, `Always` ones deleted after a while, finished ones judged
//! (terminal, consistent with their driver, no stage published twice) and deleted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use serde_json::json;
use tokio::sync::watch;

use super::RETIRE_AFTER;
use crate::chaos::ChaosConfig;
use crate::chaos::invariants::{self, Tally};
use crate::chaos::ledger::Ledger;
use crate::{NAMESPACE, Sandbox, StagedApp, StagedRun};

/// The restart policies, each drawn alike.
pub const POLICIES: [&str; 4] = ["Never", "OnFailure", "OnInfrastructureFailure", "Always"];

/// How long an `Always` application runs before the workload deletes it.
const ALWAYS_LIFETIME: Duration = Duration::from_secs(20);

/// An application the workload created.
#[derive(Debug, Clone)]
pub struct CreatedApp {
    pub name: String,
    pub policy: &'static str,
    pub recovery: bool,
    pub stages: u64,
}

/// Draws the next application from `rng`: recovery on runs the staged driver (with its agent);
/// recovery off runs kubesim's scripted Spark image for a few seconds.
pub fn draw_app(rng: &mut fastrand::Rng, index: usize) -> CreatedApp {
    CreatedApp {
        name: format!("chaos-app-{index}"),
        policy: POLICIES[rng.usize(0..POLICIES.len())],
        recovery: rng.bool(),
        stages: rng.u64(3..7),
    }
}

pub fn apps_api(sandbox: &Sandbox) -> Api<SparkApplication> {
    Api::namespaced(sandbox.client.clone(), NAMESPACE)
}

/// Creates `app` in the sandbox.
pub async fn create_app(
    sandbox: &Sandbox,
    app: &CreatedApp,
    stage_millis: u64,
) -> Result<(), kube::Error> {
    let staged = StagedApp {
        stages: app.stages,
        stage_millis,
        retries: 3,
        recovery: app.recovery,
        ..StagedApp::new(&app.name)
    };
    let manifest = sandbox
        .staged_app(&staged)
        .map_err(kube::Error::SerdeError)?;
    let mut value = serde_json::to_value(manifest).map_err(kube::Error::SerdeError)?;
    value["spec"]["restartPolicy"]["type"] = json!(app.policy);
    if !app.recovery {
        // The staged driver needs its agent; without recovery the scripted image runs instead.
        value["spec"]["image"] = json!("spark:4.0.0");
        value["spec"]["driver"]["annotations"] = json!({"kubesim.io/run-seconds": (app.stages * stage_millis / 1000).max(1).to_string()});
    }
    let manifest: SparkApplication =
        serde_json::from_value(value).map_err(kube::Error::SerdeError)?;
    apps_api(sandbox)
        .create(&PostParams::default(), &manifest)
        .await
        .map(|_| ())
}

fn terminal(app: &SparkApplication) -> Option<ApplicationStateType> {
    let state = app.status.as_ref()?.app_state.state;
    state.is_terminal().then_some(state)
}

/// Creates applications until `stopped`, and retires the finished ones; returns every
/// application created.
pub async fn run(
    sandbox: &Sandbox,
    config: &ChaosConfig,
    tally: &Tally,
    ledger: &Ledger,
    mut stopped: watch::Receiver<bool>,
) -> Vec<CreatedApp> {
    let mut rng = fastrand::Rng::with_seed(config.seed ^ 0x0a99_5eed);
    let mut created: Vec<CreatedApp> = Vec::new();
    let mut always: Vec<(String, Instant)> = Vec::new();
    let mut finished: BTreeMap<String, (Instant, ApplicationStateType)> = BTreeMap::new();
    for index in 0.. {
        let pause = Duration::from_millis(rng.u64(1000..3000));
        if tokio::time::timeout(pause, stopped.wait_for(|s| *s))
            .await
            .is_ok()
        {
            break;
        }
        // A user stops an `Always` application, which never ends by itself, after a while:
        // that frees its slot and deletes under faults too.
        let (old, young): (Vec<_>, Vec<_>) = always
            .drain(..)
            .partition(|(_, at): &(String, Instant)| at.elapsed() > ALWAYS_LIFETIME);
        always = young;
        for (name, _) in old {
            match apps_api(sandbox)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => tally.operation("delete_always_app"),
                // Failed on purpose, maybe: the next round tries again.
                Err(_) => always.push((name, Instant::now())),
            }
        }
        let Ok(list) = apps_api(sandbox).list(&ListParams::default()).await else {
            // The API fails on purpose: a user tries again later.
            continue;
        };
        retire(sandbox, &created, &list.items, &mut finished, tally, ledger).await;
        let live = list.items.iter().filter(|a| terminal(a).is_none()).count();
        let app = draw_app(&mut rng, index);
        if live >= config.max_live_apps {
            continue;
        }
        // The API may be failing on purpose: a client retries a create.
        for _ in 0..10 {
            let outcome = create_app(sandbox, &app, config.stage_millis).await;
            // A 409: created by an attempt whose answer was lost.
            let exists = matches!(&outcome, Err(kube::Error::Api(e)) if e.code == 409);
            if outcome.is_ok() || exists {
                if app.policy == "Always" {
                    always.push((app.name.clone(), Instant::now()));
                }
                created.push(app.clone());
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    created
}

/// Judges and deletes the applications finished for [`RETIRE_AFTER`], as a user cleans up
/// (or `timeToLiveSeconds` would): the cluster keeps its size however long the soak runs. One
/// that left its terminal state meanwhile breaks `terminal_and_consistent`.
async fn retire(
    sandbox: &Sandbox,
    created: &[CreatedApp],
    apps: &[SparkApplication],
    finished: &mut BTreeMap<String, (Instant, ApplicationStateType)>,
    tally: &Tally,
    ledger: &Ledger,
) {
    for current in apps {
        let name = current.metadata.name.clone().unwrap_or_default();
        let Some(app) = created.iter().find(|a| a.name == name) else {
            continue;
        };
        let state = current
            .status
            .as_ref()
            .map(|s| s.app_state.state)
            .unwrap_or_default();
        let Some((since, first)) = finished.get(&name).copied() else {
            if let Some(state) = terminal(current) {
                finished.insert(name, (Instant::now(), state));
            }
            continue;
        };
        if since.elapsed() < RETIRE_AFTER {
            continue;
        }
        if !ledger.judged(&name) {
            if state != first {
                tally.check(
                    invariants::TERMINAL_AND_CONSISTENT,
                    Some(format!("{name} was {first:?} and is now {state:?}")),
                );
            }
            judge(sandbox, app, Some(current), tally, ledger).await;
        }
        if apps_api(sandbox)
            .delete(&name, &DeleteParams::default())
            .await
            .is_ok()
        {
            finished.remove(&name);
            tally.operation("delete_finished_app");
        }
    }
}

/// Judges one application as it is now (`None`: it is gone): terminal (Always excepted) and
/// consistent with its driver's exit, its stages published once each when recovery is on.
/// Records its final state in the ledger.
pub async fn judge(
    sandbox: &Sandbox,
    app: &CreatedApp,
    current: Option<&SparkApplication>,
    tally: &Tally,
    ledger: &Ledger,
) {
    let always = app.policy == "Always";
    let Some(current) = current else {
        if always {
            ledger.ended(&app.name, "Always: deleted".into());
        } else {
            tally.check(
                invariants::TERMINAL_AND_CONSISTENT,
                Some(format!("{}: gone before it was judged", app.name)),
            );
        }
        return;
    };
    let status = current.status.clone().unwrap_or_default();
    let state = status.app_state.state;
    let recovery = if app.recovery { "recovery" } else { "plain" };
    ledger.ended(&app.name, format!("{} {recovery}: {state:?}", app.policy));
    let mut broken = None;
    if !always && !state.is_terminal() {
        broken = Some(format!(
            "{} ({} recovery={}) still {state:?} after the drain: {:?}",
            app.name, app.policy, app.recovery, status.app_state.error_message
        ));
    }
    let driver = status.driver_info.pod_name.clone();
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    if broken.is_none()
        && matches!(
            state,
            ApplicationStateType::Completed | ApplicationStateType::Failed
        )
        && !driver.is_empty()
        && let Ok(Some(pod)) = pods.get_opt(&driver).await
    {
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        let consistent = match state {
            ApplicationStateType::Completed => phase != "Failed",
            _ => phase != "Succeeded",
        };
        if !consistent {
            broken = Some(format!(
                "{} ended {state:?} but its driver {driver} is {phase}",
                app.name
            ));
        }
    }
    tally.check(invariants::TERMINAL_AND_CONSISTENT, broken);
    if let Some(recovery) = &status.recovery_status {
        // Evidence that the faults reached the fencing: restarts under a new epoch.
        tally.operations("fenced_restarts", recovery.epoch);
    }
    if !app.recovery || always {
        return;
    }
    if ledger.lost_store(&app.name) {
        // Its markers were lost with the store: a republish is the documented cost.
        tally.operation("stale_check_skipped_store_restarted");
        return;
    }
    let run = StagedRun::read(sandbox, &app.name);
    tally.operations("fenced_commits_refused", run.fenced.len() as u64);
    tally.check(
        invariants::NO_STALE_EPOCH_WRITE,
        invariants::stale_epoch_writes(
            &app.name,
            &run.committed,
            app.stages,
            state == ApplicationStateType::Completed,
        ),
    );
}
