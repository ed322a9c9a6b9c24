//! The SparkApplication operator, in two layers.
//!
//! The pure core ([`crd`], [`labels`], [`names`], [`defaults`], [`unsupported`], [`sparkconf`],
//! [`argv`], [`executor_quota`], [`state_machine`], [`fence`], [`recovery`], [`batch`], [`monitoring`], [`ui`],
//! [`dependencies`], [`schedule`], [`connect`]): the CRD types, the names and labels spelled
//! once, the spec fields we cannot honour, the `spark-submit` argument vector and inline pod
//! templates for the submitter, the objects a run owns besides its driver, the state machine that
//! decides what to do next, and the fencing rules. No I/O and no clock there: the callers pass in
//! what they observed and the time.
//!
//! The I/O shells: the [`reconciler`] (observe → decide → execute, its effects behind a trait),
//! the watch plumbing the controllers share (`watches`, the [`pod_index`], the [`pod_warnings`]
//! and the [`events`] recorder), [`controller`] (`operator run`: CRD, watches, kube-runtime's
//! controller, probes) with the [`scheduled_controller`] and [`connect_controller`] it starts,
//! [`leader`], [`metrics`], the [`progress_store`] backends (Kubernetes, Redis) and the recovery
//! [`agent`] (`operator agent`).

/// The `SparkApplication` custom resource and its CRD.
pub mod crd;

/// Label, annotation and container names, spelled once.
pub mod labels;

/// The driver pod's name, one rule for the argv, the state machine and the PDB.
pub mod names;

/// The widely used operator's defaulting webhook, as a function.
pub mod defaults;

/// Spec fields that are set but not honoured, for a condition and an event.
pub mod unsupported;

/// `sparkConf` keys the operator refuses (they would take the driver out of its control).
pub mod sparkconf;

/// From a SparkApplication to the submitter's request: argv plus inline pod templates.
pub mod argv;

/// Executors a ResourceQuota keeps out: the condition's decision from the quotas' status (pure).
pub mod executor_quota;

/// The application's state machine: `decide(app, observed, now)`.
pub mod state_machine;

/// ScheduledSparkApplications: when a run is due and what to do (pure), and the cron grammar.
pub mod schedule;

/// Fenced restarts: the epoch and marker rules every state store applies (pure).
pub mod fence;

/// What a fenced restart puts into a driver's submission: its epoch, pod name and agent sidecar.
pub mod recovery;

/// The state store of fenced restarts: the trait and its Kubernetes and Redis backends.
pub mod progress_store;

/// Driver pods by owner: a watch-fed index, re-listed whole, beside the pod cache.
pub mod pod_index;

/// The pods' Warning events by pod: what holds a pending driver (`FailedMount` is only there).
pub mod pod_warnings;

/// The event recorder (`events.k8s.io/v1`), with client-go's series and bounded memory.
pub mod events;

/// The reconciler: observe → decide → execute → write status, for one SparkApplication.
pub mod reconciler;

/// Watch plumbing shared by the controllers: a kind's watch into a reflector cache, its health.
mod watches;

/// `operator run`: CRD install, watches and caches, the controller, probes.
pub mod controller;

/// Executor pods: their watch's index by application, and what `decide` reads of them.
pub mod executors;

/// `spec.batchScheduler`: scheduler names, PodGroups, YuniKorn task groups (pure).
pub mod batch;

/// `spec.monitoring`: the JMX exporter agent, metrics configuration and its ConfigMap (pure).
pub mod monitoring;

/// The Spark UI's Service and Ingresses, as the widely used operator makes them (pure).
pub mod ui;

/// What a driver depends on, made before it is submitted: PodGroup, monitoring ConfigMap, PDB
/// (pure).
pub mod dependencies;

/// `operator run`'s ScheduledSparkApplication controller: watches, caches, runs, status.
pub mod scheduled_controller;

/// SparkConnect: its server pod, Service and ConfigMap, and its status (pure).
pub mod connect;

/// `operator run`'s SparkConnect controller: watches, caches, the server's objects, status.
pub mod connect_controller;

/// Leader election on a Lease: only the leader replica reconciles.
pub mod leader;

/// Prometheus metrics of `operator run`.
pub mod metrics;

/// `operator agent`: the recovery agent sidecar (restore, heartbeat, loopback marker API).
pub mod agent;
