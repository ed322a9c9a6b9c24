//! Checks in the order Spark 4.3 makes them (`SparkSubmitArguments.validateSubmitArguments`,
//! then `SparkSubmit.prepareSubmitEnvironment`, then the Kubernetes client), so a command line
//! with several faults is refused for the one `spark-submit` would report.

use super::{ParseArgsError, SubmitArgs};
use crate::keys;
use crate::master::{KubernetesMasterError, kubernetes_master_url};
use crate::resource::{self, Location, ResourceType};
use crate::size;

pub(super) fn validate(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    check_sizes_and_counts(args)?;
    let principal = kerberos_principal(args);
    if args.proxy_user.is_some() && principal.is_some() {
        return Err(ParseArgsError::ProxyUserWithPrincipal);
    }
    if args.conf_value(keys::REMOTE).is_some() {
        return Err(ParseArgsError::SparkConnect {
            argument: keys::REMOTE,
        });
    }
    check_master(args)?;
    check_deploy_mode(args)?;
    check_cluster_mode_applicable(args)?;
    check_packages(args)?;
    check_keytab_is_in_image(args)?;
    check_resource_lists(args, Fault::NeedsResolution)?;
    if ResourceType::of(&args.primary_resource) == ResourceType::Java && args.main_class.is_none() {
        return Err(ParseArgsError::MissingMainClass {
            resource: args.primary_resource.clone(),
        });
    }
    check_primary_is_not_client_file(args)?;
    check_resource_lists(args, Fault::ClientFile)?;
    check_kerberos_pair(args)
}

/// `(value, name to report)`: the flag when given, else the `--conf` Spark falls back to.
fn flag_or_conf<'a>(
    flag: &'a Option<String>,
    flag_name: &'static str,
    args: &'a SubmitArgs,
    key: &'static str,
) -> Option<(&'a str, &'static str)> {
    match flag {
        Some(value) => Some((value, flag_name)),
        None => args.conf_value(key).map(|value| (value, key)),
    }
}

fn check_sizes_and_counts(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    // The launcher already folded --driver-memory into the confs, in argv order.
    let driver_memory = args
        .conf_value(keys::DRIVER_MEMORY)
        .map(|v| (v, "--driver-memory"));
    let executor_memory = flag_or_conf(
        &args.executor_memory,
        "--executor-memory",
        args,
        keys::EXECUTOR_MEMORY,
    );
    for (value, argument) in [driver_memory, executor_memory].into_iter().flatten() {
        let invalid = |source| ParseArgsError::InvalidSize {
            argument,
            value: value.to_owned(),
            source,
        };
        match size::to_bytes(value) {
            Ok(0) => return Err(invalid(None)),
            Ok(_) => {}
            Err(e) => return Err(invalid(Some(e))),
        }
    }

    let dynamic_allocation = args
        .conf_value(keys::DYN_ALLOCATION_ENABLED)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let counts = [
        flag_or_conf(
            &args.driver_cores,
            "--driver-cores",
            args,
            keys::DRIVER_CORES,
        ),
        flag_or_conf(
            &args.executor_cores,
            "--executor-cores",
            args,
            keys::EXECUTOR_CORES,
        ),
        flag_or_conf(
            &args.total_executor_cores,
            "--total-executor-cores",
            args,
            keys::CORES_MAX,
        ),
        // With dynamic allocation Spark accepts any --num-executors, even 0 or junk.
        flag_or_conf(
            &args.num_executors,
            "--num-executors",
            args,
            keys::EXECUTOR_INSTANCES,
        )
        .filter(|_| !dynamic_allocation),
    ];
    for (value, argument) in counts.into_iter().flatten() {
        if !value.parse::<i32>().is_ok_and(|n| n > 0) {
            return Err(ParseArgsError::InvalidNumber {
                argument,
                value: value.to_owned(),
            });
        }
    }
    Ok(())
}

fn check_master(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    let Some((master, argument)) = flag_or_conf(&args.master, "--master", args, keys::MASTER)
    else {
        return Err(ParseArgsError::MissingMaster);
    };
    // SparkSubmit picks the cluster manager with startsWith("k8s"), then insists on "k8s://".
    if !master.starts_with("k8s") {
        return Err(ParseArgsError::MasterNotKubernetes {
            argument,
            master: master.to_owned(),
        });
    }
    kubernetes_master_url(master).map_err(|e| ParseArgsError::InvalidKubernetesMaster {
        argument,
        master: master.to_owned(),
        reason: match e {
            KubernetesMasterError::MissingPrefix => "it must start with k8s://",
            KubernetesMasterError::InvalidUri => "it is not a valid URI",
            KubernetesMasterError::InvalidScheme => "its scheme must be http or https",
        },
    })?;
    Ok(())
}

fn check_deploy_mode(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    // No --deploy-mode and no spark.submit.deployMode means client mode to spark-submit.
    match flag_or_conf(&args.deploy_mode, "--deploy-mode", args, keys::DEPLOY_MODE) {
        None => Err(ParseArgsError::MissingDeployMode),
        Some(("cluster", _)) => Ok(()),
        Some(("client", argument)) => Err(ParseArgsError::ClientDeployMode { argument }),
        Some((value, argument)) => Err(ParseArgsError::InvalidDeployMode {
            argument,
            value: value.to_owned(),
        }),
    }
}

const NOT_IN_CLUSTER_MODE_CLASSES: &[&str] = &[
    "org.apache.spark.sql.hive.thriftserver.SparkSQLCLIDriver",
    "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
    "org.apache.spark.sql.connect.service.SparkConnectServer",
];

fn check_cluster_mode_applicable(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    if resource::is_shell(&args.primary_resource) {
        return Err(ParseArgsError::NotApplicableInClusterMode {
            argument: "primary resource",
            value: args.primary_resource.clone(),
        });
    }
    match &args.main_class {
        Some(class) if NOT_IN_CLUSTER_MODE_CLASSES.contains(&class.as_str()) => {
            Err(ParseArgsError::NotApplicableInClusterMode {
                argument: "--class",
                value: class.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// Spark resolves `--packages` with Ivy twice in Kubernetes cluster mode: on the client, only to
/// put the jars on the client JVM's class path, and again in the driver (`submitInDriver`), which
/// adds them to `spark.jars` for the executors. The submitter leaves resolution to the driver, as
/// the confs reach it unchanged; what the client checks before resolving is checked here, in
/// `MavenUtils.extractMavenCoordinates`' order: each coordinate, then each exclusion.
fn check_packages(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    let Some((packages, argument)) =
        flag_or_conf(&args.packages, "--packages", args, keys::JAR_PACKAGES)
    else {
        return Ok(());
    };
    // Blank coordinates resolve to nothing, so Spark does not touch Ivy for them.
    if resource::java_trim(packages).is_empty() {
        return Ok(());
    }
    for coordinate in java_split_commas(packages) {
        check_coordinate(coordinate, coordinate, argument)?;
    }
    let exclusions = flag_or_conf(
        &args.exclude_packages,
        "--exclude-packages",
        args,
        keys::JAR_PACKAGES_EXCLUSIONS,
    );
    if let Some((exclusions, argument)) =
        exclusions.filter(|(list, _)| !resource::java_trim(list).is_empty())
    {
        // Spark excludes `groupId:artifactId:*`, checked as a coordinate.
        for exclusion in java_split_commas(exclusions) {
            check_coordinate(&format!("{exclusion}:*"), exclusion, argument)?;
        }
    }
    Ok(())
}

/// Java's `String.split(",")`: trailing empty pieces dropped, inner ones kept.
fn java_split_commas(list: &str) -> impl Iterator<Item = &str> {
    java_split(list, ',').into_iter()
}

/// Java's `String.split` on one character: trailing empty pieces dropped (all of them when the
/// text is only separators), but `""` splits into one empty piece.
fn java_split(s: &str, separator: char) -> Vec<&str> {
    let mut pieces: Vec<&str> = s.split(separator).collect();
    if s.is_empty() {
        return pieces;
    }
    while pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
}

/// `groupId:artifactId:version`, `/` counting as `:`, each part not blank
/// (`MavenUtils.extractMavenCoordinates`); `given` is what the user wrote.
fn check_coordinate(
    coordinate: &str,
    given: &str,
    argument: &'static str,
) -> Result<(), ParseArgsError> {
    let replaced = coordinate.replace('/', ":");
    let parts = java_split(&replaced, ':');
    let invalid = |reason| ParseArgsError::InvalidMavenCoordinate {
        argument,
        coordinate: given.to_owned(),
        reason,
    };
    let [group, artifact, version] = parts[..] else {
        return Err(invalid(if argument.contains("exclude") {
            "an exclusion must be groupId:artifactId"
        } else {
            "it must be groupId:artifactId:version"
        }));
    };
    for (value, reason) in [
        (group, "its groupId is blank"),
        (artifact, "its artifactId is blank"),
        (version, "its version is blank"),
    ] {
        if resource::java_trim(value).is_empty() {
            return Err(invalid(reason));
        }
    }
    Ok(())
}

fn kerberos_principal(args: &SubmitArgs) -> Option<(&str, &'static str)> {
    flag_or_conf(&args.principal, "--principal", args, keys::PRINCIPAL).or_else(|| {
        args.conf_value(keys::YARN_PRINCIPAL)
            .map(|v| (v, keys::YARN_PRINCIPAL))
    })
}

fn kerberos_keytab(args: &SubmitArgs) -> Option<(&str, &'static str)> {
    flag_or_conf(&args.keytab, "--keytab", args, keys::KEYTAB).or_else(|| {
        args.conf_value(keys::YARN_KEYTAB)
            .map(|v| (v, keys::YARN_KEYTAB))
    })
}

/// With both set, spark-submit logs in from the keytab and the Kerberos feature step copies it
/// into a Secret, both reading the client's disk unless the keytab is a `local://` one.
fn check_keytab_is_in_image(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    match (kerberos_principal(args), kerberos_keytab(args)) {
        (Some(_), Some((keytab, argument))) if resource::locate(keytab) != Location::Image => {
            Err(ParseArgsError::ClientKeytab {
                argument,
                keytab: keytab.to_owned(),
            })
        }
        _ => Ok(()),
    }
}

/// `KerberosConfDriverFeatureStep` requires both or neither.
fn check_kerberos_pair(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    match (kerberos_principal(args), kerberos_keytab(args)) {
        (Some((_, argument)), None) | (None, Some((_, argument))) => {
            Err(ParseArgsError::IncompleteKerberos { argument })
        }
        _ => Ok(()),
    }
}

fn client_file_error(args: &SubmitArgs, argument: &'static str, uri: &str) -> ParseArgsError {
    let uri = uri.to_owned();
    if args.conf_value(keys::KUBERNETES_FILE_UPLOAD_PATH).is_some() {
        ParseArgsError::LocalResourceUpload { argument, uri }
    } else {
        ParseArgsError::LocalResourceWithoutUploadPath { argument, uri }
    }
}

fn check_primary_is_not_client_file(args: &SubmitArgs) -> Result<(), ParseArgsError> {
    // spark-internal is Spark's "no resource"; shells were refused earlier.
    let primary = &args.primary_resource;
    if primary != "spark-internal" && resource::locate(primary) == Location::Client {
        return Err(client_file_error(args, "primary resource", primary));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    NeedsResolution,
    ClientFile,
}

fn check_resource_lists(args: &SubmitArgs, fault: Fault) -> Result<(), ParseArgsError> {
    let lists = [
        (&args.jars, "--jars", keys::JARS),
        (&args.files, "--files", keys::FILES),
        (&args.py_files, "--py-files", keys::PY_FILES),
        (&args.archives, "--archives", keys::ARCHIVES),
    ];
    for (flag, flag_name, key) in lists {
        let (entries, argument): (Vec<&str>, _) = match flag {
            Some(list) => (resource::option_entries(list).collect(), flag_name),
            None => match args.conf_value(key) {
                Some(list) => (resource::list_entries(list).collect(), key),
                None => continue,
            },
        };
        for entry in entries {
            match (fault, resource::locate(entry)) {
                (Fault::ClientFile, Location::Client) => {
                    return Err(client_file_error(args, argument, entry));
                }
                (Fault::NeedsResolution, Location::Remote { .. })
                    if resource::needs_submit_time_resolution(entry) =>
                {
                    return Err(ParseArgsError::UnresolvableResource {
                        argument,
                        uri: entry.to_owned(),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}
