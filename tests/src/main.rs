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

fn main() -> anyhow::Result<std::process::ExitCode> {
    match Cli::parse().command {
        Command::StagedDriver { .. } => return Ok(sandbox::staged_driver::main()),
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
