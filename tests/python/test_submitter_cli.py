"""`submitter submit | status | wait` against a real `submitter serve --insecure-dev` on kubesim."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from simutil import is_gone, lag_watch, wait_for


def cli(submitter, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.environ["SUBMITTER_BIN"], *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SUBMITTER_URL": submitter.url, **(env or {})},
    )


def spark_args(namespace: str, *confs: str) -> list[str]:
    args = [
        "--master", "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode", "cluster",
        "--name", "cli-pi",
        "--class", "org.apache.spark.examples.SparkPi",
        "--conf", "spark.kubernetes.container.image=spark:4.0.0",
        "--conf", f"spark.kubernetes.namespace={namespace}",
    ]
    for conf in confs:
        args += ["--conf", conf]
    return args + ["local:///opt/spark/examples/jars/spark-examples.jar"]


def test_submit_sends_local_templates_inline_and_wait_exits_zero(submitter, kube, namespace, tmp_path: Path):
    template = tmp_path / "driver.yaml"
    template.write_text("metadata:\n  labels:\n    team: cli\nspec:\n  containers:\n  - name: spark-kubernetes-driver\n")
    submitted = cli(submitter, "submit", *spark_args(
        namespace, f"spark.kubernetes.driver.podTemplateFile={template}"))
    assert submitted.returncode == 0, submitted.stderr
    first = submitted.stderr.splitlines()[0]
    assert first.startswith("submission-id: "), submitted.stderr
    driver = submitted.stdout.strip()
    ns, pod = driver.split(":")
    assert ns == namespace
    assert kube.core.read_namespaced_pod(pod, ns).metadata.labels["team"] == "cli"

    # A retry with the printed id is the same driver.
    again = cli(submitter, "submit", "--submission-id", first.removeprefix("submission-id: "),
                *spark_args(namespace, f"spark.kubernetes.driver.podTemplateFile={template}"))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == driver

    waited = cli(submitter, "wait", "--interval", "1", driver)
    assert waited.returncode == 0, waited.stderr
    status = cli(submitter, "status", driver)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["phase"] == "Succeeded"


def test_wait_exits_one_for_failed_and_two_for_lost(submitter, kube, namespace):
    failed = cli(submitter, "submit", *spark_args(
        namespace, "spark.kubernetes.driver.annotation.kubesim.io/exit-code=1"))
    assert failed.returncode == 0, failed.stderr
    assert cli(submitter, "wait", "--interval", "1", failed.stdout.strip()).returncode == 1

    lost = cli(submitter, "submit", "--submission-id", "cli-lost-1", *spark_args(
        namespace, "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1"))
    assert lost.returncode == 0, lost.stderr
    ns, pod = lost.stdout.strip().split(":")
    kube.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
    wait_for(lambda: is_gone(lambda: kube.core.read_namespaced_pod(pod, ns)), "the pod to go", timeout=20)
    assert cli(submitter, "wait", "--interval", "1", f"{ns}:{pod}").returncode == 2
    assert cli(submitter, "status", "no-colon").returncode == 3


def test_status_of_a_driver_the_submitters_cache_has_not_seen_is_pending(submitter, kubesim, namespace):
    lag_watch(kubesim, "pods", seconds=8)
    submitted = cli(submitter, "submit", *spark_args(
        namespace, "spark.kubernetes.driver.annotation.kubesim.io/never-start=true"))
    assert submitted.returncode == 0, submitted.stderr
    status = cli(submitter, "status", submitted.stdout.strip())
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["phase"] == "Pending"
