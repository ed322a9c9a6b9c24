//! The submitter service and its command line. The pure model (argv, builder, plan, driver
//! state, wire types) is the `submission` crate; the REST client is `submitter-client`.
//!
//! Modules from the bottom up (each uses only those above it):
//! - [`policy`], [`pod_security`], [`tls`]: who the client is and what it may do, its pods
//!   included (pure decisions; TLS config and the accept loop);
//! - [`kube_api`]: every per-request call to the API server, under one timeout;
//! - [`record`]: the format of claims and the retention records they become (pure);
//! - [`caches`]: the watch caches of our pods and ConfigMaps, their indexes and health;
//! - [`claim`]: the I/O of claims: one id, one driver, whatever the race;
//! - [`creation`], [`inflight`]: what creating a driver's objects ends with; the in-flight
//!   creations that concurrent duplicates share;
//! - [`metrics`], [`fairness`], [`log_streams`]: the Prometheus registry; the per-identity
//!   budgets (pure arithmetic, a refusal is a value); the open log streams (per-identity limit,
//!   shutdown, the body relaying the API server's log);
//! - [`state`]: what request paths share;
//! - [`audit`]: the audit line of every request of an API route, filled in by
//!   the code below it as it learns;
//! - [`submit`]: one submission, `Result<Outcome, SubmitFailure>` (parse once, the repeat
//!   check, build, authorise, the retention check, observe → decide → execute, in-flight
//!   sharing through [`inflight`]);
//! - [`status`]: status look-ups ([`status::locate`]: a driver by submission id or
//!   `namespace:pod`) and the retention recorder;
//! - [`logs`], [`kill`], [`list`]: a driver's log, its kill, the caller's submissions;
//! - [`sweep`]: removes ConfigMaps whose driver pod never came, and expired records;
//! - [`envelope`]: the one place failures become HTTP answers; only the service calls it;
//! - [`service`]: routes, the layer stack, thin handlers, and `serve`;
//! - [`cli`]: pure helpers of the client commands.

/// Which client identity may submit into which namespace with which service account.
pub mod policy;

/// What a submission's pods may ask for, per client identity (baseline Pod Security Standard).
pub mod pod_security;

/// mTLS for the service: reloading server config, peer identities, the accept loop.
pub mod tls;

/// Per-request calls to the Kubernetes API server, each under the call timeout.
pub mod kube_api;

/// Retention records: what says "this driver succeeded" after its pod is gone (pure).
pub mod record;

/// The watch caches of our pods and ConfigMaps, with their indexes.
pub mod caches;

/// Claims of submission ids: reserved before any driver object, ended as records.
pub mod claim;

/// What creating a driver's objects ends with: the driver pod, or why not.
pub mod creation;

/// The in-flight creations of this replica, shared by concurrent duplicates.
pub mod inflight;

/// The service's Prometheus metrics.
pub mod metrics;

/// Per-identity budgets: one flooding client cannot starve the others.
pub mod fairness;

/// The open driver log streams: per-identity limit, shutdown, the relaying body.
pub mod log_streams;

/// What every request path shares.
pub mod state;

/// The audit log: one line per request of an API route.
pub mod audit;

/// The JSON log lines (service logs and the audit file), written without re-parsing spans.
pub mod json_log;

/// One submission, from request to driver.
pub mod submit;

/// Status look-ups by submission id and `namespace/pod`, and the recorder that writes the
/// retention records of succeeded drivers.
pub mod status;

/// A driver's log, streamed from the API server.
pub mod logs;

/// Killing a driver, as `spark-submit --kill` does.
pub mod kill;

/// The caller's submissions, a page at a time, from the caches.
pub mod list;

/// The sweeper: ConfigMaps whose driver pod never came, expired retention records.
pub mod sweep;

/// The error envelope every answer of the service uses, and the one mapping of failures to it.
pub mod envelope;

/// The HTTP service: routes, layer stack, handlers, `serve`.
pub mod service;

/// Pure helpers of the client commands `submit`, `status` and `wait`.
pub mod cli;
