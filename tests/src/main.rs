//! The `sandbox` binary: `demo` runs a fenced restart end to end on an embedded kubesim (the
//! README's main command); `agent` is the operator's recovery agent (the same library code as
//! `operator agent`) and `staged-driver` the simulated driver, both run by kubesim's kubelet as
//! the sandbox's images.

use anyhow::Context;
use clap::{Parser, Subcommand};

/// The whole stack on this machine: demo, and the programs its simulated pods run.
#[derive(Debug, Parser)]
#[command(name = "sandbox", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a recovery-enabled application on an embedded kubesim, kill its driver mid-run and
    /// show the fenced restart resume from the next stage; the last line is a JSON summary.
    Demo(sandbox::demo::DemoArgs),
    /// Run the chaos soak: the stack under a seeded fault schedule and a random workload, with
    /// the invariants checked (docs/chaos.md); exits 1 when one was violated.
    Chaos(ChaosArgs),
    /// The recovery agent sidecar, as `operator agent` runs it (the agent image of the sandbox);
    /// `agent probe` is its startup probe.
    Agent(operator::agent::AgentCommand),
    /// The simulated staged driver; Spark's driver arguments after `--` are ignored.
    #[command(hide = true)]
    StagedDriver {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        spark_args: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct ChaosArgs {
    /// The seed of the fault schedule and the workload (random when absent; printed either way).
    #[arg(long, env = "SANDBOX_CHAOS_SEED")]
    seed: Option<u64>,
    /// How long faults are injected, e.g. `180s`, `3m`, `1h`.
    #[arg(long, env = "SANDBOX_CHAOS_DURATION", default_value = "180s", value_parser = parse_duration)]
    duration: std::time::Duration,
    /// How long the applications get to end after the fault window.
    #[arg(long, env = "SANDBOX_CHAOS_DRAIN", default_value = "90s", value_parser = parse_duration)]
    drain: std::time::Duration,
    /// Mean pause between two faults.
    #[arg(long, env = "SANDBOX_CHAOS_MEAN_GAP", default_value = "3s", value_parser = parse_duration)]
    mean_gap: std::time::Duration,
    /// Submitter instances behind the balancer.
    #[arg(long, env = "SANDBOX_CHAOS_SUBMITTERS", default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    submitters: u16,
    /// Operator replicas behind leader election.
    #[arg(long, env = "SANDBOX_CHAOS_OPERATORS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    operators: u16,
    /// Use the Redis store (a local redis-server, restarted as one of the faults).
    #[arg(long, env = "SANDBOX_CHAOS_REDIS")]
    redis: bool,
    /// Also write the report as JSON here (the text goes to standard output either way).
    #[arg(long, env = "SANDBOX_CHAOS_REPORT")]
    report: Option<std::path::PathBuf>,
}

/// `500ms`, `90s`, `3m`, `1h` or plain seconds.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |at| text.split_at(at));
    let number: u64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text}"))?;
    let millis = match unit {
        "ms" => number,
        "s" => number * 1000,
        "m" => number * 60_000,
        "h" => number * 3_600_000,
        _ => return Err(format!("unknown unit in {text}: use ms, s, m or h")),
    };
    Ok(std::time::Duration::from_millis(millis))
}

/// A duration as [`parse_duration`] reads it back exactly.
fn show(duration: std::time::Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{millis}ms")
    }
}

fn chaos(args: ChaosArgs) -> anyhow::Result<std::process::ExitCode> {
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut config = sandbox::chaos::ChaosConfig::new(
        std::env::current_exe().context("cannot find this binary")?,
        seed,
        args.duration,
    );
    config.drain = args.drain;
    config.mean_gap = args.mean_gap;
    config.redis = args.redis;
    config.submitters = usize::from(args.submitters);
    config.operators = usize::from(args.operators);
    // Everything the schedule depends on, so the printed command replays it.
    println!(
        "chaos seed {seed} (replay: sandbox chaos --seed {seed} --duration {} --mean-gap {}{})",
        show(args.duration),
        show(args.mean_gap),
        sandbox::chaos::report::replay_flags(&config)
    );
    let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    let report = runtime
        .block_on(sandbox::chaos::run(config, &|line| println!("{line}")))
        .context("the chaos soak could not run")?;
    if let Some(path) = &args.report {
        let json =
            serde_json::to_string_pretty(&report.to_json()).context("cannot encode the report")?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", report.to_text());
    // The stack's runtimes are shut down without waiting, as their processes would be killed.
    runtime.shutdown_background();
    Ok(if report.violations().is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    match Cli::parse().command {
        Command::StagedDriver { .. } => return Ok(sandbox::staged_driver::main()),
        Command::Chaos(args) => {
            init_tracing("warn");
            return chaos(args);
        }
        Command::Demo(args) => {
            // Standard output carries the narration; logs go to standard error.
            init_tracing("warn");
            let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
            let summary = runtime
                .block_on(sandbox::demo::run(args, std::io::stdout()))
                .context("the demo failed")?;
            if summary["state"] != "COMPLETED" {
                anyhow::bail!("the demo's application ended {}", summary["state"]);
            }
        }
        Command::Agent(operator::agent::AgentCommand {
            action: Some(operator::agent::AgentAction::Probe(mut probe)),
            ..
        }) => {
            probe.port = sandbox::agent_ports::from_env(probe.port);
            return Ok(operator::agent::probe_main(&probe));
        }
        Command::Agent(operator::agent::AgentCommand { mut args, .. }) => {
            args.port = sandbox::agent_ports::from_env(args.port);
            init_tracing("info");
            // One thread is plenty for a sidecar that answers one driver.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the runtime")?;
            runtime
                .block_on(operator::agent::run(args))
                .context("recovery agent failed")?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Logs to standard error at `default` unless `RUST_LOG` says otherwise.
fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
