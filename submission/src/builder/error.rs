use thiserror::Error;

use crate::argv::ParseArgsError;
use crate::conf::ReadConfError;
use crate::naming::SubmissionIdError;
use crate::template::TemplateError;

use super::version::SparkVersionError;

/// The wire contract's error codes a build can end in (the HTTP mapping lives in the service).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A malformed request outside the argument vector (here: the submission id).
    BadRequest,
    InvalidSparkSubmitArgs,
    InvalidPodTemplate,
}

impl ErrorCode {
    /// The `error_code` string of the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::InvalidSparkSubmitArgs => "INVALID_SPARK_SUBMIT_ARGS",
            ErrorCode::InvalidPodTemplate => "INVALID_POD_TEMPLATE",
        }
    }
}

/// Why a submission could not be turned into driver objects. Apart from the submission id and
/// the templates, each is a failure real `spark-submit` reports too, before it sends anything.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BuildError {
    #[error("invalid submission id")]
    InvalidSubmissionId {
        #[source]
        source: SubmissionIdError,
    },
    #[error("invalid spark-submit arguments")]
    ParseArgs {
        #[source]
        source: ParseArgsError,
    },
    #[error("cannot build for this Spark version")]
    SparkVersion {
        #[source]
        source: SparkVersionError,
    },
    #[error("invalid Spark configuration")]
    ReadConf {
        #[source]
        source: ReadConfError,
    },
    #[error("{key} is not valid: {reason}")]
    InvalidConf { key: String, reason: String },
    #[error("{key} is not supported by the submitter: {reason}")]
    UnsupportedConf { key: String, reason: &'static str },
    #[error(
        "must specify the driver container image (spark.kubernetes.driver.container.image or spark.kubernetes.container.image)"
    )]
    MissingImage,
    #[error(
        "label with key {key} is not allowed as it is reserved for Spark bookkeeping operations"
    )]
    ReservedLabel { key: String },
    #[error("{key} is required for {volume_type} volumes")]
    MissingVolumeOption { key: String, volume_type: String },
    #[error("kubernetes volume type `{volume_type}` is not supported")]
    UnsupportedVolumeType { volume_type: String },
    #[error("volume {name}: {reason}")]
    InvalidVolume { name: String, reason: String },
    #[error("found duplicated mountPath: {paths}")]
    DuplicateMountPath { paths: String },
    #[error("secretKeyRef {value:?} of {env} must be in the form name:key")]
    InvalidSecretKeyRef { env: String, value: String },
    #[error("resource {name}: {reason}")]
    InvalidResourceRequest { name: String, reason: String },
    #[error("invalid driver pod template")]
    DriverTemplate {
        #[source]
        source: TemplateError,
    },
    #[error("invalid executor pod template")]
    ExecutorTemplate {
        #[source]
        source: TemplateError,
    },
}

impl BuildError {
    /// A stable name for metrics, logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            BuildError::InvalidSubmissionId { .. } => "invalid_submission_id",
            BuildError::ParseArgs { source } => source.kind(),
            BuildError::SparkVersion { source } => source.kind(),
            BuildError::ReadConf { source } => source.kind(),
            BuildError::InvalidConf { .. } => "invalid_conf",
            BuildError::UnsupportedConf { .. } => "unsupported_conf",
            BuildError::MissingImage => "missing_image",
            BuildError::ReservedLabel { .. } => "reserved_label",
            BuildError::MissingVolumeOption { .. } => "missing_volume_option",
            BuildError::UnsupportedVolumeType { .. } => "unsupported_volume_type",
            BuildError::InvalidVolume { .. } => "invalid_volume",
            BuildError::DuplicateMountPath { .. } => "duplicate_mount_path",
            BuildError::InvalidSecretKeyRef { .. } => "invalid_secret_key_ref",
            BuildError::InvalidResourceRequest { .. } => "invalid_resource_request",
            BuildError::DriverTemplate { source } | BuildError::ExecutorTemplate { source } => {
                source.kind()
            }
        }
    }

    /// The contract's error code for this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            BuildError::InvalidSubmissionId { .. } => ErrorCode::BadRequest,
            BuildError::DriverTemplate { .. } | BuildError::ExecutorTemplate { .. } => {
                ErrorCode::InvalidPodTemplate
            }
            _ => ErrorCode::InvalidSparkSubmitArgs,
        }
    }

    /// The message for the error body: this error and its causes, joined by `: `.
    pub fn message(&self) -> String {
        crate::error_chain::error_chain(self)
    }
}

impl From<ReadConfError> for BuildError {
    fn from(source: ReadConfError) -> Self {
        BuildError::ReadConf { source }
    }
}
