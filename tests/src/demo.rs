//! `sandbox demo`: the fenced restart, end to end, on this machine with nothing to install.
//!
//! It starts the [`Sandbox`](crate::Sandbox) (kubesim, the submitter over mTLS, the operator with
//! the Kubernetes state store), submits a recovery-enabled staged application, kills its driver
//! in the middle of a stage once some stages are committed, and narrates as it happens: the
//! operator's events (the fence, the resubmission), the drivers' own lines (restore point, stages,
//! commits) and status changes. The last line of standard output is one JSON object
//! ([`crate::summary`]) with `recoveryMillis` added: kill to the new driver's restore.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use serde_json::Value;

use crate::{
    NAMESPACE, Sandbox, SandboxConfig, StagedApp, StagedRun, StartOperatorError, StartSandboxError,
    summary,
};

/// The demo's knobs.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Stages the driver runs.
    #[arg(long, default_value_t = 6)]
    pub stages: u64,
    /// Milliseconds per stage.
    #[arg(long, default_value_t = 800)]
    pub stage_millis: u64,
    /// Kill the driver during the stage after this one is committed.
    #[arg(long, default_value_t = 3)]
    pub kill_after_stage: u64,
    /// Seconds between the driver's failure and the rerun (`onFailureRetryInterval`).
    #[arg(long, default_value_t = 1)]
    pub retry_interval_seconds: i64,
    /// Give up after this many seconds (at least 300 with --spark).
    #[arg(long, default_value_t = 120)]
    pub timeout_seconds: u64,
    /// Real Spark instead of the staged stand-in: a PySpark job in real driver and executor pods
    /// ([`crate::spark_demo`]); needs root, Java 17 and pyspark.
    #[arg(long)]
    pub spark: bool,
}

/// The application's name.
const APP: &str = "staged-job";

/// The demo could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot find this program's own path (the agent and the driver are this binary)")]
    OwnPath(#[source] std::io::Error),
    #[error("cannot start the sandbox")]
    Sandbox(#[source] StartSandboxError),
    #[error("cannot start the operator")]
    Operator(#[source] StartOperatorError),
    #[error("cannot talk to kubesim")]
    Kube(#[source] kube::Error),
    #[error("cannot write to standard output")]
    Output(#[source] std::io::Error),
    #[error("--kill-after-stage {kill_after} must be below --stages {stages}")]
    KillPoint { kill_after: u64, stages: u64 },
    #[error("the application did not finish within {0:?}")]
    Timeout(Duration),
}

impl DemoError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OwnPath(_) => "own_path",
            Self::Sandbox(_) => "sandbox",
            Self::Operator(_) => "operator",
            Self::Kube(_) => "kube",
            Self::Output(_) => "output",
            Self::KillPoint { .. } => "kill_point",
            Self::Timeout(_) => "timeout",
        }
    }
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

/// What the narration has shown already.
#[derive(Default)]
struct Seen {
    events: BTreeSet<String>,
    journal_lines: usize,
    status: Option<(String, String, Option<u64>)>,
}

/// Runs the demo, narrating to `out`; returns the summary (also printed last) once the
/// application reached a terminal state.
pub async fn run<W: Write>(args: DemoArgs, out: W) -> Result<Value, DemoError> {
    if args.spark {
        return crate::spark_demo::run(&args, out).await;
    }
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
    n.say("demo", "starting kubesim, the submitter (mTLS on loopback) and the operator (fenced restarts, Kubernetes state store)")?;
    let sandbox = Sandbox::start(SandboxConfig::new(bin))
        .await
        .map_err(DemoError::Sandbox)?;
    let _operator = sandbox
        .start_operator()
        .await
        .map_err(DemoError::Operator)?;
    let app = StagedApp {
        stages: args.stages,
        stage_millis: args.stage_millis,
        retry_interval_seconds: args.retry_interval_seconds,
        ..StagedApp::new(APP)
    };
    sandbox
        .create_staged_app(&app)
        .await
        .map_err(DemoError::Kube)?;
    n.say(
        "demo",
        &format!(
            "created SparkApplication {NAMESPACE}/{APP}: {} stages of {} ms, restartPolicy OnFailure (retry after {} s), recovery enabled",
            app.stages, app.stage_millis, app.retry_interval_seconds
        ),
    )?;

    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let events: Api<Event> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let mut seen = Seen::default();
    // When and under which epoch the driver was killed.
    let mut killed: Option<(Instant, u64)> = None;
    let mut recovery_millis: Option<u64> = None;
    let deadline = Duration::from_secs(args.timeout_seconds);
    loop {
        let current = apps.get(APP).await.map_err(DemoError::Kube)?;
        narrate_events(&mut n, &mut seen, &events).await?;
        let run = narrate_journal(&mut n, &mut seen, &sandbox)?;
        narrate_status(&mut n, &mut seen, &current)?;

        if let Some((at, killed_epoch)) = killed
            && recovery_millis.is_none()
            && run.restored.iter().any(|(_, epoch)| *epoch > killed_epoch)
        {
            recovery_millis = Some(u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        if killed.is_none()
            && let Some((pod, epoch)) = mid_stage_after(&run, args.kill_after_stage, &current)
        {
            // A mid-stage kill: the stage in flight is lost and must be redone; the committed
            // ones must not be.
            n.say(
                "demo",
                &format!(
                    "killing driver pod {pod} (SIGKILL, exit 137) in the middle of stage {}",
                    args.kill_after_stage + 1
                ),
            )?;
            match sandbox.cluster.kubelet.kill(NAMESPACE, &pod, None, 137) {
                Ok(()) => killed = Some((Instant::now(), epoch)),
                // It finished the stage in the meantime: try again on the next one.
                Err(e) => n.say("demo", &format!("could not kill {pod}: {e}"))?,
            }
        }
        let state = current.status.as_ref().map(|s| s.app_state.state);
        if state.is_some_and(ApplicationStateType::is_terminal) {
            let mut summary = summary(&current, &run, args.stages);
            summary["recoveryMillis"] = recovery_millis.into();
            let line = summary.to_string();
            writeln!(n.out, "{line}")
                .and_then(|()| n.out.flush())
                .map_err(DemoError::Output)?;
            return Ok(summary);
        }
        if n.started.elapsed() > deadline {
            return Err(DemoError::Timeout(deadline));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The current driver pod and its epoch, once that driver committed `after` and started the
/// next stage.
fn mid_stage_after(run: &StagedRun, after: u64, app: &SparkApplication) -> Option<(String, u64)> {
    let status = app.status.as_ref()?;
    let epoch = status.recovery_status.as_ref()?.epoch;
    let in_flight = run.started.contains(&(after + 1, epoch));
    let committed = run.committed.contains(&(after, epoch));
    (committed && in_flight && !status.driver_info.pod_name.is_empty())
        .then(|| (status.driver_info.pod_name.clone(), epoch))
}

async fn narrate_events<W: Write>(
    n: &mut Narrator<W>,
    seen: &mut Seen,
    events: &Api<Event>,
) -> Result<(), DemoError> {
    let mut list = events
        .list(&ListParams::default())
        .await
        .map_err(DemoError::Kube)?
        .items;
    // A repeated event keeps its creation time; its series says when it last happened.
    list.sort_by_key(|e| {
        e.series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or(e.event_time.as_ref().map(|t| t.0))
    });
    for e in list {
        let regarding = e.regarding.as_ref().and_then(|r| r.name.clone());
        if regarding.as_deref() != Some(APP) {
            continue;
        }
        // A repeated event is the same object with a higher series count: key on its version.
        let Some(version) = e.metadata.resource_version.clone() else {
            continue;
        };
        if !seen.events.insert(version) {
            continue;
        }
        let kind = e.type_.unwrap_or_default();
        let reason = e.reason.unwrap_or_default();
        let note = e.note.unwrap_or_default();
        n.say("operator", &format!("{kind} {reason}: {note}"))?;
    }
    Ok(())
}

fn narrate_journal<W: Write>(
    n: &mut Narrator<W>,
    seen: &mut Seen,
    sandbox: &Sandbox,
) -> Result<StagedRun, DemoError> {
    let read = |path: PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    let journal = read(sandbox.journal_path(APP));
    for line in journal.lines().skip(seen.journal_lines) {
        n.say("driver", line)?;
        seen.journal_lines += 1;
    }
    Ok(StagedRun::parse(&journal, &read(sandbox.output_path(APP))))
}

fn narrate_status<W: Write>(
    n: &mut Narrator<W>,
    seen: &mut Seen,
    app: &SparkApplication,
) -> Result<(), DemoError> {
    let Some(status) = &app.status else {
        return Ok(());
    };
    let state = format!("{:?}", status.app_state.state);
    let pod = status.driver_info.pod_name.clone();
    let epoch = status.recovery_status.as_ref().map(|r| r.epoch);
    let now = (state, pod, epoch);
    if seen.status.as_ref() == Some(&now) {
        return Ok(());
    }
    let restored = status
        .recovery_status
        .as_ref()
        .and_then(|r| r.restored_from_epoch)
        .map_or(String::new(), |e| format!(", restored from epoch {e}"));
    n.say(
        "status",
        &format!(
            "{} driver={} epoch={}{restored}",
            now.0,
            if now.1.is_empty() { "-" } else { &now.1 },
            now.2.map_or("-".to_owned(), |e| e.to_string()),
        ),
    )?;
    seen.status = Some(now);
    Ok(())
}
