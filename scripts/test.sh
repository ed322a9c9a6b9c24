#!/usr/bin/env bash
# Runs every check and test of the project on a fresh machine: installs what is missing
# (idempotently), then formatting, lints, Rust tests, and the Python/Spark fidelity tests.
# Services (kubesim) are started by the tests themselves on loopback and stopped after.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# A one-shot build: incremental state would only cost disk (several GB) and time.
export CARGO_INCREMENTAL=0

bash scripts/install-deps.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo build (release binaries used by the Python and Spark tests, and the images)"
# One build for every release binary the later steps run (the benchmark's too): built together,
# their dependencies are compiled once, with one set of features.
cargo build --release -p kubesim -p submitter -p operator -p sandbox -p bench \
  --bin kubesim --bin submitter --bin operator --bin bench \
  --example scale_bench --example store_bench
echo "== cargo test"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
  cargo test --workspace --doc
else
  cargo test --workspace --no-fail-fast
fi
echo "== fuzzing (cargo-afl; each target bounded, about 3 minutes in all; see docs/fuzzing.md)"
bash scripts/fuzz.sh
echo "== benchmarks, quick mode (asserts that they ran and wrote their report, never timings)"
bench_out=$(mktemp -d)
"${CARGO_TARGET_DIR:-$PWD/target}/release/bench" --quick --no-build --out "$bench_out/benchmarks.md"
test -s "$bench_out/benchmarks.md"
grep -q '^## The submitter at ' "$bench_out/benchmarks.md"
grep -q '^| fresh\|^| create pods' "$bench_out/benchmarks.md"
grep -q 'At 100 apps, polling / watching' "$bench_out/benchmarks.md"
grep -q '^| commit ' "$bench_out/benchmarks.md"
test -s "$bench_out/benchmarks/throughput.png"
rm -rf "$bench_out"
echo "== python tests (real kubernetes client, real spark-submit)"
export SUBMITTER_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/submitter"
# The recovery agent: the operator binary the Rust tests above just built.
export AGENT_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/operator"
KUBESIM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/kubesim" python3 -m pytest -q tests/python

# --- Airflow provider (clients/airflow): real apache-airflow from .venv-airflow (install-deps.sh),
# a small Airflow deployment on SQLite, the submitter over mTLS, kubesim; see docs/airflow.md.
echo "== airflow provider tests (real Airflow, submitter over mTLS, kubesim)"
KUBESIM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/kubesim" \
  .venv-airflow/bin/python -m pytest -q clients/airflow/tests
