//! The operator binary. Today it prints its CRD; the controller (`run`) and the recovery agent
//! (`agent`) come with their issues.

use std::io::Write;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// SparkApplication operator.
#[derive(Debug, Parser)]
#[command(name = "operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the SparkApplication CustomResourceDefinition as YAML.
    Crd,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            let yaml = operator::crd::crd_yaml()?;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(yaml.as_bytes())
                .and_then(|()| stdout.flush())
                .context("cannot write the CRD to stdout")?;
        }
    }
    Ok(())
}
