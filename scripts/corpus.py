#!/usr/bin/env python3
"""Regenerates the conformance goldens: runs real `spark-submit` for every case of
tests/corpus/cases.yaml against kubesim and stores, per case, exactly what Spark sent.

    cargo build --release -p kubesim && python3 scripts/corpus.py [--only NAME ...]

Needs `spark-submit` on PATH (pip install pyspark==4.3.0) and Java 17. Each case runs in its own
namespace; the service accounts a case names are created first (kubesim, like a cluster, refuses
pods whose service account does not exist). Templates are given to Spark as files
(`--conf spark.kubernetes.{driver,executor}.podTemplateFile=...`); the Rust test gives the same
YAML, parsed, to the builder. A golden holds the argv Spark got, its exit code, the mutating
requests kubesim journaled (method, path, content type, body), and for failures the exception line.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
GOLDEN = CORPUS / "golden"
SPARK_TIMEOUT_S = 180
DEFAULT_IMAGE = "apache/spark:4.0.1"


def http(method: str, url: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    return json.loads(text) if text else None


class Kubesim:
    def __init__(self, binary: Path, workdir: Path):
        self.kubeconfig = workdir / "kubeconfig"
        self.log = open(workdir / "kubesim.log", "wb")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--kubeconfig-out", str(self.kubeconfig)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().decode().strip()
        if not self.url.startswith("http"):
            raise SystemExit(f"kubesim did not print its URL (got {self.url!r})")
        deadline = time.monotonic() + 30
        while not self.kubeconfig.exists():
            if time.monotonic() > deadline:
                raise SystemExit("kubesim wrote no kubeconfig")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def create_namespace(self, ns: str, service_accounts: list[str]) -> None:
        http("POST", f"{self.url}/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for sa in service_accounts:
            http(
                "POST",
                f"{self.url}/api/v1/namespaces/{ns}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}},
            )

    def clear_journal(self) -> None:
        http("DELETE", f"{self.url}/sim/v1/journal")

    def journal(self) -> list[dict]:
        return http("GET", f"{self.url}/sim/v1/journal")  # type: ignore[return-value]


EXCEPTION = re.compile(r'Exception in thread "main" (\S+?)(?::\s(.*))?$')


def exception_line(stderr: str) -> str | None:
    for line in stderr.splitlines():
        m = EXCEPTION.search(line)
        if m:
            return line[m.start(1):].strip()
    return None


def spark_argv(case: dict, url: str, namespace: str) -> list[str]:
    """The argv Spark gets: the common head, the case's options, templates as files, then the app."""
    argv = ["--master", f"k8s://{url}", "--deploy-mode", "cluster"]
    if not case.get("no_image"):
        argv += ["--conf", f"spark.kubernetes.container.image={DEFAULT_IMAGE}"]
    argv += ["--conf", "spark.kubernetes.submission.waitAppCompletion=false"]
    argv += ["--conf", f"spark.kubernetes.namespace={namespace}"]
    for key, conf in (("driver_template", "spark.kubernetes.driver.podTemplateFile"),
                      ("executor_template", "spark.kubernetes.executor.podTemplateFile")):
        if case.get(key):
            argv += ["--conf", f"{conf}={CORPUS / case[key]}"]
    argv += [str(a) for a in case["args"]]
    return argv


def run_case(sim: Kubesim, case: dict, spark_submit: str) -> dict:
    namespace = f"corpus-{case['name']}"[:63]
    sim.create_namespace(namespace, case.get("service_accounts", []))
    argv = spark_argv(case, sim.url, namespace)
    sim.clear_journal()
    env = {
        **os.environ,
        "KUBECONFIG": str(sim.kubeconfig),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TZ": "UTC",
    }
    # A client-side SPARK_LOCAL_DIRS or HADOOP_CONF_DIR would leak into the driver pod.
    for var in ("SPARK_LOCAL_DIRS", "HADOOP_CONF_DIR", "SPARK_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(var, None)
    started = time.monotonic()
    proc = subprocess.run(
        [spark_submit, *argv], env=env, capture_output=True, text=True, timeout=SPARK_TIMEOUT_S, stdin=subprocess.DEVNULL
    )
    elapsed = time.monotonic() - started
    golden = {
        "case": case["name"],
        "argv": argv,
        "spark_user": getpass.getuser(),
        "exit_code": proc.returncode,
        "requests": sim.journal(),
    }
    if proc.returncode != 0:
        golden["exception"] = exception_line(proc.stderr)
    warnings = sorted({l.split(" WARN ", 1)[1].strip() for l in proc.stderr.splitlines() if " WARN " in l
                       and ("KubernetesUtils" in l or "KubernetesDriverConf" in l or "DriverServiceFeatureStep" in l)})
    if warnings:
        golden["warnings"] = warnings
    print(f"{case['name']:40s} exit {proc.returncode}  {len(golden['requests'])} requests  {elapsed:5.1f}s", flush=True)
    if proc.returncode != 0 and not golden.get("exception"):
        print(proc.stderr[-3000:], file=sys.stderr)
    return golden


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="regenerate only these cases")
    parser.add_argument("--kubesim", default=str(ROOT / "target" / "release" / "kubesim"))
    args = parser.parse_args()
    spark_submit = shutil.which("spark-submit")
    if spark_submit is None:
        raise SystemExit("spark-submit is not on PATH: pip install pyspark==4.3.0 (and Java 17)")
    cases = yaml.safe_load((CORPUS / "cases.yaml").read_text())
    if args.only:
        cases = [c for c in cases if c["name"] in args.only]
    GOLDEN.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"corpus-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    sim = Kubesim(Path(args.kubesim), work)
    try:
        for case in cases:
            golden = run_case(sim, case, spark_submit)
            (GOLDEN / f"{case['name']}.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
