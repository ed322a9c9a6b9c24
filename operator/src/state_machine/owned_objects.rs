//! The run's owned objects (UI Service and Ingresses, driver PDB, monitoring ConfigMap,
//! PodGroup): made once per submission and recorded in `status.driverInfo`.

use super::action::{Action, EventType};
use super::draft::Draft;
use super::reasons;
use crate::crd::{ApplicationStateType as State, FailureReason};

impl Draft<'_> {
    /// The run's UI objects and driver PDB: made once per submission, the UI recorded in
    /// `status.driverInfo`. A new run's objects are made after the submission's answer and
    /// before it is stored, so SUBMITTED and the record are one status write (the Spark
    /// application id an ingress URL may name comes with the answer).
    pub(super) fn ensure_owned_objects(&mut self) {
        let settings = &self.app.settings.ui;
        let wanted = settings.ui_service
            || !self.spec.driver_ingress_options.is_empty()
            || self.spec.driver_pod_disruption_budget == Some(true)
            || self.spec.monitoring.is_some()
            || self.spec.batch_scheduler.is_some();
        let current = self.status.submission_id.clone();
        if !wanted || current.is_empty() || self.status.ui_submission_id == current {
            return;
        }
        match &self.observed.ui {
            None => {
                self.effects.push(Action::EnsureOwnedObjects);
                // A status this decision changed (a new run's SUBMITTED) is written once, with
                // the objects' record, rather than twice. Not when something else is to be done
                // now: a deletion or a live read follows a stored status.
                self.awaiting_objects = self.effects.len() == 1;
            }
            Some(Ok(made)) => {
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
                self.status.ui_submission_id = current;
            }
            Some(Err(message)) => {
                // Running without what the spec asks (a PodGroup, a UI Service) would be a
                // silent difference: the run fails, saying why.
                self.status.ui_submission_id = current;
                self.event(
                    EventType::Warning,
                    reasons::OWNED_OBJECTS_FAILED,
                    message.clone(),
                );
                self.delete_owned_driver();
                self.fail_run(FailureReason::UnsupportedSpec, message.clone());
                self.status.app_state.state = State::Failing;
            }
        }
    }
}
