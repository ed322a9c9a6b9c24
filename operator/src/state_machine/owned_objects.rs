//! The objects a run owns besides its driver, and how their failures keep the application's
//! state and its driver in agreement:
//! - what the driver depends on (`crate::dependencies`: its PodGroup, PDB, monitoring
//!   ConfigMap) is made before the submission; a refusal fails the submission, and no driver is
//!   made;
//! - the UI objects (`crate::ui`) are made after it, once per submission, and recorded in
//!   `status.driverInfo`. One the spec asks for (`driverIngressOptions`) fails the run, and its
//!   driver is stopped before the run leaves FAILING, whether or not the cache shows it yet;
//!   one the operator adds on its own (the UI Service and its Ingress) leaves the run going,
//!   with the condition [`WEB_UI_CONDITION`].

use std::time::Duration;

use super::action::{Action, EventType};
use super::draft::Draft;
use super::observed::{RefusedObject, UiMade};
use super::reasons;
use crate::crd::{ApplicationStateType as State, FailureReason};
use crate::dependencies;

/// The condition a run going on without some of its UI objects shows, with what was refused.
pub const WEB_UI_CONDITION: &str = "WebUIUnavailable";

/// Where what the driver depends on stands, for the submission about to be sent.
pub(super) enum Dependencies {
    /// Made (or none needed): the submission may go.
    Made,
    /// Asked for in this decision (or, refused, a driver of this id stopped); decide again with
    /// the answer.
    Asked,
    /// Refused: the submission failed without a driver.
    Refused,
}

impl Draft<'_> {
    /// What the driver of the submission about to be sent depends on: asked for until answered
    /// in this reconcile (they exist before every submission is sent; those that exist are taken
    /// as they are), and a refusal fails the submission, as the submitter's refusal would.
    pub(super) fn dependencies(&mut self) -> Dependencies {
        if !dependencies::needed(&self.spec) {
            return Dependencies::Made;
        }
        match &self.observed.dependencies {
            None => {
                self.effects.push(Action::EnsureDependencies);
                Dependencies::Asked
            }
            Some(Ok(())) => Dependencies::Made,
            Some(Err(_)) if !self.observed.driver_stopped => {
                // No driver is made for this submission. One of its id may exist all the same:
                // nothing is stored before a submission is sent, so a predecessor may have sent
                // it and died before recording the answer. It is stopped first.
                self.effects.push(Action::StopDriver {
                    name: self.status.driver_info.pod_name.clone(),
                    submission_id: self.status.submission_id.clone(),
                });
                Dependencies::Asked
            }
            Some(Err(refused)) => {
                let message = format!(
                    "{} (needed before the driver, so none was submitted)",
                    refused.describe()
                );
                self.event(
                    EventType::Warning,
                    reasons::OWNED_OBJECTS_FAILED,
                    message.clone(),
                );
                self.enter_submission_failed(FailureReason::OwnedObjectRefused, message);
                Dependencies::Refused
            }
        }
    }

    /// The run's UI objects: made once per submission, recorded in `status.driverInfo`. A new
    /// run's are made after the submission's answer and before it is stored, so SUBMITTED and
    /// the record are one status write (the Spark application id an ingress URL may name comes
    /// with the answer).
    pub(super) fn ensure_ui_objects(&mut self) {
        let wanted =
            self.app.settings.ui.ui_service || !self.spec.driver_ingress_options.is_empty();
        let current = self.status.submission_id.clone();
        if !wanted || current.is_empty() || self.status.ui_submission_id == current {
            return;
        }
        let Some(made) = &self.observed.ui else {
            self.effects.push(Action::EnsureUiObjects);
            // A status this decision changed (a new run's SUBMITTED) is written once, with the
            // objects' record, rather than twice. Not when something else is to be done now: a
            // deletion or a live read follows a stored status.
            self.awaiting_objects = self.effects.len() == 1;
            return;
        };
        self.record_ui(made);
        self.status.ui_submission_id = current;
        let (required, optional): (Vec<&RefusedObject>, Vec<&RefusedObject>) =
            made.refused.iter().partition(|r| r.required);
        let missing = (!optional.is_empty()).then(|| describe(&optional));
        self.update_condition(
            (WEB_UI_CONDITION, reasons::OWNED_OBJECTS_FAILED),
            missing,
            "the run goes on without",
        );
        if !required.is_empty() {
            // The spec asks for them (clients reach the driver through them): running without
            // would be a silent difference. The run fails, and `failing` stops its driver.
            let message = format!("the run needs {}", describe(&required));
            self.event(
                EventType::Warning,
                reasons::OWNED_OBJECTS_FAILED,
                message.clone(),
            );
            self.fail_run(FailureReason::OwnedObjectRefused, message);
            self.status.app_state.state = State::Failing;
        }
    }

    fn record_ui(&mut self, made: &UiMade) {
        let info = &mut self.status.driver_info;
        if let Some((name, port, address)) = &made.service {
            info.web_ui_service_name = name.clone();
            info.web_ui_port = *port;
            info.web_ui_address = address.clone();
        }
        if let Some((name, url)) = &made.ingress {
            info.web_ui_ingress_name = name.clone();
            info.web_ui_ingress_address = url.clone();
        }
    }

    /// A run that failed for an object it needs has a driver the cache may not show yet: it is
    /// stopped (read live, deleted with its uid when it carries the current submission id)
    /// before the run leaves FAILING, so the application never says FAILED beside a running
    /// driver. True once it is, or when the run failed for another reason.
    pub(super) fn refused_run_stopped(&mut self) -> bool {
        let driver = &self.status.driver_info.pod_name;
        if self.status.failure_reason != Some(FailureReason::OwnedObjectRefused)
            || self.observed.driver_stopped
            || driver.is_empty()
        {
            return true;
        }
        self.effects.push(Action::StopDriver {
            name: driver.clone(),
            submission_id: self.status.submission_id.clone(),
        });
        self.requeue(Duration::ZERO);
        false
    }
}

fn describe(refused: &[&RefusedObject]) -> String {
    refused
        .iter()
        .map(|r| r.describe())
        .collect::<Vec<_>>()
        .join("; ")
}
