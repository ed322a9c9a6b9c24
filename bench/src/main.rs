//! `cargo run --release -p bench -- [--quick]`: every benchmark of the project in one run, side
//! by side, written to docs/benchmarks.md with its plots (docs/benchmarks/*.png).
//!
//! Sections: the submitter under load at 1…1,024 clients (throughput, latency, CPU of the
//! submitter and of kubesim, API requests per submission, memory), cached duplicates, real
//! `spark-submit` on the same argument vector, start to ready, memory per cached driver; the
//! operator watching against polling at 100…10,000 applications; the fencing store on both
//! backends. `--baseline DIR` also runs the submitter's load against another build's binaries
//! (kubesim and submitter) in the same run, for before/after ratios. `--quick` (under two
//! minutes; CI runs it) uses small sizes.

mod aims;
mod external;
mod load;
mod machine;
mod plot;
mod procs;
mod profile;
mod report;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Runs every benchmark side by side and writes docs/benchmarks.md")]
struct Cli {
    /// A short run (under two minutes): fewer levels and items; CI runs it.
    #[arg(long)]
    quick: bool,
    /// Do not build the release binaries first.
    #[arg(long)]
    no_build: bool,
    /// Run the binaries of this folder instead of the release folder, without building (the
    /// test command's one build: its figures are not release figures, only proof that every
    /// benchmark runs and writes its report).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Client counts of the submitter's load (default: 1…1,024; quick: 1, 8, 64).
    #[arg(long, value_delimiter = ',')]
    clients: Vec<usize>,
    /// Fresh submissions per client count.
    #[arg(long)]
    per_level: Option<usize>,
    /// Cached duplicates submitted after the levels (default: 20,000, quick: 200; with
    /// `--per-level`, as many as it says).
    #[arg(long)]
    duplicates: Option<usize>,
    /// Concurrent connections of the connection-memory run (default: 1,024; 0 skips it).
    #[arg(long)]
    connections: Option<usize>,
    /// Application counts of the operator's runs (default: 100, 1,000, 10,000; quick: 100).
    #[arg(long, value_delimiter = ',')]
    apps: Vec<usize>,
    /// Also run the submitter's load against the kubesim and submitter binaries in this folder
    /// (another build), for before/after ratios.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Client counts of the baseline's load (default: the same as this build's). A build whose
    /// cost grows with the cluster may need fewer to finish.
    #[arg(long, value_delimiter = ',')]
    baseline_clients: Vec<usize>,
    /// Sections to skip: operator, store, spark.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Also profile this build (and the baseline's, with `--baseline`) under valgrind's
    /// callgrind: instructions per submission, by part (a few minutes; needs valgrind).
    #[arg(long)]
    profile: bool,
    /// Where the report goes (its plots go to a folder of the same name beside it).
    #[arg(long, default_value = "docs/benchmarks.md")]
    out: PathBuf,
}

fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".into(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        })
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map_or("unknown".into(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let started = Instant::now();
    let command = format!(
        "cargo run --release -p bench --{}",
        std::env::args()
            .skip(1)
            .map(|a| format!(" {a}"))
            .collect::<String>()
    );
    let bin_dir = match &cli.bin_dir {
        Some(dir) => dir.clone(),
        None => {
            if !cli.no_build {
                procs::build_binaries()?;
            }
            procs::release_dir()
        }
    };
    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut config = if cli.quick {
        load::LoadConfig {
            levels: vec![1, 8, 64],
            per_level: 200,
            duplicates: 200,
            spark_runs: 1,
            connections: 1024,
        }
    } else {
        load::LoadConfig {
            levels: vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
            per_level: 2000,
            // Ten times a level: at ~10,000/s, 2,000 duplicates last a fifth of a second, too
            // short for a CPU figure on a shared machine (the pool's 8 handshakes and the
            // scheduler's noise then weigh up to a third of it).
            duplicates: 20_000,
            spark_runs: 3,
            connections: 1024,
        }
    };
    if !cli.clients.is_empty() {
        config.levels = cli.clients.clone();
    }
    if let Some(n) = cli.per_level {
        config.per_level = n;
        config.duplicates = n;
    }
    if let Some(n) = cli.duplicates {
        config.duplicates = n;
    }
    if let Some(n) = cli.connections {
        config.connections = n;
    }
    if cli.skip.iter().any(|s| s == "spark") {
        config.spark_runs = 0;
    }
    let apps = if !cli.apps.is_empty() {
        cli.apps.clone()
    } else if cli.quick {
        vec![100]
    } else {
        vec![100, 1_000, 10_000]
    };

    eprintln!("submitter under load ({})", bin_dir.display());
    let load_dir = tempfile::tempdir_in(dir.path())?;
    let load = runtime.block_on(load::run(&bin_dir, load_dir.path(), &config))?;
    let baseline = match &cli.baseline {
        Some(base) => {
            eprintln!(
                "the baseline build under the same load ({})",
                base.display()
            );
            let base_dir = tempfile::tempdir_in(dir.path())?;
            let mut base_config = config.clone();
            base_config.spark_runs = 0;
            base_config.connections = 0;
            if !cli.baseline_clients.is_empty() {
                base_config.levels = cli.baseline_clients.clone();
            }
            Some(runtime.block_on(load::run(base, base_dir.path(), &base_config))?)
        }
        None => None,
    };
    let operator = if cli.skip.iter().any(|s| s == "operator") {
        Err("skipped (--skip operator)".to_owned())
    } else {
        eprintln!("operator, watch against poll, at {apps:?} apps");
        external::operator(
            &bin_dir,
            dir.path(),
            &bin_dir.join("operator"),
            &apps,
            "watch,poll",
            if cli.quick { 2 } else { 10 },
        )
        .map_err(|e| format!("{e:#}"))
    };
    let operator_baseline = match (&cli.baseline, &operator) {
        (Some(base), Ok(_)) => {
            eprintln!("the baseline operator, watching, at {apps:?} apps");
            let operator_bin = base.join("operator");
            let runs = if operator_bin.is_file() {
                external::operator(
                    &bin_dir,
                    dir.path(),
                    &operator_bin,
                    &apps,
                    "watch",
                    if cli.quick { 2 } else { 10 },
                )
                .map_err(|e| format!("{e:#}"))
            } else {
                Err(format!(
                    "{} is not there (build the baseline with `cargo build --release -p operator --bin operator`)",
                    operator_bin.display()
                ))
            };
            if let Err(e) = &runs {
                eprintln!("  the baseline operator did not run: {e}");
            }
            Some(runs)
        }
        _ => None,
    };
    let store = if cli.skip.iter().any(|s| s == "store") {
        Err("skipped (--skip store)".to_owned())
    } else {
        eprintln!("fencing store, kube against redis");
        external::store(&bin_dir, dir.path(), if cli.quick { 300 } else { 2000 })
            .map_err(|e| format!("{e:#}"))
    };
    let (profile, profile_baseline) = if cli.profile {
        let one = |bin: &std::path::Path| -> Result<profile::Profile, String> {
            eprintln!("profile under callgrind ({})", bin.display());
            let profile_dir = tempfile::tempdir_in(dir.path()).map_err(|e| e.to_string())?;
            runtime
                .block_on(profile::run(bin, profile_dir.path()))
                .map_err(|e| format!("{e:#}"))
        };
        let this = one(&bin_dir);
        let base = cli.baseline.as_deref().map(one);
        for result in std::iter::once(&this).chain(base.as_ref()) {
            if let Err(e) = result {
                eprintln!("  the profile did not run: {e}");
            }
        }
        (this, base)
    } else {
        (Err("not asked for (`--profile`)".to_owned()), None)
    };
    let run = report::Run {
        command,
        machine: procs::machine(),
        commit: git_commit(),
        started: now_utc(),
        seconds: started.elapsed().as_secs_f64(),
        quick: cli.quick,
        load,
        baseline,
        operator,
        operator_baseline,
        store,
        profile,
        profile_baseline,
    };
    report::write(&run, &cli.out)?;
    eprintln!(
        "wrote {} in {:.0} s",
        cli.out.display(),
        started.elapsed().as_secs_f64()
    );
    // A section that could not run is a failed benchmark, not a report to trust.
    if let Err(e) = &run.operator
        && !cli.skip.iter().any(|s| s == "operator")
    {
        anyhow::bail!("the operator benchmark failed: {e}");
    }
    if let Err(e) = &run.store
        && !cli.skip.iter().any(|s| s == "store")
    {
        anyhow::bail!("the store benchmark failed: {e}");
    }
    Ok(())
}
