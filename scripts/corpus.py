#!/usr/bin/env python3
"""Regenerates the conformance goldens: runs the real `spark-submit` of one Spark version for every
case of tests/corpus/cases.yaml against kubesim and stores, per case, exactly what Spark sent, in
tests/corpus/golden/<version>/<case>.json.

    cargo build --release -p kubesim
    python3 scripts/corpus.py --spark-version 3.5.9 [--only NAME ...]

Needs that version's `spark-submit` (each in its own venv: `python3 -m venv /opt/pyspark-3.5.9 &&
/opt/pyspark-3.5.9/bin/pip install pyspark==3.5.9`; `--spark-submit` names another) and Java 17.
The image every case names is `apache/spark:<version>`, as a user of that Spark would name it, so
the builder takes the version from the image tag as it would for them. Each case runs in its own
namespace; the service accounts a case names are created first (kubesim, like a cluster, refuses
pods whose service account does not exist). Templates are given to Spark as files
(`--conf spark.kubernetes.{driver,executor}.podTemplateFile=tests/corpus/templates/...`, relative
to the repository root, where spark-submit runs, so no golden holds a path of the machine that
made it); the Rust test gives the same
YAML, parsed, to the builder. A golden holds the argv Spark got, its exit code, the mutating
requests kubesim journaled (method, path, content type, body), and for failures the exception line.
"""

from __future__ import annotations

import argparse
import functools
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
VERSION_LINE = re.compile(r"^\d+\.\d+\.\d+$")
# Cases with `maven_repo: true` get this Maven repository on the local disk, holding the tiny
# greeting library (tests/programs/greeting), as `{maven_repo}` (a file:// URL) in their args:
# spark-submit resolves --packages on the client in cluster mode, and it has no network here.
MAVEN_REPO = Path("/tmp/corpus-maven-repo")


def image_of(version: str) -> str:
    return f"apache/spark:{version}"


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


def template_arg(template: str) -> str:
    """A template file as Spark is given it: relative to the repository root, where spark-submit
    runs, so that neither the argv nor the conf Spark sends (its driver ConfigMap keeps the
    driver's podTemplateFile) holds a path of the machine the goldens were made on."""
    return str((CORPUS / template).relative_to(ROOT))


def spark_argv(case: dict, url: str, namespace: str, version: str) -> list[str]:
    """The argv Spark gets: the common head, the case's options, templates as files, then the app."""
    argv = ["--master", f"k8s://{url}", "--deploy-mode", "cluster"]
    if not case.get("no_image"):
        argv += ["--conf", f"spark.kubernetes.container.image={image_of(version)}"]
    argv += ["--conf", "spark.kubernetes.submission.waitAppCompletion=false"]
    argv += ["--conf", f"spark.kubernetes.namespace={namespace}"]
    for key, conf in (("driver_template", "spark.kubernetes.driver.podTemplateFile"),
                      ("executor_template", "spark.kubernetes.executor.podTemplateFile")):
        if case.get(key):
            argv += ["--conf", f"{conf}={template_arg(case[key])}"]
    argv += [str(a).replace("{version}", version).replace("{maven_repo}", MAVEN_REPO.as_uri()) for a in case["args"]]
    return argv


def make_maven_repo() -> None:
    """The greeting library laid out as a Maven repository at MAVEN_REPO, made afresh."""
    shutil.rmtree(MAVEN_REPO, ignore_errors=True)
    subprocess.run(["bash", str(ROOT / "tests" / "programs" / "greeting" / "make_repo.sh"), str(MAVEN_REPO)],
                   check=True, timeout=120, stdin=subprocess.DEVNULL)


def run_case(sim: Kubesim, case: dict, spark_submit: str, version: str) -> dict:
    namespace = f"corpus-{case['name']}"[:63]
    if case.get("maven_repo"):
        make_maven_repo()
    sim.create_namespace(namespace, case.get("service_accounts", []))
    argv = spark_argv(case, sim.url, namespace, version)
    sim.clear_journal()
    env = {
        **spark_env(spark_submit),
        "KUBECONFIG": str(sim.kubeconfig),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TZ": "UTC",
    }
    # A client-side SPARK_LOCAL_DIRS or HADOOP_CONF_DIR would leak into the driver pod.
    for var in ("SPARK_LOCAL_DIRS", "HADOOP_CONF_DIR", "SPARK_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(var, None)
    started = time.monotonic()
    proc = subprocess.run(
        [spark_submit, *argv], env=env, capture_output=True, text=True, timeout=SPARK_TIMEOUT_S, stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    elapsed = time.monotonic() - started
    golden = {
        "case": case["name"],
        "spark_version": version,
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


@functools.lru_cache(maxsize=None)
def spark_home(spark_submit: str) -> str | None:
    """The pyspark folder beside a venv's spark-submit. pyspark's launcher would otherwise ask
    whichever `python3` is first on PATH, which may hold another pyspark."""
    python = Path(spark_submit).parent / "python"
    if not python.exists():
        return None
    proc = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('pyspark').submodule_search_locations[0])"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return proc.stdout.strip() or None


def spark_env(spark_submit: str) -> dict[str, str]:
    env = dict(os.environ)
    home = spark_home(spark_submit)
    if home:
        env["SPARK_HOME"] = home
    return env


def spark_submit_version(spark_submit: str) -> str | None:
    """The version `spark-submit --version` prints in its banner."""
    proc = subprocess.run([spark_submit, "--version"], env=spark_env(spark_submit), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    m = re.search(r"version (\d+\.\d+\.\d+)", proc.stdout + proc.stderr)
    return m.group(1) if m else None


def version_selected(case: dict, version: str) -> bool:
    """A case runs for every version unless it lists the Spark lines (`3.5`, `4.0`, ...) it is for."""
    lines = case.get("versions")
    return lines is None or any(version == l or version.startswith(l + ".") for l in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spark-version", required=True, help="the pyspark release, e.g. 4.0.5")
    parser.add_argument("--spark-submit", help="its spark-submit (default /opt/pyspark-<version>/bin/spark-submit, else PATH)")
    parser.add_argument("--only", nargs="*", help="regenerate only these cases")
    parser.add_argument("--kubesim", default=str(ROOT / "target" / "release" / "kubesim"))
    args = parser.parse_args()
    version = args.spark_version
    if not VERSION_LINE.match(version):
        raise SystemExit(f"--spark-version wants MAJOR.MINOR.PATCH, got {version!r}")
    spark_submit = args.spark_submit or next(
        (str(p) for p in [Path(f"/opt/pyspark-{version}/bin/spark-submit")] if p.exists()), shutil.which("spark-submit"))
    if spark_submit is None:
        raise SystemExit(f"no spark-submit: python3 -m venv /opt/pyspark-{version} && /opt/pyspark-{version}/bin/pip install pyspark=={version}")
    reported = spark_submit_version(spark_submit)
    if reported != version:
        raise SystemExit(f"{spark_submit} is Spark {reported}, not {version}")
    cases = yaml.safe_load((CORPUS / "cases.yaml").read_text())
    cases = [c for c in cases if version_selected(c, version)]
    if args.only:
        cases = [c for c in cases if c["name"] in args.only]
    golden_dir = GOLDEN / version
    golden_dir.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"corpus-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    sim = Kubesim(Path(args.kubesim), work)
    try:
        for case in cases:
            golden = run_case(sim, case, spark_submit, version)
            (golden_dir / f"{case['name']}.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
