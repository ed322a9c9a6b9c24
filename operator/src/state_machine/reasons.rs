//! Event reasons, the widely used operator's where it has one.

pub const SUBMITTED: &str = "SparkApplicationSubmitted";
pub const SUBMISSION_FAILED: &str = "SparkApplicationSubmissionFailed";
pub const COMPLETED: &str = "SparkApplicationCompleted";
pub const FAILED: &str = "SparkApplicationFailed";
pub const PENDING_RERUN: &str = "SparkApplicationPendingRerun";
/// Ours: the spec changed and the current run is being invalidated.
pub const SPEC_CHANGED: &str = "SparkApplicationSpecChanged";
pub const DRIVER_PENDING: &str = "SparkDriverPending";
pub const DRIVER_RUNNING: &str = "SparkDriverRunning";
pub const DRIVER_COMPLETED: &str = "SparkDriverCompleted";
pub const DRIVER_FAILED: &str = "SparkDriverFailed";
pub const DRIVER_UNKNOWN: &str = "SparkDriverUnknown";
pub const DRIVER_NOT_FOUND: &str = "SparkDriverNotFound";
pub const SUSPENDING: &str = "SparkApplicationSuspending";
pub const SUSPENDED: &str = "SparkApplicationSuspended";
pub const RESUMING: &str = "SparkApplicationResuming";
/// Ours (Warning): an object of the run cannot be made (a PodGroup, an Ingress, the UI
/// Service); what follows depends on the object (`state_machine::owned_objects`).
pub const OWNED_OBJECTS_FAILED: &str = "SparkApplicationObjectsFailed";
pub const EXECUTOR_PENDING: &str = "SparkExecutorPending";
pub const EXECUTOR_RUNNING: &str = "SparkExecutorRunning";
pub const EXECUTOR_COMPLETED: &str = "SparkExecutorCompleted";
pub const EXECUTOR_FAILED: &str = "SparkExecutorFailed";
pub const EXECUTOR_UNKNOWN: &str = "SparkExecutorUnknown";
/// Ours: `driverStartTimeoutMillis` passed.
pub const DRIVER_START_TIMED_OUT: &str = "SparkDriverStartTimedOut";
/// Ours: `driverReadyTimeoutMillis` passed.
pub const DRIVER_READY_TIMED_OUT: &str = "SparkDriverReadyTimedOut";
/// Ours: the store's epoch moved; every driver under an older epoch is fenced.
pub const EPOCH_ADVANCED: &str = "SparkApplicationEpochAdvanced";
/// Ours (Warning): a recovery-enabled app restarts without a committed progress marker.
pub const RESTART_FROM_ZERO: &str = "SparkApplicationRestartFromZero";
/// Ours (Warning): the driver's recovery agent stopped heartbeating.
pub const HEARTBEAT_LOST: &str = "SparkDriverHeartbeatLost";
