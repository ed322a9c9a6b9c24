//! The `submitter` binary. `render` prints the driver objects for a spark-submit argument vector
//! without contacting a cluster; `serve` runs the HTTP service.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "submitter",
    version,
    about = "Spark submissions without a JVM per application"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API (mTLS, policy, Kubernetes) until SIGTERM.
    Serve(submitter::service::serve::ServeArgs),
    /// Print the objects spark-submit would create, as one JSON v1 List, or the error body.
    Render {
        /// The client's submission id (names and ids derive from it).
        #[arg(long, env = "SUBMITTER_SUBMISSION_ID")]
        submission_id: String,
        /// Driver pod template (YAML or JSON; a Pod or a PodTemplateSpec).
        #[arg(long, env = "SUBMITTER_DRIVER_TEMPLATE")]
        driver_template: Option<PathBuf>,
        /// Executor pod template (YAML or JSON).
        #[arg(long, env = "SUBMITTER_EXECUTOR_TEMPLATE")]
        executor_template: Option<PathBuf>,
        /// SPARK_USER for the driver when there is no --proxy-user (spark-submit uses the OS user).
        #[arg(long, env = "SPARK_USER", default_value = "root")]
        spark_user: String,
        /// spark.app.submitTime in epoch milliseconds; default now.
        #[arg(long, env = "SUBMITTER_SUBMIT_TIME_MS")]
        submit_time_ms: Option<i64>,
        /// The spark-submit arguments, after `--`.
        #[arg(last = true, allow_hyphen_values = true)]
        spark_submit_args: Vec<String>,
    },
}

fn read(path: &Option<PathBuf>) -> Option<Result<String, String>> {
    path.as_ref().map(|p| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    })
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_tracing();
            let runtime = tokio::runtime::Runtime::new()?;
            if let Err(error) = runtime.block_on(submitter::service::serve::serve(args)) {
                tracing::error!(kind = error.kind(), error = %anyhow::Error::new(error).chain().map(ToString::to_string).collect::<Vec<_>>().join(": "), "submitter cannot serve");
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Render {
            submission_id,
            driver_template,
            executor_template,
            spark_user,
            submit_time_ms,
            spark_submit_args,
        } => {
            let now_ms = submit_time_ms.unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            });
            let result = submitter::render::render(
                &spark_submit_args,
                read(&driver_template).as_ref(),
                read(&executor_template).as_ref(),
                &submission_id,
                now_ms,
                &spark_user,
            );
            let (value, code) = match result {
                Ok(list) => (list, ExitCode::SUCCESS),
                Err(body) => (body, ExitCode::FAILURE),
            };
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut stdout, &value)?;
            writeln!(stdout)?;
            Ok(code)
        }
    }
}

/// Logs as JSON when not on a terminal (collected by the cluster), readable text otherwise;
/// `RUST_LOG` filters, `info` by default.
fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if std::io::stdout().is_terminal() {
        builder.init();
    } else {
        builder.json().init();
    }
}
