//! Label, annotation and container names the operator writes or reads, spelled once (Spark's own
//! come from the submission model). The
//! `sparkoperator.k8s.io/*` keys are the widely used operator's, so tools built for it (dashboards,
//! `kubectl get pods -l ...`) keep working.

/// On driver and executor pods: the SparkApplication's name.
pub const APP_NAME: &str = "sparkoperator.k8s.io/app-name";

/// On driver and executor pods: `true`.
pub const LAUNCHED_BY_SPARK_OPERATOR: &str = "sparkoperator.k8s.io/launched-by-spark-operator";

/// On the Services, Ingresses and ConfigMaps the operator creates for an application or a
/// SparkConnect: `true` (kubeflow's label).
pub const CREATED_BY_LABEL: &str = "sparkoperator.k8s.io/created-by-spark-operator";

/// On driver and executor pods: the submission id of the run they belong to.
pub const SUBMISSION_ID: &str = "sparkoperator.k8s.io/submission-id";

/// Labels with this prefix on the SparkApplication are not copied to its pods: Kueue would
/// otherwise manage the pods as workloads of their own.
pub const KUEUE_PREFIX: &str = "kueue.x-k8s.io/";

/// Spark's container names, spelled in the submission model.
pub use submission::meta::containers::{
    DRIVER as DRIVER_CONTAINER, EXECUTOR as EXECUTOR_CONTAINER,
    LEGACY_EXECUTOR as LEGACY_EXECUTOR_CONTAINER,
};

/// Volumes with this prefix are Spark local directories, passed as `spark.kubernetes.*.volumes`
/// confs rather than through the pod template (Spark must know them to use them as scratch).
pub const LOCAL_DIR_VOLUME_PREFIX: &str = "spark-local-dir-";

/// On driver pods of recovery-enabled applications: the epoch the driver runs under.
pub const RECOVERY_EPOCH: &str = "sparkoperator.k8s.io/recovery-epoch";

/// On a SparkConnect's objects, server pod and executors: the SparkConnect's name.
pub const CONNECT_NAME: &str = "sparkoperator.k8s.io/connect-name";

/// The `spark-role` of a Spark Connect server pod.
pub const CONNECT_SERVER_ROLE: &str = "connect-server";
