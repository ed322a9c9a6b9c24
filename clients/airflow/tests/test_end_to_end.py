"""The provider in a real Airflow deployment (apache-airflow from PyPI: api-server, scheduler with
the LocalExecutor, dag-processor, triggerer, SQLite) against a real `submitter serve` over mTLS on
kubesim. Drivers are kubesim's scripted containers: the annotations decide how they end, and
each writes `started`, `running for Ns` every second and `exited with code C` to its log.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import (
    EXIT_1,
    RUN_UNTIL_KILLED,
    Airflow,
    Kubesim,
    Submitter,
    driver_line,
    spark_args,
    split,
    wait_for,
)


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

    # The first try shows the driver's log while it waits.
    wait_for(lambda: driver_line("running for 2s") in airflow.driver_lines(dag_id, run_id, 1),
             "the first try to show the driver's log", timeout=120, interval=0.2)
    record = airflow.record(dag_id, run_id)
    assert record and record["driver"], f"namespace:pod is persisted before the wait: {record}"
    assert record["log"], f"how far the log was shown is persisted while it is shown: {record}"
    driver = record["driver"]
    kill_worker(airflow, dag_id, run_id)
    first = airflow.driver_lines(dag_id, run_id, 1)

    # The scheduler's heartbeat timeout fails the first try; the retry reconnects and goes on
    # with the log where the first try left it.
    wait_for(lambda: "reconnecting" in airflow.task_log(dag_id, run_id, 2), "the retry to reconnect",
             timeout=120, interval=0.2)
    wait_for(lambda: airflow.driver_lines(dag_id, run_id, 2), "the retry to show the driver's log",
             timeout=60, interval=0.2)
    assert pod_names(kubesim, namespace) == [split(driver)[1]]
    kubesim.kill_container(*split(driver), exit_code=0)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    retry_log = airflow.task_log(dag_id, run_id, 2)
    assert ti["state"] == "success", retry_log[-3000:]
    assert ti["try_number"] == 2
    assert pod_names(kubesim, namespace) == [split(driver)[1]], "exactly one driver"
    assert submitter.submissions_created() - created_before == 1, "the retry did not submit"
    assert "submitted driver" not in retry_log and "found the existing driver" not in retry_log
    final = airflow.record(dag_id, run_id)
    assert {**final, "log": None} == {**record, "phase": "Succeeded", "log": None}, final

    second = airflow.driver_lines(dag_id, run_id, 2)
    assert first[0] == driver_line("started") and second[-1] == driver_line("exited with code 0")
    shown_twice = set(first) & set(second)
    assert not shown_twice, f"lines shown by both tries: {sorted(shown_twice)}"
    assert len(second) == len(set(second)), second
    # The retry went on after the first try's last line, not from the start.
    assert seconds_running(second[0]) > seconds_running(first[-1]), (first[-1], second[0])


def seconds_running(line: str) -> int:
    """N of a scripted driver's `running for Ns` line (0 for `started`)."""
    if line == driver_line("started"):
        return 0
    prefix, suffix = driver_line("running for "), "s"
    assert line.startswith(prefix) and line.endswith(suffix), line
    return int(line[len(prefix):-len(suffix)])


def test_deferred_wait_persists_the_driver_and_shows_its_log_from_the_triggerer(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_deferred_wait", f"deferred-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})

    ti = airflow.wait_state(dag_id, run_id, {"deferred", "success", "failed"})
    assert ti["state"] == "deferred", airflow.task_log(dag_id, run_id, 1)[-3000:]
    record = airflow.record(dag_id, run_id)
    assert record and record["driver"] and record["phase"] is None, record
    assert airflow.xcom(dag_id, run_id, "driver") == record["driver"]
    assert status_of(submitter, record["driver"])["phase"] == "Running"
    # The trigger follows the driver's log in the triggerer, into the task's log.
    wait_for(lambda: driver_line("running for 2s") in airflow.driver_lines(dag_id, run_id, 1),
             "the trigger to show the driver's log", timeout=60, interval=0.2)
    assert airflow.task_instance(dag_id, run_id)["state"] == "deferred"
    kubesim.kill_container(*split(record["driver"]), exit_code=0)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    assert ti["state"] == "success", airflow.task_log(dag_id, run_id, 1)[-3000:]
    assert ti["try_number"] == 1
    result = airflow.xcom(dag_id, run_id, "return_value")
    assert result["driver"] == record["driver"] and result["phase"] == "Succeeded", result
    assert result["submission_id"] == record["submission_id"]
    final = airflow.record(dag_id, run_id)
    assert final["phase"] == "Succeeded"
    assert final["log"], f"execute_complete keeps how far the trigger showed the log: {final}"
    lines = airflow.driver_lines(dag_id, run_id, 1)
    assert lines[0] == driver_line("started") and lines[-1] == driver_line("exited with code 0"), lines
    assert len(lines) == len(set(lines)), lines


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


def test_clearing_a_waiting_task_kills_its_driver_and_the_next_try_submits_a_new_one(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_killed_in_worker", f"cleared-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})
    wait_for(lambda: driver_line("running for 1s") in airflow.driver_lines(dag_id, run_id, 1),
             "the first try to wait on a running driver", timeout=120, interval=0.2)
    killed = airflow.record(dag_id, run_id)["driver"]

    airflow.clear(dag_id, run_id)

    # on_kill, in the worker: the driver is killed through the submitter, its pod deleted.
    wait_for(lambda: split(killed)[1] not in pod_names(kubesim, namespace), "the killed driver's pod to go",
             timeout=60, interval=0.2)
    status = status_of(submitter, killed)
    assert (status["phase"], status["reason"], status["action"]) == ("Failed", "Killed", "Resubmit"), status
    assert f"asked the submitter to kill {killed}" in airflow.task_log(dag_id, run_id, 1)

    # The next try sees the kill and submits a new generation under a new id, saying why.
    wait_for(lambda: (airflow.record(dag_id, run_id) or {}).get("generation") == 1
             and airflow.record(dag_id, run_id)["driver"], "the next try to submit", timeout=120, interval=0.2)
    record = airflow.record(dag_id, run_id)
    assert record["submission_id"].endswith("-g1") and record["driver"] != killed, record
    next_log = airflow.task_log(dag_id, run_id, 2)
    assert f"driver {killed} is Failed (reason Killed)" in next_log and "submitting a new driver" in next_log
    wait_for(lambda: status_of(submitter, record["driver"])["phase"] == "Running", "the new driver to run")
    kubesim.kill_container(*split(record["driver"]), exit_code=0)

    ti = airflow.wait_state(dag_id, run_id, {"success", "failed"})
    assert (ti["state"], ti["try_number"]) == ("success", 2), airflow.task_log(dag_id, run_id, 2)[-3000:]
    assert pod_names(kubesim, namespace) == [split(record["driver"])[1]]


def test_marking_a_deferred_task_failed_kills_its_driver_from_the_triggerer(
        airflow: Airflow, submitter: Submitter, kubesim: Kubesim, namespace: str):
    dag_id, run_id = "spark_killed_deferred", f"marked-{namespace}"
    airflow.trigger(dag_id, run_id, {"args": spark_args(namespace, RUN_UNTIL_KILLED)})
    wait_for(lambda: driver_line("running for 1s") in airflow.driver_lines(dag_id, run_id, 1),
             "the trigger to follow a running driver", timeout=120, interval=0.2)
    assert airflow.task_instance(dag_id, run_id)["state"] == "deferred"
    driver = airflow.record(dag_id, run_id)["driver"]

    airflow.mark(dag_id, run_id, "failed")

    # The trigger's on_kill, in the triggerer.
    wait_for(lambda: split(driver)[1] not in pod_names(kubesim, namespace), "the killed driver's pod to go",
             timeout=60, interval=0.2)
    status = status_of(submitter, driver)
    assert (status["phase"], status["reason"]) == ("Failed", "Killed"), status
    wait_for(lambda: f"asked the submitter to kill {driver}" in airflow.task_log(dag_id, run_id, 1),
             "the trigger to say it killed the driver", timeout=30, interval=0.2)
    assert airflow.task_instance(dag_id, run_id)["state"] == "failed"
