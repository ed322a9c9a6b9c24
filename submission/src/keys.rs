//! Spark configuration keys, spelled once.

pub const MASTER: &str = "spark.master";
pub const REMOTE: &str = "spark.remote";
pub const DEPLOY_MODE: &str = "spark.submit.deployMode";
pub const APP_NAME: &str = "spark.app.name";
pub const DRIVER_HOST: &str = "spark.driver.host";

pub const DRIVER_MEMORY: &str = "spark.driver.memory";
pub const DRIVER_CORES: &str = "spark.driver.cores";
pub const DRIVER_CLASS_PATH: &str = "spark.driver.extraClassPath";
pub const DRIVER_DEFAULT_CLASS_PATH: &str = "spark.driver.defaultExtraClassPath";
pub const DRIVER_JAVA_OPTIONS: &str = "spark.driver.extraJavaOptions";
pub const DRIVER_LIBRARY_PATH: &str = "spark.driver.extraLibraryPath";

pub const EXECUTOR_MEMORY: &str = "spark.executor.memory";
pub const EXECUTOR_CORES: &str = "spark.executor.cores";
pub const EXECUTOR_INSTANCES: &str = "spark.executor.instances";
pub const CORES_MAX: &str = "spark.cores.max";
pub const DYN_ALLOCATION_ENABLED: &str = "spark.dynamicAllocation.enabled";

pub const JARS: &str = "spark.jars";
pub const FILES: &str = "spark.files";
pub const ARCHIVES: &str = "spark.archives";
pub const PY_FILES: &str = "spark.submit.pyFiles";

pub const JAR_PACKAGES: &str = "spark.jars.packages";
pub const JAR_PACKAGES_EXCLUSIONS: &str = "spark.jars.excludes";
pub const JAR_REPOSITORIES: &str = "spark.jars.repositories";
pub const JAR_IVY_REPO_PATH: &str = "spark.jars.ivy";

pub const PRINCIPAL: &str = "spark.kerberos.principal";
pub const KEYTAB: &str = "spark.kerberos.keytab";
/// Still read by `SparkSubmitArguments` as fallbacks for `--principal` / `--keytab`.
pub const YARN_PRINCIPAL: &str = "spark.yarn.principal";
pub const YARN_KEYTAB: &str = "spark.yarn.keytab";

pub const KUBERNETES_NAMESPACE: &str = "spark.kubernetes.namespace";
pub const KUBERNETES_FILE_UPLOAD_PATH: &str = "spark.kubernetes.file.upload.path";
