//! The per-pod state machine. It is pure: the async shell feeds it the time, whether the pod's
//! volumes can be mounted and what real processes did, executes the [`Action`]s it returns and
//! writes the status it renders. Scripted containers live entirely in here (their exits are
//! timers), which is what lets partitioned nodes keep "running" pods without any I/O.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::phase::is_sidecar;
use crate::meta;

mod spec;
mod status;

use spec::phase_spec;
pub use spec::{EXIT_CODE, NEVER_START, RUN_SECONDS, probe_gates, scripted_behaviour};

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
    /// What the phase reads of the pod spec (see [`phase_spec`]).
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
        let empty = json!({});
        let spec = pod.get("spec").unwrap_or(&empty);
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
        let list = |field: &str| -> &[Value] {
            spec.get(field)
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice)
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
            policy: RestartPolicy::of(spec),
            init,
            main,
            spec: phase_spec(spec),
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
            Behaviour::Scripted { .. } => None,
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
}

#[cfg(test)]
mod tests;
