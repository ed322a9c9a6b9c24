#!/usr/bin/env bash
# Coverage-guided fuzzing on stable Rust with cargo-afl: builds the targets of fuzz/ with AFL++'s
# instrumentation, then runs each one for FUZZ_SECONDS (default 20: the seven targets take about
# two and a half minutes) from its committed corpus, fuzz/corpus/<target>/. Each target checks a
# property (fuzz/src/lib.rs), so a "crash" is a broken property as well as a panic.
#
# A crash fails the run, and its input is copied to fuzz/regressions/<target>/: commit it with the
# fix, and fuzz/tests/corpus.rs replays it as an ordinary test from then on. Hangs are reported,
# not failed (a loaded CI machine makes AFL's timeouts unreliable). FUZZ_TARGETS narrows the run.
#
# This is the campaign, run on demand (installs cargo-afl and AFL++ the first time). The test
# command runs the cheap part on every run instead: the corpora replayed and a short mutation
# smoke, uninstrumented (fuzz/tests/).
set -euo pipefail
cd "$(dirname "$0")/.."

# cargo-afl, and AFL++ built for this rustc (cargo-afl keeps one build per compiler version under
# ~/.local/share/afl.rs).
if ! cargo afl --version >/dev/null 2>&1; then
  echo "== cargo install cargo-afl"
  cargo install --locked cargo-afl
fi
afl_rustc="rustc-$(rustc -V | awk '{ print $2 "-" substr($3, 2, 7) }')"
# cargo-afl keeps its runtime per rustc and per afl.rs version (…/rustc-X/afl.rs-Y/afl-llvm).
if ! compgen -G "${XDG_DATA_HOME:-$HOME/.local/share}/afl.rs/$afl_rustc/*/afl-llvm" >/dev/null; then
  echo "== cargo afl config --build ($afl_rustc)"
  cargo afl config --build
fi

seconds="${FUZZ_SECONDS:-20}"
read -r -a targets <<<"${FUZZ_TARGETS:-argv template_merge properties policy agent_body operator_spec submit_body}"
# A target directory of its own: AFL's instrumentation flags would otherwise rebuild everything
# the ordinary build made.
target_dir="${CARGO_TARGET_DIR:-$PWD/target}/afl"

echo "== cargo afl build (fuzz targets)"
cargo afl build --profile fuzz -p fuzz --features afl --bins --target-dir "$target_dir"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Quiet, non-interactive, and tolerant of a container: no UI, no CPU pinning or frequency check,
# no core-dump handler requirement.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1

failed=0
for target in "${targets[@]}"; do
  if ! cargo afl fuzz -i "fuzz/corpus/$target" -o "$out/$target" -V "$seconds" \
      "$target_dir/fuzz/$target" >"$out/$target.log" 2>&1; then
    echo "!! afl-fuzz could not run $target:"
    tail -n 30 "$out/$target.log"
    failed=1
    continue
  fi
  stats="$out/$target/default/fuzzer_stats"
  field() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$stats"; }
  echo "-- $target: $(field execs_done) executions, $(field corpus_count) inputs in the queue," \
    "$(field saved_crashes) crashes, $(field saved_hangs) hangs"
  shopt -s nullglob
  crashes=("$out/$target"/default/crashes/id:*)
  shopt -u nullglob
  if [ ${#crashes[@]} -gt 0 ]; then
    mkdir -p "fuzz/regressions/$target"
    for crash in "${crashes[@]}"; do
      name="crash-$(sha256sum "$crash" | cut -c1-16)"
      cp "$crash" "fuzz/regressions/$target/$name"
      echo "!! $target: property broken by fuzz/regressions/$target/$name"
    done
    failed=1
  fi
done
exit "$failed"
