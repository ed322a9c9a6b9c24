//! Pure helpers of the client commands (`submitter submit | status | wait | logs | kill |
//! list`): taking the pod template files out of a spark-submit argument vector, reading
//! `namespace:pod` ids and targets, the exit code of `wait`, and how a list prints. The binary
//! does the file and network I/O.

use thiserror::Error;

use submission::api::{ClientAction, DriverPhase, DriverStatus, Target};

/// The confs whose files are read on the client's machine and sent inline (the server cannot
/// read the client's files).
pub const DRIVER_TEMPLATE_CONF: &str = "spark.kubernetes.driver.podTemplateFile";
pub const EXECUTOR_TEMPLATE_CONF: &str = "spark.kubernetes.executor.podTemplateFile";

/// The argument vector without the template confs, and the template paths they named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    pub args: Vec<String>,
    pub driver_template: Option<String>,
    pub executor_template: Option<String>,
}

/// Removes `--conf KEY=PATH` / `-c KEY=PATH` / `--conf=KEY=PATH` for the two template keys.
/// Only options before the application resource are confs: after it, arguments belong to the
/// application and are kept verbatim. The last occurrence wins, as in Spark.
pub fn extract_templates(args: &[String]) -> Extracted {
    let mut out = Extracted::default();
    let mut iter = args.iter().peekable();
    let take = |conf: &str, out: &mut Extracted| -> bool {
        let Some((key, value)) = conf.split_once('=') else {
            return false;
        };
        match key.trim() {
            DRIVER_TEMPLATE_CONF => out.driver_template = Some(value.to_owned()),
            EXECUTOR_TEMPLATE_CONF => out.executor_template = Some(value.to_owned()),
            _ => return false,
        }
        true
    };
    while let Some(arg) = iter.next() {
        if arg == "--conf" || arg == "-c" {
            if let Some(conf) = iter.peek()
                && take(conf, &mut out)
            {
                iter.next();
                continue;
            }
        } else if let Some(conf) = arg.strip_prefix("--conf=")
            && take(conf, &mut out)
        {
            continue;
        } else if !arg.starts_with('-') && !is_option_value(out.args.last()) {
            // The application resource: everything after it is the application's.
            out.args.push(arg.clone());
            out.args.extend(iter.cloned());
            break;
        }
        out.args.push(arg.clone());
    }
    out
}

/// spark-submit options that take no value (everything else starting with `-` takes one).
const FLAGS: [&str; 6] = [
    "--verbose",
    "-v",
    "--supervise",
    "--help",
    "-h",
    "--version",
];

/// Whether `previous` is an option that consumes the next argument.
fn is_option_value(previous: Option<&String>) -> bool {
    previous.is_some_and(|p| p.starts_with('-') && !p.contains('=') && !FLAGS.contains(&p.as_str()))
}

/// A `namespace:pod` id was malformed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{text:?} is not a namespace:pod driver id")]
pub struct DriverRefError {
    pub text: String,
}

impl DriverRefError {
    pub fn kind(&self) -> &'static str {
        "driver_ref"
    }
}

/// Splits `namespace:pod` once, validating both halves are non-empty.
pub fn parse_driver_ref(text: &str) -> Result<(String, String), DriverRefError> {
    match text.split_once(':') {
        Some((namespace, pod))
            if !namespace.is_empty() && !pod.is_empty() && !pod.contains(':') =>
        {
            Ok((namespace.to_owned(), pod.to_owned()))
        }
        _ => Err(DriverRefError {
            text: text.to_owned(),
        }),
    }
}

/// What `logs` and `kill` operate on: `namespace:pod` when the text reads as one (a DNS label,
/// a colon, a DNS subdomain), else a submission id; `as_id` forces the id. Ids that `submit`
/// makes (UUIDs) hold no colon.
pub fn parse_target(text: &str, as_id: bool) -> Target {
    match parse_driver_ref(text) {
        Ok((namespace, pod)) if !as_id && dns_label(&namespace) && dns_subdomain(&pod) => {
            Target::Driver { namespace, pod }
        }
        _ => Target::Submission(text.to_owned()),
    }
}

/// RFC 1123 label, as Kubernetes names namespaces.
fn dns_label(text: &str) -> bool {
    text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// RFC 1123 subdomain, as Kubernetes names pods.
fn dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(dns_label)
}

/// A driver phase as `list --phase` reads it (`Running`, `running`).
pub fn parse_phase(text: &str) -> Result<DriverPhase, String> {
    [
        DriverPhase::Pending,
        DriverPhase::Running,
        DriverPhase::Succeeded,
        DriverPhase::Failed,
        DriverPhase::Unknown,
    ]
    .into_iter()
    .find(|phase| format!("{phase:?}").eq_ignore_ascii_case(text))
    .ok_or_else(|| {
        format!("{text:?} is not a phase: Pending, Running, Succeeded, Failed or Unknown")
    })
}

/// How `list` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// Aligned columns under a header, for a terminal.
    Table,
    /// One submission a line, tab-separated, no header: for `cut`, `awk`, `grep`.
    Tsv,
    /// One status object a line (JSON Lines): for `jq`.
    Json,
}

/// The columns of a listed submission: id, driver, phase, reason (`-` when none).
fn columns(status: &DriverStatus) -> [String; 4] {
    [
        status.submission_id.clone().unwrap_or_else(|| "-".into()),
        format!("{}:{}", status.namespace, status.driver_pod_name),
        format!("{:?}", status.phase),
        status.reason.clone().unwrap_or_else(|| "-".into()),
    ]
}

/// `items` as `format` prints them, each line ending in a newline.
pub fn format_list(items: &[DriverStatus], format: ListFormat) -> String {
    match format {
        ListFormat::Json => items
            .iter()
            .map(|item| serde_json::to_string(item).unwrap_or_default() + "\n")
            .collect(),
        ListFormat::Tsv => items
            .iter()
            .map(|item| columns(item).join("\t") + "\n")
            .collect(),
        ListFormat::Table => {
            let header = ["SUBMISSION ID", "DRIVER", "PHASE", "REASON"].map(str::to_owned);
            let rows: Vec<[String; 4]> = std::iter::once(header)
                .chain(items.iter().map(columns))
                .collect();
            let widths: Vec<usize> = (0..4)
                .map(|column| {
                    rows.iter()
                        .map(|row| row[column].chars().count())
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            rows.iter()
                .map(|row| {
                    let cells: Vec<String> = row
                        .iter()
                        .zip(&widths)
                        .map(|(cell, width)| format!("{cell:<width$}"))
                        .collect();
                    cells.join("   ").trim_end().to_owned() + "\n"
                })
                .collect()
        }
    }
}

/// What `wait` does after one status answer: `None` keeps polling, `Some(code)` exits.
/// 0 done (Succeeded), 1 failed, 2 unknown/lost (resubmit with a new id).
pub fn wait_exit_code(phase: DriverPhase, action: ClientAction) -> Option<u8> {
    match (action, phase) {
        (ClientAction::Reconnect, _) => None,
        (ClientAction::Done, _) => Some(0),
        (ClientAction::Resubmit, DriverPhase::Failed) => Some(1),
        (ClientAction::Resubmit, _) => Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn template_confs_are_taken_out_in_every_spelling() {
        let args = strings(&[
            "--master",
            "k8s://https://k:443",
            "--conf",
            "spark.kubernetes.driver.podTemplateFile=/d.yaml",
            "--conf=spark.kubernetes.executor.podTemplateFile=/e.yaml",
            "-c",
            "spark.app.name=x",
            "local:///app.jar",
            "--conf",
            "spark.kubernetes.driver.podTemplateFile=/app-arg",
        ]);
        let out = extract_templates(&args);
        assert_eq!(out.driver_template.as_deref(), Some("/d.yaml"));
        assert_eq!(out.executor_template.as_deref(), Some("/e.yaml"));
        assert_eq!(
            out.args,
            strings(&[
                "--master",
                "k8s://https://k:443",
                "-c",
                "spark.app.name=x",
                "local:///app.jar",
                "--conf",
                "spark.kubernetes.driver.podTemplateFile=/app-arg",
            ]),
            "application arguments stay verbatim"
        );
    }

    #[test]
    fn without_templates_the_args_are_unchanged() {
        let args = strings(&["--verbose", "--class", "A", "local:///a.jar", "1"]);
        assert_eq!(extract_templates(&args).args, args);
    }

    #[test]
    fn driver_refs_need_both_halves() {
        assert_eq!(
            parse_driver_ref("spark:pi-driver"),
            Ok(("spark".into(), "pi-driver".into()))
        );
        for bad in ["spark", ":p", "ns:", "a:b:c"] {
            assert!(parse_driver_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_target_is_a_driver_when_it_reads_as_namespace_colon_pod_else_an_id() {
        let driver = |namespace: &str, pod: &str| Target::Driver {
            namespace: namespace.into(),
            pod: pod.into(),
        };
        let id = |text: &str| Target::Submission(text.into());
        let cases = [
            ("spark:pi-driver", false, driver("spark", "pi-driver")),
            ("spark:pi.driver-1", false, driver("spark", "pi.driver-1")),
            (
                "550e8400-e29b-41d4-a716-446655440000",
                false,
                id("550e8400-e29b-41d4-a716-446655440000"),
            ),
            ("Team:Run 1", false, id("Team:Run 1")),
            ("a:b:c", false, id("a:b:c")),
            ("spark:pi-driver", true, id("spark:pi-driver")),
        ];
        for (text, as_id, expected) in cases {
            assert_eq!(parse_target(text, as_id), expected, "{text}");
        }
    }

    #[test]
    fn a_list_prints_as_a_table_for_people_and_as_lines_for_programs() {
        let status = |id: &str, phase: DriverPhase, reason: Option<&str>| {
            let mut status = DriverStatus::new(
                submission::api::DriverIdentity {
                    submission_id: Some(id.into()),
                    namespace: "spark".into(),
                    driver_pod_name: format!("{id}-driver"),
                    ..Default::default()
                },
                submission::driver::DriverObservation::absent(false),
            );
            status.phase = phase;
            status.reason = reason.map(str::to_owned);
            status
        };
        let items = [
            status("etl-nightly", DriverPhase::Running, None),
            status("pi", DriverPhase::Failed, Some("Killed")),
        ];
        assert_eq!(
            format_list(&items, ListFormat::Table),
            "SUBMISSION ID   DRIVER                     PHASE     REASON\n\
             etl-nightly     spark:etl-nightly-driver   Running   -\n\
             pi              spark:pi-driver            Failed    Killed\n"
        );
        assert_eq!(
            format_list(&items, ListFormat::Tsv),
            "etl-nightly\tspark:etl-nightly-driver\tRunning\t-\npi\tspark:pi-driver\tFailed\tKilled\n"
        );
        let json = format_list(&items, ListFormat::Json);
        let lines: Vec<serde_json::Value> = json
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["reason"], "Killed");
    }

    #[test]
    fn wait_exits_per_the_table() {
        use ClientAction::*;
        use DriverPhase as P;
        assert_eq!(wait_exit_code(P::Running, Reconnect), None);
        assert_eq!(wait_exit_code(P::Pending, Reconnect), None);
        assert_eq!(wait_exit_code(P::Succeeded, Done), Some(0));
        assert_eq!(wait_exit_code(P::Failed, Resubmit), Some(1));
        assert_eq!(wait_exit_code(P::Unknown, Resubmit), Some(2));
    }
}
