//! `sandbox demo --spark`: the fenced restart with real Spark. The same story as the default demo
//! ([`crate::demo`]), but the driver and its executor are real Spark (kubesim's Spark image, run
//! from the local pyspark and Java 17) running `tests/programs/recovery_job.py`, which commits a
//! marker after each stage through the recovery agent (`docs/examples/spark_recovery.py`). The
//! driver is killed in the middle of a stage; the rerun restores the last marker, skips the
//! committed stages and ends with a clean run's results. Needs root (pods get their own network),
//! Java 17 and pyspark; the default demo needs none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, LogParams, PostParams};
use operator::crd::SparkApplication;
use serde_json::{Value, json};

use crate::demo::{DemoArgs, DemoError};
use crate::{NAMESPACE, SPARK_WORK_DIR, Sandbox, SandboxConfig};

/// The application's name.
const APP: &str = "spark-staged-job";

/// The driver's container, as Spark names it.
const DRIVER_CONTAINER: &str = "spark-kubernetes-driver";

/// Seconds each of a stage's four tasks takes (one executor core runs them one after another).
const TASK_SECONDS: &str = "1";

/// Stage k's result in a clean run: the sum of i² for i below k·200000 (recovery_job.py).
pub fn clean_result(stage: u64) -> u128 {
    let n = u128::from(stage) * 200_000;
    (n * n.saturating_sub(1) * (2 * n).saturating_sub(1)) / 6
}

/// Prints lines stamped with the time since the demo started.
struct Narrator<W> {
    out: W,
    started: Instant,
}

impl<W: Write> Narrator<W> {
    fn say(&mut self, who: &str, what: &str) -> Result<(), DemoError> {
        let t = self.started.elapsed().as_secs_f64();
        writeln!(self.out, "[{t:6.2}s] {who:<9} {what}")
            .and_then(|()| self.out.flush())
            .map_err(DemoError::Output)
    }
}

/// What the drivers printed, from their `recovery-*` lines.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SparkRun {
    /// `(stage, epoch)` of every stage a driver started.
    pub started: Vec<(u64, u64)>,
    /// `(stage, epoch)` of every stage a driver committed.
    pub committed: Vec<(u64, u64)>,
    /// `(restored stage, epoch)` of every driver start (stage 0: nothing to restore).
    pub restored: Vec<(u64, u64)>,
    /// The final results line's values, once a driver printed it.
    pub results: Option<Vec<String>>,
}

impl SparkRun {
    /// Adds one driver log line.
    fn add(&mut self, line: &str) {
        let mut words = line.split_whitespace();
        let event = words.next().unwrap_or("");
        let fields: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
        let num = |k: &str| fields.get(k).and_then(|v| v.parse::<u64>().ok());
        match (event, num("stage"), num("epoch")) {
            ("recovery-started", Some(s), Some(e)) => self.started.push((s, e)),
            ("recovery-committed", Some(s), Some(e)) => self.committed.push((s, e)),
            ("recovery-restored", Some(s), Some(e)) => self.restored.push((s, e)),
            ("recovery-result", _, _) => {
                self.results = fields
                    .get("results")
                    .map(|r| r.split(',').map(str::to_owned).collect());
            }
            _ => {}
        }
    }

    /// The first stage the latest epoch started.
    pub fn resumed_from_stage(&self) -> Option<u64> {
        let last = self.started.iter().map(|(_, e)| *e).max()?;
        self.started
            .iter()
            .find(|(_, e)| *e == last)
            .map(|(s, _)| *s)
    }

    /// Stages started under more than one epoch.
    pub fn stages_redone(&self) -> usize {
        let mut epochs: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for (stage, epoch) in &self.started {
            epochs.entry(*stage).or_default().insert(*epoch);
        }
        epochs.values().filter(|e| e.len() > 1).count()
    }
}

/// Runs the real-Spark demo, narrating to `out`; returns the summary (also printed last).
pub async fn run<W: Write>(args: &DemoArgs, out: W) -> Result<Value, DemoError> {
    if args.kill_after_stage >= args.stages {
        return Err(DemoError::KillPoint {
            kill_after: args.kill_after_stage,
            stages: args.stages,
        });
    }
    let mut n = Narrator {
        out,
        started: Instant::now(),
    };
    let bin: PathBuf = std::env::current_exe().map_err(DemoError::OwnPath)?;
    n.say(
        "demo",
        "starting kubesim (pods on their own network, the Spark image run from the local pyspark), \
         the submitter (mTLS on loopback) and the operator (fenced restarts, Kubernetes state store)",
    )?;
    let sandbox = Sandbox::start(SandboxConfig::real_spark(bin))
        .await
        .map_err(DemoError::Sandbox)?;
    let _operator = sandbox
        .start_operator()
        .await
        .map_err(DemoError::Operator)?;
    create_app(&sandbox, args).await.map_err(DemoError::Kube)?;
    n.say(
        "demo",
        &format!(
            "created SparkApplication {NAMESPACE}/{APP}: recovery_job.py, {} stages of four {TASK_SECONDS} s tasks, \
             one 512m driver and one 512m executor, restartPolicy OnFailure, recovery enabled",
            args.stages
        ),
    )?;

    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let events: Api<Event> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let mut seen_events = BTreeSet::new();
    let mut lines_shown: BTreeMap<String, usize> = BTreeMap::new();
    let mut logs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut last_status = None;
    let mut killed: Option<(Instant, u64)> = None;
    let mut recovery_millis: Option<u64> = None;
    let deadline = Duration::from_secs(args.timeout_seconds.max(300));
    loop {
        let current = apps.get(APP).await.map_err(DemoError::Kube)?;
        narrate_events(&mut n, &mut seen_events, &events).await?;
        let status = current.status.clone().unwrap_or_default();
        let pod = status.driver_info.pod_name.clone();
        let epoch = status.recovery_status.as_ref().map(|r| r.epoch);
        if !pod.is_empty() {
            let log = driver_lines(&pods, &pod).await;
            if !log.is_empty() {
                logs.insert(pod.clone(), log);
            }
        }
        for (driver, lines) in &logs {
            let shown = lines_shown.entry(driver.clone()).or_default();
            for line in lines.iter().skip(*shown) {
                n.say("driver", &format!("{driver}: {line}"))?;
            }
            *shown = lines.len();
        }
        let mut run = SparkRun::default();
        for line in logs.values().flatten() {
            run.add(line);
        }
        let now = (format!("{:?}", status.app_state.state), pod.clone(), epoch);
        if last_status.as_ref() != Some(&now) {
            n.say(
                "status",
                &format!(
                    "{} driver={} epoch={}",
                    now.0,
                    if pod.is_empty() { "-" } else { &pod },
                    epoch.map_or("-".to_owned(), |e| e.to_string())
                ),
            )?;
            last_status = Some(now);
        }
        if let Some((at, killed_epoch)) = killed
            && recovery_millis.is_none()
            && run.restored.iter().any(|(_, e)| *e > killed_epoch)
        {
            recovery_millis = Some(u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        if killed.is_none()
            && let Some(epoch) = epoch
            && run.committed.contains(&(args.kill_after_stage, epoch))
            && run.started.contains(&(args.kill_after_stage + 1, epoch))
        {
            n.say(
                "demo",
                &format!(
                    "killing driver pod {pod} (SIGKILL, exit 137) in the middle of stage {}",
                    args.kill_after_stage + 1
                ),
            )?;
            match sandbox.cluster.kubelet.kill(NAMESPACE, &pod, None, 137) {
                Ok(()) => killed = Some((Instant::now(), epoch)),
                Err(e) => n.say("demo", &format!("could not kill {pod}: {e}"))?,
            }
        }
        if status.app_state.state.is_terminal() {
            let clean: Vec<String> = (1..=args.stages)
                .map(|s| clean_result(s).to_string())
                .collect();
            let recovery = status.recovery_status.clone().unwrap_or_default();
            let summary = json!({
                "app": APP,
                "spark": true,
                "state": status.app_state.state,
                "epoch": recovery.epoch,
                "restoredFromEpoch": recovery.restored_from_epoch,
                "stages": args.stages,
                "resumedFromStage": run.resumed_from_stage(),
                "stagesRedone": run.stages_redone(),
                "resultsEqualACleanRun": run.results.as_ref() == Some(&clean),
                "recoveryMillis": recovery_millis,
            });
            writeln!(n.out, "{summary}")
                .and_then(|()| n.out.flush())
                .map_err(DemoError::Output)?;
            return Ok(summary);
        }
        if n.started.elapsed() > deadline {
            return Err(DemoError::Timeout(deadline));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn create_app(sandbox: &Sandbox, args: &DemoArgs) -> Result<SparkApplication, kube::Error> {
    let manifest = json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "apache/spark:4.3.0",
            "sparkVersion": "4.3.0",
            "mainApplicationFile": format!("local://{SPARK_WORK_DIR}/recovery_job.py"),
            "arguments": [args.stages.to_string(), TASK_SECONDS],
            "sparkConf": {
                "spark.kubernetes.executor.useDriverPodIP": "false",
            },
            "driver": {"cores": 1, "memory": "512m", "serviceAccount": crate::driver_account::NAME},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            "restartPolicy": {
                "type": "OnFailure",
                "onFailureRetries": 2,
                "onFailureRetryInterval": args.retry_interval_seconds,
                "onSubmissionFailureRetries": 2,
                "onSubmissionFailureRetryInterval": args.retry_interval_seconds,
                "recovery": {"enabled": true},
            },
        },
    });
    let app: SparkApplication =
        serde_json::from_value(manifest).map_err(kube::Error::SerdeError)?;
    Api::<SparkApplication>::namespaced(sandbox.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &app)
        .await
}

/// The `recovery-*` lines of a driver's log (none while it has not started or once it is gone).
async fn driver_lines(pods: &Api<Pod>, pod: &str) -> Vec<String> {
    let params = LogParams {
        container: Some(DRIVER_CONTAINER.into()),
        ..LogParams::default()
    };
    pods.logs(pod, &params)
        .await
        .map(|log| {
            log.lines()
                .filter(|l| l.starts_with("recovery-"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

async fn narrate_events<W: Write>(
    n: &mut Narrator<W>,
    seen: &mut BTreeSet<String>,
    events: &Api<Event>,
) -> Result<(), DemoError> {
    let mut list = events
        .list(&ListParams::default())
        .await
        .map_err(DemoError::Kube)?
        .items;
    list.sort_by_key(|e| {
        e.series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or(e.event_time.as_ref().map(|t| t.0))
    });
    for e in list {
        if e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(APP) {
            continue;
        }
        let Some(version) = e.metadata.resource_version.clone() else {
            continue;
        };
        if !seen.insert(version) {
            continue;
        }
        let line = format!(
            "{} {}: {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
        n.say("operator", &line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_results_are_sums_of_squares() {
        let direct = |stage: u64| {
            (0..stage * 200_000)
                .map(|i| u128::from(i) * u128::from(i))
                .sum()
        };
        for stage in 1..=3 {
            assert_eq!(clean_result(stage), direct(stage), "stage {stage}");
        }
    }

    #[test]
    fn driver_lines_tell_where_the_rerun_resumed() {
        let mut run = SparkRun::default();
        for line in [
            "recovery-restored epoch=1 stage=0",
            "recovery-started stage=1 epoch=1",
            "recovery-committed stage=1 epoch=1 result=5",
            "recovery-started stage=2 epoch=1",
            "recovery-restored epoch=2 stage=1",
            "recovery-started stage=2 epoch=2",
            "recovery-committed stage=2 epoch=2 result=7",
            "recovery-result epoch=2 results=5,7",
            "something else",
        ] {
            run.add(line);
        }
        assert_eq!(run.resumed_from_stage(), Some(2));
        assert_eq!(run.stages_redone(), 1);
        assert_eq!(run.restored, vec![(0, 1), (1, 2)]);
        assert_eq!(run.results, Some(vec!["5".to_owned(), "7".to_owned()]));
    }
}
