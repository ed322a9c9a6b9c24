//! The chaos soak in CI: a short fault window from a fixed seed and from a random one (printed),
//! run at once on one machine; every invariant must hold. A failure prints the seed and the
//! schedule: `sandbox chaos --seed N --duration 180s --mean-gap 2000ms` replays the same schedule.

use std::time::Duration;

use sandbox::chaos::{ChaosConfig, Report, run};

/// The seed CI always runs.
const FIXED_SEED: u64 = 20261201;

/// The fault window of each CI soak (both run at once; each then drains and sweeps).
const WINDOW: Duration = Duration::from_secs(180);

/// The mean pause between two faults in CI.
const MEAN_GAP: Duration = Duration::from_secs(2);

async fn soak(seed: u64) -> Report {
    let mut config = ChaosConfig::new(env!("CARGO_BIN_EXE_sandbox").into(), seed, WINDOW);
    config.drain = Duration::from_secs(45);
    config.mean_gap = MEAN_GAP;
    // Two stacks share two cores: fewer applications at once.
    config.max_live_apps = 3;
    let report = run(config, &|line| eprintln!("[seed {seed}] {line}"))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: the soak could not run ({}): {e:?}", e.kind()));
    eprintln!(
        "[seed {seed}] report: {}",
        serde_json::to_string_pretty(&report.to_json()).unwrap()
    );
    report
}

fn assert_held(report: &Report) {
    let violations = report.violations();
    assert!(
        violations.is_empty(),
        "seed {} violated invariants (replay: sandbox chaos --seed {} --duration {}s --mean-gap {}ms): {violations:#?}",
        report.seed,
        report.seed,
        WINDOW.as_secs(),
        MEAN_GAP.as_millis()
    );
    let json = report.to_json();
    let checks = &json["checks"];
    for invariant in sandbox::chaos::invariants::ALL {
        assert!(
            checks[invariant].as_u64().unwrap_or(0) > 0,
            "seed {}: {invariant} was never checked: {json}",
            report.seed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_invariant_holds_under_a_fixed_and_a_random_fault_schedule() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_test_writer()
        .try_init();
    let random = fastrand::u64(..);
    eprintln!("chaos seeds: fixed {FIXED_SEED}, random {random}");
    let (fixed, random) = tokio::join!(soak(FIXED_SEED), soak(random));
    assert!(
        fixed.faults.values().sum::<u64>() > 10,
        "{:?}",
        fixed.faults
    );
    assert_held(&fixed);
    assert_held(&random);
}
