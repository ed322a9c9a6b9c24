"""SparkSubmitterOperator: submit a Spark driver through the submitter, wait, and survive crashes.

Each try:

1. reads the task instance's record from `context["task_state_store"]` (it outlives tries) and,
   if it names a driver, asks the submitter for that driver's status;
2. follows `resume.next_step`: reconnect to a Pending/Running driver, finish at once for a
   Succeeded one (also after its pod was garbage-collected: the submitter retains the success,
   and the record caches it), or submit;
3. to submit: records the deterministic submission id first, then POSTs, then records
   `namespace:pod` **before** waiting, so a worker killed at any point leaves a record from which
   the next try reconnects instead of submitting a second driver;
4. waits, deferred to `SparkDriverTrigger` (`deferrable=True`) or polling in the worker;
5. succeeds when the driver Succeeded; fails with the driver's exit code, reason and message when
   it Failed (or is Unknown, or gone): a retry then submits a new generation.

Failures a retry cannot fix (a refused certificate, 401/403, a bad argument vector, a template
the API server rejects, a pod name held by another submission) raise AirflowFailException: the
task fails at once, without burning its retries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from spark_submitter_provider.client import RECONNECT, DriverStatus, SubmitterError
from spark_submitter_provider.hooks.submitter import SparkSubmitterHook
from spark_submitter_provider.resume import (
    RECORD_KEY,
    SUCCEEDED,
    Record,
    needs_status,
    next_step,
    submission_id_for,
)
from spark_submitter_provider.triggers.driver import ERROR, FINISHED, LOST, SparkDriverTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


class _MemoryStore:
    """Stands in for a missing task state store: this try still works, a retry cannot resume."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value


class SparkSubmitterOperator(BaseOperator):
    """Runs one Spark application through the submitter's REST API and waits for its driver.

    :param spark_submit_args: the spark-submit argument vector (templated), e.g.
        ``["--master", "k8s://https://kubernetes.default.svc:443", "--deploy-mode", "cluster",
        "--name", "pi", "--class", "org.apache.spark.examples.SparkPi", "--conf",
        "spark.kubernetes.container.image=apache/spark:4.0.1", "local:///opt/spark/examples/jars/spark-examples.jar"]``
    :param conn_id: a ``spark_submitter`` connection.
    :param driver_pod_template: inline driver PodTemplateSpec (templated), instead of
        ``spark.kubernetes.driver.podTemplateFile``.
    :param executor_pod_template: inline executor PodTemplateSpec (templated).
    :param submission_id: the base of the submission id (templated); by default derived from
        dag_id, task_id, run_id and map_index. Never include the try number.
    :param deferrable: wait in the triggerer instead of the worker.
    :param poll_interval: seconds between status look-ups while waiting.
    """

    template_fields: Sequence[str] = ("spark_submit_args", "driver_pod_template", "executor_pod_template",
                                      "submission_id")
    template_fields_renderers = {"driver_pod_template": "json", "executor_pod_template": "json"}
    ui_color = "#f6b26b"

    def __init__(
        self,
        *,
        spark_submit_args: list[str],
        conn_id: str = SparkSubmitterHook.default_conn_name,
        driver_pod_template: dict | None = None,
        executor_pod_template: dict | None = None,
        submission_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spark_submit_args = spark_submit_args
        self.conn_id = conn_id
        self.driver_pod_template = driver_pod_template
        self.executor_pod_template = executor_pod_template
        self.submission_id = submission_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval

    # --- the try ------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        hook = SparkSubmitterHook(self.conn_id)
        store = self._store(context)
        record = Record.from_store(store.get(RECORD_KEY))
        status = self._call(lambda: hook.driver_status(record.driver)) if needs_status(record) else None
        step = next_step(record, status)
        self.log.info("spark-submitter: %s", step.why)

        if step.kind == "done":
            assert record is not None and record.driver is not None
            return self._succeed(store, record, status)
        if step.kind == "wait":
            assert record is not None and record.driver is not None
            return self._wait(context, hook, store, record)

        submission_id = submission_id_for(
            context["ti"].dag_id, context["ti"].task_id, context["run_id"], _map_index(context),
            step.generation, base=self.submission_id,
        )
        # Recorded before the POST: a try killed before the answer repeats this id.
        record = Record(step.generation, submission_id)
        store.set(RECORD_KEY, record.to_store())
        answer = self._call(lambda: hook.submit(submission_id, self.spark_submit_args,
                                                self.driver_pod_template, self.executor_pod_template))
        # Recorded before the wait: a try killed while waiting reconnects to this driver.
        record = Record(step.generation, submission_id, answer.driver)
        store.set(RECORD_KEY, record.to_store())
        self.log.info(
            "spark-submitter: %s driver %s (submission id %s, spark app id %s)",
            "found the existing" if answer.duplicate_submission else "submitted", answer.driver,
            submission_id, answer.spark_app_id,
        )
        context["ti"].xcom_push(key="driver", value=answer.driver)
        return self._wait(context, hook, store, record)

    def _wait(self, context: Context, hook: SparkSubmitterHook, store: Any, record: Record) -> dict[str, Any]:
        assert record.driver is not None
        if self.deferrable:
            self.defer(
                trigger=SparkDriverTrigger(record.driver, self.conn_id, self.poll_interval),
                method_name="execute_complete",
            )
        self.log.info("spark-submitter: waiting for driver %s", record.driver)
        while True:
            status = self._call(lambda: hook.driver_status(record.driver))
            if status is None:
                raise self._lost(record.driver)
            if status.action != RECONNECT:
                return self._finish(store, record, status)
            self.log.info("spark-submitter: driver %s is %s", record.driver, status.phase)
            time.sleep(self.poll_interval)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumes the try after SparkDriverTrigger fired."""
        store = self._store(context)
        record = Record.from_store(store.get(RECORD_KEY))
        driver = event.get("driver")
        if record is None or record.driver != driver:
            raise AirflowException(f"the task state store no longer records driver {driver}: {record}")
        kind = event.get("status")
        if kind == FINISHED:
            return self._finish(store, record, DriverStatus.from_json(event["driver_status"]))
        if kind == LOST:
            raise self._lost(driver)
        if kind == ERROR:
            message = f"status look-up of driver {driver} failed: {event.get('message')}"
            raise AirflowFailException(message) if event.get("fatal") else AirflowException(message)
        raise AirflowException(f"unexpected event from SparkDriverTrigger: {event}")

    # --- outcomes -----------------------------------------------------------------------------

    def _finish(self, store: Any, record: Record, status: DriverStatus) -> dict[str, Any]:
        if status.phase == SUCCEEDED:
            return self._succeed(store, record, status)
        # Failed or Unknown: the retry (if any) submits the next generation (resume.next_step).
        raise AirflowException(f"Spark {status.describe()}")

    def _succeed(self, store: Any, record: Record, status: DriverStatus | None) -> dict[str, Any]:
        if record.phase != SUCCEEDED:
            # Cached: once the submitter's retention record expires, a later try still knows.
            store.set(RECORD_KEY, Record(record.generation, record.submission_id, record.driver, SUCCEEDED).to_store())
        self.log.info("spark-submitter: driver %s succeeded", record.driver)
        return {
            "driver": record.driver,
            "submission_id": record.submission_id,
            "spark_app_id": status.spark_app_id if status else None,
            "phase": SUCCEEDED,
        }

    @staticmethod
    def _lost(driver: str) -> AirflowException:
        return AirflowException(
            f"the submitter knows no driver {driver} any more (deleted before it finished?); "
            f"a retry submits a new one"
        )

    # --- plumbing -----------------------------------------------------------------------------

    def _call(self, call: Any) -> Any:
        """Runs a submitter call; a failure no retry can fix fails the task without retries."""
        try:
            return call()
        except SubmitterError as e:
            if e.retryable:
                raise AirflowException(str(e)) from e
            raise AirflowFailException(str(e)) from e

    def _store(self, context: Context) -> Any:
        store = context.get("task_state_store")
        if store is None:
            self.log.warning(
                "spark-submitter: no task_state_store in the context (Airflow < 3.3?): a retry will "
                "find a running driver by its submission id, but cannot resubmit after a failure"
            )
            store = _MemoryStore()
        return store


def _map_index(context: Context) -> int:
    map_index = getattr(context["ti"], "map_index", -1)
    return -1 if map_index is None else int(map_index)
