//! `sandbox demo`, the README's main command, run as a user runs it: the binary, its narration on
//! standard output and the JSON summary on the last line.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn the_demo_kills_the_driver_mid_run_and_the_rerun_resumes_after_the_last_commit() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandbox"))
        .args(["demo", "--stages", "5", "--stage-millis", "500"])
        .args(["--kill-after-stage", "2", "--timeout-seconds", "90"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The demo bounds itself; this only keeps a hung process from outliving the test.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("the demo did not exit within 120s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let summary: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(summary["state"], "COMPLETED", "{stdout}");
    assert_eq!(summary["stages"], 5);
    assert_eq!(summary["resumedFromStage"], 3, "{stdout}");
    assert_eq!(summary["stagesRedone"], 1, "{stdout}");
    let epoch = summary["epoch"].as_u64().unwrap();
    assert_eq!(summary["restoredFromEpoch"].as_u64(), Some(epoch - 1));
    assert!(summary["recoveryMillis"].as_u64().is_some(), "{summary}");
    // The narration shows the fence and the resume point as they happen.
    assert!(stdout.contains("SparkApplicationEpochAdvanced"), "{stdout}");
    assert!(
        stdout.contains(&format!("restored stage=2 epoch={epoch}")),
        "{stdout}"
    );
}

#[test]
fn the_demo_refuses_a_kill_point_past_the_last_stage() {
    let output = Command::new(env!("CARGO_BIN_EXE_sandbox"))
        .args(["demo", "--stages", "3", "--kill-after-stage", "3"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--kill-after-stage 3 must be below --stages 3"),
        "{stderr}"
    );
}
