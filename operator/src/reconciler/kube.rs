//! The reconciler's effects against a real cluster: the watch caches, the API server, the
//! submitter over mTLS, the event recorder and the state store of fenced restarts (generic: the
//! backend is chosen once, when `operator run` starts).

use std::sync::Arc;

use ::kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams, Preconditions};
use ::kube::{Client, Resource, ResourceExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube_runtime::events::{Event, EventType as KubeEventType};
use submission::api::ErrorCode;
use submission::error_chain::error_chain;
use submitter_client::{SubmitError, SubmitterClient};
use tracing::{info, warn};

use super::{Effects, Health, ReconcileError, StatusWrite, observe};
use crate::argv::build_submission;
use crate::crd::{SparkApplication, SparkApplicationStatus};
use crate::dependencies;
use crate::executors::ExecutorIndex;
use crate::fence::Heartbeat;
use crate::labels;
use crate::metrics::{Metrics, outcome};
use crate::progress_store::{AppKey, ProgressStore, Scope, StoreError};
use crate::recovery::RecoverySettings;
use crate::state_machine::{
    EventType, FIRST_RUN, FenceOutcome, ObservedDriver, ObservedExecutor, PendingReason,
    RefusedObject, SubmissionOutcome, UiMade,
};
use crate::ui::UiSettings;

/// The effects of `operator run`.
pub struct KubeEffects<S> {
    pub client: Client,
    pub submitter: SubmitterClient,
    /// The driver pod caches with their owner indexes, one per namespace watched (or one for
    /// all); the controller's pod watches feed them.
    pub pods: Vec<crate::pod_index::DriverCache>,
    /// The executors of every application, from the executor watches.
    pub executors: Arc<ExecutorIndex>,
    /// The pods' recent Warning events, from the events watches.
    pub warnings: crate::pod_warnings::PodWarnings,
    /// The ResourceQuotas, one cache per namespace watched (or one for all).
    pub quotas: Vec<kube_runtime::reflector::Store<k8s_openapi::api::core::v1::ResourceQuota>>,
    pub health: Arc<Health>,
    pub recorder: Arc<crate::events::EventRecorder>,
    /// `--master` given to the submitter in the argv.
    pub master: String,
    /// What a fenced restart adds to a submission; `None`: the feature is off.
    pub recovery: Option<RecoverySettings>,
    pub metrics: Arc<Metrics>,
    /// The state store of fenced restarts (when `recovery` is set).
    pub store: Option<S>,
}

fn is_conflict(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(status) if status.code == 409)
}

fn is_not_found(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(status) if status.code == 404)
}

/// What a create of one of the run's objects came to.
enum Created<K> {
    Made(K),
    /// One of that name exists (a previous run's, or this run's before a crash): it is taken as
    /// it is.
    Exists,
    /// The API server refused it, saying this.
    Refused(String),
}

/// Creates `object` through `api`; an error is what a retry may cure. `crd` names the CRD that
/// serves the type, for a type Kubernetes does not have itself.
async fn create<K>(api: &Api<K>, object: &K, crd: Option<&str>) -> Result<Created<K>, ::kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(created) => Ok(Created::Made(created)),
        Err(error) if is_conflict(&error) => Ok(Created::Exists),
        Err(error) => match refusal(&error, crd) {
            Some(message) => Ok(Created::Refused(message)),
            None => Err(error),
        },
    }
}

/// The API server's refusal of an object, as the application's message says it: its type is not
/// served (404; `crd` names the CRD that would serve it), the operator may not create it (403,
/// which is also how a quota refuses), or it is invalid (400, 422). `None` for what a retry may
/// cure (a server error, throttling, a lost connection). Matched on the status code, never on
/// the message.
fn refusal(error: &::kube::Error, crd: Option<&str>) -> Option<String> {
    let ::kube::Error::Api(status) = error else {
        return None;
    };
    match (status.code, crd) {
        (404, Some(crd)) => Some(format!(
            "its type is not served: the CRD {crd} is not installed in the cluster"
        )),
        (400 | 403 | 404 | 422, _) => Some(status.message.clone()),
        _ => None,
    }
}

fn namespace(app: &SparkApplication) -> String {
    app.namespace().unwrap_or_default()
}

/// The store's key of run `run` of `app`.
fn app_key(app: &SparkApplication, run: u64) -> AppKey {
    let uid = app.metadata.uid.clone().unwrap_or_default();
    AppKey::new(namespace(app), app.name_any(), Scope::new(uid, run))
}

/// The run of the app's current driver, as its status records it.
fn current_run(app: &SparkApplication) -> u64 {
    app.status
        .as_ref()
        .and_then(|s| s.recovery_status.as_ref())
        .map_or(FIRST_RUN, |r| r.run)
}

impl<S> KubeEffects<S> {
    /// The same effects over the state store `store`.
    pub fn with_store<T>(self, store: T) -> KubeEffects<T> {
        KubeEffects {
            client: self.client,
            submitter: self.submitter,
            pods: self.pods,
            executors: self.executors,
            warnings: self.warnings,
            quotas: self.quotas,
            health: self.health,
            recorder: self.recorder,
            master: self.master,
            recovery: self.recovery,
            metrics: self.metrics,
            store: Some(store),
        }
    }
}

impl<S: ProgressStore> KubeEffects<S> {
    fn apps(&self, app: &SparkApplication) -> Api<SparkApplication> {
        Api::namespaced(self.client.clone(), &namespace(app))
    }

    fn pods_api(&self, app: &SparkApplication) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &namespace(app))
    }

    /// Advances the epoch and reads the marker the next driver restores.
    async fn advance(
        &self,
        store: &S,
        app: &SparkApplication,
        observed: u64,
        run: u64,
    ) -> Result<FenceOutcome, StoreError> {
        let key = app_key(app, run);
        let epoch = store.advance_epoch(&key, observed).await?;
        let latest = store.latest(&key).await?;
        Ok(FenceOutcome {
            epoch,
            latest: latest.map(|m| (m.epoch, m.seq)),
        })
    }
}

impl<S: ProgressStore> Effects for KubeEffects<S> {
    fn cache_synced(&self) -> bool {
        self.health.synced()
    }

    fn cached_drivers(
        &self,
        app: &SparkApplication,
    ) -> (Option<ObservedDriver>, Vec<ObservedDriver>) {
        let Some(uid) = app.metadata.uid.as_deref() else {
            return (None, Vec::new());
        };
        let namespace = namespace(app);
        let named = app
            .status
            .as_ref()
            .map_or("", |s| s.driver_info.pod_name.as_str());
        let cached: Vec<Arc<Pod>> = self
            .pods
            .iter()
            .flat_map(|cache| cache.candidates(&namespace, uid, named))
            .collect();
        let pods: Vec<&Pod> = cached.iter().map(Arc::as_ref).collect();
        let driver = observe::find_driver(app, &pods);
        let others = observe::other_drivers(uid, &pods, driver)
            .map(|pod| observe::observe_driver(pod, uid))
            .collect();
        (driver.map(|pod| observe::observe_driver(pod, uid)), others)
    }

    fn cached_executors(&self, app: &SparkApplication) -> Vec<ObservedExecutor> {
        self.executors.executors(&namespace(app), &app.name_any())
    }

    fn cached_quotas(&self, app: &SparkApplication) -> Vec<crate::executor_quota::QuotaRoom> {
        let namespace = namespace(app);
        self.quotas
            .iter()
            .flat_map(kube_runtime::reflector::Store::state)
            .filter(|q| q.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .filter_map(|q| crate::executor_quota::QuotaRoom::of(&q))
            .collect()
    }

    async fn read_live(
        &self,
        app: &SparkApplication,
    ) -> Result<Option<SparkApplication>, ReconcileError> {
        self.apps(app)
            .get_opt(&app.name_any())
            .await
            .map_err(ReconcileError::ReadLatest)
    }

    async fn write_status(
        &self,
        app: &SparkApplication,
        status: SparkApplicationStatus,
    ) -> Result<StatusWrite, ReconcileError> {
        let mut body = app.clone();
        body.status = Some(status);
        body.metadata.managed_fields = None;
        match self
            .apps(app)
            .replace_status(&app.name_any(), &PostParams::default(), &body)
            .await
        {
            Ok(written) => Ok(StatusWrite::Written(Box::new(written))),
            Err(error) if is_conflict(&error) => Ok(StatusWrite::Conflict),
            Err(error) => Err(ReconcileError::WriteStatus(error)),
        }
    }

    async fn driver_absent(
        &self,
        app: &SparkApplication,
        pod: &str,
        submission_id: &str,
    ) -> Result<bool, ReconcileError> {
        let found = self.pods_api(app).get_opt(pod).await.map_err(|source| {
            ReconcileError::VerifyDriverAbsent {
                name: pod.to_owned(),
                source,
            }
        })?;
        Ok(found.is_none_or(|pod| {
            pod.labels().get(labels::SUBMISSION_ID).map(String::as_str) != Some(submission_id)
        }))
    }

    async fn ensure_dependencies(
        &self,
        app: &SparkApplication,
    ) -> Result<Result<(), RefusedObject>, ReconcileError> {
        for dependency in dependencies::of(app) {
            let api_version = match dependency.group {
                "" => dependency.version.to_owned(),
                group => format!("{group}/{}", dependency.version),
            };
            let resource = ApiResource {
                group: dependency.group.to_owned(),
                version: dependency.version.to_owned(),
                api_version,
                kind: dependency.kind.to_owned(),
                plural: dependency.plural.to_owned(),
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &namespace(app), &resource);
            let object: DynamicObject = serde_json::from_value(dependency.object.clone())
                .expect("an object built from plain fields always decodes");
            let created = create(&api, &object, dependency.crd.as_deref())
                .await
                .map_err(|source| ReconcileError::EnsureDependencies {
                    object: dependency.describe(),
                    source,
                })?;
            match created {
                Created::Made(_) => {
                    info!(object = %dependency.describe(), "made a dependency of the driver");
                }
                Created::Exists => {}
                Created::Refused(message) => {
                    return Ok(Err(RefusedObject {
                        object: dependency.describe(),
                        message,
                        required: true,
                    }));
                }
            }
        }
        Ok(Ok(()))
    }

    async fn ensure_ui_objects(
        &self,
        app: &SparkApplication,
        settings: &UiSettings,
    ) -> Result<UiMade, ReconcileError> {
        let plan = match crate::ui::plan(app, settings) {
            Ok(plan) => plan,
            // The spec (or the operator's URL format) cannot be honoured: nothing is made.
            Err(error) => {
                return Ok(UiMade {
                    refused: vec![RefusedObject {
                        object: "the UI objects".to_owned(),
                        message: error.to_string(),
                        required: true,
                    }],
                    ..UiMade::default()
                });
            }
        };
        let services: Api<Service> = Api::namespaced(self.client.clone(), &namespace(app));
        let ingresses: Api<Ingress> = Api::namespaced(self.client.clone(), &namespace(app));
        let mut made = UiMade::default();
        for planned in &plan.services {
            let name = planned.object.metadata.name.clone().unwrap_or_default();
            let object = format!("Service {name}");
            let fail = |source| ReconcileError::EnsureUiObjects {
                object: object.clone(),
                source,
            };
            let stored = match create(&services, &planned.object, None)
                .await
                .map_err(fail)?
            {
                Created::Made(created) => created,
                Created::Exists => services.get(&name).await.map_err(fail)?,
                Created::Refused(message) => {
                    made.refuse(object, message, planned.required);
                    continue;
                }
            };
            if let Some((ui_name, port)) = plan.ui_service.as_ref().filter(|(n, _)| *n == name) {
                let ip = stored
                    .spec
                    .as_ref()
                    .and_then(|s| s.cluster_ip.clone())
                    .unwrap_or_default();
                made.service = Some((ui_name.clone(), *port, format!("{ip}:{port}")));
            }
        }
        for planned in &plan.ingresses {
            let name = planned.object.metadata.name.clone().unwrap_or_default();
            let object = format!("Ingress {name}");
            let created = create(&ingresses, &planned.object, None)
                .await
                .map_err(|source| ReconcileError::EnsureUiObjects {
                    object: object.clone(),
                    source,
                })?;
            if let Created::Refused(message) = created {
                made.refuse(object, message, planned.required);
                continue;
            }
            if let Some(ui_ingress) = plan.ui_ingress.as_ref().filter(|(n, _)| *n == name) {
                made.ingress = Some(ui_ingress.clone());
            }
        }
        info!(
            services = plan.services.len(),
            ingresses = plan.ingresses.len(),
            refused = made.refused.len(),
            "made the UI objects"
        );
        Ok(made)
    }

    async fn stop_driver(
        &self,
        app: &SparkApplication,
        pod: &str,
        submission_id: &str,
    ) -> Result<(), ReconcileError> {
        let found =
            self.pods_api(app)
                .get_opt(pod)
                .await
                .map_err(|source| ReconcileError::StopDriver {
                    name: pod.to_owned(),
                    source,
                })?;
        let Some(found) = found else {
            return Ok(());
        };
        let ours = found
            .labels()
            .get(labels::SUBMISSION_ID)
            .map(String::as_str)
            == Some(submission_id);
        if !ours || found.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let uid = found.metadata.uid.clone().unwrap_or_default();
        self.delete_driver(app, pod, &uid).await
    }

    fn driver_warning(&self, _pod: &str, uid: &str) -> Option<PendingReason> {
        self.warnings.latest(uid)
    }

    async fn submit(&self, app: &SparkApplication, submission_id: String) -> SubmissionOutcome {
        send_submission(
            &self.submitter,
            &self.metrics,
            (&self.master, self.recovery.as_ref()),
            app,
            submission_id,
        )
        .await
    }

    async fn fence(
        &self,
        app: &SparkApplication,
        observed: u64,
        run: u64,
    ) -> Result<FenceOutcome, ReconcileError> {
        let store = self.store.as_ref().ok_or(ReconcileError::NoStore)?;
        self.advance(store, app, observed, run)
            .await
            .map_err(ReconcileError::Fence)
    }

    async fn last_heartbeat(&self, app: &SparkApplication) -> Option<Option<Heartbeat>> {
        let store = self.store.as_ref()?;
        match store.last_heartbeat(&app_key(app, current_run(app))).await {
            Ok(heartbeat) => Some(heartbeat),
            Err(error) => {
                warn!(kind = error.kind(), error = %error_chain(&error), "cannot read the heartbeat");
                None
            }
        }
    }

    async fn delete_driver(
        &self,
        app: &SparkApplication,
        pod: &str,
        uid: &str,
    ) -> Result<(), ReconcileError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.pods_api(app).delete(pod, &params).await {
            Ok(_) => {
                info!(pod = %pod, "deleted driver pod");
                Ok(())
            }
            // 409: another pod now holds the name; it is not ours to delete.
            Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(()),
            Err(source) => Err(ReconcileError::DeleteDriver {
                name: pod.to_owned(),
                source,
            }),
        }
    }

    async fn delete_application(&self, app: &SparkApplication) -> Result<(), ReconcileError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: app.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.apps(app).delete(&app.name_any(), &params).await {
            Ok(_) => {
                info!("deleted the application: its time to live expired");
                Ok(())
            }
            Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(()),
            Err(source) => Err(ReconcileError::DeleteApplication(source)),
        }
    }

    async fn record_event(
        &self,
        app: &SparkApplication,
        event_type: EventType,
        reason: &'static str,
        message: String,
    ) {
        publish_event(&self.recorder, app, event_type, reason, message).await;
    }
}

/// Builds the app's submission (for `master`, with its recovery settings) and sends it, counting
/// the outcome; shared with the scale benchmark's polling operator.
pub async fn send_submission(
    submitter: &SubmitterClient,
    metrics: &Metrics,
    (master, recovery): (&str, Option<&RecoverySettings>),
    app: &SparkApplication,
    submission_id: String,
) -> SubmissionOutcome {
    let plan = match build_submission(app, &submission_id, master, recovery) {
        Ok(plan) => plan,
        Err(error) => {
            metrics.submission(outcome::REJECTED);
            warn!(kind = error.kind(), error = %error_chain(&error), "cannot build the submission");
            return SubmissionOutcome::Rejected {
                submission_id,
                message: error_chain(&error),
                retryable: false,
            };
        }
    };
    let request = plan.into_request();
    match submitter.submit(&request).await {
        Ok(response) => {
            metrics.submission(if response.duplicate_submission {
                outcome::DUPLICATE
            } else {
                outcome::CREATED
            });
            info!(
                submission_id = %response.submission_id,
                driver = %response.driver_pod_name,
                duplicate = response.duplicate_submission,
                "submitted"
            );
            SubmissionOutcome::Accepted {
                submission_id: response.submission_id,
                driver_pod_name: response.driver_pod_name,
                spark_app_id: response.spark_app_id,
            }
        }
        // The answer that passes with time but not within one call: a failed attempt of its
        // own, retried as the restart policy says.
        Err(SubmitError::Rejected {
            code: Some(ErrorCode::QuotaExceeded),
            message,
            ..
        }) => {
            metrics.submission(outcome::QUOTA_EXCEEDED);
            warn!(submission_id = %submission_id, message = %message, "submission over quota");
            SubmissionOutcome::OverQuota {
                submission_id,
                message,
            }
        }
        Err(error) => {
            metrics.submission(if error.retryable() {
                outcome::UNAVAILABLE
            } else {
                outcome::REJECTED
            });
            warn!(
                submission_id = %submission_id,
                kind = error.kind(),
                retryable = error.retryable(),
                error = %error_chain(&error),
                "submission failed"
            );
            SubmissionOutcome::Rejected {
                submission_id,
                message: error_chain(&error),
                retryable: error.retryable(),
            }
        }
    }
}

/// The event's `action`. The recorder folds events with the same action and reason into one
/// series that keeps the first note, so a different message (a new epoch, another driver) must be
/// a different action, while the same message repeated stays one series.
pub fn event_action(reason: &str, note: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(note.as_bytes());
    let short = submission::naming::hex(&digest[..4]);
    format!("{reason}-{short}")
}

/// Publishes one of the state machine's events about `app`, logging a failure; shared with the
/// scale benchmark's polling operator.
pub async fn publish_event(
    recorder: &crate::events::EventRecorder,
    app: &SparkApplication,
    event_type: EventType,
    reason: &'static str,
    message: String,
) {
    let event = Event {
        type_: match event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: reason.to_owned(),
        action: event_action(reason, &message),
        note: Some(message),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &app.object_ref(&())).await {
        warn!(reason, error = %error_chain(&error), "cannot record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_with_other_messages_are_other_actions_and_repeats_are_one() {
        let first = event_action("EpochAdvanced", "epoch 1");
        assert_eq!(first, event_action("EpochAdvanced", "epoch 1"));
        assert_ne!(first, event_action("EpochAdvanced", "epoch 2"));
        assert!(first.starts_with("EpochAdvanced-"), "{first}");
        // The Events API caps `action` at 128 characters.
        assert!(event_action(&"R".repeat(100), "x").len() <= 128);
    }
}
