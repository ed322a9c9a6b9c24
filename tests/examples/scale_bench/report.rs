//! The figures of one run and how they are printed: per run, then two Markdown tables (requests
//! per app by verb; time and memory) and the poll/watch ratios per app count.

use std::collections::{BTreeMap, BTreeSet};

use crate::track::{Drained, percentile};
use crate::{Counts, Variant, mib};

const VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
/// The most common state paths printed per run.
const MAX_PATHS: usize = 6;
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Everything measured in one run (one variant, one app count).
pub struct Figures {
    pub variant: Variant,
    pub apps: usize,
    pub created: usize,
    pub create_secs: f64,
    /// First create → every app terminal (or the bound).
    pub drain_secs: f64,
    pub drained: Drained,
    /// Requests from the first create to the drain, the bench's own creates excluded.
    pub counts: Counts,
    /// Of those, the operator's (by the user it acts as).
    pub by_operator: Counts,
    /// Requests of the idle window after the drain.
    pub idle: Counts,
    pub idle_secs: f64,
    /// The operator's reconcile-duration histogram: p50, p99 (bucket upper bounds), count.
    pub reconcile_p50: f64,
    pub reconcile_p99: f64,
    pub reconciles: u64,
    /// The operator's submissions by outcome (created, duplicate, unavailable, rejected).
    pub submissions: BTreeMap<String, u64>,
    pub operator_idle_kib: u64,
    pub operator_peak_kib: u64,
    pub operator_cpu: f64,
    /// The operator's CPU seconds in the idle window.
    pub idle_cpu: f64,
    pub submitter_peak_kib: u64,
}

impl Figures {
    fn per_app(&self, n: u64) -> f64 {
        n as f64 / self.created.max(1) as f64
    }

    fn by_verb(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for ((verb, _), n) in &self.counts {
            let verb = VERBS
                .iter()
                .find(|v| **v == verb)
                .copied()
                .unwrap_or("other");
            *out.entry(verb).or_default() += n;
        }
        out
    }

    fn verb_per_app(&self, verb: &str) -> f64 {
        self.per_app(self.by_verb().get(verb).copied().unwrap_or(0))
    }

    fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// (operator, submitter) writes: the operator's by the user it acts as, the submitter's all
    /// the others (the bench's own creates are not counted).
    fn writes(&self) -> (u64, u64) {
        let writes = |counts: &Counts| -> u64 {
            counts
                .iter()
                .filter(|((verb, _), _)| WRITES.contains(&verb.as_str()))
                .map(|(_, n)| n)
                .sum()
        };
        let operator = writes(&self.by_operator);
        (operator, writes(&self.counts).saturating_sub(operator))
    }

    /// Status writes that lost a race (409): PUTs that made no MODIFIED event.
    fn conflicts(&self) -> u64 {
        self.counts
            .get(&("update".to_owned(), "sparkapplications/status".to_owned()))
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.drained.app_changes)
    }

    /// Calls to the submitter that got an answer, whatever it was.
    fn submit_calls(&self) -> u64 {
        self.submissions.values().sum()
    }

    fn idle_per_second(&self) -> f64 {
        self.idle.values().sum::<u64>() as f64 / self.idle_secs.max(1e-9)
    }

    fn idle_cpu_share(&self) -> f64 {
        self.idle_cpu / self.idle_secs.max(1e-9)
    }

    fn apps_per_second(&self) -> f64 {
        self.drained.to_done.len() as f64 / self.drain_secs.max(1e-9)
    }
}

fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

pub fn print_one(f: &Figures) {
    let d = &f.drained;
    println!(
        "\n== {} with {} apps: {} created in {:.1} s; {} completed, {} failed, {} not terminal; drained in {:.1} s ({:.1} apps/s)",
        f.variant.name(),
        f.apps,
        f.created,
        f.create_secs,
        d.completed,
        d.failed,
        f.created - d.to_done.len(),
        f.drain_secs,
        f.apps_per_second()
    );
    println!("requests from the first create to the drain (the bench's creates excluded):");
    for ((verb, resource), n) in &f.counts {
        let operator = f
            .by_operator
            .get(&(verb.clone(), resource.clone()))
            .copied()
            .unwrap_or(0);
        println!(
            "  {verb:>8} {resource:<32} {n:>9}  {:>7.2}/app  (operator {:.2}/app)",
            f.per_app(*n),
            f.per_app(operator)
        );
    }
    println!(
        "idle {:.0} s after the drain: {:?}",
        f.idle_secs,
        f.idle
            .iter()
            .map(|((v, r), n)| format!("{v} {r} {n}"))
            .collect::<Vec<_>>()
    );
    println!(
        "created -> SUBMITTED: p50 {:.2} s, p99 {:.2} s; created -> terminal: p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        secs(percentile(&d.to_submitted, 50.0)),
        secs(percentile(&d.to_submitted, 99.0)),
        secs(percentile(&d.to_done, 50.0)),
        secs(percentile(&d.to_done, 99.0)),
        secs(d.to_done.last().copied().unwrap_or_default()),
    );
    if d.catch_ups > 0 {
        println!(
            "the bench's event follower caught up {} times; {} apps have latencies that are upper bounds",
            d.catch_ups, d.late_apps
        );
    }
    println!(
        "reconciles {} (duration p50 <= {:.0} ms, p99 <= {:.0} ms by histogram bucket); submissions by outcome {:?}",
        f.reconciles,
        f.reconcile_p50 * 1e3,
        f.reconcile_p99 * 1e3,
        f.submissions
    );
    println!(
        "status writes: {} took effect (app MODIFIED events), about {} lost a race (409)",
        d.app_changes,
        f.conflicts()
    );
    println!(
        "operator: RSS {:.1} MiB idle before the run, peak {:.1} MiB, CPU {:.1} s; submitter peak RSS {:.1} MiB",
        mib(f.operator_idle_kib),
        mib(f.operator_peak_kib),
        f.operator_cpu,
        mib(f.submitter_peak_kib)
    );
    println!(
        "operator CPU in the idle window: {:.0}% of a core",
        f.idle_cpu_share() * 100.0
    );
    let mut paths: Vec<_> = d.paths.iter().collect();
    paths.sort_by(|a, b| b.1.cmp(a.1));
    for (path, n) in paths.iter().take(MAX_PATHS) {
        println!("  state path x{n}: {path}");
    }
    for ((verb, resource), n) in &f.by_operator {
        if WRITES.contains(&verb.as_str()) {
            println!(
                "  operator writes: {verb} {resource} {:.2}/app",
                f.per_app(*n)
            );
        }
    }
    for (reason, n) in &d.failures {
        println!("  failed x{n}: {reason}");
    }
}

/// The figures of one run as JSON (read by `cargo run -p bench`).
pub fn to_json(f: &Figures) -> serde_json::Value {
    let d = &f.drained;
    let (operator_writes, submitter_writes) = f.writes();
    let lists = f.by_verb().get("list").copied().unwrap_or(0);
    serde_json::json!({
        "variant": f.variant.name(),
        "apps": f.apps,
        "created": f.created,
        "completed": d.completed,
        "failed": d.failed,
        "drain_secs": f.drain_secs,
        "apps_per_second": f.apps_per_second(),
        "requests_per_app": f.per_app(f.total()),
        "lists": lists,
        "operator_writes_per_app": f.per_app(operator_writes),
        "submitter_writes_per_app": f.per_app(submitter_writes),
        "status_conflicts_per_app": f.per_app(f.conflicts()),
        "to_submitted_p50_s": secs(percentile(&d.to_submitted, 50.0)),
        "to_submitted_p99_s": secs(percentile(&d.to_submitted, 99.0)),
        "to_done_p50_s": secs(percentile(&d.to_done, 50.0)),
        "to_done_p99_s": secs(percentile(&d.to_done, 99.0)),
        "reconcile_p50_ms": f.reconcile_p50 * 1e3,
        "reconcile_p99_ms": f.reconcile_p99 * 1e3,
        "reconciles": f.reconciles,
        "operator_peak_mib": mib(f.operator_peak_kib),
        "operator_idle_mib": mib(f.operator_idle_kib),
        "operator_cpu_s": f.operator_cpu,
        "operator_cpu_ms_per_app": f.operator_cpu * 1e3 / f.created.max(1) as f64,
        "idle_requests_per_s": f.idle_per_second(),
        "idle_cpu_share": f.idle_cpu_share(),
        "submitter_peak_mib": mib(f.submitter_peak_kib),
        "by_request": f.counts.iter().map(|((verb, resource), n)| {
            serde_json::json!({"verb": verb, "resource": resource, "count": n})
        }).collect::<Vec<_>>(),
    })
}

pub fn print_tables(results: &[Figures]) {
    println!(
        "\nAPI requests per app, by verb (first create to drain; the bench's creates excluded):\n"
    );
    println!(
        "| variant | apps | GET | LIST | WATCH | POST | PUT | PATCH | DELETE | all | operator writes | of which 409 | submitter writes | submit calls | idle req/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in results {
        let (operator, submitter) = f.writes();
        println!(
            "| {} | {} | {:.2} | {:.4} | {:.4} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |",
            f.variant.name(),
            f.apps,
            f.verb_per_app("get"),
            f.verb_per_app("list"),
            f.verb_per_app("watch"),
            f.verb_per_app("create"),
            f.verb_per_app("update"),
            f.verb_per_app("patch"),
            f.verb_per_app("delete"),
            f.per_app(f.total()),
            f.per_app(operator),
            f.per_app(f.conflicts()),
            f.per_app(submitter),
            f.per_app(f.submit_calls()),
            f.idle_per_second()
        );
    }
    println!("\nTime and memory:\n");
    println!(
        "| variant | apps | completed | failed | drain s | apps/s | created→SUBMITTED p50 / p99 s | created→terminal p50 / p99 s | reconcile p50 / p99 ms | operator peak RSS MiB | operator CPU s | idle operator CPU % core | submitter peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in results {
        let d = &f.drained;
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} | {:.0} / {:.0} | {:.1} | {:.1} | {:.0} | {:.1} |",
            f.variant.name(),
            f.apps,
            d.completed,
            d.failed,
            f.drain_secs,
            f.apps_per_second(),
            secs(percentile(&d.to_submitted, 50.0)),
            secs(percentile(&d.to_submitted, 99.0)),
            secs(percentile(&d.to_done, 50.0)),
            secs(percentile(&d.to_done, 99.0)),
            f.reconcile_p50 * 1e3,
            f.reconcile_p99 * 1e3,
            mib(f.operator_peak_kib),
            f.operator_cpu,
            f.idle_cpu_share() * 100.0,
            mib(f.submitter_peak_kib)
        );
    }
    println!();
    for apps in results.iter().map(|f| f.apps).collect::<BTreeSet<_>>() {
        let find = |v: Variant| results.iter().find(|f| f.apps == apps && f.variant == v);
        let (Some(w), Some(p)) = (find(Variant::Watch), find(Variant::Poll)) else {
            continue;
        };
        let ratio = |a: f64, b: f64| a / b.max(1e-9);
        let lists = |f: &Figures| f.by_verb().get("list").copied().unwrap_or(0);
        let p50 = |f: &Figures| secs(percentile(&f.drained.to_done, 50.0));
        let sub50 = |f: &Figures| secs(percentile(&f.drained.to_submitted, 50.0));
        println!(
            "ratio poll/watch at {apps} apps: requests/app {:.2}x ({:.2} vs {:.2}), LISTs {} vs {}, operator writes/app {:.2}x, idle req/s {:.1} vs {:.1}, idle operator CPU {:.0}% vs {:.0}% of a core, drain time {:.2}x, created→SUBMITTED p50 {:.2}x, created→terminal p50 {:.2}x, operator peak RSS {:.2}x, operator CPU {:.2}x",
            ratio(p.per_app(p.total()), w.per_app(w.total())),
            p.per_app(p.total()),
            w.per_app(w.total()),
            lists(p),
            lists(w),
            ratio(p.per_app(p.writes().0), w.per_app(w.writes().0)),
            p.idle_per_second(),
            w.idle_per_second(),
            p.idle_cpu_share() * 100.0,
            w.idle_cpu_share() * 100.0,
            ratio(p.drain_secs, w.drain_secs),
            ratio(sub50(p), sub50(w)),
            ratio(p50(p), p50(w)),
            ratio(p.operator_peak_kib as f64, w.operator_peak_kib as f64),
            ratio(p.operator_cpu, w.operator_cpu)
        );
    }
}
