//! The submitter's pure core: a `spark-submit` command line in, the Spark configuration and
//! driver facts Spark itself would derive out. No I/O, no clock.

/// Byte strings (`1g`, `1500m`) as Spark reads them.
pub mod size;

/// The argument vector: Spark's grammar, then what the submitter refuses.
pub mod argv;

/// The resulting SparkConf with Spark's precedence, and values derived from it.
pub mod conf;
