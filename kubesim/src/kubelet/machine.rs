//! The per-pod state machine. It is pure: the async shell feeds it the time, whether the pod's
//! volumes can be mounted and what real processes did, executes the [`Action`]s it returns and
//! writes the status it renders. Scripted containers live entirely in here (their exits are
//! timers), which is what lets partitioned nodes keep "running" pods without any I/O.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::phase::{is_sidecar, pod_phase};
use crate::meta;

/// Annotation: seconds a scripted container runs (float; negative = until killed).
pub const RUN_SECONDS: &str = "kubesim.io/run-seconds";
/// Annotation: exit code of a scripted container.
pub const EXIT_CODE: &str = "kubesim.io/exit-code";
/// Annotation: `"true"` keeps every container waiting in `ContainerCreating` forever.
pub const NEVER_START: &str = "kubesim.io/never-start";

/// Longest crash-loop back-off; Kubernetes uses five minutes, far too long for tests.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// `spec.restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Restart whatever the exit code.
    Always,
    /// Restart on a non-zero exit code.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// The policy of a pod spec (Kubernetes defaults to `Always`).
    pub fn of(spec: &Value) -> Self {
        match spec.get("restartPolicy").and_then(Value::as_str) {
            Some("Never") => Self::Never,
            Some("OnFailure") => Self::OnFailure,
            _ => Self::Always,
        }
    }

    /// Whether a container that exited with `exit_code` is restarted.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => exit_code != 0,
            Self::Never => false,
        }
    }
}

/// Which list of the pod spec a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `spec.initContainers` (regular init containers and native sidecars).
    Init,
    /// `spec.containers`.
    Main,
}

/// A container of the pod: its list and index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CRef {
    /// The list.
    pub section: Section,
    /// Index in the list.
    pub index: usize,
}

/// The role of a container in the pod's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular init container: must exit 0 before the next one starts.
    Init,
    /// A native sidecar (init container with `restartPolicy: Always`).
    Sidecar,
    /// A regular container.
    Regular,
}

/// How a container runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Behaviour {
    /// Simulated: runs for `run` (forever when `None`), then exits with `exit_code`.
    Scripted {
        /// How long it runs.
        run: Option<Duration>,
        /// Its exit code.
        exit_code: i32,
    },
    /// A real local process; the shell reports its exit.
    Process,
}

/// A finished container instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Terminated {
    /// Exit code.
    pub exit_code: i32,
    /// `Completed`, `Error` or `StartError`.
    pub reason: &'static str,
    /// Why it could not start, for `StartError`.
    pub message: Option<String>,
    /// When it started.
    pub started_at: SystemTime,
    /// When it finished.
    pub finished_at: SystemTime,
    /// Which start of the container this was.
    pub instance: u64,
}

/// Why a running container is being stopped by the kubelet, which decides what its exit reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// The pod is being deleted: the real exit code is reported.
    Delete,
    /// A native sidecar whose pod is done: reported as a clean exit (0, `Completed`).
    SidecarDone,
    /// A liveness or startup probe gave up: the real exit code is reported and the restart
    /// policy decides what follows.
    Unhealthy,
}

/// Container state.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Not running.
    Waiting {
        /// `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`, ...
        reason: &'static str,
        /// Detail (e.g. why the configuration is wrong).
        message: Option<String>,
    },
    /// Running.
    Running {
        /// When it started.
        started_at: SystemTime,
        /// When a scripted container exits by itself.
        until: Option<SystemTime>,
        /// Whether its startup probe (if any) has passed.
        started: bool,
        /// Set once the kubelet has asked it to stop.
        stopping: Option<StopMode>,
    },
    /// Exited.
    Terminated(Terminated),
}

/// One container's life in the machine.
#[derive(Debug, Clone)]
pub struct Container {
    /// Container name.
    pub name: String,
    /// Image.
    pub image: String,
    /// Role.
    pub kind: Kind,
    /// Scripted or real.
    pub behaviour: Behaviour,
    /// Current state.
    pub state: State,
    /// The previous instance's end (`lastState`).
    pub last: Option<Terminated>,
    /// `restartCount`.
    pub restarts: u32,
    /// How many times it has been started (0 = never); tags process exits so stale ones are
    /// ignored.
    pub instance: u64,
    /// No restart before this time (crash-loop back-off).
    pub backoff_until: Option<SystemTime>,
    /// Whether `started` waits for the shell to report a passing startup probe.
    pub needs_probe: bool,
    /// Whether readiness waits for the shell to report a passing readiness probe.
    pub has_readiness: bool,
    /// What the readiness probe last said about the running instance.
    pub probe_ready: bool,
    /// Log lines of a scripted container's current instance.
    pub log: Vec<String>,
    restarts_before_start: u32,
}

impl Container {
    fn new(
        name: &str,
        image: &str,
        kind: Kind,
        behaviour: Behaviour,
        (needs_probe, has_readiness): (bool, bool),
    ) -> Self {
        Self {
            name: name.to_string(),
            image: image.to_string(),
            kind,
            behaviour,
            state: State::Waiting {
                reason: "ContainerCreating",
                message: None,
            },
            last: None,
            restarts: 0,
            instance: 0,
            backoff_until: None,
            needs_probe: needs_probe && behaviour == Behaviour::Process,
            has_readiness: has_readiness && behaviour == Behaviour::Process,
            probe_ready: false,
            log: Vec::new(),
            restarts_before_start: 0,
        }
    }

    /// Whether it is running now.
    pub fn is_running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn is_started(&self) -> bool {
        matches!(self.state, State::Running { started: true, .. })
    }

    fn is_ready(&self) -> bool {
        match (&self.state, self.kind) {
            (State::Terminated(t), Kind::Init) => t.exit_code == 0,
            (State::Running { started, .. }, Kind::Sidecar | Kind::Regular) => {
                *started && (!self.has_readiness || self.probe_ready)
            }
            _ => false,
        }
    }

    fn may_start(&self, now: SystemTime) -> bool {
        matches!(self.state, State::Waiting { .. }) && self.backoff_until.is_none_or(|t| now >= t)
    }
}

/// What the shell must do for a real process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Spawn instance `instance` of the container.
    Start {
        /// The container.
        cref: CRef,
        /// Its instance number, to tag the exit with.
        instance: u64,
    },
    /// Stop the running instance.
    Stop {
        /// The container.
        cref: CRef,
        /// Graceful (`Term`, escalated after the grace period) or at once.
        signal: Signal,
    },
}

/// How to stop a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, then SIGKILL after the grace period.
    Term,
    /// SIGKILL now.
    Kill,
}

/// Why the shell could not start a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartFailure {
    /// Env or config missing (`CreateContainerConfigError`): retried after a back-off.
    Config(String),
    /// The program could not be executed (`StartError`, exit code 128).
    Exec(String),
}

/// `kill()` of a container that is not running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRunning;

/// The whole pod.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Restart policy.
    pub policy: RestartPolicy,
    /// Init containers and native sidecars, in spec order.
    pub init: Vec<Container>,
    /// Regular containers.
    pub main: Vec<Container>,
    spec: Value,
    admitted: bool,
    never_start: bool,
    mounted: bool,
    initialized: bool,
    init_failed: bool,
    deleting: bool,
    finished: bool,
    changed: bool,
    backoff_base: Duration,
}

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

/// Whether a container has a startup probe and a readiness probe (the shell runs them for real
/// processes).
pub fn probe_gates(container: &Value) -> (bool, bool) {
    (
        container.get("startupProbe").is_some(),
        container.get("readinessProbe").is_some(),
    )
}

/// Crash-loop back-off before restart number `restarts + 1`: none for the first restart, then
/// doubling from `base` up to [`MAX_BACKOFF`].
pub fn backoff(base: Duration, restarts: u32) -> Duration {
    if restarts == 0 {
        return Duration::ZERO;
    }
    let factor = 1u32 << (restarts - 1).min(16);
    base.saturating_mul(factor).min(MAX_BACKOFF)
}

impl Machine {
    /// Builds the machine of a pod; `is_process` says which images run as real processes.
    pub fn new(pod: &Value, is_process: &dyn Fn(&str) -> bool, backoff_base: Duration) -> Self {
        let spec = pod.get("spec").cloned().unwrap_or_else(|| json!({}));
        let build = |c: &Value, kind: Kind| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let behaviour = if is_process(image) {
                Behaviour::Process
            } else {
                scripted_behaviour(pod, name, kind)
            };
            Container::new(name, image, kind, behaviour, probe_gates(c))
        };
        let list = |field: &str| -> Vec<Value> {
            spec.get(field)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let init = list("initContainers")
            .iter()
            .map(|c| {
                build(
                    c,
                    if is_sidecar(c) {
                        Kind::Sidecar
                    } else {
                        Kind::Init
                    },
                )
            })
            .collect();
        let main = list("containers")
            .iter()
            .map(|c| build(c, Kind::Regular))
            .collect();
        Self {
            policy: RestartPolicy::of(&spec),
            init,
            main,
            spec,
            admitted: false,
            never_start: meta::annotation(pod, NEVER_START) == Some("true"),
            mounted: false,
            initialized: false,
            init_failed: false,
            deleting: false,
            finished: false,
            changed: true,
            backoff_base,
        }
    }

    /// A container by reference.
    pub fn container(&self, cref: CRef) -> Option<&Container> {
        match cref.section {
            Section::Init => self.init.get(cref.index),
            Section::Main => self.main.get(cref.index),
        }
    }

    fn container_mut(&mut self, cref: CRef) -> Option<&mut Container> {
        match cref.section {
            Section::Init => self.init.get_mut(cref.index),
            Section::Main => self.main.get_mut(cref.index),
        }
    }

    /// Finds a container by name (regular containers first).
    pub fn find(&self, name: &str) -> Option<CRef> {
        let pos = |list: &[Container]| list.iter().position(|c| c.name == name);
        pos(&self.main)
            .map(|index| CRef {
                section: Section::Main,
                index,
            })
            .or_else(|| {
                pos(&self.init).map(|index| CRef {
                    section: Section::Init,
                    index,
                })
            })
    }

    /// Every container with its reference.
    pub fn all(&self) -> impl Iterator<Item = (CRef, &Container)> {
        let init = self.init.iter().enumerate().map(|(index, c)| {
            (
                CRef {
                    section: Section::Init,
                    index,
                },
                c,
            )
        });
        let main = self.main.iter().enumerate().map(|(index, c)| {
            (
                CRef {
                    section: Section::Main,
                    index,
                },
                c,
            )
        });
        init.chain(main)
    }

    /// Whether the machine is waiting for its volumes (the shell then checks them).
    pub fn wants_mounts(&self) -> bool {
        !self.mounted && !self.never_start && !self.deleting
    }

    /// Whether the status changed since the last [`Machine::take_changed`].
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Whether something changed that has not been taken yet.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// Marks the status as needing a write again (a write failed).
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }

    /// Until when [`Machine::step`] cannot change anything by itself, as long as nothing
    /// happens from outside (a process exit, a probe report, a deletion, a kill): `None` when a
    /// step may change something now. A pod whose scripted containers all run (forever, or
    /// until a known time) is quiet until the first of them is due; the kubelet skips it until
    /// then, so a tick costs the pods that are moving, not every pod on the node.
    pub fn quiet_until(&self) -> Option<SystemTime> {
        if self.changed || self.deleting || self.finished || !self.admitted {
            return None;
        }
        if self.never_start && !self.mounted {
            return Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u32::MAX.into()));
        }
        if !self.mounted || !self.initialized || self.init_failed {
            return None;
        }
        let mut due: Option<SystemTime> = None;
        for (_, c) in self.all() {
            match (&c.state, c.behaviour, c.kind) {
                (State::Terminated(t), _, Kind::Init) if t.exit_code == 0 => {}
                (
                    State::Running {
                        until,
                        started: true,
                        stopping: None,
                        ..
                    },
                    Behaviour::Scripted { .. },
                    _,
                ) => {
                    if let Some(t) = until {
                        due = Some(due.map_or(*t, |d| d.min(*t)));
                    }
                }
                _ => return None,
            }
        }
        Some(due.unwrap_or(SystemTime::UNIX_EPOCH + Duration::from_secs(u32::MAX.into())))
    }

    /// Whether nothing will ever happen again (terminal phase, or deletion complete).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether deletion has stopped every container and the pod can be removed.
    pub fn removable(&self) -> bool {
        self.deleting && self.finished
    }

    /// Whether the pod still counts against its node (the scheduler balances on this).
    pub fn is_active(&self) -> bool {
        !self.finished
    }

    /// Starts graceful deletion: every container is stopped on the next step.
    pub fn begin_delete(&mut self) {
        if !self.deleting {
            self.deleting = true;
            // Stopping a finished pod changes nothing but must still let it be removed.
            self.finished = false;
            self.changed = true;
        }
    }

    fn start(&mut self, cref: CRef, now: SystemTime) -> Option<Action> {
        let c = self.container_mut(cref)?;
        c.restarts_before_start = c.restarts;
        if c.instance > 0 {
            c.restarts += 1;
        }
        c.instance += 1;
        c.backoff_until = None;
        c.probe_ready = false;
        let (until, started) = match c.behaviour {
            Behaviour::Scripted { run, .. } => (run.map(|d| now + d), true),
            Behaviour::Process => (None, !c.needs_probe),
        };
        c.state = State::Running {
            started_at: now,
            until,
            started,
            stopping: None,
        };
        let action = match c.behaviour {
            Behaviour::Scripted { .. } => {
                c.log = vec![format!("kubesim: container {} started", c.name)];
                None
            }
            Behaviour::Process => Some(Action::Start {
                cref,
                instance: c.instance,
            }),
        };
        self.changed = true;
        action
    }

    /// Ends the running instance of a container with `exit_code`.
    fn exit(&mut self, cref: CRef, exit_code: i32, now: SystemTime) {
        let Some(c) = self.container_mut(cref) else {
            return;
        };
        let State::Running {
            started_at,
            stopping,
            ..
        } = c.state
        else {
            return;
        };
        let exit_code = if stopping == Some(StopMode::SidecarDone) {
            0
        } else {
            exit_code
        };
        c.state = State::Terminated(Terminated {
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" },
            message: None,
            started_at,
            finished_at: now,
            instance: c.instance,
        });
        if matches!(c.behaviour, Behaviour::Scripted { .. }) {
            c.log.push(format!(
                "kubesim: container {} exited with code {exit_code}",
                c.name
            ));
        }
        self.changed = true;
    }

    /// A real process exited (`instance` tags which start it was).
    pub fn on_process_exit(&mut self, cref: CRef, instance: u64, exit_code: i32, now: SystemTime) {
        if self.container(cref).is_some_and(|c| c.instance == instance) {
            self.exit(cref, exit_code, now);
        }
    }

    /// A real process's startup probe passed.
    pub fn on_probe_passed(&mut self, cref: CRef, instance: u64) {
        let Some(c) = self.container_mut(cref) else {
            return;
        };
        if c.instance != instance {
            return;
        }
        if let State::Running { started, .. } = &mut c.state
            && !*started
        {
            *started = true;
            self.changed = true;
        }
    }

    /// The readiness probe of a running instance changed its verdict.
    pub fn on_readiness(&mut self, cref: CRef, instance: u64, ready: bool) {
        let Some(c) = self.container_mut(cref) else {
            return;
        };
        if c.instance == instance && c.is_running() && c.probe_ready != ready {
            c.probe_ready = ready;
            self.changed = true;
        }
    }

    /// A liveness or startup probe gave up on a running instance: the kubelet stops it (the
    /// restart policy then decides, as for any exit).
    pub fn on_unhealthy(&mut self, cref: CRef, instance: u64) -> Option<Action> {
        let c = self.container_mut(cref)?;
        if c.instance != instance || c.behaviour != Behaviour::Process {
            return None;
        }
        let State::Running { stopping, .. } = &mut c.state else {
            return None;
        };
        if stopping.is_some() {
            return None;
        }
        *stopping = Some(StopMode::Unhealthy);
        Some(Action::Stop {
            cref,
            signal: Signal::Term,
        })
    }

    /// The shell could not start a process it was asked to start.
    pub fn on_start_failed(
        &mut self,
        cref: CRef,
        instance: u64,
        why: StartFailure,
        now: SystemTime,
    ) {
        let base = self.backoff_base;
        let Some(c) = self.container_mut(cref) else {
            return;
        };
        if c.instance != instance || !c.is_running() {
            return;
        }
        match why {
            StartFailure::Config(message) => {
                // Nothing ran: undo the start so the retry is not counted as a restart.
                c.instance -= 1;
                c.restarts = c.restarts_before_start;
                c.state = State::Waiting {
                    reason: "CreateContainerConfigError",
                    message: Some(message),
                };
                c.backoff_until = Some(now + base);
            }
            StartFailure::Exec(message) => {
                let started_at = match c.state {
                    State::Running { started_at, .. } => started_at,
                    _ => now,
                };
                c.state = State::Terminated(Terminated {
                    exit_code: 128,
                    reason: "StartError",
                    message: Some(message),
                    started_at,
                    finished_at: now,
                    instance: c.instance,
                });
            }
        }
        self.changed = true;
    }

    /// Terminates a running container now with `exit_code` (fault injection).
    pub fn kill(
        &mut self,
        cref: CRef,
        exit_code: i32,
        now: SystemTime,
    ) -> Result<Option<Action>, NotRunning> {
        let c = self.container(cref).ok_or(NotRunning)?;
        if !c.is_running() {
            return Err(NotRunning);
        }
        let process = c.behaviour == Behaviour::Process;
        if let Some(c) = self.container_mut(cref)
            && let State::Running { stopping, .. } = &mut c.state
        {
            // A kill overrides "report as completed": the caller chose the exit code.
            *stopping = None;
        }
        self.exit(cref, exit_code, now);
        Ok(process.then_some(Action::Stop {
            cref,
            signal: Signal::Kill,
        }))
    }

    /// Moves a terminated container towards its restart: back-off, then a new instance.
    fn restart(&mut self, cref: CRef, now: SystemTime, actions: &mut Vec<Action>) {
        let base = self.backoff_base;
        let Some(c) = self.container_mut(cref) else {
            return;
        };
        if let State::Terminated(t) = &c.state {
            let delay = backoff(base, c.restarts);
            c.last = Some(t.clone());
            c.state = State::Waiting {
                reason: "CrashLoopBackOff",
                message: Some(format!(
                    "back-off {}ms restarting failed container={}",
                    delay.as_millis(),
                    c.name
                )),
            };
            c.backoff_until = Some(now + delay);
            self.changed = true;
        }
        if self.container(cref).is_some_and(|c| c.may_start(now))
            && let Some(a) = self.start(cref, now)
        {
            actions.push(a);
        }
    }

    /// Advances the pod to `now`. `mounts_ready` says whether every volume the pod needs exists
    /// (only consulted while [`Machine::wants_mounts`]).
    pub fn step(&mut self, now: SystemTime, mounts_ready: bool) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.finished {
            return actions;
        }
        self.expire_scripted(now);
        if self.deleting {
            self.step_delete(&mut actions, now);
            return actions;
        }
        if !self.admitted {
            // The first step only accepts the pod (Pending, ContainerCreating), so watchers see
            // that stage before anything starts, as they would on a real node.
            self.admitted = true;
            self.changed = true;
            return actions;
        }
        if !self.mounted {
            if self.never_start || !mounts_ready {
                return actions;
            }
            self.mounted = true;
            self.changed = true;
            let has_init = !self.init.is_empty();
            for c in self.init.iter_mut().chain(self.main.iter_mut()) {
                if has_init {
                    c.state = State::Waiting {
                        reason: "PodInitializing",
                        message: None,
                    };
                }
            }
        }
        if !self.initialized {
            self.step_init(&mut actions, now);
        }
        if self.init_failed {
            self.stop_sidecars(&mut actions, now);
        } else if self.initialized {
            self.step_main(&mut actions, now);
        }
        actions
    }

    fn expire_scripted(&mut self, now: SystemTime) {
        let due: Vec<(CRef, i32)> =
            self.all()
                .filter_map(|(cref, c)| match (&c.state, c.behaviour) {
                    (
                        State::Running { until: Some(t), .. },
                        Behaviour::Scripted { exit_code, .. },
                    ) if *t <= now => Some((cref, exit_code)),
                    _ => None,
                })
                .collect();
        for (cref, code) in due {
            self.exit(cref, code, now);
        }
    }

    fn step_init(&mut self, actions: &mut Vec<Action>, now: SystemTime) {
        for index in 0..self.init.len() {
            let cref = CRef {
                section: Section::Init,
                index,
            };
            let c = &self.init[index];
            match (c.kind, &c.state) {
                (Kind::Sidecar, State::Running { started, .. }) => {
                    if !*started {
                        return;
                    }
                }
                (Kind::Sidecar, State::Terminated(_)) => {
                    self.restart(cref, now, actions);
                    return;
                }
                (Kind::Init, State::Terminated(t)) if t.exit_code == 0 => {}
                (Kind::Init, State::Terminated(_)) => {
                    if self.policy == RestartPolicy::Never {
                        self.init_failed = true;
                        self.changed = true;
                    } else {
                        self.restart(cref, now, actions);
                    }
                    return;
                }
                (_, State::Running { .. }) | (Kind::Regular, State::Terminated(_)) => return,
                (_, State::Waiting { .. }) => {
                    if !c.may_start(now) {
                        return;
                    }
                    let sidecar = c.kind == Kind::Sidecar;
                    actions.extend(self.start(cref, now));
                    // A sidecar without a probe counts as started at once; the next init
                    // container may start in the same step.
                    if !(sidecar && self.init[index].is_started()) {
                        return;
                    }
                }
            }
        }
        self.initialized = true;
        self.changed = true;
        for c in &mut self.main {
            if let State::Waiting { reason, .. } = &mut c.state {
                *reason = "ContainerCreating";
            }
        }
    }

    fn step_main(&mut self, actions: &mut Vec<Action>, now: SystemTime) {
        for index in 0..self.main.len() {
            let cref = CRef {
                section: Section::Main,
                index,
            };
            let c = &self.main[index];
            match &c.state {
                State::Waiting { .. } if c.may_start(now) => actions.extend(self.start(cref, now)),
                State::Terminated(t) if self.policy.restarts(t.exit_code) => {
                    self.restart(cref, now, actions)
                }
                _ => {}
            }
        }
        let all_done = self.main.iter().all(|c| match &c.state {
            State::Terminated(t) => !self.policy.restarts(t.exit_code),
            _ => false,
        });
        if all_done {
            self.stop_sidecars(actions, now);
            return;
        }
        for index in 0..self.init.len() {
            let c = &self.init[index];
            if c.kind == Kind::Sidecar
                && (matches!(c.state, State::Terminated(_)) || c.may_start(now))
            {
                self.restart(
                    CRef {
                        section: Section::Init,
                        index,
                    },
                    now,
                    actions,
                );
            }
        }
    }

    /// The pod is done: native sidecars stop (reported as a clean exit), then the phase is final.
    fn stop_sidecars(&mut self, actions: &mut Vec<Action>, now: SystemTime) {
        let mut running = false;
        for index in 0..self.init.len() {
            let cref = CRef {
                section: Section::Init,
                index,
            };
            let c = &mut self.init[index];
            if c.kind != Kind::Sidecar {
                continue;
            }
            match (&mut c.state, c.behaviour) {
                (State::Running { stopping: None, .. }, Behaviour::Scripted { .. }) => {
                    if let State::Running { stopping, .. } = &mut c.state {
                        *stopping = Some(StopMode::SidecarDone);
                    }
                    self.exit(cref, 0, now);
                }
                (State::Running { stopping, .. }, Behaviour::Process) => {
                    running = true;
                    if stopping.is_none() {
                        *stopping = Some(StopMode::SidecarDone);
                        actions.push(Action::Stop {
                            cref,
                            signal: Signal::Term,
                        });
                    }
                }
                (State::Running { .. }, _) => running = true,
                _ => {}
            }
        }
        if !running {
            self.finished = true;
            self.changed = true;
        }
    }

    fn step_delete(&mut self, actions: &mut Vec<Action>, now: SystemTime) {
        let mut running = false;
        let refs: Vec<CRef> = self.all().map(|(r, _)| r).collect();
        for cref in refs {
            let Some(c) = self.container_mut(cref) else {
                continue;
            };
            let behaviour = c.behaviour;
            let State::Running { stopping, .. } = &mut c.state else {
                continue;
            };
            match behaviour {
                // Scripted containers die at once with SIGKILL's code, as if the grace period
                // had run out.
                Behaviour::Scripted { .. } => self.exit(cref, 137, now),
                Behaviour::Process => {
                    running = true;
                    if stopping.is_none() {
                        *stopping = Some(StopMode::Delete);
                        actions.push(Action::Stop {
                            cref,
                            signal: Signal::Term,
                        });
                    }
                }
            }
        }
        if !running {
            self.finished = true;
            self.changed = true;
        }
    }

    /// The pod phase now.
    #[cfg(test)]
    pub fn phase(&self, uid: &str) -> super::phase::Phase {
        let (init, main) = self.container_statuses(uid);
        pod_phase(&self.spec, &main, &init, self.deleting && self.finished)
    }

    /// `initContainerStatuses` and `containerStatuses`.
    pub fn container_statuses(&self, uid: &str) -> (Vec<Value>, Vec<Value>) {
        (
            self.init.iter().map(|c| container_status(c, uid)).collect(),
            self.main.iter().map(|c| container_status(c, uid)).collect(),
        )
    }

    /// The part of `status` the kubelet owns (conditions without transition times; the shell
    /// merges them into the current object).
    pub fn render(&self, uid: &str, pod_ip: &str, host_ip: &str, start_time: &str) -> Value {
        let (init, main) = self.container_statuses(uid);
        let phase = pod_phase(&self.spec, &main, &init, self.deleting && self.finished);
        let unready = |list: &[&Container]| -> Vec<String> {
            list.iter()
                .filter(|c| !c.is_ready())
                .map(|c| c.name.clone())
                .collect()
        };
        let incomplete: Vec<String> = self
            .init
            .iter()
            .filter(|c| !(c.is_ready() || (c.kind == Kind::Init && self.initialized)))
            .map(|c| c.name.clone())
            .collect();
        let watched: Vec<&Container> = self
            .init
            .iter()
            .filter(|c| c.kind == Kind::Sidecar)
            .chain(self.main.iter())
            .collect();
        let not_ready = unready(&watched);
        let cond = |kind: &str, ok: bool, reason: &str, message: String| {
            if ok {
                json!({"type": kind, "status": "True", "lastProbeTime": null})
            } else {
                json!({"type": kind, "status": "False", "lastProbeTime": null,
                       "reason": reason, "message": message})
            }
        };
        let list = |names: &[String]| format!("[{}]", names.join(" "));
        let ready_cond = |kind: &str| {
            if phase.is_terminal() {
                json!({"type": kind, "status": "False", "lastProbeTime": null, "reason": "PodCompleted"})
            } else {
                cond(
                    kind,
                    not_ready.is_empty(),
                    "ContainersNotReady",
                    format!("containers with unready status: {}", list(&not_ready)),
                )
            }
        };
        let mut status = json!({
            "phase": phase.as_str(),
            "conditions": [
                cond("PodReadyToStartContainers", self.mounted, "", String::new()),
                if self.init.is_empty() {
                    // Without init containers Kubernetes reports the pod initialized at once.
                    json!({"type": "Initialized", "status": "True", "lastProbeTime": null})
                } else {
                    cond(
                        "Initialized",
                        self.initialized,
                        "ContainersNotInitialized",
                        format!("containers with incomplete status: {}", list(&incomplete)),
                    )
                },
                ready_cond("Ready"),
                ready_cond("ContainersReady"),
                json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null}),
            ],
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": start_time,
            "containerStatuses": main,
        });
        if !self.init.is_empty() {
            status["initContainerStatuses"] = Value::Array(init);
        }
        if let Some(conds) = status["conditions"].as_array_mut() {
            for c in conds.iter_mut().filter_map(Value::as_object_mut) {
                if c.get("reason").and_then(Value::as_str) == Some("") {
                    c.remove("reason");
                    c.remove("message");
                }
            }
        }
        status
    }
}

fn container_id(uid: &str, name: &str, instance: u64) -> String {
    format!("kubesim://{uid}-{name}-{instance}")
}

fn terminated_json(t: &Terminated, uid: &str, name: &str) -> Value {
    let mut v = json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": meta::rfc3339(t.started_at),
        "finishedAt": meta::rfc3339(t.finished_at),
        "containerID": container_id(uid, name, t.instance),
    });
    if let Some(m) = &t.message {
        v["message"] = json!(m);
    }
    v
}

/// One entry of `containerStatuses` / `initContainerStatuses`.
pub fn container_status(c: &Container, uid: &str) -> Value {
    let state = match &c.state {
        State::Waiting { reason, message } => {
            let mut w = json!({"reason": reason});
            if let Some(m) = message {
                w["message"] = json!(m);
            }
            json!({"waiting": w})
        }
        State::Running { started_at, .. } => {
            json!({"running": {"startedAt": meta::rfc3339(*started_at)}})
        }
        State::Terminated(t) => json!({"terminated": terminated_json(t, uid, &c.name)}),
    };
    let last = match &c.last {
        Some(t) => json!({"terminated": terminated_json(t, uid, &c.name)}),
        None => json!({}),
    };
    let mut v = json!({
        "name": c.name,
        "image": c.image,
        "imageID": if c.instance > 0 { format!("kubesim://{}", c.image) } else { String::new() },
        "ready": c.is_ready(),
        "started": c.is_started(),
        "restartCount": c.restarts,
        "state": state,
        "lastState": last,
    });
    if c.instance > 0 {
        v["containerID"] = json!(container_id(uid, &c.name, c.instance));
    }
    v
}

#[cfg(test)]
mod tests {
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
}
