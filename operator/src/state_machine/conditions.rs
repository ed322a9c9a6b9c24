//! The spec's own conditions: fields set but not honoured, and refused `sparkConf` keys, each
//! with a Warning event when it appears or changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::action::EventType;
use super::draft::Draft;
use crate::sparkconf;
use crate::unsupported;

impl Draft<'_> {
    /// The condition listing unsupported fields, and a Warning event when it appears or changes.
    pub(super) fn update_unsupported_condition(&mut self) {
        let message =
            (!self.unsupported.is_empty()).then(|| unsupported::message(&self.unsupported));
        self.update_condition(
            (unsupported::CONDITION_TYPE, unsupported::REASON),
            message,
            "fields set but not supported",
        );
    }

    /// The condition listing refused `sparkConf` keys, and a Warning event when it appears or
    /// changes.
    pub(super) fn update_refused_condition(&mut self) {
        let message = (!self.refused.is_empty()).then(|| sparkconf::message(&self.refused));
        self.update_condition(
            (sparkconf::CONDITION_TYPE, sparkconf::REASON),
            message,
            "sparkConf keys refused",
        );
    }

    /// Sets the condition `type_` to `message` (removes it for `None`), with a Warning event
    /// (`what: message`) when it appears or its message changes.
    pub(super) fn update_condition(
        &mut self,
        (type_, reason): (&'static str, &'static str),
        message: Option<String>,
        what: &str,
    ) {
        let existing = self.status.conditions.iter().position(|c| c.type_ == type_);
        let Some(message) = message else {
            if let Some(i) = existing {
                self.status.conditions.remove(i);
            }
            return;
        };
        if let Some(i) = existing {
            if self.status.conditions[i].message == message {
                return;
            }
            self.status.conditions.remove(i);
        }
        self.status.conditions.push(Condition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message: message.clone(),
            last_transition_time: self.time(),
            observed_generation: None,
        });
        self.event(EventType::Warning, reason, format!("{what}: {message}"));
    }
}
