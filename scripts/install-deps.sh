#!/usr/bin/env bash
# Installs what the tests need and is not on a fresh machine. Safe to run again: it only
# installs what is missing.
set -euo pipefail

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
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
          "schemathesis": "schemathesis==4.32.5"}
print(" ".join(spec for mod, spec in wanted.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$py_missing" ]; then
  echo "== pip install $py_missing"
  python3 -m pip install -q --disable-pip-version-check $py_missing
fi

# The real Helm (client-go) as a Python package, for tests/python/test_helm.py. Its metadata asks
# for a newer Python than the 3.11 here, but the bundled Helm library works with it.
if ! python3 -c 'import helm_sdkpy' >/dev/null 2>&1; then
  echo "== pip install helm-sdkpy"
  python3 -m pip install -q --disable-pip-version-check --ignore-requires-python helm-sdkpy
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "(cargo-nextest not found: falling back to cargo test)"
fi
