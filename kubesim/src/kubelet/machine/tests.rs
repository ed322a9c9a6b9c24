use super::*;
use crate::kubelet::phase::Phase;

const T0: Duration = Duration::from_secs(1_700_000_000);

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + T0 + Duration::from_millis(ms)
}

fn pod(annotations: Value, policy: &str, init: Value, main: Value) -> Value {
    json!({"metadata": {"name": "p", "annotations": annotations},
           "spec": {"restartPolicy": policy, "initContainers": init, "containers": main}})
}

fn c(name: &str) -> Value {
    json!({"name": name, "image": "busybox"})
}

fn sidecar(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "restartPolicy": "Always"})
}

/// A machine past its admission step.
fn admitted(p: &Value, is_process: &dyn Fn(&str) -> bool) -> Machine {
    let mut m = Machine::new(p, is_process, Duration::from_millis(100));
    assert!(m.step(at(0), true).is_empty());
    m
}

fn scripted(p: &Value) -> Machine {
    admitted(p, &|_| false)
}

/// Steps every 10ms until the phase is terminal or `limit_ms` passes; returns the phase and
/// the time it was reached.
fn run(m: &mut Machine, limit_ms: u64) -> (Phase, u64) {
    let mut t = 0;
    while t <= limit_ms {
        m.step(at(t), true);
        let phase = m.phase("u");
        if phase.is_terminal() {
            return (phase, t);
        }
        t += 10;
    }
    (m.phase("u"), t)
}

#[test]
fn a_quiet_machine_changes_nothing_when_stepped() {
    let cases = [
        pod(
            json!({RUN_SECONDS: "-1"}),
            "Never",
            json!([]),
            json!([c("a")]),
        ),
        pod(
            json!({RUN_SECONDS: "0.2"}),
            "Never",
            json!([]),
            json!([c("a"), c("b")]),
        ),
        pod(
            json!({RUN_SECONDS: "0.1"}),
            "Always",
            json!([]),
            json!([c("a")]),
        ),
        pod(
            json!({RUN_SECONDS: "0.1", "kubesim.io/run-seconds.s": "-1"}),
            "Never",
            json!([c("i"), sidecar("s")]),
            json!([c("a")]),
        ),
        pod(
            json!({NEVER_START: "true"}),
            "Never",
            json!([]),
            json!([c("a")]),
        ),
    ];
    for p in cases {
        let mut m = scripted(&p);
        let mut quiet_steps = 0;
        for t in (0..=1_000).step_by(10) {
            let now = at(t);
            m.take_changed();
            let quiet = m.quiet_until().is_some_and(|until| now < until);
            let before = format!("{:?}", m.container_statuses("u"));
            let actions = m.step(now, true);
            if quiet {
                quiet_steps += 1;
                assert!(actions.is_empty(), "{p}");
                assert!(!m.is_changed(), "{p} at {t} ms");
                assert_eq!(format!("{:?}", m.container_statuses("u")), before, "{p}");
            }
        }
        assert!(quiet_steps > 0, "{p} is quiet at some point");
    }
}

#[test]
fn lifecycle_table() {
    use Phase::*;
    let cases: Vec<(&str, Value, Phase)> = vec![
        (
            "all succeeded",
            pod(
                json!({RUN_SECONDS: "0.05"}),
                "Never",
                json!([]),
                json!([c("a"), c("b")]),
            ),
            Succeeded,
        ),
        (
            "one failed",
            pod(
                json!({RUN_SECONDS: "0.05", "kubesim.io/exit-code.b": "3"}),
                "Never",
                json!([]),
                json!([c("a"), c("b")]),
            ),
            Failed,
        ),
        (
            "native sidecar does not hold the pod",
            pod(
                json!({RUN_SECONDS: "0.05"}),
                "Never",
                json!([sidecar("s")]),
                json!([c("a")]),
            ),
            Succeeded,
        ),
        (
            "plain sidecar holds it running",
            pod(
                json!({RUN_SECONDS: "0.05", "kubesim.io/run-seconds.s": "-1"}),
                "Never",
                json!([]),
                json!([c("a"), c("s")]),
            ),
            Running,
        ),
        (
            "init container failure with Never",
            pod(
                json!({RUN_SECONDS: "0.05", "kubesim.io/exit-code.i": "1"}),
                "Never",
                json!([c("i")]),
                json!([c("a")]),
            ),
            Failed,
        ),
        (
            "never-start",
            pod(
                json!({NEVER_START: "true"}),
                "Never",
                json!([]),
                json!([c("a")]),
            ),
            Pending,
        ),
        (
            "pod-wide exit code fails the app, not its init container",
            pod(
                json!({RUN_SECONDS: "0.05", EXIT_CODE: "2"}),
                "Never",
                json!([c("i")]),
                json!([c("a")]),
            ),
            Failed,
        ),
    ];
    for (what, p, want) in cases {
        let mut m = scripted(&p);
        let (phase, _) = run(&mut m, 2_000);
        assert_eq!(phase, want, "{what}");
    }
}

#[test]
fn never_start_stays_container_creating() {
    let p = pod(
        json!({NEVER_START: "true"}),
        "Never",
        json!([]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    run(&mut m, 500);
    let status = m.render("u", "198.18.0.2", "h", "t");
    assert_eq!(status["phase"], "Pending");
    assert_eq!(
        status["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
}

#[test]
fn on_failure_restarts_until_success_is_impossible() {
    let p = pod(
        json!({RUN_SECONDS: "0.02", EXIT_CODE: "1"}),
        "OnFailure",
        json!([]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    let (phase, _) = run(&mut m, 3_000);
    assert_eq!(phase, Phase::Running);
    let a = &m.main[0];
    assert!(a.restarts >= 3, "restarts {}", a.restarts);
    assert_eq!(a.last.as_ref().map(|t| t.exit_code), Some(1));
}

#[test]
fn on_failure_does_not_restart_a_success() {
    let p = pod(
        json!({RUN_SECONDS: "0.02"}),
        "OnFailure",
        json!([]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    assert_eq!(run(&mut m, 1_000).0, Phase::Succeeded);
    assert_eq!(m.main[0].restarts, 0);
}

#[test]
fn init_failure_with_on_failure_retries() {
    let p = pod(
        json!({RUN_SECONDS: "0.02", "kubesim.io/exit-code.i": "1"}),
        "OnFailure",
        json!([c("i")]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    assert_eq!(run(&mut m, 1_000).0, Phase::Pending);
    assert!(m.init[0].restarts >= 2);
    assert!(matches!(
        m.main[0].state,
        State::Waiting {
            reason: "PodInitializing",
            ..
        }
    ));
}

#[test]
fn init_containers_run_in_order_before_main() {
    let p = pod(
        json!({RUN_SECONDS: "0.05"}),
        "Never",
        json!([c("i1"), c("i2")]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    m.step(at(0), true);
    assert!(m.init[0].is_running() && !m.init[1].is_running());
    m.step(at(60), true);
    assert!(matches!(m.init[0].state, State::Terminated(_)) && m.init[1].is_running());
    assert!(!m.main[0].is_running());
    m.step(at(120), true);
    assert!(m.main[0].is_running());
    assert_eq!(m.phase("u"), Phase::Running);
}

#[test]
fn sidecar_started_lets_main_start_in_the_same_step_and_stops_completed() {
    let p = pod(
        json!({RUN_SECONDS: "0.05"}),
        "Never",
        json!([sidecar("s")]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    m.step(at(0), true);
    assert!(m.init[0].is_running() && m.main[0].is_running());
    let status = m.render("u", "ip", "h", "t");
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["conditions"][1]["status"], "True");
    assert_eq!(status["conditions"][2]["status"], "True");
    m.step(at(100), true);
    let State::Terminated(t) = &m.init[0].state else {
        panic!("sidecar still running");
    };
    assert_eq!((t.exit_code, t.reason), (0, "Completed"));
    assert!(m.is_finished());
    let status = m.render("u", "ip", "h", "t");
    assert_eq!(status["phase"], "Succeeded");
    assert_eq!(status["conditions"][2]["reason"], "PodCompleted");
}

#[test]
fn process_sidecar_with_probe_gates_main_containers() {
    let p = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
        "initContainers": [{"name": "agent", "image": "real", "restartPolicy": "Always",
                            "startupProbe": {"httpGet": {"port": 8080, "path": "/"}}}],
        "containers": [{"name": "a", "image": "real"}]}});
    let mut m = admitted(&p, &|i| i == "real");
    let agent = CRef {
        section: Section::Init,
        index: 0,
    };
    let main = CRef {
        section: Section::Main,
        index: 0,
    };
    assert_eq!(
        m.step(at(0), true),
        vec![Action::Start {
            cref: agent,
            instance: 1
        }]
    );
    assert!(m.step(at(10), true).is_empty());
    m.on_probe_passed(agent, 1);
    assert_eq!(
        m.step(at(20), true),
        vec![Action::Start {
            cref: main,
            instance: 1
        }]
    );
    m.on_process_exit(main, 1, 0, at(30));
    assert_eq!(
        m.step(at(40), true),
        vec![Action::Stop {
            cref: agent,
            signal: Signal::Term
        }]
    );
    assert_eq!(m.phase("u"), Phase::Running);
    m.on_process_exit(agent, 1, 143, at(50));
    m.step(at(60), true);
    assert_eq!(m.phase("u"), Phase::Succeeded);
}

#[test]
fn deletion_kills_scripted_containers_with_137() {
    let p = pod(
        json!({RUN_SECONDS: "-1"}),
        "Always",
        json!([]),
        json!([c("a")]),
    );
    let mut m = scripted(&p);
    m.step(at(0), true);
    m.begin_delete();
    m.step(at(10), true);
    assert!(m.removable());
    let status = m.render("u", "ip", "h", "t");
    assert_eq!(
        status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
    assert_eq!(status["phase"], "Failed");
}

#[test]
fn kill_reports_the_given_code_and_stale_exits_are_ignored() {
    let p = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "a", "image": "real"}]}});
    let mut m = admitted(&p, &|_| true);
    let a = CRef {
        section: Section::Main,
        index: 0,
    };
    m.step(at(0), true);
    assert_eq!(
        m.kill(a, 42, at(5)),
        Ok(Some(Action::Stop {
            cref: a,
            signal: Signal::Kill
        }))
    );
    m.on_process_exit(a, 1, 137, at(6));
    m.step(at(10), true);
    let status = m.render("u", "ip", "h", "t");
    assert_eq!(
        status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        42
    );
    assert_eq!(status["phase"], "Failed");
    assert_eq!(m.kill(a, 1, at(20)), Err(NotRunning));
}

#[test]
fn config_errors_retry_without_counting_restarts() {
    let p = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "a", "image": "real"}]}});
    let mut m = admitted(&p, &|_| true);
    let a = CRef {
        section: Section::Main,
        index: 0,
    };
    m.step(at(0), true);
    m.on_start_failed(
        a,
        1,
        StartFailure::Config("configmap \"x\" not found".into()),
        at(0),
    );
    assert!(matches!(
        m.main[0].state,
        State::Waiting {
            reason: "CreateContainerConfigError",
            ..
        }
    ));
    assert!(m.step(at(50), true).is_empty());
    assert_eq!(
        m.step(at(100), true),
        vec![Action::Start {
            cref: a,
            instance: 1
        }]
    );
    assert_eq!(m.main[0].restarts, 0);
}

#[test]
fn backoff_doubles_and_caps() {
    let base = Duration::from_millis(100);
    assert_eq!(backoff(base, 0), Duration::ZERO);
    assert_eq!(backoff(base, 1), base);
    assert_eq!(backoff(base, 3), base * 4);
    assert_eq!(backoff(base, 40), MAX_BACKOFF);
}

#[test]
fn annotations_pick_scripted_behaviour() {
    let p = json!({"metadata": {"annotations": {RUN_SECONDS: "2.5", EXIT_CODE: "3",
        "kubesim.io/run-seconds.x": "-1", "kubesim.io/exit-code.y": "7"}}});
    assert_eq!(
        scripted_behaviour(&p, "a", Kind::Regular),
        Behaviour::Scripted {
            run: Some(Duration::from_millis(2500)),
            exit_code: 3
        }
    );
    assert_eq!(
        scripted_behaviour(&p, "x", Kind::Regular),
        Behaviour::Scripted {
            run: None,
            exit_code: 3
        }
    );
    assert_eq!(
        scripted_behaviour(&p, "y", Kind::Init),
        Behaviour::Scripted {
            run: Some(Duration::from_millis(2500)),
            exit_code: 7
        }
    );
    assert_eq!(
        scripted_behaviour(&p, "s", Kind::Sidecar),
        Behaviour::Scripted {
            run: None,
            exit_code: 0
        }
    );
    assert_eq!(
        scripted_behaviour(&json!({}), "a", Kind::Regular),
        Behaviour::Scripted {
            run: Some(Duration::from_secs(1)),
            exit_code: 0
        }
    );
}
