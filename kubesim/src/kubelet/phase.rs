//! The pod phase as Kubernetes' kubelet computes it (`getPhase` in `kubelet_pods.go`), over the
//! JSON container statuses kubesim writes.

use crate::meta::At;
use serde_json::Value;

/// `status.phase` of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, but not every container has started yet.
    Pending,
    /// Bound to a node and at least one container running or restarting.
    Running,
    /// Every regular container terminated with exit code 0 and will not restart.
    Succeeded,
    /// Every regular container terminated, will not restart, and at least one failed.
    Failed,
}

impl Phase {
    /// The string written to `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }

    /// Whether the pod will never run anything again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// Whether an init container is a native sidecar (`restartPolicy: Always`).
pub fn is_sidecar(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

fn status_of<'a>(statuses: &'a [Value], name: &str) -> Option<&'a Value> {
    statuses
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
}

fn state_is(status: &Value, state: &str) -> bool {
    status
        .at(&format!("/state/{state}"))
        .is_some_and(Value::is_object)
}

fn exit_code(v: Option<&Value>) -> i64 {
    v.and_then(|t| t.get("exitCode"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn last_terminated(status: &Value) -> Option<&Value> {
    status.at("/lastState/terminated").filter(|v| v.is_object())
}

fn containers<'a>(spec: &'a Value, field: &str) -> impl Iterator<Item = (&'a Value, &'a str)> {
    spec.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (c, c.get("name").and_then(Value::as_str).unwrap_or("")))
}

/// The phase of a pod from its spec and container statuses, following Kubernetes' rules
/// (native sidecars included). `terminal` is the kubelet's "this pod is done for good" (e.g. it
/// has been deleted): containers that stopped then count as final whatever the restart policy,
/// and a pod that never got going ends `Failed`.
pub fn pod_phase(
    spec: &Value,
    container_statuses: &[Value],
    init_statuses: &[Value],
    terminal: bool,
) -> Phase {
    let restart_policy = spec
        .get("restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    let mut pending_init = 0;
    let mut failed_init = 0;
    for (_, name) in containers(spec, "initContainers").filter(|(c, _)| !is_sidecar(c)) {
        let Some(s) = status_of(init_statuses, name) else {
            pending_init += 1;
            continue;
        };
        if state_is(s, "running") {
            pending_init += 1;
        } else if state_is(s, "terminated") {
            if exit_code(s.at("/state/terminated")) != 0 {
                failed_init += 1;
            }
        } else if state_is(s, "waiting") {
            match last_terminated(s) {
                Some(t) if exit_code(Some(t)) != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for (_, name) in containers(spec, "initContainers").filter(|(c, _)| is_sidecar(c)) {
        let Some(s) = status_of(init_statuses, name) else {
            unknown += 1;
            continue;
        };
        if state_is(s, "running") {
            if s.get("started").and_then(Value::as_bool) != Some(true) {
                pending_init += 1;
            }
            running += 1;
        } else if state_is(s, "terminated") {
            // A stopped sidecar is neither running nor stopped for the phase.
        } else if state_is(s, "waiting") {
            if last_terminated(s).is_none() {
                pending_init += 1;
                waiting += 1;
            }
        } else {
            pending_init += 1;
            unknown += 1;
        }
    }
    let mut any_regular_started = false;
    for (_, name) in containers(spec, "containers") {
        let Some(s) = status_of(container_statuses, name) else {
            unknown += 1;
            continue;
        };
        if state_is(s, "running") {
            running += 1;
            any_regular_started = true;
        } else if state_is(s, "terminated") {
            stopped += 1;
            any_regular_started = true;
            if exit_code(s.at("/state/terminated")) == 0 {
                succeeded += 1;
            }
        } else if state_is(s, "waiting") {
            if last_terminated(s).is_some() {
                stopped += 1;
                any_regular_started = true;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    let phase = if failed_init > 0 && restart_policy == "Never" {
        Phase::Failed
    } else if (pending_init > 0 && !any_regular_started) || waiting > 0 {
        Phase::Pending
    } else if running > 0 && unknown == 0 {
        Phase::Running
    } else if running == 0 && stopped > 0 && unknown == 0 {
        if terminal || restart_policy != "Always" {
            if stopped == succeeded {
                Phase::Succeeded
            } else if terminal || restart_policy == "Never" {
                Phase::Failed
            } else {
                // OnFailure with a failure: that container is restarting.
                Phase::Running
            }
        } else {
            Phase::Running
        }
    } else {
        Phase::Pending
    };
    // A deleted pod is done even if its containers never ran; Kubernetes reports it Failed.
    if terminal && !phase.is_terminal() {
        Phase::Failed
    } else {
        phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn running(name: &str) -> Value {
        json!({"name": name, "started": true, "state": {"running": {"startedAt": "t"}}})
    }
    fn terminated(name: &str, code: i64) -> Value {
        json!({"name": name, "state": {"terminated": {"exitCode": code}}})
    }
    fn waiting(name: &str) -> Value {
        json!({"name": name, "state": {"waiting": {"reason": "ContainerCreating"}}})
    }
    fn restarting(name: &str, code: i64) -> Value {
        json!({"name": name, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
               "lastState": {"terminated": {"exitCode": code}}})
    }

    fn spec(policy: &str, init: &[(&str, bool)], main: &[&str]) -> Value {
        json!({
            "restartPolicy": policy,
            "initContainers": init.iter().map(|(n, sidecar)| if *sidecar {
                json!({"name": n, "restartPolicy": "Always"})
            } else {
                json!({"name": n})
            }).collect::<Vec<_>>(),
            "containers": main.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn phase_table() {
        use Phase::*;
        type Case = (&'static str, Value, Vec<Value>, Vec<Value>, bool, Phase);
        let cases: Vec<Case> = vec![
            (
                "nothing started",
                spec("Never", &[], &["a"]),
                vec![waiting("a")],
                vec![],
                false,
                Pending,
            ),
            (
                "running",
                spec("Never", &[], &["a"]),
                vec![running("a")],
                vec![],
                false,
                Running,
            ),
            (
                "all succeeded",
                spec("Never", &[], &["a", "b"]),
                vec![terminated("a", 0), terminated("b", 0)],
                vec![],
                false,
                Succeeded,
            ),
            (
                "one failed",
                spec("Never", &[], &["a", "b"]),
                vec![terminated("a", 0), terminated("b", 2)],
                vec![],
                false,
                Failed,
            ),
            (
                "one still running",
                spec("Never", &[], &["a", "b"]),
                vec![terminated("a", 1), running("b")],
                vec![],
                false,
                Running,
            ),
            (
                "native sidecar running does not hold a finished pod once stopped",
                spec("Never", &[("side", true)], &["a"]),
                vec![terminated("a", 0)],
                vec![terminated("side", 0)],
                false,
                Succeeded,
            ),
            (
                "native sidecar stopped with an error does not fail the pod",
                spec("Never", &[("side", true)], &["a"]),
                vec![terminated("a", 0)],
                vec![terminated("side", 143)],
                false,
                Succeeded,
            ),
            (
                "plain sidecar keeps the pod running",
                spec("Never", &[], &["a", "side"]),
                vec![terminated("a", 0), running("side")],
                vec![],
                false,
                Running,
            ),
            (
                "OnFailure restarting a failure",
                spec("OnFailure", &[], &["a"]),
                vec![restarting("a", 1)],
                vec![],
                false,
                Running,
            ),
            (
                "OnFailure all succeeded",
                spec("OnFailure", &[], &["a"]),
                vec![terminated("a", 0)],
                vec![],
                false,
                Succeeded,
            ),
            (
                "Always restarting a success",
                spec("Always", &[], &["a"]),
                vec![terminated("a", 0)],
                vec![],
                false,
                Running,
            ),
            (
                "init failure with Never",
                spec("Never", &[("init", false)], &["a"]),
                vec![waiting("a")],
                vec![terminated("init", 1)],
                false,
                Failed,
            ),
            (
                "init failure retried with OnFailure",
                spec("OnFailure", &[("init", false)], &["a"]),
                vec![waiting("a")],
                vec![restarting("init", 1)],
                false,
                Pending,
            ),
            (
                "init running",
                spec("Never", &[("init", false)], &["a"]),
                vec![waiting("a")],
                vec![running("init")],
                false,
                Pending,
            ),
            (
                "never started",
                spec("Always", &[("side", true)], &["a"]),
                vec![waiting("a")],
                vec![waiting("side")],
                false,
                Pending,
            ),
            (
                "deleted while running Always",
                spec("Always", &[], &["a"]),
                vec![terminated("a", 137)],
                vec![],
                true,
                Failed,
            ),
            (
                "deleted before starting",
                spec("Always", &[], &["a"]),
                vec![waiting("a")],
                vec![],
                true,
                Failed,
            ),
        ];
        for (what, spec, main, init, terminal, want) in cases {
            assert_eq!(pod_phase(&spec, &main, &init, terminal), want, "{what}");
        }
    }
}
