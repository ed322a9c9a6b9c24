//! The benchmarks that have their own program, run as child processes that write their figures
//! as JSON: the operator at N applications, watching against polling (`scale_bench`, in the
//! sandbox package), and the fencing store's operations on both backends (`store_bench`, in the
//! operator package).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

/// Runs `program` (a release example) with `args` plus `--json FILE`, the operator it starts
/// being `operator_bin`; its JSON.
fn run_json(
    bin_dir: &Path,
    dir: &Path,
    program: &str,
    args: &[String],
    operator_bin: &Path,
) -> anyhow::Result<Value> {
    let tag = operator_bin
        .parent()
        .and_then(Path::file_name)
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let json = dir.join(format!("{program}-{tag}.json"));
    let log = dir.join(format!("{program}-{tag}.log"));
    let file = std::fs::File::create(&log)?;
    let status = Command::new(bin_dir.join("examples").join(program))
        .args(args)
        .arg("--json")
        .arg(&json)
        .env("OPERATOR_BIN", operator_bin)
        .env("SUBMITTER_BIN", bin_dir.join("submitter"))
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .with_context(|| {
            format!("cannot run {program} (cargo build --release --example {program})")
        })?;
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        bail!(
            "{program} failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let text = std::fs::read_to_string(&json)
        .with_context(|| format!("{program} wrote no {}", json.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// The operator `operator_bin` at each app count, in each of `variants` (watch, poll): one
/// JSON object per run.
pub fn operator(
    bin_dir: &Path,
    dir: &Path,
    operator_bin: &Path,
    apps: &[usize],
    variants: &str,
    idle_seconds: u64,
) -> anyhow::Result<Vec<Value>> {
    let apps: Vec<String> = apps.iter().map(ToString::to_string).collect();
    let args = vec![
        "--apps".to_owned(),
        apps.join(","),
        "--variants".to_owned(),
        variants.to_owned(),
        "--idle-seconds".to_owned(),
        idle_seconds.to_string(),
    ];
    match run_json(bin_dir, dir, "scale_bench", &args, operator_bin)? {
        Value::Array(runs) => Ok(runs),
        other => bail!("scale_bench wrote {other}"),
    }
}

/// The fencing store's operations, sequential and in a concurrent mix, on both backends.
pub fn store(bin_dir: &Path, dir: &Path, ops: u64) -> anyhow::Result<Value> {
    let args = vec![
        "--ops".to_owned(),
        ops.to_string(),
        "--warmup".to_owned(),
        (ops / 10).max(10).to_string(),
        "--concurrency".to_owned(),
        "8".to_owned(),
        "--backends".to_owned(),
        "kube,redis".to_owned(),
    ];
    run_json(
        bin_dir,
        dir,
        "store_bench",
        &args,
        &bin_dir.join("operator"),
    )
}
