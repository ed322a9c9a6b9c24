//! The performance issue's aims, each against this run's figure: met, or missed by how much.

use serde_json::Value;

use crate::load::{Level, LoadResult};

/// One aim and what this run measured of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Aim {
    pub measure: &'static str,
    /// The aim as the issue writes it.
    pub wanted: &'static str,
    /// This run's figure, formatted (`n/a` when this run did not measure it).
    pub measured: String,
    /// `met`, `missed by 1.30×`, or why there is no verdict.
    pub verdict: String,
}

/// Which side of a bound a figure must be on.
#[derive(Debug, Clone, Copy)]
enum Goal {
    AtMost(f64),
    Below(f64),
    AtLeast(f64),
}

/// `met`, or by what factor the figure misses the bound.
fn verdict(value: f64, goal: Goal) -> String {
    if !value.is_finite() || value <= 0.0 {
        return "not measured in this run".into();
    }
    match goal {
        Goal::AtMost(bound) if value <= bound => "met".into(),
        Goal::Below(bound) if value < bound => "met".into(),
        Goal::AtLeast(bound) if value >= bound => "met".into(),
        Goal::AtMost(bound) | Goal::Below(bound) => format!("missed by {:.2}×", value / bound),
        Goal::AtLeast(bound) => format!("missed by {:.2}×", bound / value),
    }
}

/// A per-submission figure over every fresh level, weighted by its submissions.
pub fn weighted(load: &LoadResult, figure: impl Fn(&Level) -> f64) -> f64 {
    let submissions: usize = load.levels.iter().map(|l| l.submissions).sum();
    load.levels
        .iter()
        .map(|l| figure(l) * l.submissions as f64)
        .sum::<f64>()
        / submissions.max(1) as f64
}

/// kubesim's CPU per API request over every fresh level.
pub fn kubesim_per_request(load: &LoadResult) -> f64 {
    let requests: u64 = load.levels.iter().map(|l| l.requests.total()).sum();
    load.levels
        .iter()
        .map(|l| l.kubesim_cpu_us * l.submissions as f64)
        .sum::<f64>()
        / requests.max(1) as f64
}

/// `lowest–highest µs by level`, for a figure whose spread the weighted mean hides.
fn spread(load: &LoadResult, figure: impl Fn(&Level) -> f64) -> String {
    let values: Vec<f64> = load.levels.iter().map(figure).collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{low:.0}–{high:.0} µs by level")
}

fn at_clients(load: &LoadResult, clients: usize) -> Option<&Level> {
    load.levels.iter().find(|l| l.clients == clients)
}

/// The watching operator's run at `apps`, if this run made one.
fn operator_at(operator: &[Value], apps: u64) -> Option<&Value> {
    operator
        .iter()
        .find(|r| r["variant"] == "watch" && r["apps"].as_u64() == Some(apps))
}

fn number(v: Option<&Value>, key: &str) -> f64 {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

fn aim(measure: &'static str, wanted: &'static str, value: f64, shown: String, goal: Goal) -> Aim {
    Aim {
        measure,
        wanted,
        measured: if value.is_finite() {
            shown
        } else {
            "n/a".into()
        },
        verdict: verdict(value, goal),
    }
}

/// Every aim of the issue against this run (`operator`: the operator's runs, if any).
pub fn aims(load: &LoadResult, operator: &[Value]) -> Vec<Aim> {
    let fresh = weighted(load, |l| l.submitter_cpu_us);
    let duplicate = load.duplicates.submitter_cpu_us;
    let kubesim = kubesim_per_request(load);
    let sequential = at_clients(load, 1).map_or(f64::NAN, |l| l.latencies_ms.p50);
    let at_32 = at_clients(load, 32).map_or(f64::NAN, Level::per_second);
    let at_10k = operator_at(operator, 10_000);
    let writes = number(at_10k, "operator_writes_per_app");
    let to_done = number(at_10k, "to_done_p50_s");
    vec![
        aim(
            "submitter CPU, fresh submission",
            "≤ 500 µs",
            fresh,
            format!("{fresh:.0} µs ({})", spread(load, |l| l.submitter_cpu_us)),
            Goal::AtMost(500.0),
        ),
        aim(
            "submitter CPU, cached duplicate",
            "≤ 100 µs",
            duplicate,
            format!("{duplicate:.0} µs"),
            Goal::AtMost(100.0),
        ),
        aim(
            "kubesim CPU per request",
            "≤ 100 µs",
            kubesim,
            format!(
                "{kubesim:.0} µs ({})",
                spread(load, |l| l.kubesim_cpu_us * l.submissions as f64
                    / l.requests.total().max(1) as f64)
            ),
            Goal::AtMost(100.0),
        ),
        aim(
            "sequential latency p50",
            "< 2 ms",
            sequential,
            format!("{sequential:.2} ms"),
            Goal::Below(2.0),
        ),
        aim(
            "throughput at 32 clients",
            "≥ 1,000/s",
            at_32,
            format!("{at_32:.0}/s"),
            Goal::AtLeast(1000.0),
        ),
        aim(
            "operator writes per application at 10,000",
            "≤ 6",
            writes,
            format!("{writes:.2}"),
            Goal::AtMost(6.0),
        ),
        aim(
            "operator 10,000 burst, created→terminal p50",
            "≤ 33 s",
            to_done,
            format!("{to_done:.1} s"),
            Goal::AtMost(33.0),
        ),
        Aim {
            measure: "fresh-clone `bash scripts/test.sh`",
            wanted: "≤ 30 min",
            measured: "n/a".into(),
            verdict: "not measured here: the test command prints its own stage times".into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_within_its_bound_is_met_and_one_outside_says_by_how_much() {
        assert_eq!(verdict(400.0, Goal::AtMost(500.0)), "met");
        assert_eq!(verdict(500.0, Goal::AtMost(500.0)), "met");
        assert_eq!(verdict(650.0, Goal::AtMost(500.0)), "missed by 1.30×");
        assert_eq!(verdict(2.0, Goal::Below(2.0)), "missed by 1.00×");
        assert_eq!(verdict(1.7, Goal::Below(2.0)), "met");
        assert_eq!(verdict(1019.0, Goal::AtLeast(1000.0)), "met");
        assert_eq!(verdict(800.0, Goal::AtLeast(1000.0)), "missed by 1.25×");
    }

    #[test]
    fn a_figure_this_run_did_not_measure_has_no_verdict() {
        for value in [f64::NAN, 0.0] {
            assert_eq!(
                verdict(value, Goal::AtMost(6.0)),
                "not measured in this run"
            );
        }
    }

    #[test]
    fn the_operator_figure_comes_from_the_watching_run_at_ten_thousand_apps() {
        let runs = [
            serde_json::json!({"variant": "poll", "apps": 10000, "operator_writes_per_app": 9.0}),
            serde_json::json!({"variant": "watch", "apps": 1000, "operator_writes_per_app": 8.0}),
            serde_json::json!({"variant": "watch", "apps": 10000, "operator_writes_per_app": 6.0}),
        ];
        let found = operator_at(&runs, 10_000);
        assert_eq!(number(found, "operator_writes_per_app"), 6.0);
        assert!(number(operator_at(&runs, 100), "operator_writes_per_app").is_nan());
    }
}
