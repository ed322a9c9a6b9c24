//! The `submitter` binary. `render` prints the driver objects for a spark-submit argument vector
//! without contacting a cluster; `serve` runs the HTTP service; `submit`, `status`, `wait`,
//! `logs`, `kill` and `list` are its client (exit codes of `wait`: 0 succeeded, 1 failed, 2
//! unknown or gone, so resubmit with a new id; 3 the look-up itself failed).

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
    /// Print a driver's log to stdout as it comes: the driver container's, unless --container
    /// names another. Exit 0 when the log ended (with -f: when the driver container exited),
    /// 1 when it could not be read or broke off.
    Logs {
        #[command(flatten)]
        client: ClientArgs,
        /// Keep printing new lines until the driver container exits.
        #[arg(short, long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long, value_name = "N")]
        tail: Option<i64>,
        /// Only the lines of the last SECONDS seconds.
        #[arg(long, value_name = "SECONDS")]
        since: Option<i64>,
        /// At most N bytes.
        #[arg(long, value_name = "N")]
        limit_bytes: Option<i64>,
        /// Prefix each line with the time it was written.
        #[arg(long)]
        timestamps: bool,
        /// The previous instance of the container (after a restart).
        #[arg(short, long)]
        previous: bool,
        /// Another container of the driver pod (a sidecar).
        #[arg(short, long)]
        container: Option<String>,
        /// Read TARGET as a submission id even when it reads as namespace:pod.
        #[arg(long)]
        id: bool,
        /// A submission id, or a driver's namespace:pod.
        target: String,
    },
    /// Kill a driver as `spark-submit --kill` does; prints its namespace:pod on stdout.
    Kill {
        #[command(flatten)]
        client: ClientArgs,
        /// Seconds the driver gets to stop before it is killed hard (default: its pod's own).
        #[arg(long, value_name = "SECONDS")]
        grace_period: Option<i64>,
        /// Read TARGET as a submission id even when it reads as namespace:pod.
        #[arg(long)]
        id: bool,
        /// A submission id, or a driver's namespace:pod.
        target: String,
    },
    /// List the submissions this client may see, running and retained, every page.
    List {
        #[command(flatten)]
        client: ClientArgs,
        /// Only this namespace.
        #[arg(short, long)]
        namespace: Option<String>,
        /// Only drivers in this phase (Pending, Running, Succeeded, Failed, Unknown).
        #[arg(long, value_parser = submitter::cli::parse_phase)]
        phase: Option<submission::api::DriverPhase>,
        /// table (the default on a terminal), tsv (the default in a pipe) or json (one object
        /// a line).
        #[arg(short, long, value_enum)]
        output: Option<submitter::cli::ListFormat>,
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

/// Prints the log of `target` as it comes; a reader that goes away (`| head`) ends it quietly.
async fn logs(
    client: &ClientArgs,
    target: &submission::api::Target,
    query: &submission::api::LogQuery,
) -> anyhow::Result<ExitCode> {
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let mut stream = match client.client()?.logs(target, query).await {
        Ok(stream) => stream,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut stdout = tokio::io::stdout();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => {
                eprintln!("error: the log broke off: {}", error_chain(&error));
                return Ok(ExitCode::FAILURE);
            }
        };
        // Flushed chunk by chunk: a followed log shows each line as it comes, in a pipe too.
        let written = async {
            stdout.write_all(&chunk).await?;
            stdout.flush().await
        };
        match written.await {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                return Ok(ExitCode::SUCCESS);
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn kill(
    client: &ClientArgs,
    target: &submission::api::Target,
    query: &submission::api::KillQuery,
) -> anyhow::Result<ExitCode> {
    match client.client()?.kill(target, query).await {
        Ok(status) => {
            eprintln!(
                "{target}: {:?}{}",
                status.phase,
                status
                    .reason
                    .as_deref()
                    .map(|reason| format!(" ({reason})"))
                    .unwrap_or_default()
            );
            println!("{}:{}", status.namespace, status.driver_pod_name);
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Every page of the list, printed once all are in (a table's columns fit every row).
async fn list(
    client: &ClientArgs,
    mut query: submission::api::ListQuery,
    output: Option<submitter::cli::ListFormat>,
) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let client = client.client()?;
    query.limit = Some(submission::api::MAX_LIST_LIMIT);
    let mut items = Vec::new();
    loop {
        match client.list(&query).await {
            Ok(page) => {
                items.extend(page.items);
                match page.continue_token {
                    Some(token) => query.continue_token = Some(token),
                    None => break,
                }
            }
            Err(error) => {
                eprintln!("error: {}", error_chain(&error));
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let format = output.unwrap_or(if std::io::stdout().is_terminal() {
        submitter::cli::ListFormat::Table
    } else {
        submitter::cli::ListFormat::Tsv
    });
    print!("{}", submitter::cli::format_list(&items, format));
    Ok(ExitCode::SUCCESS)
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
        Command::Logs {
            client,
            follow,
            tail,
            since,
            limit_bytes,
            timestamps,
            previous,
            container,
            id,
            target,
        } => {
            let query = submission::api::LogQuery {
                follow: follow.then_some(true),
                tail_lines: tail,
                since_seconds: since,
                limit_bytes,
                timestamps: timestamps.then_some(true),
                previous: previous.then_some(true),
                container,
            };
            let target = submitter::cli::parse_target(&target, id);
            tokio::runtime::Runtime::new()?.block_on(logs(&client, &target, &query))
        }
        Command::Kill {
            client,
            grace_period,
            id,
            target,
        } => {
            let query = submission::api::KillQuery {
                grace_period_seconds: grace_period,
            };
            let target = submitter::cli::parse_target(&target, id);
            tokio::runtime::Runtime::new()?.block_on(kill(&client, &target, &query))
        }
        Command::List {
            client,
            namespace,
            phase,
            output,
        } => {
            let query = submission::api::ListQuery {
                namespace,
                phase,
                ..submission::api::ListQuery::default()
            };
            tokio::runtime::Runtime::new()?.block_on(list(&client, query, output))
        }
        Command::Serve(args) => {
            init_tracing(args.audit_log.as_deref())?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(usize::from(args.worker_threads))
                .enable_all()
                .build()?;
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
        submitter::json_log::JsonLines::new(std::io::stdout).boxed()
    };
    let main = main
        .with_filter(filter)
        .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
            !(audit_elsewhere && meta.target() == submitter::audit::TARGET)
        }));
    let audit = audit_file.map(|file| {
        submitter::json_log::JsonLines::new(file)
            .without_spans()
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(submitter::audit::TARGET, tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry().with(main).with(audit).init();
    Ok(())
}
