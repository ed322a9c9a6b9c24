//! An exhaustive model check of the fenced-restart protocol.
//!
//! Actors: the operator (observe failure → fence → write status → delete old drivers → submit the new
//! driver carrying the fenced epoch; it may crash between any two steps and restarts from what the
//! API server holds), the driver agents (every agent ever started, zombies included, may try a
//! commit or a heartbeat at any moment), the store (the real rules of `operator::fence`), the API
//! server (driver pods by name, create fails on an existing name) and the kubelet (starts pending
//! pods; a driver may fail, or its pod may vanish while the process keeps running on a partitioned
//! node). A breadth-first search visits every reachable state within the bounds and checks:
//!
//! The protocol checked is: fence (advance from the failed driver's epoch) → record the new epoch
//! in the status → delete every older driver pod → submit the new driver carrying the epoch.
//!
//! 1. no write under a stale epoch is accepted (every accepted write carries the highest epoch
//!    any advance has returned);
//! 2. at most one driver commits under a given epoch;
//! 3. no two drivers ever started share an epoch;
//! 4. at most one driver pod is live (pending or running) at any time;
//! 5. in every final state the operator converged: exactly one pod, live, under the status's
//!    epoch, which is the store's epoch.
//!
//! Mutated protocols (a sloppy store check, the epoch recorded in the status only after the
//! submission, an agent that takes its epoch from the status like the seed's bug 1) must each be
//! caught, so the check has teeth.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use operator::fence::{self, FenceState};

/// Where the operator is in one restart; held in memory, so a crash forgets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pc {
    Idle,
    Fence { from: u64 },
    WriteStatus { to: u64 },
    Delete { to: u64 },
    Submit { to: u64 },
}

/// The order of the restart steps. The status records the fenced epoch before anything is
/// submitted under it: after a crash, an epoch whose driver may already have been created (and
/// may since have vanished with its node) is never handed to a second driver.
fn next_step(m: Mutation, step: Pc, to: u64) -> Pc {
    if m.status_after_submit {
        match step {
            Pc::Fence { .. } => Pc::Delete { to },
            Pc::Delete { .. } => Pc::Submit { to },
            Pc::Submit { .. } => Pc::WriteStatus { to },
            Pc::WriteStatus { .. } | Pc::Idle => Pc::Idle,
        }
    } else {
        match step {
            Pc::Fence { .. } => Pc::WriteStatus { to },
            Pc::WriteStatus { .. } => Pc::Delete { to },
            Pc::Delete { .. } => Pc::Submit { to },
            Pc::Submit { .. } | Pc::Idle => Pc::Idle,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Pending,
    Running,
    Failed,
}

/// A driver pod in the API server. Its name is derived from the epoch it carries, so a resubmission
/// after an operator crash hits the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Pod {
    uid: u8,
    epoch: u64,
    phase: Phase,
}

/// A running agent process; it outlives its pod (a zombie on a partitioned node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Agent {
    uid: u8,
    epoch: u64,
    next_seq: u64,
    writes_left: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct World {
    store: FenceState,
    /// Pods by name (the epoch the name was derived from).
    pods: BTreeMap<u64, Pod>,
    agents: Vec<Agent>,
    /// `status.recoveryStatus.epoch`: the operator's durable memory.
    status_epoch: u64,
    pc: Pc,
    crashes_left: u8,
    failures_left: u8,
    next_uid: u8,
    /// Ghost: the highest epoch any advance returned.
    max_advanced: u64,
    /// Ghost: (epoch, driver uid) of every accepted commit.
    committers: BTreeSet<(u64, u8)>,
}

/// Which protocol to check: the real one, or a deliberately broken variant.
#[derive(Debug, Clone, Copy, Default)]
struct Mutation {
    /// The store accepts any epoch up to the current one instead of exactly the current one.
    sloppy_store: bool,
    /// The agent takes its epoch from the application status when it starts (the seed's bug 1)
    /// instead of from its own submission.
    agent_epoch_from_status: bool,
    /// The operator records the new epoch in the status only after submitting under it.
    status_after_submit: bool,
}

#[derive(Debug, Clone, Copy)]
struct Bounds {
    failures: u8,
    crashes: u8,
    writes_per_agent: u8,
}

#[derive(Debug)]
struct Report {
    states: usize,
    transitions: usize,
    final_states: usize,
}

#[derive(Debug)]
struct Violation {
    invariant: &'static str,
    state: Box<World>,
}

/// The application object and run the model's progress belongs to (one: scopes are checked by
/// the store's own tests).
const SCOPE: &str = "uid/1";

/// The world after the operator's first fence: the first driver runs under epoch 1.
fn initial(b: Bounds) -> World {
    let (store, first) = fence::advance_from(&FenceState::default(), SCOPE, fence::INITIAL_EPOCH);
    World {
        store,
        pods: BTreeMap::from([(
            first.epoch,
            Pod {
                uid: 0,
                epoch: first.epoch,
                phase: Phase::Pending,
            },
        )]),
        agents: Vec::new(),
        status_epoch: first.epoch,
        pc: Pc::Idle,
        crashes_left: b.crashes,
        failures_left: b.failures,
        next_uid: 1,
        max_advanced: first.epoch,
        committers: BTreeSet::new(),
    }
}

fn store_commit(m: Mutation, s: &FenceState, epoch: u64, seq: u64, who: u8) -> Option<FenceState> {
    if m.sloppy_store && epoch < s.epoch {
        // The broken check: treat an old epoch as if it were current.
        let as_current = FenceState { epoch, ..s.clone() };
        return fence::commit(&as_current, SCOPE, epoch, seq, &who.to_string(), 0)
            .ok()
            .map(|(n, _)| FenceState {
                epoch: s.epoch,
                ..n
            });
    }
    fence::commit(s, SCOPE, epoch, seq, &who.to_string(), 0)
        .ok()
        .map(|(n, _)| n)
}

/// Every successor of `w`, or the first invariant a transition breaks.
fn successors(w: &World, m: Mutation, b: Bounds) -> Result<Vec<World>, Violation> {
    let mut out = Vec::new();
    let violation = |invariant, state: &World| Violation {
        invariant,
        state: Box::new(state.clone()),
    };

    // Kubelet: a pending pod starts; its agent restores the latest marker.
    for (name, pod) in &w.pods {
        if pod.phase == Phase::Pending {
            let mut n = w.clone();
            let epoch = if m.agent_epoch_from_status {
                w.status_epoch
            } else {
                pod.epoch
            };
            let next_seq = fence::latest_marker(&w.store, SCOPE).map_or(1, |mk| mk.seq + 1);
            if let Some(p) = n.pods.get_mut(name) {
                p.phase = Phase::Running;
            }
            n.agents.push(Agent {
                uid: pod.uid,
                epoch,
                next_seq,
                writes_left: b.writes_per_agent,
            });
            out.push(n);
        }
    }
    // A bounded number of failures: the driver dies (its agent may live on as a zombie), or its
    // pod vanishes while the process keeps running on a partitioned node.
    if w.failures_left > 0 {
        for (name, pod) in &w.pods {
            if pod.phase == Phase::Running {
                let mut failed = w.clone();
                failed.failures_left -= 1;
                if let Some(p) = failed.pods.get_mut(name) {
                    p.phase = Phase::Failed;
                }
                out.push(failed);
                let mut vanished = w.clone();
                vanished.failures_left -= 1;
                vanished.pods.remove(name);
                out.push(vanished);
            }
        }
    }
    // Agents: any of them, at any time, tries a commit or a heartbeat under its own epoch.
    for (i, a) in w.agents.iter().enumerate() {
        if a.writes_left == 0 {
            continue;
        }
        if let Some(store) = store_commit(m, &w.store, a.epoch, a.next_seq, a.uid) {
            let mut n = w.clone();
            n.store = store;
            n.agents[i].next_seq += 1;
            n.agents[i].writes_left -= 1;
            if a.epoch != w.max_advanced {
                return Err(violation("a commit under a stale epoch was accepted", &n));
            }
            n.committers.insert((a.epoch, a.uid));
            if n.committers.iter().filter(|(e, _)| *e == a.epoch).count() > 1 {
                return Err(violation("two drivers committed under one epoch", &n));
            }
            out.push(n);
        } else {
            let mut n = w.clone();
            n.agents[i].writes_left -= 1;
            out.push(n);
        }
        let mut n = w.clone();
        n.agents[i].writes_left -= 1;
        if let Ok(store) = fence::heartbeat(&w.store, SCOPE, a.epoch, 0) {
            if a.epoch != w.max_advanced {
                return Err(violation(
                    "a heartbeat under a stale epoch was accepted",
                    &n,
                ));
            }
            n.store = store;
        }
        out.push(n);
    }
    // The operator: one step of its restart, or a crash that forgets where it was.
    let then = |step: Pc, to: u64| next_step(m, step, to);
    match w.pc {
        Pc::Idle => {
            let needs_restart = w
                .pods
                .get(&w.status_epoch)
                .is_none_or(|p| p.phase == Phase::Failed);
            if needs_restart {
                let mut n = w.clone();
                n.pc = Pc::Fence {
                    from: w.status_epoch,
                };
                out.push(n);
            }
        }
        Pc::Fence { from } => {
            let mut n = w.clone();
            let (store, adv) = fence::advance_from(&w.store, SCOPE, from);
            n.store = store;
            n.max_advanced = n.max_advanced.max(adv.epoch);
            n.pc = then(w.pc, adv.epoch);
            out.push(n);
        }
        Pc::WriteStatus { to } => {
            let mut n = w.clone();
            n.status_epoch = to;
            n.pc = then(w.pc, to);
            out.push(n);
        }
        Pc::Delete { to } => {
            // Every driver pod of the application under an older epoch (listed by label), not only
            // the one the operator remembers: a crash may have left an earlier one behind.
            let mut n = w.clone();
            n.pods.retain(|name, _| *name >= to);
            n.pc = then(w.pc, to);
            out.push(n);
        }
        Pc::Submit { to } => {
            let mut n = w.clone();
            // Create by name: an existing pod (an earlier attempt before a crash) answers 409.
            if let std::collections::btree_map::Entry::Vacant(slot) = n.pods.entry(to) {
                slot.insert(Pod {
                    uid: w.next_uid,
                    epoch: to,
                    phase: Phase::Pending,
                });
                n.next_uid += 1;
            }
            n.pc = then(w.pc, to);
            out.push(n);
        }
    }
    if w.pc != Pc::Idle && w.crashes_left > 0 {
        let mut n = w.clone();
        n.crashes_left -= 1;
        n.pc = Pc::Idle;
        out.push(n);
    }
    Ok(out)
}

/// Invariants of every state, not only of transitions.
fn check_state(w: &World) -> Result<(), &'static str> {
    let mut epochs = BTreeSet::new();
    if !w.agents.iter().all(|a| epochs.insert(a.epoch)) {
        return Err("two drivers were started under one epoch");
    }
    let live = w.pods.values().filter(|p| p.phase != Phase::Failed).count();
    if live > 1 {
        return Err("two driver pods live at once");
    }
    Ok(())
}

/// The operator converged: one live pod, under the status's epoch, which is the store's.
fn check_final(w: &World) -> Result<(), &'static str> {
    let converged = w.pc == Pc::Idle
        && w.pods.len() == 1
        && w.pods.get(&w.status_epoch).is_some_and(|p| {
            p.phase != Phase::Failed && p.epoch == w.status_epoch && p.epoch == w.store.epoch
        });
    if converged {
        Ok(())
    } else {
        Err("the operator did not converge to one live driver under the current epoch")
    }
}

fn explore(b: Bounds, m: Mutation) -> Result<Report, Violation> {
    let start = initial(b);
    let mut seen = HashSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    let mut report = Report {
        states: 0,
        transitions: 0,
        final_states: 0,
    };
    while let Some(w) = queue.pop_front() {
        report.states += 1;
        assert!(
            report.states < 20_000_000,
            "state space larger than the bounds suggest"
        );
        check_state(&w).map_err(|invariant| Violation {
            invariant,
            state: Box::new(w.clone()),
        })?;
        let next = successors(&w, m, b)?;
        if next.is_empty() {
            report.final_states += 1;
            check_final(&w).map_err(|invariant| Violation {
                invariant,
                state: Box::new(w.clone()),
            })?;
        }
        report.transitions += next.len();
        for n in next {
            if seen.insert(n.clone()) {
                queue.push_back(n);
            }
        }
    }
    Ok(report)
}

const BOUNDS: Bounds = Bounds {
    failures: 3,
    crashes: 2,
    writes_per_agent: 2,
};

/// `FENCE_MODEL_BOUNDS=failures,crashes,writes` explores deeper (3,3,3: 1.7 million states).
fn bounds_from_env() -> Bounds {
    let Ok(text) = std::env::var("FENCE_MODEL_BOUNDS") else {
        return BOUNDS;
    };
    let v: Vec<u8> = text
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("FENCE_MODEL_BOUNDS is three small numbers")
        })
        .collect();
    assert_eq!(v.len(), 3, "FENCE_MODEL_BOUNDS=failures,crashes,writes");
    Bounds {
        failures: v[0],
        crashes: v[1],
        writes_per_agent: v[2],
    }
}

#[test]
fn protocol_never_accepts_a_stale_write_and_converges() {
    let bounds = bounds_from_env();
    let report = match explore(bounds, Mutation::default()) {
        Ok(r) => r,
        Err(v) => panic!("{}: {:#?}", v.invariant, v.state),
    };
    println!(
        "fence model: {} states, {} transitions, {} final states (failures {}, crashes {}, writes per agent {})",
        report.states,
        report.transitions,
        report.final_states,
        bounds.failures,
        bounds.crashes,
        bounds.writes_per_agent
    );
    // Guards against bounds so small the search proves nothing.
    assert!(report.states > 10_000, "{report:?}");
    assert!(report.final_states > 1, "{report:?}");
}

#[test]
fn a_store_that_accepts_old_epochs_is_caught() {
    let mutation = Mutation {
        sloppy_store: true,
        ..Mutation::default()
    };
    let v = explore(BOUNDS, mutation).expect_err("the model must catch a sloppy store");
    assert_eq!(v.invariant, "a commit under a stale epoch was accepted");
}

#[test]
fn the_seed_bug_1_agent_epoch_from_the_status_is_caught() {
    // The seed's order (status written after the pod is created) with the agent reading its epoch
    // from the status: even without any operator crash, a new agent can start under the old
    // epoch. Carrying the epoch in the submission itself removes the race.
    let no_crashes = Bounds {
        crashes: 0,
        ..BOUNDS
    };
    let seed_order = Mutation {
        status_after_submit: true,
        ..Mutation::default()
    };
    explore(no_crashes, seed_order).expect("without crashes the seed's order alone is safe");
    let seed_bug = Mutation {
        agent_epoch_from_status: true,
        ..seed_order
    };
    let v = explore(no_crashes, seed_bug).expect_err("the model must catch seed bug 1");
    assert_eq!(v.invariant, "two drivers were started under one epoch");
}

#[test]
fn recording_the_epoch_only_after_submitting_is_caught() {
    // Submit under epoch 1, the pod vanishes with its node, the operator crashes before the status
    // write; on restart the idempotent advance returns epoch 1 again and a second driver would be
    // created under it. Recording the epoch first is what prevents it.
    let mutation = Mutation {
        status_after_submit: true,
        ..Mutation::default()
    };
    let v = explore(BOUNDS, mutation).expect_err("the model must catch the late status write");
    assert_eq!(v.invariant, "two drivers were started under one epoch");
}
