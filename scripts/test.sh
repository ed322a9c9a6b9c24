#!/usr/bin/env bash
# Runs every check and test of the project on a fresh machine: installs what is missing
# (idempotently), then formatting, lints, Rust tests, and the Python/Spark fidelity tests.
# Services (kubesim) are started by the tests themselves on loopback and stopped after.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# A one-shot build: incremental state would only cost disk (several GB) and time.
export CARGO_INCREMENTAL=0

# Each stage's wall time, printed as a table when the run ends, failed or not.
stage_names=()
stage_seconds=()
stage_started=$SECONDS
stage() {
  stage_done
  stage_names+=("$1")
  stage_started=$SECONDS
  echo "== $1"
}
stage_done() {
  if [ ${#stage_names[@]} -gt ${#stage_seconds[@]} ]; then
    stage_seconds+=($((SECONDS - stage_started)))
  fi
}
stage_table() {
  local status=$?
  stage_done
  echo "== stage times ($( [ "$status" -eq 0 ] && echo passed || echo "FAILED in the last stage" ))"
  local i
  for i in "${!stage_names[@]}"; do
    printf '%6d s  %3d:%02d  %s\n' "${stage_seconds[$i]}" $((stage_seconds[i] / 60)) \
      $((stage_seconds[i] % 60)) "${stage_names[$i]}"
  done
  printf '%6d s  %3d:%02d  %s\n' "$SECONDS" $((SECONDS / 60)) $((SECONDS % 60)) "in all"
}
trap stage_table EXIT

stage "install what is missing"
bash scripts/install-deps.sh

stage "cargo fmt --check"
cargo fmt --all -- --check
# Clippy lints inside the one build below rather than in a `cargo clippy` of its own: the
# workspace's crates are compiled by clippy-driver (rustc with clippy's lints, as `cargo clippy`
# runs it), with every warning an error. A separate `cargo clippy --all-targets` compiled the
# whole dependency tree a second time, in check mode, for about three minutes of the run. The
# dependencies are compiled by plain rustc; every cargo command below keeps these two variables, so
# the build is shared.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# One build for everything that follows, in the `ci` profile (Cargo.toml): the tests, every
# binary, example and benchmark. The Python, Airflow, image and benchmark stages run these
# binaries; building the tests in `dev` and the binaries again in `release` took two builds.
bin_dir="${CARGO_TARGET_DIR:-$PWD/target}/ci"
stage "cargo build --profile ci, linted by clippy (every binary, example and benchmark; the tests' build below reuses it)"
cargo build --profile ci --workspace --bins --examples --benches
stage "cargo nextest (every Rust test; the fuzz targets' corpora and a mutation smoke among them)"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --cargo-profile ci --no-fail-fast
  stage "cargo test --doc"
  cargo test --workspace --doc --profile ci
else
  cargo test --workspace --profile ci --no-fail-fast
fi
stage "benchmarks, quick mode (asserts that they ran and wrote their report, never timings)"
bench_out=$(mktemp -d)
"$bin_dir/bench" --quick --bin-dir "$bin_dir" --out "$bench_out/benchmarks.md"
test -s "$bench_out/benchmarks.md"
grep -q '^## The submitter at ' "$bench_out/benchmarks.md"
grep -q '^| fresh\|^| create pods' "$bench_out/benchmarks.md"
grep -q 'At 100 apps, polling / watching' "$bench_out/benchmarks.md"
grep -q '^| commit ' "$bench_out/benchmarks.md"
test -s "$bench_out/benchmarks/throughput.png"
rm -rf "$bench_out"
stage "python tests and airflow provider tests, side by side (real clients, real spark-submit, real Airflow)"
# The binaries of the one build: the images, the chart's install and the recovery agent too.
export BIN_DIR="$bin_dir"
export SUBMITTER_BIN="$bin_dir/submitter"
export AGENT_BIN="$bin_dir/operator"
export KUBESIM_BIN="$bin_dir/kubesim"
# The two suites mostly wait (on processes, JVMs and Airflow's triggers: about 0.4 of a core
# each), so they run at once. Each starts its own kubesim on a loopback port of its own, and each
# cluster's pod network is its own, so they cannot meet.
# Airflow provider (clients/airflow): real apache-airflow from .venv-airflow (install-deps.sh), a
# small Airflow deployment on SQLite, the submitter over mTLS, kubesim; see docs/airflow.md. Its
# output is held back and printed after the other suite's, so the two do not interleave.
airflow_log=$(mktemp)
.venv-airflow/bin/python -m pytest -q clients/airflow/tests >"$airflow_log" 2>&1 &
airflow_pid=$!
python_status=0
python3 -m pytest -q tests/python || python_status=$?
airflow_status=0
wait "$airflow_pid" || airflow_status=$?
echo "== airflow provider tests (real Airflow, submitter over mTLS, kubesim): exit $airflow_status"
cat "$airflow_log"
rm -f "$airflow_log"
echo "== python tests (real kubernetes client, real spark-submit): exit $python_status"
[ "$python_status" -eq 0 ] && [ "$airflow_status" -eq 0 ]
