//! How fast the machine is at a moment: one fixed piece of work, timed in this thread's own CPU
//! time before each level. On a shared host the same binaries measure tens of percent more CPU
//! per request from one minute to the next (docs/kubesim.md, "The collapse, sampled"); a level
//! whose fixed work also took longer ran on a slower machine, not a slower build.

use std::hint::black_box;
use std::path::Path;

/// 64-bit words the work fills and reads: 32 MiB, more than the caches hold, so the memory
/// side is timed as well as the arithmetic.
const WORDS: usize = 4 << 20;
/// Times the work runs; the fastest counts (the others were interrupted by something).
const RUNS: usize = 3;

/// Milliseconds of this thread's CPU for the fixed work, the fastest of [`RUNS`].
pub fn fixed_work_ms() -> f64 {
    (0..RUNS)
        .map(|_| {
            let start = thread_cpu_ns();
            black_box(work());
            thread_cpu_ns().saturating_sub(start) as f64 / 1e6
        })
        .fold(f64::INFINITY, f64::min)
}

/// Fills the words with a xorshift sequence, then reads them at a large odd stride.
fn work() -> u64 {
    let mut words = vec![0u64; WORDS];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for word in &mut words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *word = x;
    }
    let mut sum = 0u64;
    let mut i = 0usize;
    for _ in 0..WORDS {
        sum = sum.wrapping_add(words[i]);
        i = (i + 4099) & (WORDS - 1);
    }
    sum
}

/// This thread's time on a CPU, in nanoseconds; 0 if unreadable.
fn thread_cpu_ns() -> u64 {
    crate::procs::schedstat_nanos(Path::new("/proc/thread-self/schedstat")).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_work_takes_measurable_cpu_time() {
        let ms = fixed_work_ms();
        assert!(ms > 0.0 && ms.is_finite(), "{ms}");
    }

    #[test]
    fn the_work_is_the_same_every_time() {
        assert_eq!(work(), work());
    }
}
