//! What a pod's machine reads from its spec and annotations: the scripted behaviour of its
//! containers, their probes, and the parts of the spec the pod phase rule needs.

use std::time::Duration;

use serde_json::Value;

use super::{Behaviour, Kind};
use crate::meta;

/// Annotation: seconds a scripted container runs (float; negative = until killed).
pub const RUN_SECONDS: &str = "kubesim.io/run-seconds";
/// Annotation: exit code of a scripted container.
pub const EXIT_CODE: &str = "kubesim.io/exit-code";
/// Annotation: `"true"` keeps every container waiting in `ContainerCreating` forever.
pub const NEVER_START: &str = "kubesim.io/never-start";

fn parse_f64(s: Option<&str>) -> Option<f64> {
    s.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|f| f.is_finite())
}

fn parse_i32(s: Option<&str>) -> Option<i32> {
    s.and_then(|s| s.trim().parse::<i32>().ok())
}

/// The scripted behaviour of a container from the pod's annotations. Pod-wide `run-seconds`
/// applies to every container but native sidecars (which run until the main containers finish);
/// pod-wide `exit-code` applies to regular containers only, so that "this app fails" does not
/// turn into "its init container fails".
pub fn scripted_behaviour(pod: &Value, container: &str, kind: Kind) -> Behaviour {
    let per_run = parse_f64(meta::annotation(pod, &format!("{RUN_SECONDS}.{container}")));
    let pod_run = parse_f64(meta::annotation(pod, RUN_SECONDS));
    let secs = match (per_run, kind) {
        (Some(s), _) => Some(s),
        (None, Kind::Sidecar) => None,
        (None, _) => Some(pod_run.unwrap_or(1.0)),
    };
    let run = secs.filter(|s| *s >= 0.0).map(Duration::from_secs_f64);
    let per_exit = parse_i32(meta::annotation(pod, &format!("{EXIT_CODE}.{container}")));
    let exit_code = per_exit
        .or_else(|| {
            (kind == Kind::Regular)
                .then(|| parse_i32(meta::annotation(pod, EXIT_CODE)))
                .flatten()
        })
        .unwrap_or(0);
    Behaviour::Scripted { run, exit_code }
}

/// The parts of a pod spec [`pod_phase`](crate::kubelet::phase::pod_phase) reads: the restart
/// policies and the containers' names. A machine keeps these rather than a copy of the whole
/// spec, which every running pod would hold for its life.
pub(super) fn phase_spec(spec: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(policy) = spec.get("restartPolicy") {
        out.insert("restartPolicy".into(), policy.clone());
    }
    for field in ["initContainers", "containers"] {
        let Some(list) = spec.get(field).and_then(Value::as_array) else {
            continue;
        };
        let trimmed = list
            .iter()
            .map(|c| {
                let mut kept = serde_json::Map::new();
                for key in ["name", "restartPolicy"] {
                    if let Some(v) = c.get(key) {
                        kept.insert(key.into(), v.clone());
                    }
                }
                Value::Object(kept)
            })
            .collect();
        out.insert(field.into(), Value::Array(trimmed));
    }
    Value::Object(out)
}

/// Whether a container has a startup probe and a readiness probe (the shell runs them for real
/// processes).
pub fn probe_gates(container: &Value) -> (bool, bool) {
    (
        container.get("startupProbe").is_some(),
        container.get("readinessProbe").is_some(),
    )
}
