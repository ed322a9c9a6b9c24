//! One submission, from request to driver, behind one entry point: [`submit`] returns
//! `Result<Outcome, SubmitFailure>` and the HTTP edge (`envelope`) maps both.
//!
//! The steps: read the `dryRun` flag; read the submission id and parse the argument vector,
//! once (`builder::ParsedSubmission`); answer a repeat whose driver the synced caches show
//! complete without building anything ([`repeat`], from the parsed arguments); else build the
//! objects from the same parse (pure, `submission::builder`); authorise the client for the
//! namespace and every service account the driver and its executors will run as (before
//! anything touches Kubernetes); answer from the retention record when this submission's driver
//! already ended and its pod is gone; then observe → decide (`submission::plan`) → execute
//! ([`execute`]) in a task shared by concurrent duplicates ([`crate::inflight`]). A creation claims the
//! id first ([`crate::claim`]): of racing first submissions of one id, in any namespaces, on any
//! replicas, one driver is made.

pub mod blame;
pub mod execute;
mod fence;
mod owned;
pub mod repeat;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use thiserror::Error;
use tracing::{Span, debug, info, warn};

use crate::claim::ClaimToWrite;
use crate::inflight::{Key, TaskFailure};
use crate::kube_api::CallError;
use crate::policy::PolicyError;
use crate::record::{self, Record};
use crate::state::AppState;
use crate::tls::PeerIdentity;
use blame::Origin;
use execute::{Failure, Submission, SubmitDriverError, Submitted};
use submission::api::{SubmitRequest, SubmitResponse};
use submission::builder::{
    self, BuildError, DriverNames, DriverObjects, Identity, ParsedSubmission,
};
use submission::conf::SparkConf;
use submission::meta::{annotations, labels};
use submission::naming::SubmissionId;

/// Why a submission was not answered with a driver.
#[derive(Debug, Error)]
pub enum SubmitFailure {
    #[error("dryRun must be true or false, not {value:?}")]
    ReadDryRun { value: String },
    #[error("the submission cannot be built")]
    BuildObjects {
        #[source]
        source: BuildError,
    },
    #[error("the client may not make this submission")]
    Authorize {
        #[source]
        source: PolicyError,
    },
    #[error("the driver was not created")]
    CreateDriver {
        /// Shared by the concurrent duplicates that waited on the same creation.
        #[source]
        source: Arc<SubmitDriverError>,
        /// When the API server rejected a field (400/422): the input it came from.
        rejected: Option<Origin>,
    },
    #[error("the dry run did not complete")]
    DryRun {
        #[source]
        source: SubmitDriverError,
        rejected: Option<Origin>,
    },
    #[error("the submission id is bound to driver {namespace}:{pod}")]
    BoundToAnotherDriver { namespace: String, pod: String },
    #[error("cannot check which driver the submission id is bound to")]
    CheckBinding {
        #[source]
        source: CallError,
    },
    #[error("the submission task stopped before finishing")]
    TaskLost,
}

impl SubmitFailure {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            SubmitFailure::ReadDryRun { .. } => "read_dry_run",
            SubmitFailure::BuildObjects { .. } => "build_objects",
            SubmitFailure::Authorize { .. } => "authorize",
            SubmitFailure::CreateDriver { .. } => "create_driver",
            SubmitFailure::DryRun { .. } => "dry_run",
            SubmitFailure::BoundToAnotherDriver { .. } => "bound_to_another_driver",
            SubmitFailure::CheckBinding { .. } => "check_binding",
            SubmitFailure::TaskLost => "task_lost",
        }
    }
}

/// How a submission was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The driver: `created` by this request (201), or found (200, a duplicate; also a driver
    /// that succeeded and was collected, answered from its retention record).
    Driver { created: bool, body: SubmitResponse },
    /// `dryRun=true`: the objects as a `v1` List, nothing created (200).
    DryRun(Value),
}

/// Who the driver is, as the answer names it: from the built objects, or from the names alone
/// (a repeat answered from the caches).
struct Named<'a> {
    app_name: &'a str,
    app_id: &'a str,
    driver_pod_name: &'a str,
    namespace: &'a str,
}

impl<'a> From<&'a Identity> for Named<'a> {
    fn from(identity: &'a Identity) -> Named<'a> {
        Named {
            app_name: &identity.app_name,
            app_id: &identity.app_id,
            driver_pod_name: &identity.driver_pod_name,
            namespace: &identity.namespace,
        }
    }
}

impl<'a> From<&'a DriverNames> for Named<'a> {
    fn from(names: &'a DriverNames) -> Named<'a> {
        Named {
            app_name: &names.app_name,
            app_id: &names.app_id,
            driver_pod_name: &names.pod_name,
            namespace: &names.namespace,
        }
    }
}

/// The contract's answer for a driver pod as the API server (or the watch cache) has it.
fn driver_answer(id: &str, named: Named<'_>, submitted: &Submitted, duplicate: bool) -> Outcome {
    let pod = &submitted.pod;
    let body = SubmitResponse {
        submission_id: id.to_owned(),
        app_name: named.app_name.to_owned(),
        message: if duplicate {
            "duplicate submission: the existing driver pod is returned".into()
        } else {
            "driver pod created".into()
        },
        // The API server always sets it; the fallback only keeps the field well-formed.
        submitted_at: pod.created_at.clone().unwrap_or_else(now_rfc3339),
        spark_app_id: pod
            .spark_app_id
            .clone()
            .unwrap_or_else(|| named.app_id.to_owned()),
        driver_pod_name: named.driver_pod_name.to_owned(),
        driver_pod_uid: pod.uid.clone(),
        namespace: named.namespace.to_owned(),
        duplicate_submission: duplicate,
    };
    Outcome::Driver {
        created: !duplicate,
        body,
    }
}

/// The 200 duplicate answer for a driver known from its retention record: one that succeeded
/// and whose pod was removed, or one that was killed (a killed submission stays killed).
fn retained_answer(id: &str, built: &DriverObjects, record: &Record) -> Outcome {
    let message = match record.outcome {
        record::Outcome::Succeeded => {
            "duplicate submission: the driver already succeeded and its pod was removed"
        }
        record::Outcome::Killed => {
            "duplicate submission: the driver was killed; its submission id stays bound to it, \
             submit again with a new id"
        }
    };
    Outcome::Driver {
        created: false,
        body: SubmitResponse {
            submission_id: id.to_owned(),
            app_name: built.identity.app_name.clone(),
            message: message.into(),
            submitted_at: record::submitted_at(record),
            spark_app_id: record.spark_app_id.clone(),
            driver_pod_name: record.pod.clone(),
            driver_pod_uid: record.uid.clone(),
            namespace: record.namespace.clone(),
            duplicate_submission: true,
        },
    }
}

/// `?dryRun=true|false` (absent: false). Anything else is refused: a typo must not create.
fn dry_run_flag(query: Option<&str>) -> Result<bool, SubmitFailure> {
    let mut dry_run = false;
    for pair in query.unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "dryRun" {
            continue;
        }
        dry_run = match value {
            "true" | "All" => true,
            "false" => false,
            _ => {
                return Err(SubmitFailure::ReadDryRun {
                    value: value.to_owned(),
                });
            }
        };
    }
    Ok(dry_run)
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn now_ms(now: SystemTime) -> i64 {
    now.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The service account the driver pod will run as: what Spark put in the pod (the conf
/// `spark.kubernetes.authenticate.driver.serviceAccountName` over the template's).
fn driver_service_account(built: &DriverObjects) -> Option<&str> {
    let spec = built.pod().get("spec")?;
    spec.get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

/// The driver's objects of the parsed submission (its conf stays in `parsed`, for the
/// policy's look at the executors).
fn build(
    parsed: &ParsedSubmission,
    request: &SubmitRequest,
    submit_time_ms: i64,
    spark_user: &str,
) -> Result<DriverObjects, BuildError> {
    builder::build(&parsed.input(
        request.driver_pod_template.as_ref(),
        request.executor_pod_template.as_ref(),
        submit_time_ms,
        spark_user,
    ))
}

/// Every service account the submission runs code as, for the policy (`None`: `default`): the
/// driver's, and its executors' (the driver creates them with its own token, so an executor
/// account the policy does not allow would run the client's code as that account).
fn service_accounts<'a>(
    built: &'a DriverObjects,
    conf: &'a SparkConf,
    request: &'a SubmitRequest,
) -> Vec<Option<&'a str>> {
    let mut accounts = vec![driver_service_account(built)];
    accounts.extend(executor_service_accounts(
        conf,
        request.executor_pod_template.as_ref(),
    ));
    accounts
}

/// The accounts executors run as, by Spark's `ExecutorKubernetesCredentialsFeatureStep`: the
/// executor template's account (`serviceAccountName`, or the deprecated `serviceAccount`; both
/// are checked when both are set) takes precedence; else
/// `spark.kubernetes.authenticate.executor.serviceAccountName`; else the driver's conf account
/// (`spark.kubernetes.authenticate.driver.serviceAccountName`); else none, which Kubernetes runs
/// as `default`.
fn executor_service_accounts<'a>(
    conf: &'a SparkConf,
    template: Option<&'a Value>,
) -> Vec<Option<&'a str>> {
    let spec = template
        .map(|template| template.get("template").unwrap_or(template))
        .and_then(|template| template.get("spec"));
    let field = |name: &str| {
        spec.and_then(|spec| spec.get(name))
            .and_then(Value::as_str)
            .filter(|account| !account.is_empty())
    };
    let from_template: Vec<Option<&str>> = [field("serviceAccountName"), field("serviceAccount")]
        .into_iter()
        .flatten()
        .map(Some)
        .collect();
    if !from_template.is_empty() {
        return from_template;
    }
    let configured = |key: &str| conf.get(key).filter(|account| !account.is_empty());
    vec![configured(EXECUTOR_SERVICE_ACCOUNT).or_else(|| configured(DRIVER_SERVICE_ACCOUNT))]
}

/// Spark's confs of the driver's and the executors' service accounts.
const DRIVER_SERVICE_ACCOUNT: &str = "spark.kubernetes.authenticate.driver.serviceAccountName";
const EXECUTOR_SERVICE_ACCOUNT: &str = "spark.kubernetes.authenticate.executor.serviceAccountName";

/// Submits `request` for the client `peer`; `query` is the request's query string.
pub async fn submit(
    state: &AppState,
    peer: Option<&PeerIdentity>,
    query: Option<&str>,
    request: &SubmitRequest,
) -> Result<Outcome, SubmitFailure> {
    let dry_run = dry_run_flag(query)?;
    let id = request.submission_id.as_str();
    let refused = |source: BuildError| {
        info!(kind = source.kind(), "submission refused by the builder");
        SubmitFailure::BuildObjects { source }
    };
    // Read once: the repeat check and the build share it.
    let parsed = ParsedSubmission::parse(&request.spark_submit_args, &request.submission_id)
        .map_err(refused)?;
    if !dry_run
        && let Some(caches) = state.synced_caches()
        && let Some(found) = repeat::find(caches, &state.access, peer, request, &parsed)
    {
        return Ok(answer_repeat(state, id, &found));
    }
    // Never closed: the semaphore lives as long as the state.
    let _turn = state.work.acquire().await;
    let now = SystemTime::now();
    let built = build(&parsed, request, now_ms(now), &state.spark_user).map_err(refused)?;
    let conf = &parsed.submission.conf;
    // Shared with the creation task, not copied into it.
    let built = Arc::new(built);
    record_target(
        &built.identity.namespace,
        &built.identity.driver_pod_name,
        dry_run,
    );
    crate::audit::note_target(
        &built.identity.namespace,
        &built.identity.driver_pod_name,
        dry_run,
    );
    let namespace = &built.identity.namespace;
    let accounts = service_accounts(&built, conf, request);
    let pods =
        crate::pod_security::submission_pods(built.pod(), request.executor_pod_template.as_ref());
    state
        .access
        .may_submit(peer, namespace, &accounts)
        .and_then(|()| {
            let access = &state.access;
            access.may_run(peer, namespace, &accounts, &pods, conf.iter())
        })
        .map_err(|source| {
            warn!(kind = source.kind(), namespace = %namespace,
                identities = ?peer.map(PeerIdentity::names), "submission refused by the policy");
            SubmitFailure::Authorize { source }
        })?;

    // One id, one driver: refused here when the caches (or one LIST) already show the id bound
    // elsewhere; atomically, whatever the race, by the id's claim before the first object.
    if let Some((namespace, pod)) = bound_elsewhere(state, &built, id).await? {
        info!(bound_to = %format!("{namespace}:{pod}"), "submission id bound to another driver");
        return Err(SubmitFailure::BoundToAnotherDriver { namespace, pod });
    }

    if dry_run {
        let submission = Submission {
            api: &state.kube,
            objects: &built.objects,
            namespace,
            submission_id: id,
            caches: None,
            catch_up: state.cache_catch_up,
            claim: None,
        };
        return match submission.dry_run().await {
            Ok(list) => Ok(Outcome::DryRun(list)),
            Err(source) => Err(SubmitFailure::DryRun {
                rejected: rejected_input(&source, &built, request),
                source,
            }),
        };
    }

    // A driver of this submission that succeeded and was then garbage-collected left a
    // retention record: answering from it keeps "never a second driver" true after the pod is
    // gone.
    if let Some(record) = finished_driver(state, &built, id).await {
        state.metrics.duplicate();
        info!(
            uid = record.uid.as_str(),
            "submission answered from its retention record"
        );
        return Ok(retained_answer(id, &built, &record));
    }
    // A complete driver of this submission in the synced caches: a duplicate answered without
    // a request to the API server and without a creation task.
    let complete = Submission {
        api: &state.kube,
        objects: &built.objects,
        namespace,
        submission_id: id,
        caches: state.synced_caches(),
        catch_up: state.cache_catch_up,
        claim: None,
    }
    .complete_in_cache();
    if let Some(submitted) = complete {
        state.metrics.duplicate();
        // DEBUG: the audit line records the answer (DUPLICATE, pod, uid) at INFO already.
        debug!(
            duplicate = true,
            uid = submitted.pod_uid(),
            "submission answered from the watch cache"
        );
        return Ok(driver_answer(
            id,
            (&built.identity).into(),
            &submitted,
            true,
        ));
    }
    create(state, &parsed, &built, id)
        .await
        .map_err(|failure| match failure {
            SubmitFailure::CreateDriver { source, .. } => SubmitFailure::CreateDriver {
                rejected: rejected_input(&source, &built, request),
                source,
            },
            other => other,
        })
}

/// When the API server rejected a field of a built object (400/422), or its resources (a 403
/// of a LimitRange or a quota's constraints), the input it came from.
fn rejected_input(
    error: &SubmitDriverError,
    built: &DriverObjects,
    request: &SubmitRequest,
) -> Option<Origin> {
    let call = error.call_error()?;
    let (kind, name) = error.object()?;
    let object = built.objects.iter().find(|object| {
        object.get("kind").and_then(Value::as_str) == Some(kind)
            && submission::pointer::text(object, "/metadata/name") == name
    })?;
    let status = call.status()?;
    if status.code == 403 && blame::forbidden(&status.message) == blame::Forbidden::Resources {
        return Some(blame::resources_origin(
            object,
            request.driver_pod_template.as_ref(),
        ));
    }
    if !matches!(status.code, 400 | 422) {
        return None;
    }
    // The executor template's ConfigMap is the one that does not hold the spark properties.
    let executor_template_config_map = kind == "ConfigMap"
        && object
            .get("data")
            .and_then(|data| data.get("spark.properties"))
            .is_none();
    let fields = call.rejected_fields();
    Some(blame::origin(
        object,
        request.driver_pod_template.as_ref(),
        request.executor_pod_template.as_ref(),
        executor_template_config_map,
        &fields,
    ))
}

/// The driver a submission targets, on the request's span. In one call: the JSON log formatter
/// parses and writes a span's fields again on every record.
fn record_target(namespace: &str, pod: &str, dry_run: bool) {
    let span = Span::current();
    tracing::record_all!(span, namespace = namespace, pod = pod, dry_run = dry_run);
}

/// The 200 for a repeat whose complete driver the caches show ([`repeat::find`]).
fn answer_repeat(state: &AppState, id: &str, found: &repeat::Repeat) -> Outcome {
    let names = &found.names;
    record_target(&names.namespace, &names.pod_name, false);
    crate::audit::note_target(&names.namespace, &names.pod_name, false);
    state.metrics.duplicate();
    // DEBUG: the audit line records the answer (DUPLICATE, pod, uid) at INFO already.
    debug!(
        duplicate = true,
        uid = found.submitted.pod_uid(),
        "submission answered from the watch cache before building"
    );
    driver_answer(id, names.into(), &found.submitted, true)
}

/// The claim of the submission's id for the driver `built` names, in the submitter's namespace.
fn claim_of(state: &AppState, parsed: &ParsedSubmission, built: &DriverObjects) -> ClaimToWrite {
    let home = state.record_namespace.to_string();
    let (claim, object) = record::claim(
        &parsed.id,
        &built.identity.namespace,
        &built.identity.driver_pod_name,
        &home,
    );
    ClaimToWrite {
        home,
        claim,
        object,
    }
}

/// Creates (or finds) the driver in a task shared by concurrent duplicates.
async fn create(
    state: &AppState,
    parsed: &ParsedSubmission,
    built: &Arc<DriverObjects>,
    id: &str,
) -> Result<Outcome, SubmitFailure> {
    let key = Key {
        namespace: built.identity.namespace.clone(),
        pod: built.identity.driver_pod_name.clone(),
        submission_id: id.to_owned(),
    };
    let work = {
        let kube = state.kube.clone();
        let metrics = state.metrics.clone();
        let built = Arc::clone(built);
        let submission_id = id.to_owned();
        let caches = state.synced_caches().cloned();
        let catch_up = state.cache_catch_up;
        let claim = claim_of(state, parsed, &built);
        Box::pin(async move {
            let outcome = Submission {
                api: &kube,
                objects: &built.objects,
                namespace: &built.identity.namespace,
                submission_id: &submission_id,
                caches: caches.as_ref(),
                catch_up,
                claim: Some(&claim),
            }
            .run()
            .await;
            if let Err(Failure {
                rolled_back: true, ..
            }) = &outcome
            {
                metrics.rollback();
            }
            outcome
        })
    };
    let (outcome, leader) = state.in_flight.join_or_start(key, work);
    match outcome.await {
        Ok(submitted) => {
            // A request that joined a running creation is a duplicate of it.
            let duplicate = !(leader && submitted.created);
            // DEBUG: the audit line records the answer (CREATED or DUPLICATE, uid) at INFO.
            debug!(duplicate, uid = submitted.pod_uid(), "submission answered");
            if duplicate {
                state.metrics.duplicate();
            }
            Ok(driver_answer(
                id,
                (&built.identity).into(),
                &submitted,
                duplicate,
            ))
        }
        Err(TaskFailure::Failed(source)) => {
            if let SubmitDriverError::Ended { record } = source.as_ref() {
                state.metrics.duplicate();
                info!(
                    uid = record.uid.as_str(),
                    "submission answered from its id's record"
                );
                return Ok(retained_answer(id, built, record));
            }
            warn!(kind = source.kind(), error = %source.loggable_cause(), "submission failed");
            Err(SubmitFailure::CreateDriver {
                source,
                rejected: None,
            })
        }
        Err(TaskFailure::Lost) => Err(SubmitFailure::TaskLost),
    }
}

/// The driver, other than the one `built` names, that carries `id` in another namespace, in a
/// retention record or in the id's claim: from the synced caches when there are some (no
/// request), else from one labelled LIST of pods (all namespaces) and one of records. An early
/// refusal only: what this cannot see (two first submissions racing, caches that lag), the
/// claim decides atomically before any object is created ([`crate::claim`]).
async fn bound_elsewhere(
    state: &AppState,
    built: &DriverObjects,
    id: &str,
) -> Result<Option<(String, String)>, SubmitFailure> {
    let ours = (
        built.identity.namespace.as_str(),
        built.identity.driver_pod_name.as_str(),
    );
    let other = |namespace: &str, pod: &str| {
        ((namespace, pod) != ours).then(|| (namespace.to_owned(), pod.to_owned()))
    };
    if let Some(caches) = state.synced_caches() {
        let cached_pods = caches.pod_index.get(id);
        if let Some(bound) = cached_pods.iter().find_map(|(ns, pod)| other(ns, pod)) {
            return Ok(Some(bound));
        }
        let records = caches.retained(&record::submission_key(id));
        if let Some(bound) = records.iter().find_map(|r| other(&r.namespace, &r.pod)) {
            return Ok(Some(bound));
        }
        let claimed = caches
            .config_map(&state.record_namespace, &record::claim_name(id))
            .and_then(|cm| record::read_claim(&cm));
        return Ok(claimed.and_then(|claim| other(&claim.namespace, &claim.pod)));
    }
    let Ok(parsed) = id.parse::<SubmissionId>() else {
        return Ok(None);
    };
    let selector = format!("{}={}", labels::SUBMISSION_ID_HASH, parsed.label_value());
    let check = |source| SubmitFailure::CheckBinding { source };
    let pods = state.kube.list_pods(&selector).await.map_err(check)?;
    let annotated = |meta: &kube::api::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(annotations::SUBMISSION_ID))
            .is_some_and(|value| value == id)
    };
    if let Some(bound) = pods
        .iter()
        .filter(|pod| annotated(&pod.metadata))
        .find_map(|pod| {
            other(
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default(),
            )
        })
    {
        return Ok(Some(bound));
    }
    let records = state
        .kube
        .list_config_maps(&state.record_namespace, &selector)
        .await
        .map_err(check)?;
    Ok(records
        .iter()
        .filter_map(record::read)
        .filter(|r| r.submission_id == id)
        .find_map(|r| other(&r.namespace, &r.pod)))
}

/// The retention record of this submission's finished driver, if the pod it names is the one
/// this submission builds. Any failure to read it means "no record": the normal path then
/// observes the pod itself, so nothing is lost by not knowing.
async fn finished_driver(state: &AppState, built: &DriverObjects, id: &str) -> Option<Record> {
    let ours = |r: &Record| {
        r.submission_id == id
            && r.namespace == built.identity.namespace
            && r.pod == built.identity.driver_pod_name
    };
    // From the synced watch cache when there is one: no API call on the submission path. A
    // record reaches the cache milliseconds after the driver succeeds, long before its pod is
    // collected, so the cache's lag does not open a window for a second driver in practice.
    if let Some(caches) = state.synced_caches() {
        return caches
            .retained(&record::submission_key(id))
            .into_iter()
            .find(ours);
    }
    let name = record::claim_name(id);
    let cm = state
        .kube
        .get_config_map(&state.record_namespace, &name)
        .await
        .ok()??;
    record::read(&cm).filter(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executors_run_as_the_template_account_else_the_executor_conf_else_the_drivers() {
        use serde_json::json;
        let conf = |pairs: &[(&str, &str)]| {
            let mut conf = SparkConf::new();
            for (key, value) in pairs {
                conf.set(*key, *value);
            }
            conf
        };
        let both = conf(&[
            (DRIVER_SERVICE_ACCOUNT, "d"),
            (EXECUTOR_SERVICE_ACCOUNT, "e"),
        ]);
        let driver_only = conf(&[(DRIVER_SERVICE_ACCOUNT, "d")]);
        let none = conf(&[]);
        let named = json!({"spec": {"serviceAccountName": "t"}});
        let deprecated = json!({"spec": {"serviceAccount": "old"}});
        let pod_shaped = json!({"template": {"spec": {"serviceAccountName": "t"}}});
        let split = json!({"spec": {"serviceAccountName": "t", "serviceAccount": "old"}});
        type Case<'a> = (&'a SparkConf, Option<&'a Value>, Vec<Option<&'a str>>);
        let cases: [Case; 7] = [
            (&both, Some(&named), vec![Some("t")]),
            (&both, Some(&deprecated), vec![Some("old")]),
            (&both, Some(&pod_shaped), vec![Some("t")]),
            (&none, Some(&split), vec![Some("t"), Some("old")]),
            (&both, None, vec![Some("e")]),
            (&driver_only, None, vec![Some("d")]),
            (&none, None, vec![None]),
        ];
        for (conf, template, expected) in cases {
            assert_eq!(
                executor_service_accounts(conf, template),
                expected,
                "{template:?}"
            );
        }
    }

    #[test]
    fn dry_run_flag_accepts_true_false_and_absent_only() {
        let flag = |query: Option<&str>| dry_run_flag(query).map_err(|e| e.kind());
        assert_eq!(flag(None), Ok(false));
        assert_eq!(flag(Some("dryRun=true")), Ok(true));
        assert_eq!(flag(Some("x=1&dryRun=false")), Ok(false));
        assert_eq!(flag(Some("dryRun=yes")), Err("read_dry_run"));
    }
}
