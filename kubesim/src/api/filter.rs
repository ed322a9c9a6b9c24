//! Label and field selection of lists, watches and deletecollections, with the field labels
//! the API server supports per type.

use serde_json::Value;

use super::query::Query;
use crate::api_error::ApiError;
use crate::meta;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};

/// Label and field selection of a list, watch or deletecollection.
#[derive(Debug, Clone)]
pub struct Filter {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Filter {
    pub(super) fn from_query(rt: &ResourceType, q: &Query) -> Result<Self, ApiError> {
        let labels = q
            .get("labelSelector")
            .filter(|s| !s.is_empty())
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fields = q
            .get("fieldSelector")
            .filter(|s| !s.is_empty())
            .map(FieldSelector::parse)
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        if let Some(f) = &fields {
            f.validate_fields(&supported_fields(rt))
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        Ok(Self { labels, fields })
    }

    /// Whether nothing is selected on (every object matches).
    pub(super) fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    /// Whether an object is selected.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|l| l.matches(meta::labels(obj)))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }
}

/// Field selectors each type supports, as the real API server's field label conversion allows.
pub(super) fn supported_fields(rt: &ResourceType) -> Vec<&'static str> {
    let mut v = vec!["metadata.name", "metadata.namespace"];
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => v.extend([
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        ("", "events") | ("events.k8s.io", "events") => v.extend([
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]),
        ("", "secrets") => v.push("type"),
        ("", "namespaces") => v.push("status.phase"),
        ("", "nodes") => v.push("spec.unschedulable"),
        _ => {}
    }
    v
}
