//! A `spark-submit` argument vector, parsed the way Spark 4.3's launcher
//! (`SparkSubmitCommandBuilder`) and `SparkSubmitArguments` parse it, then checked against what
//! a server-side submitter for Kubernetes cluster mode can honour.

mod error;
mod grammar;
mod validate;

pub use error::ParseArgsError;

/// One accepted `spark-submit` command line.
///
/// Options are kept as written; `conf::SparkConf::from_submit_args` applies Spark's precedence.
/// `--driver-memory`, `--driver-java-options`, `--driver-library-path`, `--driver-class-path`
/// and `--driver-default-class-path` have no field: Spark's launcher turns them into
/// `spark.driver.*` entries of the same map as `--conf`, in argv order, so whichever of
/// `--driver-memory 2g` and `--conf spark.driver.memory=3g` comes last wins. `confs` keeps that
/// sequence, including keys Spark later ignores because they do not start with `spark.`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmitArgs {
    pub master: Option<String>,
    pub deploy_mode: Option<String>,
    pub main_class: Option<String>,
    pub name: Option<String>,
    pub jars: Option<String>,
    pub packages: Option<String>,
    pub exclude_packages: Option<String>,
    pub repositories: Option<String>,
    pub py_files: Option<String>,
    pub files: Option<String>,
    pub archives: Option<String>,
    pub executor_memory: Option<String>,
    pub driver_cores: Option<String>,
    pub executor_cores: Option<String>,
    pub num_executors: Option<String>,
    pub total_executor_cores: Option<String>,
    pub proxy_user: Option<String>,
    pub principal: Option<String>,
    pub keytab: Option<String>,
    pub queue: Option<String>,
    pub verbose: bool,
    pub load_spark_defaults: bool,
    /// `--conf`/`-c` pairs and launcher-mapped driver options, in argv order.
    pub confs: Vec<(String, String)>,
    /// The first non-option argument: a jar, `.py` or `.R` URI, or a special name such as `spark-shell`.
    pub primary_resource: String,
    /// Everything after the primary resource, verbatim.
    pub app_args: Vec<String>,
}

impl SubmitArgs {
    /// The last `--conf` value for `key`, counting only the `spark.*` keys Spark keeps.
    pub fn conf_value(&self, key: &str) -> Option<&str> {
        if !key.starts_with("spark.") {
            return None;
        }
        self.confs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses `args` (without the `spark-submit` program name) and rejects what the submitter
/// cannot reproduce faithfully.
pub fn parse(args: &[String]) -> Result<SubmitArgs, ParseArgsError> {
    // A real argv is C strings: spark-submit can never be given a NUL, and a value carrying one
    // would reach the driver's container arguments or a label, where Kubernetes or exec fails.
    if let Some(index) = args.iter().position(|arg| arg.contains('\0')) {
        return Err(ParseArgsError::NulByte { index });
    }
    let parsed = grammar::parse(args)?;
    validate::validate(&parsed)?;
    Ok(parsed)
}

#[cfg(test)]
mod tests;
