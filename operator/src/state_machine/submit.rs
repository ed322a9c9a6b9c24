//! NEW, PENDING_RERUN, RESUMING and a due SUBMISSION_FAILED: clear a previous run's driver,
//! refuse a spec that cannot run, prepare the submission (the id, the fence), make what the
//! driver depends on, send it, and apply the submitter's answer.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::action::{Action, EventType};
use super::draft::Draft;
use super::observed::{ObservedDriver, SubmissionOutcome};
use super::owned_objects::Dependencies;
use super::policy::should_retry_submission;
use super::reasons;
use super::submission_id::{sending_id, submission_attempt};
use crate::crd::{ApplicationStateType as State, FailureReason};
use crate::fence::INITIAL_EPOCH;
use crate::names::driver_pod_name;
use crate::recovery;
use crate::sparkconf;
use crate::unsupported::{self, UnsupportedField};

impl<'a> Draft<'a> {
    /// NEW, PENDING_RERUN, and SUBMISSION_FAILED once a retry is due: apply the answer to a
    /// submission, clear a previous run's driver, send a prepared submission, or prepare one.
    pub(super) fn submit_path(&mut self, hash: &str) {
        let observed = self.observed;
        if self.status.submission_pending
            && let Some(outcome) = self.answer()
        {
            self.apply_outcome(outcome);
            return;
        }
        // With fenced restarts every epoch has its own pod name and older drivers are deleted only
        // after the fence (below); without, a previous run's driver holds the name.
        if let Some(driver) = observed
            .driver
            .as_ref()
            .filter(|_| self.recovery().is_none())
        {
            // Ours to keep when made for the id being sent, which a predecessor may have sent
            // before it could record the answer.
            let sending = sending_id(self.app.uid, &self.status);
            let of_this_submission = driver.submission_id.as_deref() == Some(sending.as_str());
            // A previous run's driver holds the pod name; only ours is removed. A foreign pod
            // is left to the submitter to report as a conflict.
            if !of_this_submission && driver.owned {
                if !driver.terminating {
                    self.effects.push(Action::DeleteDriver {
                        name: driver.name.clone(),
                        uid: driver.uid.clone(),
                    });
                }
                self.requeue(self.app.settings.deletion_requeue);
                return;
            }
        }
        if !self.refused.is_empty() {
            // Before anything is submitted: the driver would escape the operator's control.
            let message = format!(
                "sparkConf keys refused: {}",
                sparkconf::message(&self.refused)
            );
            self.fail_spec(hash, FailureReason::RefusedSparkConf, message);
            return;
        }
        if self.unsupported.iter().any(|f| f.blocking) {
            self.fail_unsupported(hash);
            return;
        }
        if recovery::requested(&self.spec) && self.app.settings.recovery.is_none() {
            self.fail_recovery_disabled(hash);
            return;
        }
        if self.status.submission_pending {
            // Persist whatever changed first: a Submit only ever follows a status that is
            // already stored, so a crash cannot lose the id (or the epoch) it was sent with.
            if Some(&self.status) != self.app.status {
                self.requeue(Duration::ZERO);
            } else {
                if !matches!(self.dependencies(), Dependencies::Made) {
                    return;
                }
                if self.recovery().is_some() {
                    // The epoch is fenced and recorded: now every older driver goes, and only
                    // then is its successor submitted (fence → record → delete → submit).
                    self.delete_older_drivers();
                }
                self.effects.push(Action::Submit {
                    submission_id: self.status.submission_id.clone(),
                });
            }
            return;
        }
        let mut pod_name = driver_pod_name(self.app.name, self.app.spec);
        if self.recovery().is_some() {
            let Some(fence) = &observed.fence else {
                let observed_epoch = self
                    .status
                    .recovery_status
                    .as_ref()
                    .map_or(INITIAL_EPOCH, |r| r.epoch);
                self.effects.push(Action::AdvanceEpoch {
                    observed: observed_epoch,
                    run: self.run(),
                });
                return;
            };
            self.record_fence(fence);
            pod_name = recovery::pod_name(&pod_name, fence.epoch);
        }
        self.status.submission_attempts = submission_attempt(&self.status);
        self.status.submission_id = sending_id(self.app.uid, &self.status);
        self.status.submission_pending = true;
        self.status.last_submission_attempt_time = Some(self.time());
        self.status.driver_info.pod_name = pod_name;
        self.status.spec_hash = Some(hash.to_owned());
        if self.recovery().is_some() {
            // The fenced epoch is stored before a driver runs under it.
            self.requeue(Duration::ZERO);
            return;
        }
        // Nothing is stored before the request: the id is a function of the stored status
        // (`next_submission_id`), so an operator that dies before recording the answer sends the
        // same id again and the submitter answers it from the driver it already made. The
        // status is written once, with the answer.
        // What the driver depends on is made first, before anything is stored, too.
        if let Some(outcome) = self.answer() {
            self.apply_outcome(outcome);
            return;
        }
        match self.dependencies() {
            Dependencies::Made => {
                self.effects.push(Action::Submit {
                    submission_id: self.status.submission_id.clone(),
                });
                self.awaiting_answer = true;
            }
            Dependencies::Asked => self.awaiting_answer = true,
            // Written: the attempt counts, as a refused submission's does.
            Dependencies::Refused => {}
        }
    }

    /// The submitter's answer to the status' submission id, if it came in this reconcile.
    pub(super) fn answer(&self) -> Option<&'a SubmissionOutcome> {
        self.observed
            .submission
            .as_ref()
            .filter(|o| o.submission_id() == self.status.submission_id)
    }

    /// An app asking for fenced restarts from an operator running without them.
    pub(super) fn fail_recovery_disabled(&mut self, hash: &str) {
        let message = "spec.restartPolicy.recovery is set, but this operator runs with fenced restarts disabled (start it with --recovery-store kubernetes or redis://...)".to_owned();
        self.fail_spec(hash, FailureReason::UnsupportedSpec, message);
    }

    pub(super) fn apply_outcome(&mut self, outcome: &SubmissionOutcome) {
        self.status.submission_pending = false;
        // The submitter's answer was lost on the way back (a replica killed after it made the
        // driver), but the driver it made is in the cache: the submission happened.
        if matches!(
            outcome,
            SubmissionOutcome::Rejected {
                retryable: true,
                ..
            }
        ) && let Some(driver) = self.submitted_driver()
        {
            self.enter_submitted(&driver.name, driver.spark_app_id.as_deref().unwrap_or(""));
            return;
        }
        match outcome {
            SubmissionOutcome::Accepted {
                driver_pod_name,
                spark_app_id,
                ..
            } => self.enter_submitted(driver_pod_name, spark_app_id),
            SubmissionOutcome::Rejected {
                message, retryable, ..
            } => {
                let reason = if *retryable {
                    FailureReason::SubmitterUnavailable
                } else {
                    FailureReason::SubmissionRejected
                };
                self.enter_submission_failed(reason, message.clone());
            }
            // Counted as a failed submission, as the widely used operator counts a failed
            // `spark-submit`: the quota may have room by the next attempt.
            SubmissionOutcome::OverQuota { message, .. } => {
                self.enter_submission_failed(FailureReason::QuotaExceeded, message.clone());
            }
        }
    }

    /// SUBMITTED: the submitter made the driver `driver_pod_name` (empty: not named in the
    /// answer) of the Spark application `spark_app_id`.
    fn enter_submitted(&mut self, driver_pod_name: &str, spark_app_id: &str) {
        self.status.app_state.state = State::Submitted;
        self.status.app_state.error_message.clear();
        self.status.failure_reason = None;
        self.status.termination_time = None;
        self.status.execution_attempts = self.status.execution_attempts.saturating_add(1);
        if !driver_pod_name.is_empty() {
            self.status.driver_info.pod_name = driver_pod_name.to_owned();
        }
        self.status.spark_application_id = spark_app_id.to_owned();
        let message = format!(
            "SparkApplication {} was submitted successfully",
            self.name()
        );
        self.event(EventType::Normal, reasons::SUBMITTED, message);
        // The driver may not be in the cache yet; the grace period starts now.
        self.requeue(self.app.settings.driver_creation_grace);
    }

    /// The application's own driver pod, not being deleted, that carries the current
    /// submission id: proof that the submission was made, whatever its answer said.
    fn submitted_driver(&self) -> Option<&'a ObservedDriver> {
        let id = self.status.submission_id.as_str();
        self.observed.driver.as_ref().filter(|d| {
            !id.is_empty() && d.owned && !d.terminating && d.submission_id.as_deref() == Some(id)
        })
    }

    /// The submission failed for `reason`: SUBMISSION_FAILED, retried as the restart policy
    /// says.
    pub(super) fn enter_submission_failed(&mut self, reason: FailureReason, message: String) {
        self.status.submission_pending = false;
        self.status.app_state.state = State::SubmissionFailed;
        self.status.app_state.error_message = message.clone();
        self.status.failure_reason = Some(reason);
        let text = format!(
            "failed to submit SparkApplication {}: {message}",
            self.name()
        );
        self.event(EventType::Warning, reasons::SUBMISSION_FAILED, text);
        self.requeue(Duration::ZERO);
    }

    /// A spec this operator cannot run: failed, not retried (a retry cannot help), and rerun
    /// when the spec changes (the hash is recorded for that).
    pub(super) fn fail_unsupported(&mut self, hash: &str) {
        let blocking: Vec<UnsupportedField> = self
            .unsupported
            .iter()
            .filter(|f| f.blocking)
            .cloned()
            .collect();
        let message = format!("unsupported spec: {}", unsupported::message(&blocking));
        self.fail_spec(hash, FailureReason::UnsupportedSpec, message);
    }

    /// A spec this operator cannot run, failed at once for `reason` with `message`.
    pub(super) fn fail_spec(&mut self, hash: &str, reason: FailureReason, message: String) {
        self.status.submission_pending = false;
        self.status.spec_hash = Some(hash.to_owned());
        self.status.failure_reason = Some(reason);
        self.status.app_state.error_message = message.clone();
        self.status.termination_time.get_or_insert(Time(self.now));
        self.enter_failed(message);
    }

    pub(super) fn submission_failed(&mut self, hash: &str) {
        // A submission whose answer was lost (the submitter unavailable while it answered) may
        // have made its driver: once the cache shows it, the application follows that driver.
        // Retrying would reach the same driver (one id, one driver), and failing would leave
        // it running under a FAILED application.
        if self.status.failure_reason == Some(FailureReason::SubmitterUnavailable)
            && let Some(driver) = self.submitted_driver()
        {
            self.enter_submitted(&driver.name, driver.spark_app_id.as_deref().unwrap_or(""));
            return;
        }
        if !should_retry_submission(self.policy_type(), &self.spec, &self.status) {
            let message = self.status.app_state.error_message.clone();
            self.status.termination_time.get_or_insert(Time(self.now));
            self.enter_failed(message);
            return;
        }
        let interval = self
            .spec
            .restart_policy
            .as_ref()
            .and_then(|p| p.on_submission_failure_retry_interval);
        let since = self.status.last_submission_attempt_time.clone();
        let attempts = self.status.submission_attempts;
        if let Some(left) = self.retry_wait(interval, attempts, since.as_ref()) {
            self.requeue(left);
            return;
        }
        self.submit_path(hash);
    }
}
