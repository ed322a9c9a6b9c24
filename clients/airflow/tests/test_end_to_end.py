"""The provider in a real Airflow deployment (apache-airflow from PyPI: api-server, scheduler with
the LocalExecutor, dag-processor, triggerer, SQLite) against a real `submitter serve` over mTLS on
kubesim. Drivers are kubesim's scripted containers: the annotations decide how they end.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import Airflow, Kubesim, Submitter, wait_for

# kubesim's scripted containers (docs/kubesim.md): run until the test ends them, or exit 1.
RUN_UNTIL_KILLED = "spark.kubernetes.driver.annotation.kubesim.io/run-seconds=-1"
EXIT_1 = "spark.kubernetes.driver.annotation.kubesim.io/exit-code=1"


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


def split(driver: str) -> tuple[str, str]:
    namespace, pod = driver.split(":")
    return namespace, pod


def pod_names(kubesim: Kubesim, namespace: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kubesim.driver_pods(namespace))


def kill_worker(airflow: Airflow, dag_id: str, run_id: str) -> None:
    """SIGKILLs the worker running the task: the LocalExecutor worker (the task's supervisor, which
    heartbeats for it) and the task process it forked. Nobody tells Airflow; its scheduler finds
    the missing heartbeat and fails the try."""
    task_pid = airflow.task_instance(dag_id, run_id)["pid"]
    stat = Path(f"/proc/{task_pid}/stat").read_text()
    worker_pid = int(stat.rsplit(")", 1)[1].split()[1])
    title = Path(f"/proc/{worker_pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "LocalExecutor" in title, f"the task's parent {worker_pid} is not a LocalExecutor worker: {title!r}"
    os.kill(worker_pid, signal.SIGKILL)
    os.kill(task_pid, signal.SIGKILL)


def status_of(submitter: Submitter, driver: str) -> dict:
    namespace, pod = split(driver)
    with submitter.client() as c:
        r = c.get(f"/api/v1/drivers/{namespace}/{pod}")
    assert r.status_code == 200, r.text
    return r.json()


def test_worker_killed_mid_wait_is_retried_and_reconnects_to_the_one_driver(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_worker_wait", f"killed-{namespace}"
    created_before = submitter.submissions_created()
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})

    wait_for(lambda: "waiting for driver" in airflow.task_log(dag_id, run_id, 1), "the first try to wait",
             timeout=120, interval=0.2)
    record = airflow.record(dag_id, run_id)
    assert record and record["driver"], f"namespace:pod is persisted before the wait: {record}"
    driver = record["driver"]
    kill_worker(airflow, dag_id, run_id)

    # The scheduler's heartbeat timeout fails the first try; the retry reconnects.
    wait_for(lambda: "reconnecting" in airflow.task_log(dag_id, run_id, 2), "the retry to reconnect",
             timeout=120, interval=0.2)
    assert pod_names(kubesim, namespace) == [split(driver)[1]]
    kubesim.kill_container(*split(driver), exit_code=0)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    retry_log = airflow.task_log(dag_id, run_id, 2)
    assert ti["state"] == "success", retry_log[-3000:]
    assert ti["try_number"] == 2
    assert pod_names(kubesim, namespace) == [split(driver)[1]], "exactly one driver"
    assert submitter.submissions_created() - created_before == 1, "the retry did not submit"
    assert "submitted driver" not in retry_log and "found the existing driver" not in retry_log
    assert airflow.record(dag_id, run_id) == {**record, "phase": "Succeeded"}


def test_deferred_wait_persists_the_driver_and_succeeds_in_the_triggerer(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_deferred_wait", f"deferred-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})

    ti = airflow.wait_state(dag_id, run_id, {"deferred", "success", "failed"})
    assert ti["state"] == "deferred", airflow.task_log(dag_id, run_id, 1)[-3000:]
    record = airflow.record(dag_id, run_id)
    assert record and record["driver"] and record["phase"] is None, record
    assert airflow.xcom(dag_id, run_id, "driver") == record["driver"]
    assert status_of(submitter, record["driver"])["phase"] == "Running"
    # The triggerer is polling the status route.
    wait_for(lambda: f"polling driver {record['driver']}: Running" in airflow.task_log(dag_id, run_id, 1),
             "the trigger to poll", timeout=60, interval=0.2)
    kubesim.kill_container(*split(record["driver"]), exit_code=0)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    assert ti["state"] == "success", airflow.task_log(dag_id, run_id, 1)[-3000:]
    assert ti["try_number"] == 1
    result = airflow.xcom(dag_id, run_id, "return_value")
    assert result["driver"] == record["driver"] and result["phase"] == "Succeeded", result
    assert result["submission_id"] == record["submission_id"]
    assert airflow.record(dag_id, run_id)["phase"] == "Succeeded"


def test_failed_driver_fails_the_try_with_its_message_and_the_retry_submits_a_new_driver(
        airflow: Airflow, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_failing_driver", f"failing-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, EXIT_1)})

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"}, timeout=180)
    assert ti["state"] == "failed" and ti["try_number"] == 2, ti
    pods = pod_names(kubesim, namespace)
    assert len(pods) == 2, f"one driver per try, the second with a new submission id: {pods}"
    for attempt in (1, 2):
        log = airflow.task_log(dag_id, run_id, attempt)
        assert any(f"Spark driver {namespace}:{pod} is Failed (exit code 1, reason Error)" in log for pod in pods), \
            log[-3000:]
    record = airflow.record(dag_id, run_id)
    assert record["generation"] == 1 and record["submission_id"].endswith("-g1"), record
    assert "is Failed (exit code 1, reason Error): submitting a new driver" in airflow.task_log(dag_id, run_id, 2)


def test_driver_that_succeeded_and_was_collected_while_no_worker_ran_reads_as_done(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_collected_driver", f"collected-{namespace}"
    created_before = submitter.submissions_created()
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})
    wait_for(lambda: "waiting for driver" in airflow.task_log(dag_id, run_id, 1), "the first try to wait",
             timeout=120, interval=0.2)
    driver = airflow.record(dag_id, run_id)["driver"]

    # Paused, the DAG gets no retry until the driver has finished and its pod is gone.
    airflow.cli("dags", "pause", dag_id)
    try:
        kill_worker(airflow, dag_id, run_id)
        airflow.wait_state(dag_id, run_id, {"up_for_retry"})
        kubesim.kill_container(*split(driver), exit_code=0)
        # The submitter retains the success before the pod goes (it needs the pod to see it).
        wait_for(lambda: status_of(submitter, driver)["phase"] == "Succeeded", "the driver to succeed")
        # The record lives in the submitter's own namespace, not the job's.
        wait_for(lambda: kubesim.get("/api/v1/configmaps",
                                     labelSelector="spark-submitter.io/record=driver-succeeded")["items"],
                 "the retention record")
        kubesim.delete_pod(*split(driver))
        wait_for(lambda: status_of(submitter, driver)["pod_phase"] is None, "the submitter to see the pod gone")
    finally:
        airflow.cli("dags", "unpause", dag_id)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    retry_log = airflow.task_log(dag_id, run_id, 2)
    assert ti["state"] == "success" and ti["try_number"] == 2, retry_log[-3000:]
    assert f"driver {driver} is Succeeded (its pod was garbage-collected)" in retry_log
    assert pod_names(kubesim, namespace) == []
    assert submitter.submissions_created() - created_before == 1


def test_wrong_client_certificate_fails_the_task_at_once_with_a_clear_message(
        airflow: Airflow, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_rogue_certificate", f"rogue-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace)})

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed", "up_for_retry"})
    log = airflow.task_log(dag_id, run_id, 1)
    assert ti["state"] == "failed", f"a refused certificate is not retried (3 retries allowed): {ti}"
    assert ti["try_number"] == 1
    # Refused in the handshake (or, by a submitter that lets every certificate through TLS, with
    # 401 in the envelope): either way the message names what to fix.
    assert "check the connection's client_cert and client_key" in log, log[-3000:]
    assert "AirflowFailException" in log
    assert pod_names(kubesim, namespace) == []
