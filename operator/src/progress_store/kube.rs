//! Kubernetes-native backend, the default: one ConfigMap `<app>-progress` per application in the
//! application's namespace. Every write reads the object, applies the rule of [`crate::fence`] to
//! what it read and replaces the object with the resourceVersion it read (compare-and-swap): if
//! anyone wrote in between, the API server answers 409 and the write starts over from a fresh read,
//! so the rule is always judged against the latest state and a stale epoch stays FENCED however
//! many retries it takes.
//!
//! Data keys: `scope` (`<uid>/<run>`, absent before the first fence), `epoch` (decimal),
//! `markers` (JSON array of [`Marker`], oldest first), `heartbeat` (JSON [`Heartbeat`], absent
//! until the first one). A ConfigMap holds at most 1 MiB: the operator prunes the marker history.
//!
//! The object belongs to the application: every write sets an ownerReference to the
//! SparkApplication whose uid the scope names, so deleting the application lets the garbage
//! collector delete its progress; an object left by an earlier application of the same name
//! (orphaned, or not yet collected) is another scope, and the next fence starts from nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use ::kube::Resource;
use ::kube::api::{Api, ObjectMeta, PostParams};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{AppKey, Heartbeat, Marker, ProgressStore, StoreError};
use crate::crd::SparkApplication;
use crate::fence::{self, FenceState};

/// Reads and compare-and-swaps per operation before giving up. Contention is between one operator
/// and one or two agents per application, so a handful is plenty.
pub const MAX_ATTEMPTS: u32 = 8;

const SCOPE: &str = "scope";
const EPOCH: &str = "epoch";
const MARKERS: &str = "markers";
const HEARTBEAT: &str = "heartbeat";

/// The ConfigMap name for an application.
pub fn object_name(app: &AppKey) -> String {
    format!("{}-progress", app.name)
}

/// A store of one ConfigMap per application.
#[derive(Clone)]
pub struct KubeStore {
    client: ::kube::Client,
    /// Whether writes make the scope's SparkApplication the owner of its object.
    owned: bool,
}

/// What a rule decided: write a new state, or answer without writing (a retry that finds its work
/// done, an empty prune).
enum Outcome<T> {
    Write(FenceState, T),
    Keep(T),
}

impl KubeStore {
    /// A store using `client`, whose objects belong to their applications.
    pub fn new(client: ::kube::Client) -> Self {
        Self {
            client,
            owned: true,
        }
    }

    /// A store whose objects have no owner: for applications that are not SparkApplications of
    /// the cluster (the garbage collector deletes an object whose owner does not exist).
    pub fn without_owners(client: ::kube::Client) -> Self {
        Self {
            client,
            owned: false,
        }
    }

    fn api(&self, app: &AppKey) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &app.namespace)
    }

    /// The state and the object's metadata as read, resourceVersion included (`None` when the
    /// object does not exist). An object that does not decode fails the operation at once:
    /// retrying cannot repair it.
    async fn read(
        &self,
        op: &'static str,
        app: &AppKey,
    ) -> Result<(FenceState, Option<ObjectMeta>), Retry> {
        match self.api(app).get_opt(&object_name(app)).await {
            Err(e) => Err(classify(op, app, e)),
            Ok(None) => Ok((FenceState::default(), None)),
            Ok(Some(cm)) => {
                let state = decode(&cm).map_err(|reason| {
                    Retry::Fail(StoreError::Corrupt {
                        app: app.clone(),
                        reason,
                    })
                })?;
                Ok((state, Some(cm.metadata)))
            }
        }
    }

    async fn read_state(&self, op: &'static str, app: &AppKey) -> Result<FenceState, StoreError> {
        let mut last = None;
        for attempt in 0..MAX_ATTEMPTS {
            match self.read(op, app).await {
                Ok((state, _)) => return Ok(state),
                Err(Retry::Again(e)) => {
                    last = Some(e);
                    backoff(attempt).await;
                }
                Err(Retry::Fail(e)) => return Err(e),
            }
        }
        Err(last.unwrap_or(StoreError::ConflictRetriesExhausted {
            op,
            app: app.clone(),
            attempts: MAX_ATTEMPTS,
        }))
    }

    /// Read → rule → compare-and-swap, until the swap wins, the rule refuses, or attempts run out.
    async fn update<T>(
        &self,
        op: &'static str,
        app: &AppKey,
        rule: impl Fn(&FenceState) -> Result<Outcome<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let api = self.api(app);
        let mut transient = None;
        for attempt in 0..MAX_ATTEMPTS {
            let (state, previous) = match self.read(op, app).await {
                Ok(read) => read,
                Err(Retry::Again(e)) => {
                    transient = Some(e);
                    backoff(attempt).await;
                    continue;
                }
                Err(Retry::Fail(e)) => return Err(e),
            };
            let (next, out) = match rule(&state)? {
                Outcome::Keep(out) => return Ok(out),
                Outcome::Write(next, out) => (next, out),
            };
            let exists = previous.is_some();
            let object = encode(app, &next, previous, self.owned)?;
            let written = match exists {
                false => api.create(&PostParams::default(), &object).await,
                true => {
                    api.replace(&object_name(app), &PostParams::default(), &object)
                        .await
                }
            };
            match written {
                Ok(_) => return Ok(out),
                Err(e) => match classify(op, app, e) {
                    Retry::Again(e) => {
                        // A 409 (someone wrote first) or a lost answer: re-read and judge again.
                        // Retrying is safe because every rule is idempotent on its own result.
                        tracing::debug!(app = %app, op, attempt, error = %e, "store write retried");
                        transient = Some(e);
                        backoff(attempt).await;
                    }
                    Retry::Fail(e) => return Err(e),
                },
            }
        }
        match transient {
            Some(StoreError::Backend { source, .. }) if !is_conflict_source(source.as_ref()) => {
                Err(StoreError::Backend {
                    op,
                    app: app.clone(),
                    source,
                })
            }
            _ => Err(StoreError::ConflictRetriesExhausted {
                op,
                app: app.clone(),
                attempts: MAX_ATTEMPTS,
            }),
        }
    }
}

enum Retry {
    Again(StoreError),
    Fail(StoreError),
}

/// Conflicts, throttling, server errors and transport failures are worth another read; anything
/// else (forbidden, invalid) will not get better. Matched on the status code, never the message.
fn classify(op: &'static str, app: &AppKey, e: ::kube::Error) -> Retry {
    let retry = match &e {
        ::kube::Error::Api(status) => {
            status.code == 409 || status.code == 429 || status.code >= 500
        }
        _ => true,
    };
    let err = StoreError::Backend {
        op,
        app: app.clone(),
        source: Box::new(e),
    };
    if retry {
        Retry::Again(err)
    } else {
        Retry::Fail(err)
    }
}

fn is_conflict_source(source: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    matches!(
        source.downcast_ref::<::kube::Error>(),
        Some(::kube::Error::Api(status)) if status.code == 409
    )
}

async fn backoff(attempt: u32) {
    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt + 1))).await;
}

fn decode(cm: &ConfigMap) -> Result<FenceState, String> {
    let empty = BTreeMap::new();
    let data = cm.data.as_ref().unwrap_or(&empty);
    let epoch = match data.get(EPOCH) {
        None => fence::INITIAL_EPOCH,
        Some(t) => t
            .parse()
            .map_err(|_| format!("epoch {t:?} is not a number"))?,
    };
    let markers: Vec<Marker> = match data.get(MARKERS) {
        None => Vec::new(),
        Some(t) => serde_json::from_str(t).map_err(|e| format!("markers: {e}"))?,
    };
    let heartbeat: Option<Heartbeat> = match data.get(HEARTBEAT) {
        None => None,
        Some(t) => Some(serde_json::from_str(t).map_err(|e| format!("heartbeat: {e}"))?),
    };
    Ok(FenceState {
        scope: data.get(SCOPE).cloned(),
        epoch,
        markers,
        heartbeat,
    })
}

/// The object holding `state`. A replaced object keeps the metadata it was read with (its
/// resourceVersion for the compare-and-swap, and the owner the operator gave it).
fn encode(
    app: &AppKey,
    state: &FenceState,
    previous: Option<ObjectMeta>,
    owned: bool,
) -> Result<ConfigMap, StoreError> {
    let json = |what: &str, r: serde_json::Result<String>| {
        r.map_err(|e| StoreError::Corrupt {
            app: app.clone(),
            reason: format!("encoding {what}: {e}"),
        })
    };
    let mut data = BTreeMap::new();
    if let Some(scope) = &state.scope {
        data.insert(SCOPE.to_owned(), scope.clone());
    }
    data.insert(EPOCH.to_owned(), state.epoch.to_string());
    data.insert(
        MARKERS.to_owned(),
        json("markers", serde_json::to_string(&state.markers))?,
    );
    if let Some(hb) = &state.heartbeat {
        data.insert(
            HEARTBEAT.to_owned(),
            json("heartbeat", serde_json::to_string(hb))?,
        );
    }
    let mut metadata = previous.unwrap_or_default();
    metadata.name = Some(object_name(app));
    metadata.namespace = Some(app.namespace.clone());
    metadata.managed_fields = None;
    metadata
        .labels
        .get_or_insert_default()
        .insert(crate::labels::APP_NAME.to_owned(), app.name.clone());
    if owned && state.scope.is_some() {
        // The state is the scope's (writes are refused otherwise), so its application owns it.
        let owners = metadata.owner_references.get_or_insert_default();
        owners.retain(|o| o.kind != SparkApplication::kind(&()));
        owners.push(OwnerReference {
            api_version: SparkApplication::api_version(&()).into_owned(),
            kind: SparkApplication::kind(&()).into_owned(),
            name: app.name.clone(),
            uid: app.scope.uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        });
    }
    Ok(ConfigMap {
        metadata,
        data: Some(data),
        ..ConfigMap::default()
    })
}

impl ProgressStore for KubeStore {
    async fn advance_epoch(&self, app: &AppKey, observed: u64) -> Result<u64, StoreError> {
        let scope = app.scope_text();
        self.update("advance_epoch", app, |s| {
            let (next, a) = fence::advance_from(s, &scope, observed);
            Ok(if a.moved {
                Outcome::Write(next, a.epoch)
            } else {
                Outcome::Keep(a.epoch)
            })
        })
        .await
    }

    async fn epoch(&self, app: &AppKey) -> Result<u64, StoreError> {
        let state = self.read_state("epoch", app).await?;
        Ok(fence::current_epoch(&state, &app.scope_text()))
    }

    async fn commit(
        &self,
        app: &AppKey,
        epoch: u64,
        seq: u64,
        payload: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let scope = app.scope_text();
        self.update("commit", app, |s| {
            match fence::commit(s, &scope, epoch, seq, payload, now_ms) {
                Ok((next, true)) => Ok(Outcome::Write(next, ())),
                Ok((_, false)) => Ok(Outcome::Keep(())),
                Err(r) => Err(StoreError::rejected(app, r)),
            }
        })
        .await
    }

    async fn latest(&self, app: &AppKey) -> Result<Option<Marker>, StoreError> {
        let state = self.read_state("latest", app).await?;
        Ok(fence::latest_marker(&state, &app.scope_text()).cloned())
    }

    async fn heartbeat(&self, app: &AppKey, epoch: u64, now_ms: u64) -> Result<(), StoreError> {
        let scope = app.scope_text();
        self.update("heartbeat", app, |s| {
            fence::heartbeat(s, &scope, epoch, now_ms)
                .map(|next| Outcome::Write(next, ()))
                .map_err(|r| StoreError::rejected(app, r))
        })
        .await
    }

    async fn last_heartbeat(&self, app: &AppKey) -> Result<Option<Heartbeat>, StoreError> {
        let state = self.read_state("last_heartbeat", app).await?;
        Ok(fence::last_heartbeat(&state, &app.scope_text()))
    }

    async fn prune(&self, app: &AppKey, keep: usize) -> Result<usize, StoreError> {
        let scope = app.scope_text();
        self.update("prune", app, |s| {
            let (next, dropped) = fence::prune(s, &scope, keep);
            Ok(if dropped == 0 {
                Outcome::Keep(0)
            } else {
                Outcome::Write(next, dropped)
            })
        })
        .await
    }
}
