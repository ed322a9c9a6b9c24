"""The Airflow-style example client (docs/examples/airflow_client.py) against a real
`submitter serve --insecure-dev` on kubesim: submit, persist `namespace:pod`, crash, reconnect,
and act per the seed's phase table, row by row.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from simutil import is_gone, lag_watch, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "examples"))

import airflow_client as ac  # noqa: E402

RECORD_SELECTOR = "spark-submitter.io/record=driver-succeeded"
# The session's submitter runs outside a cluster: its own namespace is its kubeconfig's, "default".
SUBMITTER_NAMESPACE = "default"


def spark_args(namespace: str, *confs: str) -> list[str]:
    args = [
        "--master", "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode", "cluster",
        "--name", "airflow-pi",
        "--class", "org.apache.spark.examples.SparkPi",
        "--conf", "spark.kubernetes.container.image=spark:4.0.0",
        "--conf", f"spark.kubernetes.namespace={namespace}",
    ]
    for conf in confs:
        args += ["--conf", conf]
    return args + ["local:///opt/spark/examples/jars/spark-examples.jar"]


def new_task(submitter, tmp_path: Path, args: list[str], timeout: float = 30.0) -> ac.ResumableSparkTask:
    """A fresh task object (a fresh worker process): only the store file carries state."""
    return ac.ResumableSparkTask(
        task_id="spark_pi",
        args=args,
        store=ac.TaskStore(tmp_path / "tasks.json"),
        submitter=ac.Submitter(submitter.url),
        poll_interval=0.2,
        timeout=timeout,
    )


def submit_and_crash(submitter, tmp_path: Path, args: list[str]) -> str:
    with pytest.raises(ac.SimulatedCrash):
        new_task(submitter, tmp_path, args).execute(crash_after_submit=True)
    saved = ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")
    assert saved["driver"], saved
    return saved["driver"]


def phase_of(submitter, driver: str) -> str | None:
    status = ac.Submitter(submitter.url).driver_status(driver)
    return status["phase"] if status else None


def test_running_driver_is_reconnected_and_polled_to_completion(submitter, kubesim, namespace, tmp_path):
    args = spark_args(namespace, "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1")
    driver = submit_and_crash(submitter, tmp_path, args)
    wait_for(lambda: phase_of(submitter, driver) == "Running", "the driver to run", timeout=20)

    task = new_task(submitter, tmp_path, args)
    result: list[ac.Outcome] = []
    worker = threading.Thread(target=lambda: result.append(task.execute()))
    worker.start()
    wait_for(lambda: "reconnect" in task.events, "the retry to reconnect", timeout=20)
    # The driver finishes while the reconnected task polls it.
    ns, pod = driver.split(":")
    kubesim.sim("POST", f"pods/{ns}/{pod}/kill", json={"container": "spark-kubernetes-driver", "exitCode": 0})
    worker.join(timeout=30)
    assert result, task.events
    assert result[0].phase == "Succeeded", task.events
    assert result[0].driver == driver
    assert result[0].submissions == 0, "a reconnect never submits again"


def test_pending_driver_is_reconnected_not_resubmitted(submitter, namespace, tmp_path):
    args = spark_args(namespace, "spark.kubernetes.driver.annotation.kubesim.io/never-start=true")
    driver = submit_and_crash(submitter, tmp_path, args)
    wait_for(lambda: phase_of(submitter, driver) == "Pending", "the driver to be pending", timeout=20)
    outcome = new_task(submitter, tmp_path, args, timeout=2.0).execute()
    assert "reconnect" in outcome.events
    assert outcome.phase == "Pending"
    assert outcome.driver == driver
    assert outcome.submissions == 0


def test_driver_the_submitters_cache_has_not_seen_is_reconnected_not_resubmitted(
        submitter, kubesim, namespace, tmp_path):
    args = spark_args(namespace, "spark.kubernetes.driver.annotation.kubesim.io/never-start=true")
    lag_watch(kubesim, "pods", seconds=8)
    driver = submit_and_crash(submitter, tmp_path, args)
    outcome = new_task(submitter, tmp_path, args, timeout=1.0).execute()
    assert outcome.events[0] == "retry:Pending:Reconnect", outcome.events
    assert outcome.driver == driver
    assert outcome.submissions == 0, "a driver that exists is never resubmitted"


def test_succeeded_driver_is_done_without_resubmission(submitter, namespace, tmp_path):
    args = spark_args(namespace)
    driver = submit_and_crash(submitter, tmp_path, args)
    wait_for(lambda: phase_of(submitter, driver) == "Succeeded", "the driver to succeed", timeout=20)
    outcome = new_task(submitter, tmp_path, args).execute()
    assert outcome.events == ["retry:Succeeded:Done", "done-without-resubmit"]
    assert outcome.submissions == 0


def test_failed_driver_is_resubmitted_with_a_new_submission_id(submitter, namespace, tmp_path):
    args = spark_args(namespace, "spark.kubernetes.driver.annotation.kubesim.io/exit-code=1")
    driver = submit_and_crash(submitter, tmp_path, args)
    first_id = ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")["submission_id"]
    wait_for(lambda: phase_of(submitter, driver) == "Failed", "the driver to fail", timeout=20)
    outcome = new_task(submitter, tmp_path, args).execute()
    assert outcome.events[:2] == ["retry:Failed:Resubmit", "resubmit"]
    assert outcome.submissions == 1
    saved = ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")
    assert saved["submission_id"] != first_id
    assert saved["driver"] != driver, "a new id makes a new driver"
    assert outcome.phase == "Failed"  # the same failing job fails again


def test_lost_driver_is_resubmitted_with_a_new_submission_id(submitter, kube, namespace, tmp_path):
    args = spark_args(namespace, "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1")
    driver = submit_and_crash(submitter, tmp_path, args)
    first_id = ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")["submission_id"]
    ns, pod = driver.split(":")
    kube.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
    wait_for(lambda: is_gone(lambda: kube.core.read_namespaced_pod(pod, ns)), "the pod to go", timeout=20)
    wait_for(lambda: phase_of(submitter, driver) is None, "the submitter to forget it", timeout=20)
    outcome = new_task(submitter, tmp_path, args, timeout=1.0).execute()
    assert outcome.events[:2] == ["retry:NotFound:Resubmit", "resubmit"]
    assert outcome.submissions == 1
    assert ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")["submission_id"] != first_id


def records_for(kube, namespace: str, submission_id: str) -> list:
    """The retention records (in the submitter's own namespace) of one submission."""
    return [
        cm for cm in kube.core.list_namespaced_config_map(
            SUBMITTER_NAMESPACE, label_selector=RECORD_SELECTOR).items
        if (cm.data or {}).get("submission_id") == submission_id
        and (cm.data or {}).get("namespace") == namespace
    ]


def test_succeeded_then_collected_driver_is_still_done(submitter, kube, namespace, tmp_path):
    args = spark_args(namespace)
    driver = submit_and_crash(submitter, tmp_path, args)
    submission_id = ac.TaskStore(tmp_path / "tasks.json").get("spark_pi")["submission_id"]
    wait_for(lambda: phase_of(submitter, driver) == "Succeeded", "the driver to succeed", timeout=20)
    wait_for(lambda: records_for(kube, namespace, submission_id), "the retention record", timeout=20)
    # The record lives with the submitter, not in the user's namespace (no clutter, no quota).
    assert not kube.core.list_namespaced_config_map(namespace, label_selector=RECORD_SELECTOR).items
    ns, pod = driver.split(":")
    kube.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
    wait_for(lambda: is_gone(lambda: kube.core.read_namespaced_pod(pod, ns)), "the pod to go", timeout=20)
    wait_for(
        lambda: ac.Submitter(submitter.url).driver_status(driver)["pod_phase"] is None,
        "the submitter to see the pod gone", timeout=20,
    )
    outcome = new_task(submitter, tmp_path, args).execute()
    assert outcome.events == ["retry:Succeeded:Done", "done-without-resubmit"]
    assert outcome.submissions == 0


@pytest.mark.parametrize("driver", ["no-colon", ":pod", "ns:", "a:b:c", "a/b:pod", "ns:pod/x", "NS:pod"])
def test_malformed_driver_ids_are_refused_before_any_request(driver):
    # Nothing listens on port 9: a request would fail with a connection error instead.
    with pytest.raises(ac.DriverIdError):
        ac.Submitter("http://127.0.0.1:9").driver_status(driver)
