use thiserror::Error;

use crate::size::ParseByteStringError;

/// Why an argument vector was not accepted. The first group mirrors errors `spark-submit`
/// itself raises; the rest are things real `spark-submit` would do on the client machine
/// (read its disk, resolve Maven, run locally) that a server cannot do on the client's behalf.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseArgsError {
    #[error("argument {index} contains a NUL byte, which no command line can carry")]
    NulByte { index: usize },
    #[error("option {option} needs a value")]
    MissingOptionValue { option: String },
    #[error("unrecognized option {option}")]
    UnrecognizedOption { option: String },
    #[error("--conf {value:?} has no '=': spark config must be given as KEY=VALUE")]
    ConfWithoutEquals { value: String },
    #[error("{argument} must be either \"client\" or \"cluster\", not {value:?}")]
    InvalidDeployMode {
        argument: &'static str,
        value: String,
    },
    #[error("missing primary resource: give a jar, .py or .R file after the options")]
    MissingPrimaryResource,
    #[error("{argument} must be a positive number of bytes (e.g. 1g, 1500m), not {value:?}")]
    InvalidSize {
        argument: &'static str,
        value: String,
        #[source]
        source: Option<ParseByteStringError>,
    },
    #[error("{argument} must be a positive whole number, not {value:?}")]
    InvalidNumber {
        argument: &'static str,
        value: String,
    },
    #[error("only one of --proxy-user or --principal can be provided")]
    ProxyUserWithPrincipal,
    #[error(
        "missing --master: the submitter only runs on Kubernetes, pass --master k8s://https://HOST:PORT"
    )]
    MissingMaster,
    #[error(
        "{argument} {master:?} is not a Kubernetes master: the submitter only accepts k8s://..."
    )]
    MasterNotKubernetes {
        argument: &'static str,
        master: String,
    },
    #[error("{argument} {master:?} is not a valid Kubernetes master URL: {reason}")]
    InvalidKubernetesMaster {
        argument: &'static str,
        master: String,
        reason: &'static str,
    },
    #[error(
        "missing --deploy-mode: spark-submit would run the driver in client mode on the submitting machine; pass --deploy-mode cluster"
    )]
    MissingDeployMode,
    #[error(
        "{argument} client runs the driver on the submitting machine, which a server cannot do; pass --deploy-mode cluster"
    )]
    ClientDeployMode { argument: &'static str },
    #[error("{option} is not a submission: the submitter only submits applications")]
    UnsupportedAction { option: &'static str },
    #[error(
        "{option} names a file on the client machine, which the submitter cannot read: pass the properties with --conf"
    )]
    PropertiesFile { option: &'static str },
    #[error(
        "--supervise only applies to Spark standalone cluster mode; Kubernetes drivers are not supervised"
    )]
    Supervise,
    #[error("{argument} selects Spark Connect, which is not a Kubernetes cluster-mode submission")]
    SparkConnect { argument: &'static str },
    #[error("{argument} {value:?} is not applicable in cluster deploy mode")]
    NotApplicableInClusterMode {
        argument: &'static str,
        value: String,
    },
    #[error("{argument}: {coordinate:?} is not a Maven coordinate: {reason}")]
    InvalidMavenCoordinate {
        // First: the value at fault, as the user wrote it, leads the Debug text.
        coordinate: String,
        argument: &'static str,
        reason: &'static str,
    },
    #[error(
        "missing --class for jar {resource:?}: spark-submit would read Main-Class from the jar, which the submitter does not fetch; please specify one with --class"
    )]
    MissingMainClass { resource: String },
    #[error(
        "{argument} {uri:?} is not a local:// or remote URI, so spark-submit would upload it from the client machine and needs spark.kubernetes.file.upload.path for that; use a local:// path in the image or a remote URL"
    )]
    LocalResourceWithoutUploadPath { argument: &'static str, uri: String },
    #[error(
        "{argument} {uri:?} is not a local:// or remote URI, so spark-submit would upload it from the client machine, which the submitter cannot do even with spark.kubernetes.file.upload.path; use a local:// path in the image or a remote URL"
    )]
    LocalResourceUpload { argument: &'static str, uri: String },
    #[error(
        "{argument} {uri:?} would be resolved against its file system by spark-submit (globs expanded, paths qualified), which the submitter cannot do; give a fully qualified scheme://authority/path without wildcards"
    )]
    UnresolvableResource { argument: &'static str, uri: String },
    #[error(
        "{argument} {keytab:?} is a keytab on the client machine, which the submitter cannot read; use a local:// keytab in the image"
    )]
    ClientKeytab {
        argument: &'static str,
        keytab: String,
    },
    #[error(
        "{argument} needs its counterpart: a Kerberos principal and keytab must be given together"
    )]
    IncompleteKerberos { argument: &'static str },
}

impl ParseArgsError {
    pub fn kind(&self) -> &'static str {
        match self {
            ParseArgsError::NulByte { .. } => "nul_byte",
            ParseArgsError::MissingOptionValue { .. } => "missing_option_value",
            ParseArgsError::UnrecognizedOption { .. } => "unrecognized_option",
            ParseArgsError::ConfWithoutEquals { .. } => "conf_without_equals",
            ParseArgsError::InvalidDeployMode { .. } => "invalid_deploy_mode",
            ParseArgsError::MissingPrimaryResource => "missing_primary_resource",
            ParseArgsError::InvalidSize { .. } => "invalid_size",
            ParseArgsError::InvalidNumber { .. } => "invalid_number",
            ParseArgsError::ProxyUserWithPrincipal => "proxy_user_with_principal",
            ParseArgsError::MissingMaster => "missing_master",
            ParseArgsError::MasterNotKubernetes { .. } => "master_not_kubernetes",
            ParseArgsError::InvalidKubernetesMaster { .. } => "invalid_kubernetes_master",
            ParseArgsError::MissingDeployMode => "missing_deploy_mode",
            ParseArgsError::ClientDeployMode { .. } => "client_deploy_mode",
            ParseArgsError::UnsupportedAction { .. } => "unsupported_action",
            ParseArgsError::PropertiesFile { .. } => "properties_file",
            ParseArgsError::Supervise => "supervise",
            ParseArgsError::SparkConnect { .. } => "spark_connect",
            ParseArgsError::NotApplicableInClusterMode { .. } => "not_applicable_in_cluster_mode",
            ParseArgsError::InvalidMavenCoordinate { .. } => "invalid_maven_coordinate",
            ParseArgsError::MissingMainClass { .. } => "missing_main_class",
            ParseArgsError::LocalResourceWithoutUploadPath { .. } => {
                "local_resource_without_upload_path"
            }
            ParseArgsError::LocalResourceUpload { .. } => "local_resource_upload",
            ParseArgsError::UnresolvableResource { .. } => "unresolvable_resource",
            ParseArgsError::ClientKeytab { .. } => "client_keytab",
            ParseArgsError::IncompleteKerberos { .. } => "incomplete_kerberos",
        }
    }

    /// The option, conf key or positional argument at fault, as the user would recognise it.
    pub fn argument(&self) -> &str {
        match self {
            ParseArgsError::NulByte { .. } => "argument",
            ParseArgsError::MissingOptionValue { option }
            | ParseArgsError::UnrecognizedOption { option } => option,
            ParseArgsError::ConfWithoutEquals { .. } => "--conf",
            ParseArgsError::MissingPrimaryResource
            | ParseArgsError::NotApplicableInClusterMode {
                argument: "primary resource",
                ..
            } => "primary resource",
            ParseArgsError::MissingMainClass { .. } => "--class",
            ParseArgsError::ProxyUserWithPrincipal => "--proxy-user",
            ParseArgsError::MissingMaster => "--master",
            ParseArgsError::MissingDeployMode => "--deploy-mode",
            ParseArgsError::Supervise => "--supervise",
            ParseArgsError::UnsupportedAction { option }
            | ParseArgsError::PropertiesFile { option } => option,
            ParseArgsError::InvalidDeployMode { argument, .. }
            | ParseArgsError::InvalidSize { argument, .. }
            | ParseArgsError::InvalidNumber { argument, .. }
            | ParseArgsError::MasterNotKubernetes { argument, .. }
            | ParseArgsError::InvalidKubernetesMaster { argument, .. }
            | ParseArgsError::ClientDeployMode { argument }
            | ParseArgsError::SparkConnect { argument }
            | ParseArgsError::NotApplicableInClusterMode { argument, .. }
            | ParseArgsError::InvalidMavenCoordinate { argument, .. }
            | ParseArgsError::LocalResourceWithoutUploadPath { argument, .. }
            | ParseArgsError::LocalResourceUpload { argument, .. }
            | ParseArgsError::UnresolvableResource { argument, .. }
            | ParseArgsError::ClientKeytab { argument, .. }
            | ParseArgsError::IncompleteKerberos { argument } => argument,
        }
    }
}
