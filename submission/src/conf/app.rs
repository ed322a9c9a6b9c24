use super::SparkConf;
use crate::argv::SubmitArgs;
use crate::keys;
use crate::resource::ResourceType;

/// What the driver builder needs from one accepted command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    pub conf: SparkConf,
    pub resource_type: ResourceType,
    /// The class the driver container runs (`--class <main>` in its args). Spark replaces a
    /// user `--class` by its runner for Python and R, though the user's still names the app.
    pub main_class: String,
    /// Passed to the driver verbatim.
    pub primary_resource: String,
    pub app_args: Vec<String>,
    /// Goes into the driver args right after `driver`, and into `SPARK_USER`.
    pub proxy_user: Option<String>,
    /// `--total-executor-cores` (or `spark.cores.max`): Spark 3.5.0 alone writes it into
    /// `spark.cores.max` on Kubernetes; the conf leaves it out, as every later release does.
    pub total_executor_cores: Option<String>,
}

const DEFAULT_NAMESPACE: &str = "default";
/// `KubernetesClientApplication`'s fallback when `spark.app.name` is unset.
const DEFAULT_APP_NAME: &str = "spark";

impl Submission {
    /// Total over any `SubmitArgs`; `argv::parse` guarantees a Java submission has `--class`,
    /// otherwise `main_class` would be empty.
    pub fn from_args(args: &SubmitArgs) -> Submission {
        let resource_type = ResourceType::of(&args.primary_resource);
        let main_class = match resource_type {
            ResourceType::Python => "org.apache.spark.deploy.PythonRunner".to_owned(),
            ResourceType::R => "org.apache.spark.deploy.RRunner".to_owned(),
            ResourceType::Java => args.main_class.clone().unwrap_or_default(),
        };
        Submission {
            conf: SparkConf::from_submit_args(args),
            resource_type,
            main_class,
            primary_resource: args.primary_resource.clone(),
            app_args: args.app_args.clone(),
            proxy_user: args.proxy_user.clone(),
            total_executor_cores: args.total_executor_cores.clone(),
        }
    }

    /// `--name`, else `spark.app.name`, else `--class`, else the primary resource's file name.
    pub fn app_name(&self) -> &str {
        self.conf.get_or(keys::APP_NAME, DEFAULT_APP_NAME)
    }

    pub fn namespace(&self) -> &str {
        self.conf
            .get_or(keys::KUBERNETES_NAMESPACE, DEFAULT_NAMESPACE)
    }

    /// `spark.jars` entries: `--jars` then, for a Java application, the primary jar last.
    pub fn jars(&self) -> impl Iterator<Item = &str> {
        self.list(keys::JARS)
    }

    /// `spark.submit.pyFiles` entries (the conf itself is always set, possibly empty).
    pub fn py_files(&self) -> impl Iterator<Item = &str> {
        self.list(keys::PY_FILES)
    }

    fn list(&self, key: &str) -> impl Iterator<Item = &str> {
        self.conf
            .get(key)
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter(|e| !e.is_empty())
    }
}
