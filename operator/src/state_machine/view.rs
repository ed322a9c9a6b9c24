//! What [`decide`](super::decide) is given about the application: the object as persisted
//! ([`AppView`]) and the operator-wide [`Settings`] that shape decisions.

use std::time::Duration;

use crate::crd::{SparkApplication, SparkApplicationSpec, SparkApplicationStatus};
use crate::recovery::RecoverySettings;
use crate::ui::UiSettings;

/// Operator-wide settings that shape decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// How long a driver may be missing from the cache right after its submission before a
    /// live read is made: caches lag the API server.
    pub driver_creation_grace: Duration,
    /// TTL for terminated apps whose spec sets none; `None`: keep them.
    pub default_ttl_seconds: Option<i64>,
    /// Wait before looking again while the pod cache has not synced.
    pub unsynced_requeue: Duration,
    /// Wait before looking again while a driver is being deleted.
    pub deletion_requeue: Duration,
    /// Fenced restarts (`spec.restartPolicy.recovery`); `None`: the feature is off and apps
    /// asking for it fail with a message saying so.
    pub recovery: Option<RecoverySettings>,
    /// The UI Service and Ingresses (`operator run` turns the UI Service on; the default here,
    /// for tests and tools, makes none).
    pub ui: UiSettings,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            driver_creation_grace: Duration::from_secs(10),
            default_ttl_seconds: None,
            unsynced_requeue: Duration::from_secs(1),
            deletion_requeue: Duration::from_secs(2),
            recovery: None,
            ui: UiSettings {
                ui_service: false,
                ..UiSettings::default()
            },
        }
    }
}

/// The application as persisted: what `decide` starts from.
#[derive(Debug, Clone, Copy)]
pub struct AppView<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub spec: &'a SparkApplicationSpec,
    /// `None` for an app whose status was never written.
    pub status: Option<&'a SparkApplicationStatus>,
    pub settings: &'a Settings,
}

impl<'a> AppView<'a> {
    /// The view of a SparkApplication read from the API; `None` without a name, namespace or uid
    /// (an object the API server returned always has them).
    pub fn of(app: &'a SparkApplication, settings: &'a Settings) -> Option<AppView<'a>> {
        Some(AppView {
            name: app.metadata.name.as_deref()?,
            namespace: app.metadata.namespace.as_deref()?,
            uid: app.metadata.uid.as_deref()?,
            spec: &app.spec,
            status: app.status.as_ref(),
            settings,
        })
    }
}
