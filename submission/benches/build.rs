//! Our builder against real `spark-submit` on the same case (the corpus' minimal JVM app),
//! side by side in one run:
//!
//!     cargo build --release -p kubesim
//!     cargo bench -p submitter --bench build
//!
//! Measures (1) parse + build in process, (2) the `submitter render` process end to end, and
//! (3) `spark-submit` against kubesim (`KUBESIM_BIN`, default target/release/kubesim), and prints
//! the ratios. Without spark-submit or kubesim only (1) and (2) are printed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn argv(master: &str, namespace: &str) -> Vec<String> {
    [
        "--master",
        master,
        "--deploy-mode",
        "cluster",
        "--conf",
        "spark.kubernetes.container.image=apache/spark:4.3.0",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf",
        &format!("spark.kubernetes.namespace={namespace}"),
        "--name",
        "spark-pi",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "local:///opt/spark/examples/jars/spark-examples.jar",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn in_process() -> Duration {
    let args = argv("k8s://http://127.0.0.1:6443", "default");
    let run = |i: usize| {
        let id = format!("bench-{i}");
        let built = submission::builder::build_from_argv(&args, None, None, &id, 0, "root")
            .expect("the bench case builds");
        std::hint::black_box(built);
    };
    for i in 0..1_000 {
        run(i);
    }
    let mut samples = Vec::new();
    for round in 0..15 {
        let n = 2_000;
        let start = Instant::now();
        for i in 0..n {
            run(round * n + i);
        }
        samples.push(start.elapsed() / n as u32);
    }
    median(samples)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn render_process() -> Option<Duration> {
    let exe = workspace_root().join("target/release/submitter");
    let exe = if exe.exists() {
        exe
    } else {
        workspace_root().join("target/debug/submitter")
    };
    if !exe.exists() {
        return None;
    }
    let mut samples = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        let status = Command::new(&exe)
            .args(["render", "--submission-id", &format!("bench-{i}"), "--"])
            .args(argv("k8s://http://127.0.0.1:6443", "default"))
            .stdout(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        samples.push(start.elapsed());
    }
    Some(median(samples))
}

fn spark_submit() -> Option<Duration> {
    let kubesim = std::env::var_os("KUBESIM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/release/kubesim"));
    if !kubesim.exists()
        || Command::new("spark-submit")
            .arg("--version")
            .output()
            .is_err()
    {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("submitter-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let kubeconfig = dir.join("kubeconfig");
    let mut sim = Command::new(&kubesim)
        .args(["serve", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut url = String::new();
    BufReader::new(sim.stdout.take()?)
        .read_line(&mut url)
        .ok()?;
    let url = url.trim().to_owned();
    let mut samples = Vec::new();
    // One warm-up run (page cache), then five measured ones, all into `default`.
    for i in 0..6 {
        let start = Instant::now();
        let status = Command::new("spark-submit")
            .args(argv(&format!("k8s://{url}"), "default"))
            .env("KUBECONFIG", &kubeconfig)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            break;
        }
        if i > 0 {
            samples.push(start.elapsed());
        }
    }
    let _ = sim.kill();
    let _ = sim.wait();
    let _ = std::fs::remove_dir_all(&dir);
    (!samples.is_empty()).then(|| median(samples))
}

fn main() {
    let ours = in_process();
    println!("parse + build, in process (median of 15 x 2000): {ours:?}");
    let render = render_process();
    match render {
        Some(d) => println!("`submitter render` process, end to end (median of 20): {d:?}"),
        None => println!("`submitter render` process: binary not built, skipped"),
    }
    match spark_submit() {
        Some(spark) => {
            println!("spark-submit against kubesim (median of 5, after 1 warm-up): {spark:?}");
            println!(
                "ratio spark-submit / in-process build: {:.0}x",
                spark.as_secs_f64() / ours.as_secs_f64()
            );
            if let Some(render) = render {
                println!(
                    "ratio spark-submit / render process: {:.0}x",
                    spark.as_secs_f64() / render.as_secs_f64()
                );
            }
        }
        None => println!("spark-submit or kubesim not available: ratio skipped"),
    }
}
