//! A short fuzzing smoke in the ordinary test run: each target's property over inputs mutated
//! from its committed corpus, without AFL's instrumentation (so without its build, the costly
//! part of a campaign). The campaign itself is `scripts/fuzz.sh`; this catches a property that
//! breaks on an input a few mutations away from a seed, on every test run.
//!
//! Bounded in count and time per target. The seed differs per run (so runs explore different
//! inputs) and is printed; `FUZZ_SMOKE_SEED=N` replays a run, `FUZZ_SMOKE_INPUTS=N` sets the
//! count per target. An input that breaks a property is written to `fuzz/regressions/<target>/`
//! (commit it with the fix: `tests/corpus.rs` replays it from then on) and shown in the failure.

use std::path::Path;
use std::time::{Duration, Instant};

use fuzz::{TARGETS, inputs};

/// Inputs per target unless `FUZZ_SMOKE_INPUTS` says otherwise.
const DEFAULT_INPUTS: usize = 400;
/// A target stops early once it has run this long (a debug build on a loaded machine).
const TIME_PER_TARGET: Duration = Duration::from_secs(15);

/// Bytes that reach the parsers' edge cases: separators, quotes, escapes, line ends, flags.
const TOKENS: [&[u8]; 16] = [
    b"\n",
    b"=",
    b"\"",
    b"\\",
    b"\\u",
    b"\x00",
    b"--conf",
    b"spark.kubernetes.",
    b"{",
    b"}",
    b"[",
    b": ",
    b"-",
    b"#",
    b"\xff",
    b"9999999999999999999",
];

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

/// One to four random edits of `input`, sometimes spliced with `other` (another seed).
fn mutate(rng: &mut fastrand::Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..rng.usize(1..=4) {
        let at = rng.usize(0..=data.len());
        match rng.u8(0..6) {
            0 if !data.is_empty() => {
                let i = rng.usize(0..data.len());
                data[i] ^= 1 << rng.u8(0..8);
            }
            1 => data.insert(at, rng.u8(..)),
            2 if at < data.len() => {
                let end = rng.usize(at..=data.len().min(at + 16));
                data.drain(at..end);
            }
            3 if at < data.len() => {
                let end = rng.usize(at..=data.len().min(at + 32));
                let copy = data[at..end].to_vec();
                let to = rng.usize(0..=data.len());
                data.splice(to..to, copy);
            }
            4 => {
                let token = TOKENS[rng.usize(0..TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            _ => {
                let cut = rng.usize(0..=other.len());
                data.truncate(at);
                data.extend_from_slice(&other[cut..]);
            }
        }
    }
    data
}

#[test]
fn every_property_holds_for_inputs_mutated_from_its_corpus() {
    let seed = env_number("FUZZ_SMOKE_SEED").unwrap_or_else(|| fastrand::u64(..));
    let count = env_number("FUZZ_SMOKE_INPUTS").map_or(DEFAULT_INPUTS, |n| n as usize);
    println!(
        "fuzz smoke: seed {seed} (FUZZ_SMOKE_SEED={seed} replays it), {count} inputs per target"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The properties panic on a break; the hook would print every caught one twice.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut broken = Vec::new();
    for (index, (target, property)) in TARGETS.into_iter().enumerate() {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(index as u64));
        let seeds: Vec<Vec<u8>> = inputs(&root.join("corpus").join(target))
            .iter()
            .map(|path| std::fs::read(path).unwrap())
            .collect();
        assert!(!seeds.is_empty(), "{target} has no committed corpus");
        let started = Instant::now();
        let mut ran = 0;
        while ran < count && started.elapsed() < TIME_PER_TARGET {
            let input = &seeds[rng.usize(0..seeds.len())];
            let other = &seeds[rng.usize(0..seeds.len())];
            let data = mutate(&mut rng, input, other);
            ran += 1;
            if std::panic::catch_unwind(|| property(&data)).is_err() {
                broken.push((target, data));
                break;
            }
        }
        println!("fuzz smoke: {target}: {ran} inputs");
    }
    std::panic::set_hook(hook);
    for (target, data) in &broken {
        let dir = root.join("regressions").join(target);
        let name = format!("smoke-{seed}-{target}");
        let written =
            std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(&name), data));
        println!(
            "fuzz smoke: {target} broken by {:?}{}",
            String::from_utf8_lossy(data),
            match written {
                Ok(()) => format!(" (written to fuzz/regressions/{target}/{name})"),
                Err(error) => format!(" (not written: {error})"),
            }
        );
    }
    assert!(
        broken.is_empty(),
        "properties broken (seed {seed}): {:?}",
        broken.iter().map(|(target, _)| target).collect::<Vec<_>>()
    );
}
