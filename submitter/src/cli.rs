//! Pure helpers of the client commands (`submitter submit | status | wait`): taking the pod
//! template files out of a spark-submit argument vector, reading `namespace:pod` ids, and the
//! exit code of `wait`. The binary does the file and network I/O.

use thiserror::Error;

use submission::api::{ClientAction, DriverPhase};

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
