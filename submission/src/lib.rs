//! The Spark submission model, pure: a `spark-submit` command line and optional pod templates in,
//! the Kubernetes objects Spark itself would create out, plus the rules that decide what a
//! submission must do given what exists, and which state a driver pod is in. No I/O, no clock,
//! no async: the service (`submitter`) and the operator are the shells around it.

// Bottom up: a module uses only the modules declared before it.

/// Byte strings (`1g`, `1500m`) as Spark reads them.
pub mod size;

/// Kubernetes resource quantities (`500m`, `1.5Gi`) held exactly, written back canonically.
pub mod quantity;

/// An error and its causes on one line, for logs and error bodies.
pub mod error_chain;

/// JSON pointer look-ups that do not copy the pointer's tokens.
pub mod pointer;

/// Label, annotation and container names, spelled once, and the ownership of dependents.
pub mod meta;

/// Spark's configuration keys, spelled once (below both `argv` and `conf`).
pub mod keys;

/// Resource URIs as Spark judges them, and what the primary resource makes of the application.
pub mod resource;

/// The Kubernetes master URL rule (`k8s://…`).
pub mod master;

/// Wire types of the REST contract and the driver status table.
pub mod api;

/// Pod templates: validation and the choice of the Spark container.
pub mod template;

/// The argument vector: Spark's grammar, then what the submitter refuses.
pub mod argv;

/// The resulting SparkConf with Spark's precedence, and values derived from it.
pub mod conf;

/// The driver-state rule: which container is the driver, and what state it is in.
pub mod driver;

/// Spark's naming rules, with the submission id in place of Spark's randomness.
pub mod naming;

/// From a submission to the driver's Kubernetes objects.
pub mod builder;

/// `submitter render`: the objects as one `v1` List, or the contract's error body.
pub mod render;

/// What a submission must do given what already exists (observe → decide).
pub mod plan;
