//! The `submitter` binary. `render` prints the driver objects for a spark-submit argument vector
//! without contacting a cluster; `serve` runs the HTTP service; `submit`, `status` and `wait` are
//! its client (exit codes of `wait`: 0 succeeded, 1 failed, 2 unknown or gone, so resubmit with a
//! new id; 3 the look-up itself failed).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use submission::error_chain::error_chain;

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

/// Where the service is and how to prove who we are.
#[derive(Debug, Clone, clap::Args)]
struct ClientArgs {
    /// The service, `https://host:port` (or `http://` against `--insecure-dev`).
    #[arg(long, env = "SUBMITTER_URL", default_value = "http://127.0.0.1:8443")]
    url: String,
    /// CA bundle that verifies the service (https).
    #[arg(long, env = "SUBMITTER_CA")]
    ca: Option<PathBuf>,
    /// Client certificate, PEM (with --key).
    #[arg(long, env = "SUBMITTER_CERT")]
    cert: Option<PathBuf>,
    /// Client key, PEM (with --cert).
    #[arg(long, env = "SUBMITTER_KEY")]
    key: Option<PathBuf>,
}

impl ClientArgs {
    fn client(&self) -> anyhow::Result<submitter_client::SubmitterClient> {
        let mut config = submitter_client::ClientConfig::new(self.url.clone());
        config.ca.clone_from(&self.ca);
        config.cert.clone_from(&self.cert);
        config.key.clone_from(&self.key);
        Ok(submitter_client::SubmitterClient::new(config)?)
    }
}

/// Exit code of `status`/`wait` when the look-up itself failed (not a driver state).
const LOOKUP_FAILED: u8 = 3;

#[derive(Debug, Subcommand)]
enum Command {
    /// Submit a spark-submit argument vector; prints the submission id on stderr first, then
    /// `namespace:pod` on stdout. Pod template files named by --conf are read here and sent
    /// inline.
    Submit {
        #[command(flatten)]
        client: ClientArgs,
        /// Idempotency key; reuse it to retry the same submission. Default: a new UUID v4.
        #[arg(long, env = "SUBMITTER_SUBMISSION_ID")]
        submission_id: Option<String>,
        /// Create nothing: print the objects the submission would create (validated by the API
        /// server, as one JSON v1 List) and exit 0, or the error and exit 1.
        #[arg(long)]
        dry_run: bool,
        /// The spark-submit arguments (optionally after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        spark_submit_args: Vec<String>,
    },
    /// Print a driver's status (JSON) by its `namespace:pod` id.
    Status {
        #[command(flatten)]
        client: ClientArgs,
        /// `namespace:pod`, as `submit` printed it.
        driver: String,
    },
    /// Poll a driver's status until it is finished: exit 0 succeeded, 1 failed, 2 unknown or
    /// gone (resubmit with a new submission id), 3 the look-up failed.
    Wait {
        #[command(flatten)]
        client: ClientArgs,
        /// Seconds between polls (1 to 60).
        #[arg(long, env = "SUBMITTER_WAIT_INTERVAL", default_value_t = 2,
            value_parser = clap::value_parser!(u64).range(1..=60))]
        interval: u64,
        /// `namespace:pod`, as `submit` printed it.
        driver: String,
    },
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

/// A pod template file as JSON (YAML is a superset, so both read).
fn read_template(path: &str) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read pod template {path}: {e}"))?;
    yaml_serde::from_str(&text).map_err(|e| anyhow::anyhow!("pod template {path} is not YAML: {e}"))
}

async fn submit(
    client: &ClientArgs,
    submission_id: Option<String>,
    dry_run: bool,
    args: &[String],
) -> anyhow::Result<ExitCode> {
    let extracted = submitter::cli::extract_templates(args);
    let driver_pod_template = extracted
        .driver_template
        .as_deref()
        .map(read_template)
        .transpose()?;
    let executor_pod_template = extracted
        .executor_template
        .as_deref()
        .map(read_template)
        .transpose()?;
    let client = client.client()?;
    let submission_id = submission_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // First, before anything can fail: a caller that retries must reuse this id.
    eprintln!("submission-id: {submission_id}");
    let request = submission::api::SubmitRequest {
        submission_id,
        spark_submit_args: extracted.args,
        driver_pod_template,
        executor_pod_template,
    };
    if dry_run {
        return match client.dry_run(&request).await {
            Ok(list) => {
                println!("{}", serde_json::to_string_pretty(&list)?);
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                eprintln!("error: {}", error_chain(&error));
                Ok(ExitCode::FAILURE)
            }
        };
    }
    match client.submit(&request).await {
        Ok(response) => {
            println!("{}", response.driver_ref());
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// One look-up; `Err` carries the exit code for a failed one (2 for an unknown driver: a
/// client keeping ids resubmits, as for a lost pod).
async fn lookup(
    client: &submitter_client::SubmitterClient,
    driver: &str,
) -> Result<submission::api::DriverStatus, (u8, String)> {
    let (namespace, pod) = submitter::cli::parse_driver_ref(driver)
        .map_err(|error| (LOOKUP_FAILED, error.to_string()))?;
    client
        .driver_status(&namespace, &pod)
        .await
        .map_err(|error| {
            let code = match error.code() {
                Some(submission::api::ErrorCode::NotFound) => 2,
                _ => LOOKUP_FAILED,
            };
            (code, error_chain(&error))
        })
}

async fn status(client: &ClientArgs, driver: &str) -> anyhow::Result<ExitCode> {
    match lookup(&client.client()?, driver).await {
        Ok(status) => {
            println!("{}", serde_json::to_string_pretty(&status)?);
            Ok(ExitCode::SUCCESS)
        }
        Err((code, message)) => {
            eprintln!("error: {message}");
            Ok(ExitCode::from(code))
        }
    }
}

async fn wait(client: &ClientArgs, interval: u64, driver: &str) -> anyhow::Result<ExitCode> {
    let client = client.client()?;
    loop {
        match lookup(&client, driver).await {
            Ok(status) => {
                if let Some(code) = submitter::cli::wait_exit_code(status.phase, status.action) {
                    println!("{}", serde_json::to_string(&status)?);
                    return Ok(ExitCode::from(code));
                }
            }
            // Transient trouble (the client already retried) is not an answer: poll on.
            Err((LOOKUP_FAILED, message)) => eprintln!("status look-up failed: {message}"),
            Err((code, message)) => {
                eprintln!("error: {message}");
                return Ok(ExitCode::from(code));
            }
        }
        tokio::time::sleep(Duration::from_secs(interval)).await;
    }
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Submit {
            client,
            submission_id,
            dry_run,
            spark_submit_args,
        } => tokio::runtime::Runtime::new()?.block_on(submit(
            &client,
            submission_id,
            dry_run,
            &spark_submit_args,
        )),
        Command::Status { client, driver } => {
            tokio::runtime::Runtime::new()?.block_on(status(&client, &driver))
        }
        Command::Wait {
            client,
            interval,
            driver,
        } => tokio::runtime::Runtime::new()?.block_on(wait(&client, interval, &driver)),
        Command::Serve(args) => {
            init_tracing(args.audit_log.as_deref())?;
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
            let result = submission::render::render(
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
/// `RUST_LOG` filters, `info` by default. With `audit_log`, the audit lines go to that file
/// (JSON, appended) and not to the other logs, whatever `RUST_LOG` says.
fn init_tracing(audit_log: Option<&std::path::Path>) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let audit_file = audit_log
        .map(|path| {
            submitter::audit::open_file(path).map_err(|error| {
                anyhow::anyhow!("cannot open the audit log {}: {error}", path.display())
            })
        })
        .transpose()?;
    let audit_elsewhere = audit_file.is_some();
    let main = tracing_subscriber::fmt::layer();
    let main = if std::io::stdout().is_terminal() {
        main.boxed()
    } else {
        main.json().boxed()
    };
    let main = main
        .with_filter(filter)
        .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
            !(audit_elsewhere && meta.target() == submitter::audit::TARGET)
        }));
    let audit = audit_file.map(|file| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(file)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(submitter::audit::TARGET, tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry().with(main).with(audit).init();
    Ok(())
}
