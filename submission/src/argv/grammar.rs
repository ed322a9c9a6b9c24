//! The option grammar of Spark 4.3's `SparkSubmitOptionParser` (checked in the
//! `spark-launcher_2.13-4.3.0` bytecode): a fixed table of options that take a value and of
//! switches, `--opt=value` as an alternative spelling, and the first argument that is neither
//! ends option parsing and becomes the primary resource.

use super::{ParseArgsError, SubmitArgs};
use crate::keys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Archives,
    Class,
    Conf,
    DeployMode,
    DriverClassPath,
    DriverCores,
    DriverDefaultClassPath,
    DriverJavaOptions,
    DriverLibraryPath,
    DriverMemory,
    ExecutorCores,
    ExecutorMemory,
    ExcludePackages,
    ExtraPropertiesFile,
    Files,
    Jars,
    Keytab,
    Kill,
    Master,
    Name,
    NumExecutors,
    Packages,
    Principal,
    PropertiesFile,
    ProxyUser,
    PyFiles,
    Queue,
    Remote,
    Repositories,
    Status,
    TotalExecutorCores,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    Help,
    LoadSparkDefaults,
    Supervise,
    UsageError,
    Verbose,
    Version,
}

const OPTIONS: &[(&str, Opt)] = &[
    ("--archives", Opt::Archives),
    ("--class", Opt::Class),
    ("--conf", Opt::Conf),
    ("-c", Opt::Conf),
    ("--deploy-mode", Opt::DeployMode),
    ("--driver-class-path", Opt::DriverClassPath),
    ("--driver-cores", Opt::DriverCores),
    ("--driver-default-class-path", Opt::DriverDefaultClassPath),
    ("--driver-java-options", Opt::DriverJavaOptions),
    ("--driver-library-path", Opt::DriverLibraryPath),
    ("--driver-memory", Opt::DriverMemory),
    ("--executor-cores", Opt::ExecutorCores),
    ("--executor-memory", Opt::ExecutorMemory),
    ("--files", Opt::Files),
    ("--jars", Opt::Jars),
    ("--keytab", Opt::Keytab),
    ("--kill", Opt::Kill),
    ("--master", Opt::Master),
    ("--remote", Opt::Remote),
    ("--name", Opt::Name),
    ("--num-executors", Opt::NumExecutors),
    ("--packages", Opt::Packages),
    ("--exclude-packages", Opt::ExcludePackages),
    ("--principal", Opt::Principal),
    ("--properties-file", Opt::PropertiesFile),
    ("--extra-properties-file", Opt::ExtraPropertiesFile),
    ("--proxy-user", Opt::ProxyUser),
    ("--py-files", Opt::PyFiles),
    ("--queue", Opt::Queue),
    ("--repositories", Opt::Repositories),
    ("--status", Opt::Status),
    ("--total-executor-cores", Opt::TotalExecutorCores),
];

const SWITCHES: &[(&str, Switch)] = &[
    ("--help", Switch::Help),
    ("-h", Switch::Help),
    ("--supervise", Switch::Supervise),
    ("--usage-error", Switch::UsageError),
    ("--verbose", Switch::Verbose),
    ("-v", Switch::Verbose),
    ("--version", Switch::Version),
    ("--load-spark-defaults", Switch::LoadSparkDefaults),
];

fn lookup<T: Copy>(table: &[(&str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Spark's `(--[^=]+)=(.+)`: a `--name` of at least one character, the first `=`, then a
/// non-empty value. Java's `.` stops at line terminators, so a value spanning lines does not
/// match and the whole argument is then looked up (and rejected) as an option name.
fn split_inline_value(arg: &str) -> (&str, Option<&str>) {
    let Some(rest) = arg.strip_prefix("--") else {
        return (arg, None);
    };
    let Some(eq) = rest.find('=') else {
        return (arg, None);
    };
    let value = &rest[eq + 1..];
    let is_line_terminator =
        |c: char| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
    if eq == 0 || value.is_empty() || value.contains(is_line_terminator) {
        return (arg, None);
    }
    (&arg[..eq + 2], Some(value))
}

pub(super) fn parse(args: &[String]) -> Result<SubmitArgs, ParseArgsError> {
    let mut out = SubmitArgs::default();
    let mut primary = None;
    let mut idx = 0;
    while idx < args.len() {
        let (name, inline) = split_inline_value(&args[idx]);
        if let Some(opt) = lookup(OPTIONS, name) {
            let value = match inline {
                Some(value) => value.to_owned(),
                None => {
                    idx += 1;
                    args.get(idx)
                        .ok_or_else(|| ParseArgsError::MissingOptionValue {
                            option: name.to_owned(),
                        })?
                        .clone()
                }
            };
            apply_option(&mut out, opt, value)?;
        } else if let Some(switch) = lookup(SWITCHES, name) {
            // Spark ignores an inline value on a switch: `--verbose=no` still turns verbose on.
            apply_switch(&mut out, switch)?;
        } else if name.starts_with('-') {
            return Err(ParseArgsError::UnrecognizedOption {
                option: name.to_owned(),
            });
        } else {
            primary = Some(name.to_owned());
            out.app_args = args[idx + 1..].to_vec();
            break;
        }
        idx += 1;
    }
    out.primary_resource = primary.ok_or(ParseArgsError::MissingPrimaryResource)?;
    Ok(out)
}

fn apply_option(out: &mut SubmitArgs, opt: Opt, value: String) -> Result<(), ParseArgsError> {
    let field = match opt {
        Opt::Conf => {
            // Java's split("=", 2): the key is everything before the first '=', possibly empty.
            let Some((key, val)) = value.split_once('=') else {
                return Err(ParseArgsError::ConfWithoutEquals { value });
            };
            out.confs.push((key.to_owned(), val.to_owned()));
            return Ok(());
        }
        Opt::DriverMemory => return push_conf(out, keys::DRIVER_MEMORY, value),
        Opt::DriverJavaOptions => return push_conf(out, keys::DRIVER_JAVA_OPTIONS, value),
        Opt::DriverLibraryPath => return push_conf(out, keys::DRIVER_LIBRARY_PATH, value),
        Opt::DriverClassPath => return push_conf(out, keys::DRIVER_CLASS_PATH, value),
        Opt::DriverDefaultClassPath => {
            return push_conf(out, keys::DRIVER_DEFAULT_CLASS_PATH, value);
        }
        Opt::DeployMode => {
            if value != "client" && value != "cluster" {
                return Err(ParseArgsError::InvalidDeployMode {
                    argument: "--deploy-mode",
                    value,
                });
            }
            &mut out.deploy_mode
        }
        Opt::Kill => return Err(ParseArgsError::UnsupportedAction { option: "--kill" }),
        Opt::Status => return Err(ParseArgsError::UnsupportedAction { option: "--status" }),
        Opt::PropertiesFile => {
            return Err(ParseArgsError::PropertiesFile {
                option: "--properties-file",
            });
        }
        Opt::ExtraPropertiesFile => {
            return Err(ParseArgsError::PropertiesFile {
                option: "--extra-properties-file",
            });
        }
        Opt::Remote => {
            return Err(ParseArgsError::SparkConnect {
                argument: "--remote",
            });
        }
        Opt::Archives => &mut out.archives,
        Opt::Class => &mut out.main_class,
        Opt::DriverCores => &mut out.driver_cores,
        Opt::ExecutorCores => &mut out.executor_cores,
        Opt::ExecutorMemory => &mut out.executor_memory,
        Opt::ExcludePackages => &mut out.exclude_packages,
        Opt::Files => &mut out.files,
        Opt::Jars => &mut out.jars,
        Opt::Keytab => &mut out.keytab,
        Opt::Master => &mut out.master,
        Opt::Name => &mut out.name,
        Opt::NumExecutors => &mut out.num_executors,
        Opt::Packages => &mut out.packages,
        Opt::Principal => &mut out.principal,
        Opt::ProxyUser => &mut out.proxy_user,
        Opt::PyFiles => &mut out.py_files,
        Opt::Queue => &mut out.queue,
        Opt::Repositories => &mut out.repositories,
        Opt::TotalExecutorCores => &mut out.total_executor_cores,
    };
    *field = Some(value);
    Ok(())
}

fn push_conf(out: &mut SubmitArgs, key: &str, value: String) -> Result<(), ParseArgsError> {
    out.confs.push((key.to_owned(), value));
    Ok(())
}

fn apply_switch(out: &mut SubmitArgs, switch: Switch) -> Result<(), ParseArgsError> {
    match switch {
        Switch::Verbose => out.verbose = true,
        // The submitter has no spark-defaults.conf of the client's to load, so this changes nothing.
        Switch::LoadSparkDefaults => out.load_spark_defaults = true,
        Switch::Supervise => return Err(ParseArgsError::Supervise),
        Switch::Help => return Err(ParseArgsError::UnsupportedAction { option: "--help" }),
        Switch::UsageError => {
            return Err(ParseArgsError::UnsupportedAction {
                option: "--usage-error",
            });
        }
        Switch::Version => {
            return Err(ParseArgsError::UnsupportedAction {
                option: "--version",
            });
        }
    }
    Ok(())
}
