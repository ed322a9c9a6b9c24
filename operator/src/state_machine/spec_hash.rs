//! The digest of what a run was submitted from, stored in `status.specHash`: a change made
//! while the operator was down is still seen.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::crd::SparkApplicationSpec;

/// Digest of what a run was submitted from: the spec without `timeToLiveSeconds` and `suspend`,
/// which change nothing about a run (as in the widely used operator).
pub fn spec_hash(spec: &SparkApplicationSpec) -> String {
    let mut value = serde_json::to_value(spec)
        .expect("the spec has string keys and plain values, so it always encodes as JSON");
    if let Some(object) = value.as_object_mut() {
        object.remove("timeToLiveSeconds");
        object.remove("suspend");
    }
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    submission::naming::hex(&digest[..16])
}

/// JSON with object keys sorted, whatever map order serde_json was built with.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
