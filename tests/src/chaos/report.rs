//! What a soak did and saw: the seed and what replays it, the faults by kind, the violations by
//! invariant, the applications by final state, the operations, and the process's memory at the
//! start, at the end and at its peak; as JSON (`--report FILE`) and as text (stdout).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::ChaosConfig;
use super::invariants::{self, Tally};
use super::memory::{self, Memory};
use super::schedule::Fault;

/// The report of one soak.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    /// The fault window, the mean gap and the store: with the seed, what replays the schedule.
    pub duration: Duration,
    pub mean_gap: Duration,
    pub redis: bool,
    pub submitters: usize,
    pub operators: usize,
    pub schedule: Vec<(Duration, Fault)>,
    /// `<restart policy> <recovery|plain>: <final state>` of every application, by name.
    pub apps: BTreeMap<String, String>,
    pub tally: Arc<Tally>,
    pub elapsed: Duration,
    /// Once the stack was up, before the first fault.
    pub memory_start: Memory,
    /// After the last check; its `peak_kib` is the process's peak.
    pub memory_end: Memory,
}

impl Report {
    pub fn violations(&self) -> Vec<invariants::Violation> {
        self.tally.violations()
    }

    /// Faults applied and skipped, by kind.
    pub fn faults(&self) -> BTreeMap<String, u64> {
        self.tally.faults()
    }

    /// The command that replays this soak's schedule.
    pub fn replay(&self) -> String {
        let mut config = ChaosConfig::new(PathBuf::new(), self.seed, self.duration);
        config.redis = self.redis;
        config.submitters = self.submitters;
        config.operators = self.operators;
        format!(
            "sandbox chaos --seed {} --duration {}ms --mean-gap {}ms{}",
            self.seed,
            self.duration.as_millis(),
            self.mean_gap.as_millis(),
            replay_flags(&config)
        )
    }

    /// How many applications ended in each final state (`COMPLETED`, `Always: deleted`, ...).
    pub fn applications_by_state(&self) -> BTreeMap<String, u64> {
        let mut states = BTreeMap::new();
        for state in self.apps.values() {
            let state = state.rsplit(": ").next().unwrap_or(state);
            *states.entry(state.to_owned()).or_default() += 1;
        }
        states
    }

    pub fn to_json(&self) -> Value {
        let mut by_policy: BTreeMap<&str, u64> = BTreeMap::new();
        for state in self.apps.values() {
            *by_policy.entry(state).or_default() += 1;
        }
        let mut report = json!({
            "seed": self.seed,
            "replay": self.replay(),
            "durationSeconds": self.duration.as_secs_f64(),
            "meanGapSeconds": self.mean_gap.as_secs_f64(),
            "redis": self.redis,
            "elapsedSeconds": self.elapsed.as_secs_f64(),
            "schedule": self.schedule.iter()
                .map(|(at, fault)| format!("{:>8.3}s {fault}", at.as_secs_f64()))
                .collect::<Vec<_>>(),
            "faults": self.faults(),
            "violationsByInvariant": self.tally.violations_by_invariant(),
            "applicationsByState": self.applications_by_state(),
            "applications": by_policy,
            "memory": {
                "startKiB": self.memory_start.rss_kib,
                "endKiB": self.memory_end.rss_kib,
                "peakKiB": self.memory_end.peak_kib,
            },
        });
        if let (Some(report), Value::Object(tally)) = (report.as_object_mut(), self.tally.to_json())
        {
            report.extend(tally);
        }
        report
    }

    /// The report as a person reads it.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let violations = self.violations();
        let _ = writeln!(
            text,
            "chaos soak, seed {}: {} fault window, {:.0} s in all; {} violations",
            self.seed,
            humantime(self.duration),
            self.elapsed.as_secs_f64(),
            violations.len()
        );
        let _ = writeln!(text, "replay: {}", self.replay());
        let _ = writeln!(
            text,
            "memory (resident): {} at the start, {} at the end, {} at the peak",
            memory::mib(self.memory_start.rss_kib),
            memory::mib(self.memory_end.rss_kib),
            memory::mib(self.memory_end.peak_kib)
        );
        let section = |text: &mut String, title: &str, rows: Vec<(String, u64)>| {
            let _ = writeln!(text, "{title}:");
            for (name, count) in rows {
                let _ = writeln!(text, "  {name:<48} {count:>6}");
            }
        };
        section(
            &mut text,
            "faults by kind",
            self.faults().into_iter().collect(),
        );
        section(
            &mut text,
            "violations by invariant (checks)",
            self.tally
                .violations_by_invariant()
                .into_iter()
                .zip(self.tally.checks())
                .map(|((name, n), (_, checks))| (format!("{name} ({checks} checks)"), n))
                .collect(),
        );
        section(
            &mut text,
            "applications by final state",
            self.applications_by_state().into_iter().collect(),
        );
        let operations = self.tally.to_json()["operations"].clone();
        section(
            &mut text,
            "operations",
            operations
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default(),
        );
        for v in &violations {
            let _ = writeln!(
                text,
                "VIOLATION {} at {:.1}s: {}",
                v.invariant, v.at_seconds, v.detail
            );
        }
        text
    }
}

/// The flags beside seed, duration and gap that the schedule depends on, where they differ
/// from the defaults: the store and the number of replicas it draws kills from.
pub fn replay_flags(config: &ChaosConfig) -> String {
    let defaults = ChaosConfig::new(PathBuf::new(), config.seed, config.duration);
    let mut flags = String::new();
    if config.submitters != defaults.submitters {
        let _ = write!(flags, " --submitters {}", config.submitters);
    }
    if config.operators != defaults.operators {
        let _ = write!(flags, " --operators {}", config.operators);
    }
    if config.redis {
        flags.push_str(" --redis");
    }
    flags
}

/// `75s`, `3m`, `1h 5m`: how a duration reads in the text.
fn humantime(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, seconds % 3600 / 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::schedule::FaultKind;

    fn report() -> Report {
        let tally = Arc::new(Tally::default());
        tally.fault(FaultKind::QuotaFlip, true);
        tally.fault(FaultKind::KillApi, false);
        tally.check(
            invariants::NO_ORPHANS,
            Some("configmap default/x: its owners are gone".into()),
        );
        tally.operation("submit_created");
        Report {
            seed: 42,
            duration: Duration::from_secs(75),
            mean_gap: Duration::from_millis(1500),
            redis: false,
            submitters: 3,
            operators: 2,
            schedule: vec![(Duration::from_millis(1200), Fault::DropWatches)],
            apps: BTreeMap::from([
                ("a".to_owned(), "Never plain: Completed".to_owned()),
                ("b".to_owned(), "OnFailure recovery: Completed".to_owned()),
                ("c".to_owned(), "Always: deleted".to_owned()),
            ]),
            tally,
            elapsed: Duration::from_secs(101),
            memory_start: Memory {
                rss_kib: 102_400,
                peak_kib: 102_400,
            },
            memory_end: Memory {
                rss_kib: 153_600,
                peak_kib: 204_800,
            },
        }
    }

    #[test]
    fn the_json_report_holds_faults_violations_states_and_memory() {
        let json = report().to_json();
        assert_eq!(json["seed"], 42);
        assert_eq!(
            json["replay"],
            "sandbox chaos --seed 42 --duration 75000ms --mean-gap 1500ms"
        );
        assert_eq!(json["faults"]["quota_flip"], 1);
        assert_eq!(json["faults"]["kill_api_skipped"], 1);
        assert_eq!(json["violationsByInvariant"]["no_orphans"], 1);
        assert_eq!(json["violationsByInvariant"]["one_live_driver"], 0);
        assert_eq!(json["applicationsByState"]["Completed"], 2);
        assert_eq!(json["applicationsByState"]["deleted"], 1);
        assert_eq!(json["memory"]["startKiB"], 102_400);
        assert_eq!(json["memory"]["peakKiB"], 204_800);
        assert_eq!(json["operations"]["submit_created"], 1);
    }

    #[test]
    fn the_replay_command_names_the_store_and_replica_counts_only_when_not_the_defaults() {
        let mut report = report();
        assert!(
            !report.replay().contains("--submitters"),
            "{}",
            report.replay()
        );
        report.submitters = 5;
        report.operators = 1;
        report.redis = true;
        assert_eq!(
            report.replay(),
            "sandbox chaos --seed 42 --duration 75000ms --mean-gap 1500ms --submitters 5 --operators 1 --redis"
        );
    }

    #[test]
    fn the_text_report_says_the_seed_memory_and_each_violation() {
        let text = report().to_text();
        assert!(
            text.starts_with(
                "chaos soak, seed 42: 1m 15s fault window, 101 s in all; 1 violations\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("100.0 MiB at the start, 150.0 MiB at the end, 200.0 MiB at the peak"),
            "{text}"
        );
        assert!(text.contains("  quota_flip "), "{text}");
        assert!(text.contains("VIOLATION no_orphans at "), "{text}");
    }
}
