//! docs/benchmarks.md and its plots, from one run's figures.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::aims;
use crate::load::{Level, LoadResult};
use crate::plot::{self, Series};

/// Everything one run measured.
pub struct Run {
    pub command: String,
    pub machine: String,
    pub commit: String,
    pub started: String,
    pub seconds: f64,
    pub quick: bool,
    pub load: LoadResult,
    /// The same load against the baseline build's binaries, when asked for.
    pub baseline: Option<LoadResult>,
    pub operator: Result<Vec<Value>, String>,
    /// The baseline build's operator, watching, at the same app counts.
    pub operator_baseline: Option<Result<Vec<Value>, String>>,
    pub store: Result<Value, String>,
    /// This build's profile under callgrind, when asked for.
    pub profile: Result<crate::profile::Profile, String>,
    /// The baseline build's, when asked for with a baseline.
    pub profile_baseline: Option<Result<crate::profile::Profile, String>>,
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.1}×", a / b)
    } else {
        "n/a".into()
    }
}

/// The fresh-submission levels whose client count lies in `range`.
fn levels_in(load: &LoadResult, range: std::ops::RangeInclusive<usize>) -> Vec<&Level> {
    load.levels
        .iter()
        .filter(|l| range.contains(&l.clients))
        .collect()
}

fn level(load: &LoadResult, clients: usize) -> Option<&Level> {
    load.levels.iter().find(|l| l.clients == clients)
}

/// The headline rows: (measure, value of a run).
fn headline(load: &LoadResult) -> Vec<(&'static str, String)> {
    let fresh: Vec<&Level> = load.levels.iter().collect();
    let submissions: usize = fresh.iter().map(|l| l.submissions).sum();
    let weighted = |f: &dyn Fn(&Level) -> f64| aims::weighted(load, f);
    let requests: u64 = fresh.iter().map(|l| l.requests.total()).sum();
    let kubesim_requests = aims::kubesim_per_request(load);
    let best_8_32 = levels_in(load, 8..=32)
        .iter()
        .map(|l| l.per_second())
        .fold(f64::NAN, f64::max);
    let best = fresh
        .iter()
        .map(|l| l.per_second())
        .fold(f64::NAN, f64::max);
    let one = level(load, 1);
    let at_128 = level(load, 128);
    let biggest = fresh.iter().max_by_key(|l| l.clients);
    vec![
        (
            "API requests, fresh submission",
            format!("{:.2}", requests as f64 / submissions.max(1) as f64),
        ),
        (
            "API requests, duplicate",
            format!("{:.2}", load.duplicates.requests_per_submission()),
        ),
        (
            "submitter CPU per fresh submission",
            format!("{:.0} µs", weighted(&|l| l.submitter_cpu_us)),
        ),
        (
            "submitter CPU per cached duplicate",
            format!("{:.0} µs", load.duplicates.submitter_cpu_us),
        ),
        (
            "kubesim CPU per submission",
            format!("{:.0} µs", weighted(&|l| l.kubesim_cpu_us)),
        ),
        (
            "kubesim CPU per request",
            format!("{kubesim_requests:.0} µs"),
        ),
        (
            "sequential latency p50 / p99",
            one.map_or("n/a".into(), |l| {
                format!("{:.2} / {:.2} ms", l.latencies_ms.p50, l.latencies_ms.p99)
            }),
        ),
        (
            "throughput at 8–32 clients (best level)",
            format!("{best_8_32:.0}/s"),
        ),
        ("throughput, best level", format!("{best:.0}/s")),
        (
            "p99 at 128 clients",
            at_128.map_or("n/a".into(), |l| format!("{:.0} ms", l.latencies_ms.p99)),
        ),
        (
            "start to ready",
            format!("{:.0} ms", load.start_to_ready_ms),
        ),
        (
            "submitter RSS when ready, empty cluster",
            format!("{:.1} MiB", load.idle_submitter_mib),
        ),
        (
            "submitter peak RSS at the most clients",
            biggest.map_or("n/a".into(), |l| {
                // Every driver submitted so far is in its caches by then.
                let cached: usize = 40
                    + fresh
                        .iter()
                        .take_while(|other| other.clients <= l.clients)
                        .map(|other| other.submissions)
                        .sum::<usize>();
                format!(
                    "{:.1} MiB ({} clients, ~{} drivers cached)",
                    l.submitter_peak_mib, l.clients, cached
                )
            }),
        ),
        (
            "memory per cached driver (RSS growth per driver, levels 1 → 2)",
            format!(
                "{:.1} KiB ({} drivers added)",
                load.cache.kib_per_driver(),
                load.cache.added
            ),
        ),
        (
            "submitter peak RSS at ~1,000 concurrent connections, nearly empty cluster",
            load.connections.map_or("n/a".into(), |c| {
                format!(
                    "{:.1} MiB ({} mTLS keep-alive connections, one cached duplicate each, {} errors; {:.1} MiB ready, {:.1} MiB with all open)",
                    c.peak_mib, c.connections, c.errors, c.idle_mib, c.open_mib
                )
            }),
        ),
        (
            "submitter RSS when ready on the full cluster",
            format!(
                "{:.1} MiB ({} drivers)",
                load.cache.ready_mib, load.cache.drivers
            ),
        ),
    ]
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

fn number(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Writes the report to `path`, its plots beside it in `benchmarks/`.
pub fn write(run: &Run, path: &Path) -> anyhow::Result<()> {
    let dir = path.with_extension("");
    std::fs::create_dir_all(&dir)?;
    let plots = plot::init().and_then(|()| plots(run, &dir));
    let rel = dir
        .file_name()
        .map_or("benchmarks".into(), |n| n.to_string_lossy().into_owned());
    let img = |name: &str| format!("![{name}]({rel}/{name}.png)\n\n");
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Generated by `{}` ({} mode) at commit `{}`, started {}, {:.0} s in all. Do not edit by \
         hand: run the command again.\n",
        run.command,
        if run.quick { "quick" } else { "full" },
        run.commit,
        run.started,
        run.seconds
    );
    let _ = writeln!(out, "Machine: {}.\n", run.machine);
    let _ = writeln!(
        out,
        "Every figure below comes from this one run, and every comparison is a ratio of two of its \
         figures. kubesim (plain HTTP, host network, scripted drivers), `submitter serve` (mTLS) \
         and the benchmark's clients share the machine's cores; on this shared machine timings vary \
         by about ±25% from run to run, request counts do not. CPU is each process' own \
         (`/proc/<pid>/task/*/schedstat`), memory its resident set (`VmRSS`, `VmHWM`).\n"
    );
    if let Err(e) = &plots {
        let _ = writeln!(out, "Plots were not drawn: {e:#}.\n");
    }

    // Headline: the table, before and after when a baseline build ran too.
    let _ = writeln!(out, "## Headline\n");
    let after = headline(&run.load);
    match &run.baseline {
        Some(baseline) => {
            let before = headline(baseline);
            let _ = writeln!(
                out,
                "`before` is the same load against the baseline build's binaries (`--baseline`), \
                 in the same run.\n"
            );
            let rows: Vec<Vec<String>> = after
                .iter()
                .zip(&before)
                .map(|((name, a), (_, b))| vec![(*name).to_owned(), b.clone(), a.clone()])
                .collect();
            table(&mut out, &["measure", "before", "after"], &rows);
            let levels = |load: &LoadResult| {
                load.levels
                    .iter()
                    .map(|l| l.clients.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "Client counts: before {}; after {}. Figures over levels (CPU, requests) are \
                 weighted by submissions.\n",
                levels(baseline),
                levels(&run.load)
            );
        }
        None => {
            let rows: Vec<Vec<String>> = after
                .iter()
                .map(|(name, a)| vec![(*name).to_owned(), a.clone()])
                .collect();
            table(&mut out, &["measure", "this build"], &rows);
        }
    }

    // The aims, this build only.
    let _ = writeln!(out, "## The aims\n");
    let _ = writeln!(
        out,
        "Each aim of the performance issue against this build's figure in this run: met, or \
         missed by the factor between the figure and the aim. CPU figures are weighted over every \
         level, with the spread by level beside them.\n"
    );
    let operator_runs = run.operator.as_deref().unwrap_or_default();
    let rows: Vec<Vec<String>> = aims::aims(&run.load, operator_runs)
        .into_iter()
        .map(|a| {
            vec![
                a.measure.to_owned(),
                a.wanted.to_owned(),
                a.measured,
                a.verdict,
            ]
        })
        .collect();
    table(
        &mut out,
        &["measure", "aim", "this build", "verdict"],
        &rows,
    );

    // Where the CPU goes: the split this run measures, and where the profiles are.
    let _ = writeln!(out, "## Where the CPU goes\n");
    let share = |k: &crate::load::KernelShare| {
        format!(
            "{:.0}% of the submitter's CPU and {:.0}% of kubesim's",
            k.submitter * 100.0,
            k.kubesim * 100.0
        )
    };
    let baseline_share = run
        .baseline
        .as_ref()
        .map(|b| format!(" (the baseline build: {})", share(&b.kernel_share)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Over the fresh levels, system (kernel) time was {}{baseline_share} \
         (`/proc/<pid>/stat`, 10 ms ticks): loopback sockets, wake-ups between threads, log \
         writes, which fewer instructions do not shorten. Where the user time goes is in the next \
         section, by part; function by function, change by change, in docs/submitter-service.md \
         (the \"Issue 27\" paragraphs) and docs/kubesim.md (its performance section).\n",
        share(&run.load.kernel_share)
    );
    let _ = writeln!(out, "{}\n", machine_speed(run));
    out.push_str(&crate::profile::section(
        &run.profile,
        run.profile_baseline.as_ref(),
    ));

    // Against real spark-submit.
    let _ = writeln!(out, "## The submitter against real `spark-submit`\n");
    match (&run.load.spark, level(&run.load, 1)) {
        (Some(spark), Some(one)) => {
            let _ = writeln!(
                out,
                "The same argument vector (SparkPi, `waitAppCompletion=false`), one submission at a \
                 time, against the same kubesim: `spark-submit` ({} runs; pyspark's JVM, from \
                 start to exit) and the submitter with one client (keep-alive mTLS).\n",
                spark.runs
            );
            let rows = vec![
                vec![
                    "latency p50".into(),
                    format!("{:.2} ms", one.latencies_ms.p50),
                    format!("{:.0} ms", spark.wall_ms.p50),
                    ratio(spark.wall_ms.p50, one.latencies_ms.p50),
                ],
                vec![
                    "CPU per submission".into(),
                    format!("{:.2} ms", one.submitter_cpu_us / 1e3),
                    format!("{:.0} ms", spark.cpu_ms),
                    ratio(spark.cpu_ms, one.submitter_cpu_us / 1e3),
                ],
                vec![
                    "API requests per submission".into(),
                    format!("{:.2}", one.requests_per_submission()),
                    format!("{:.2}", spark.requests_per_submission()),
                    ratio(
                        spark.requests_per_submission(),
                        one.requests_per_submission(),
                    ),
                ],
            ];
            table(
                &mut out,
                &["", "submitter", "spark-submit", "spark-submit / submitter"],
                &rows,
            );
        }
        _ => {
            let _ = writeln!(out, "Not measured: `spark-submit` did not run.\n");
        }
    }

    // Load levels.
    let _ = writeln!(
        out,
        "## The submitter at 1…{} clients\n",
        run.load.levels.iter().map(|l| l.clients).max().unwrap_or(1)
    );
    let _ = writeln!(
        out,
        "Each client is its own keep-alive mTLS connection submitting fresh ids one after \
         the other; `--max-concurrency` is the largest client count, so nothing is shed. Drivers run \
         until the end (no retention records are written). A level's CPU is counted until the \
         submitter is quiet after its last answer (two {} ms windows under {} ms of CPU, at most \
         {} s), so each level pays for the pod events its own drivers cause, and the next level, \
         above all the short one of cached duplicates, does not.\n",
        crate::load::QUIET_WINDOW.as_millis(),
        crate::load::QUIET_CPU.as_millis(),
        crate::load::SETTLE_BOUND.as_secs(),
    );
    let level_rows = |load: &LoadResult| -> Vec<Vec<String>> {
        load.levels
            .iter()
            .chain(std::iter::once(&load.duplicates))
            .enumerate()
            .map(|(i, l)| {
                vec![
                    if i == load.levels.len() {
                        format!("{} (cached duplicates)", l.clients)
                    } else {
                        l.clients.to_string()
                    },
                    l.submissions.to_string(),
                    format!("{:.0}", l.per_second()),
                    format!(
                        "{:.2} / {:.2} / {:.2}",
                        l.latencies_ms.p50, l.latencies_ms.p90, l.latencies_ms.p99
                    ),
                    format!("{:.0}", l.submitter_cpu_us),
                    format!("{:.0}", l.kubesim_cpu_us),
                    l.kubesim_cpu_per_request_cell(),
                    format!("{:.2}", l.requests_per_submission()),
                    format!("{:.1}", l.submitter_peak_mib),
                    l.errors.to_string(),
                    format!("{:.0}", l.machine_ms),
                ]
            })
            .collect()
    };
    let header = [
        "clients",
        "submissions",
        "per second",
        "latency p50 / p90 / p99 ms",
        "submitter CPU µs/submission",
        "kubesim CPU µs/submission",
        "kubesim CPU µs/request",
        "API requests/submission",
        "submitter peak RSS MiB",
        "errors",
        "fixed work ms",
    ];
    table(&mut out, &header, &level_rows(&run.load));
    if let Some(baseline) = &run.baseline {
        let _ = writeln!(out, "The baseline build under the same load:\n");
        table(&mut out, &header, &level_rows(baseline));
    }
    if plots.is_ok() {
        for name in ["throughput", "latency", "cpu", "rss", "requests"] {
            out.push_str(&img(name));
        }
    }

    // Requests by verb.
    let _ = writeln!(
        out,
        "## API requests per submission, by verb and resource\n"
    );
    let mut keys: Vec<(String, String)> = Vec::new();
    let fresh_total: usize = run.load.levels.iter().map(|l| l.submissions).sum();
    let mut fresh = crate::procs::Counts::default();
    for l in &run.load.levels {
        for (k, v) in &l.requests.0 {
            *fresh.0.entry(k.clone()).or_default() += v;
        }
    }
    let columns: Vec<(&str, &crate::procs::Counts, usize)> = {
        let mut c = vec![
            ("fresh", &fresh, fresh_total),
            (
                "cached duplicate",
                &run.load.duplicates.requests,
                run.load.duplicates.submissions,
            ),
        ];
        if let Some(spark) = &run.load.spark {
            c.push(("spark-submit", &spark.requests, spark.runs));
        }
        c
    };
    for (_, counts, _) in &columns {
        for k in counts.0.keys() {
            if k.0 != "watch" && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.sort();
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let mut row = vec![format!("{} {}", k.0, k.1)];
            for (_, counts, n) in &columns {
                row.push(format!(
                    "{:.2}",
                    counts.0.get(k).copied().unwrap_or(0) as f64 / (*n).max(1) as f64
                ));
            }
            row
        })
        .collect();
    let mut header: Vec<&str> = vec!["request"];
    header.extend(columns.iter().map(|c| c.0));
    table(&mut out, &header, &rows);

    // Operator.
    let _ = writeln!(out, "## The operator: watching against polling\n");
    match &run.operator {
        Ok(runs) => {
            let _ = writeln!(
                out,
                "`scale_bench` (sandbox package): N SparkApplications created at once on a fresh \
                 kubesim, run to completion by `operator run` (watches and caches) or by the polling \
                 variant (a LIST of apps and pods per second, same decisions), each with its own \
                 `submitter serve`; drivers are scripted pods that exit at once.\n"
            );
            let rows: Vec<Vec<String>> = runs
                .iter()
                .map(|r| {
                    vec![
                        r["variant"].as_str().unwrap_or("").to_owned(),
                        format!("{}", r["apps"]),
                        format!("{}/{}", r["completed"], r["created"]),
                        format!("{:.1}", number(r, "apps_per_second")),
                        format!("{:.2}", number(r, "requests_per_app")),
                        format!("{}", r["lists"]),
                        format!("{:.2}", number(r, "operator_writes_per_app")),
                        format!("{:.2}", number(r, "submitter_writes_per_app")),
                        format!(
                            "{:.2} / {:.2}",
                            number(r, "to_done_p50_s"),
                            number(r, "to_done_p99_s")
                        ),
                        format!("{:.2}", number(r, "operator_cpu_ms_per_app")),
                        format!("{:.1}", number(r, "operator_peak_mib")),
                        format!("{:.1}", number(r, "idle_requests_per_s")),
                    ]
                })
                .collect();
            table(
                &mut out,
                &[
                    "variant",
                    "apps",
                    "completed",
                    "apps/s",
                    "API requests/app",
                    "LISTs",
                    "operator writes/app",
                    "submitter writes/app",
                    "created→terminal p50 / p99 s",
                    "operator CPU ms/app",
                    "operator peak RSS MiB",
                    "idle requests/s",
                ],
                &rows,
            );
            let find = |variant: &str, apps: &Value| {
                runs.iter()
                    .find(|r| r["variant"] == variant && &r["apps"] == apps)
            };
            for w in runs.iter().filter(|r| r["variant"] == "watch") {
                if let Some(p) = find("poll", &w["apps"]) {
                    let _ = writeln!(
                        out,
                        "At {} apps, polling / watching: API requests per app {}, operator CPU {}, \
                         operator peak RSS {}, drain time {}.\n",
                        w["apps"],
                        ratio(number(p, "requests_per_app"), number(w, "requests_per_app")),
                        ratio(number(p, "operator_cpu_s"), number(w, "operator_cpu_s")),
                        ratio(
                            number(p, "operator_peak_mib"),
                            number(w, "operator_peak_mib")
                        ),
                        ratio(number(p, "drain_secs"), number(w, "drain_secs")),
                    );
                }
            }
            if let Some(Ok(before)) = &run.operator_baseline {
                let _ = writeln!(
                    out,
                    "The baseline build's operator (`--baseline`), watching, against this one, at \
                     the same app counts in the same run (same kubesim and submitter):\n"
                );
                let rows: Vec<Vec<String>> = before
                    .iter()
                    .filter_map(|b| {
                        let a = runs
                            .iter()
                            .find(|r| r["variant"] == "watch" && r["apps"] == b["apps"])?;
                        let pair = |key: &str, digits: usize| {
                            format!("{:.digits$} → {:.digits$}", number(b, key), number(a, key))
                        };
                        Some(vec![
                            format!("{}", b["apps"]),
                            pair("operator_writes_per_app", 2),
                            pair("requests_per_app", 2),
                            pair("operator_cpu_ms_per_app", 2),
                            pair("reconcile_p99_ms", 0),
                            pair("operator_peak_mib", 1),
                            pair("to_done_p50_s", 2),
                        ])
                    })
                    .collect();
                table(
                    &mut out,
                    &[
                        "apps",
                        "operator writes/app",
                        "API requests/app",
                        "operator CPU ms/app",
                        "reconcile p99 ms (bucket)",
                        "operator peak RSS MiB",
                        "created→terminal p50 s",
                    ],
                    &rows,
                );
            }
            if let Some(Err(e)) = &run.operator_baseline {
                let _ = writeln!(out, "The baseline build's operator could not be run: {e}\n");
            }
            if plots.is_ok() {
                for name in ["operator-requests", "operator-rss", "operator-cpu"] {
                    out.push_str(&img(name));
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "Not measured: {e}\n");
        }
    }

    // Fencing store.
    let _ = writeln!(out, "## The fencing store: Kubernetes against Redis\n");
    match &run.store {
        Ok(store) => {
            let _ = writeln!(
                out,
                "`store_bench` (operator package): the Kubernetes store (one ConfigMap per \
                 application, compare-and-swap) on kubesim and the Redis store (a Lua script per \
                 write) on a local `redis-server`; one client, one operation at a time, then a \
                 concurrent mix of 8 tasks.\n"
            );
            let backends = store["backends"].as_array().cloned().unwrap_or_default();
            let of = |backend: &str, part: &str, op: &str| -> Option<Value> {
                backends
                    .iter()
                    .find(|b| b["backend"] == backend)?
                    .get(part)?
                    .as_array()?
                    .iter()
                    .find(|s| s["op"] == op)
                    .cloned()
            };
            for (part, title) in [("sequential", "One client"), ("mix", "Concurrent mix")] {
                let ops: Vec<String> = backends
                    .iter()
                    .flat_map(|b| b[part].as_array().cloned().unwrap_or_default())
                    .filter_map(|s| s["op"].as_str().map(str::to_owned))
                    .fold(Vec::new(), |mut acc, op| {
                        if !acc.contains(&op) {
                            acc.push(op);
                        }
                        acc
                    });
                let rows: Vec<Vec<String>> = ops
                    .iter()
                    .map(|op| {
                        let cell = |b: &str| {
                            of(b, part, op).map_or("n/a".into(), |s| {
                                format!(
                                    "{:.3} / {:.3} ms, {:.0}/s",
                                    number(&s, "p50_ms"),
                                    number(&s, "p99_ms"),
                                    number(&s, "ops_per_s")
                                )
                            })
                        };
                        let p50 =
                            |b: &str| of(b, part, op).map_or(f64::NAN, |s| number(&s, "p50_ms"));
                        vec![
                            op.clone(),
                            cell("kube"),
                            cell("redis"),
                            ratio(p50("kube"), p50("redis")),
                        ]
                    })
                    .collect();
                let _ = writeln!(out, "{title}:\n");
                table(
                    &mut out,
                    &[
                        "operation",
                        "kube p50 / p99, ops/s",
                        "redis p50 / p99, ops/s",
                        "kube/redis p50",
                    ],
                    &rows,
                );
            }
            for s in store["skipped"].as_array().into_iter().flatten() {
                let _ = writeln!(out, "{} not measured: {}\n", s["backend"], s["reason"]);
            }
        }
        Err(e) => {
            let _ = writeln!(out, "Not measured: {e}\n");
        }
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// Draws every plot into `dir`.
fn plots(run: &Run, dir: &Path) -> anyhow::Result<()> {
    let per_level = |load: &LoadResult, name: &str, f: &dyn Fn(&Level) -> f64| Series {
        name: name.to_owned(),
        points: load
            .levels
            .iter()
            .map(|l| (l.clients as f64, f(l)))
            .collect(),
    };
    let both = |f: &dyn Fn(&Level) -> f64, name: &str| {
        let mut s = vec![per_level(&run.load, name, f)];
        if let Some(b) = &run.baseline {
            s.push(per_level(b, &format!("{name} (baseline)"), f));
        }
        s
    };
    plot::lines(
        &dir.join("throughput.png"),
        "Fresh submissions per second",
        "clients",
        "submissions/s",
        true,
        &both(&|l| l.per_second(), "submitter"),
    )?;
    let mut latency = vec![
        per_level(&run.load, "p50", &|l| l.latencies_ms.p50),
        per_level(&run.load, "p99", &|l| l.latencies_ms.p99),
    ];
    if let Some(b) = &run.baseline {
        latency.push(per_level(b, "p50 (baseline)", &|l| l.latencies_ms.p50));
        latency.push(per_level(b, "p99 (baseline)", &|l| l.latencies_ms.p99));
    }
    plot::lines(
        &dir.join("latency.png"),
        "Submission latency",
        "clients",
        "ms",
        true,
        &latency,
    )?;
    let mut cpu = vec![
        per_level(&run.load, "submitter", &|l| l.submitter_cpu_us),
        per_level(&run.load, "kubesim", &|l| l.kubesim_cpu_us),
    ];
    if let Some(b) = &run.baseline {
        cpu.push(per_level(b, "submitter (baseline)", &|l| {
            l.submitter_cpu_us
        }));
        cpu.push(per_level(b, "kubesim (baseline)", &|l| l.kubesim_cpu_us));
    }
    plot::lines(
        &dir.join("cpu.png"),
        "CPU per fresh submission",
        "clients",
        "µs",
        true,
        &cpu,
    )?;
    plot::lines(
        &dir.join("rss.png"),
        "Submitter peak resident memory",
        "clients",
        "MiB",
        true,
        &both(&|l| l.submitter_peak_mib, "submitter"),
    )?;
    plot::lines(
        &dir.join("requests.png"),
        "API requests per fresh submission",
        "clients",
        "requests",
        true,
        &both(&|l| l.requests_per_submission(), "submitter"),
    )?;
    if let Ok(runs) = &run.operator {
        let series = |key: &str| -> Vec<Series> {
            ["watch", "poll"]
                .iter()
                .map(|variant| Series {
                    name: (*variant).to_owned(),
                    points: runs
                        .iter()
                        .filter(|r| r["variant"] == *variant)
                        .map(|r| (number(r, "apps"), number(r, key)))
                        .collect(),
                })
                .collect()
        };
        let log = runs
            .iter()
            .map(|r| r["apps"].clone())
            .collect::<Vec<_>>()
            .len()
            > 2;
        plot::lines(
            &dir.join("operator-requests.png"),
            "API requests per application",
            "applications",
            "requests/app",
            log,
            &series("requests_per_app"),
        )?;
        plot::lines(
            &dir.join("operator-rss.png"),
            "Operator peak resident memory",
            "applications",
            "MiB",
            log,
            &series("operator_peak_mib"),
        )?;
        plot::lines(
            &dir.join("operator-cpu.png"),
            "Operator CPU per application",
            "applications",
            "ms/app",
            log,
            &series("operator_cpu_ms_per_app"),
        )?;
    }
    Ok(())
}

/// What the fixed work timed before each level says about the machine during the run.
fn machine_speed(run: &Run) -> String {
    let spread = |load: &LoadResult| {
        let times: Vec<f64> = load
            .levels
            .iter()
            .chain(std::iter::once(&load.duplicates))
            .map(|l| l.machine_ms)
            .filter(|ms| *ms > 0.0)
            .collect();
        let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
        let slowest = times.iter().copied().fold(0.0, f64::max);
        (fastest.is_finite()).then_some((fastest, slowest))
    };
    let Some((fastest, slowest)) = run
        .baseline
        .iter()
        .chain(std::iter::once(&run.load))
        .filter_map(spread)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    else {
        return "The fixed work before each level could not be timed here \
                (`/proc/thread-self/schedstat`)."
            .to_owned();
    };
    format!(
        "Before each level the benchmark times a fixed piece of work in its own CPU time (32 MiB \
         written, then read at a stride; the fastest of three), the `fixed work ms` column of the \
         level tables: {fastest:.0}–{slowest:.0} ms over this run, the slowest {:.2}× the fastest. \
         On this shared machine the same binaries can take tens of percent more CPU per request \
         from one minute to the next; a level whose fixed work also took longer ran on a slower \
         machine, and its CPU figures are inflated by about that factor (docs/kubesim.md, \
         \"The collapse, sampled\").",
        slowest / fastest
    )
}
