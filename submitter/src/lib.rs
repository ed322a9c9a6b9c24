//! The submitter's pure core: a `spark-submit` command line in, the Spark configuration and
//! driver facts Spark itself would derive out. No I/O, no clock.

/// Byte strings (`1g`, `1500m`) as Spark reads them.
pub mod size;

/// The argument vector: Spark's grammar, then what the submitter refuses.
pub mod argv;

/// The resulting SparkConf with Spark's precedence, and values derived from it.
pub mod conf;

/// Wire types of the HTTP API (the Go client's contract) and the driver status table.
pub mod api;

/// The error envelope every answer of the service uses, and axum rejection mapping.
pub mod envelope;

/// Which client identity may submit into which namespace with which service account.
pub mod policy;

/// mTLS for the service: reloading server config, peer identities, the accept loop.
pub mod tls;

/// The Rust client with the Go client's semantics (retries, backoff, Retry-After).
pub mod client;

/// Spark's naming rules, with the submission id in place of Spark's randomness.
pub mod naming;

/// Pod templates: validation and the choice of the Spark container.
pub mod template;

/// Label and annotation keys, and ownership of the driver's dependents.
pub mod objects;

/// From a submission to the driver's Kubernetes objects.
pub mod builder;

/// `submitter render`: the objects as one `v1` List, or the contract's error body.
pub mod render;

/// The HTTP service: routes, layer stack, the submission's plan and executor, the sweeper.
pub mod service;

/// Status look-ups by submission id and `namespace/pod`, from the watch caches, and the
/// retention records that outlive succeeded drivers.
pub mod status;

/// Pure helpers of the client commands `submit`, `status` and `wait`.
pub mod cli;
