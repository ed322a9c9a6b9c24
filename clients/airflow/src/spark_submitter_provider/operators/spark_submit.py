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
4. waits, deferred to `SparkDriverTrigger` (`deferrable=True`) or in the worker, following the
   driver's log into the task log meanwhile (`get_logs`) and keeping how far it has shown it in
   the record, so that a later try goes on from there (`driver_wait`, `log_position`);
5. succeeds when the driver Succeeded; fails with the driver's exit code, reason and message when
   it Failed (or is Unknown, or gone, or was killed): a retry then submits a new generation.

`on_kill` (the task marked failed or succeeded, or cleared, while it runs; its execution_timeout;
a worker's graceful shutdown) kills the driver through the submitter (`cancel_on_kill`); the next
try finds it killed (Failed, reason Killed) and submits a new generation, saying so.

Failures a retry cannot fix (a refused certificate, 401/403, a bad argument vector, a template
the API server rejects, a pod name held by another submission) raise AirflowFailException: the
task fails at once, without burning its retries.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from spark_submitter_provider.client import (
    AsyncSubmitterClient,
    DriverStatus,
    SubmitterClient,
    SubmitterConfig,
    SubmitterError,
    describe_kill,
)
from spark_submitter_provider.driver_wait import DriverLog, Logger, TaskLogSink, wait_for_driver
from spark_submitter_provider.hooks.submitter import SparkSubmitterHook
from spark_submitter_provider.log_position import LogCursor, LogPosition
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

T = TypeVar("T")

#: At most one task state store write per this many seconds while the log is followed.
CHECKPOINT_INTERVAL_S = 1.0
#: Steps of one try: at most a duplicate answer that names a finished driver, then a new one.
MAX_STEPS = 3


class _MemoryStore:
    """Stands in for a missing task state store: this try still works, a retry cannot resume."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value


class _CheckpointingSink:
    """The worker's sink: the record with the new position goes to the task state store first,
    then the lines to the task log. A worker killed in between leaves lines unshown, never
    shown twice (the next try starts after the recorded position).

    A write that fails does not end the wait: the position is only worth a few repeated lines,
    and the usual cause is a try that was cleared or marked failed a moment ago (its task
    instance is gone from the execution API); failing here would end the task before Airflow's
    heartbeat sends the SIGTERM that runs on_kill, and leave the driver running.
    """

    def __init__(self, store: Any, record: Record, log: Logger) -> None:
        self.store = store
        self.record = record
        self.log = log
        self._task_log = TaskLogSink(log)
        self._write_failed = False

    async def show(self, lines: list[str], position: LogPosition | None) -> None:
        if position != self.record.log:
            self.record = dataclasses.replace(self.record, log=position)
            try:
                self.store.set(RECORD_KEY, self.record.to_store())
            except Exception as e:  # whatever the store raises, the log goes on (above)
                if not self._write_failed:
                    self.log.warning("spark-submitter: cannot record how far the driver's log was shown "
                                     "(a later try may show some lines again): %s", e)
                self._write_failed = True
        await self._task_log.show(lines, position)


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
    :param poll_interval: seconds between status look-ups while waiting (and between attempts to
        follow the driver's log when it cannot be read).
    :param get_logs: follow the driver's log into the task log while waiting.
    :param cancel_on_kill: kill the driver through the submitter when the task is killed
        (`on_kill`: marked failed or succeeded, cleared, timed out, or its worker shut down).
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
        get_logs: bool = True,
        cancel_on_kill: bool = True,
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
        self.get_logs = get_logs
        self.cancel_on_kill = cancel_on_kill
        # What on_kill kills: this try's record and the connection read when the try began (on_kill
        # runs in a signal handler and must not ask Airflow for the connection again).
        self._record: Record | None = None
        self._config: SubmitterConfig | None = None

    # --- the try ------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        hook = SparkSubmitterHook(self.conn_id)
        self._config = self._call(hook.get_config)
        store = self._store(context)
        record = Record.from_store(store.get(RECORD_KEY))
        self._record = record
        status = self._call(lambda: hook.driver_status(record.driver)) if needs_status(record) else None
        for _ in range(MAX_STEPS):
            step = next_step(record, status)
            self.log.info("spark-submitter: %s", step.why)
            if step.kind == "wait":
                assert record is not None and record.driver is not None
                return self._wait(context, store, record)
            if record is not None and status is not None and status.pod_phase is not None:
                # Finished while no try watched it: what its log says since the last try showed it.
                record = self._show_rest(store, record)
            if step.kind == "done":
                assert record is not None and record.driver is not None
                return self._succeed(store, record, status)
            record, duplicate = self._submit(context, hook, store, step.generation)
            if not duplicate:
                return self._wait(context, store, record)
            # The id already named a driver: the table decides from that driver's state (a
            # killed or failed one is not waited for, a new generation is submitted).
            status = self._call(lambda: hook.driver_status(record.driver))
        raise AirflowException(f"spark-submitter: no driver to wait for after {MAX_STEPS} steps: {record}")

    def _submit(self, context: Context, hook: SparkSubmitterHook, store: Any, generation: int) -> tuple[Record, bool]:
        submission_id = submission_id_for(
            context["ti"].dag_id, context["ti"].task_id, context["run_id"], _map_index(context),
            generation, base=self.submission_id,
        )
        # Recorded before the POST: a try killed before the answer repeats this id.
        record = self._keep(store, Record(generation, submission_id))
        answer = self._call(lambda: hook.submit(submission_id, self.spark_submit_args,
                                                self.driver_pod_template, self.executor_pod_template))
        # Recorded before the wait: a try killed while waiting reconnects to this driver.
        record = self._keep(store, Record(generation, submission_id, answer.driver))
        self.log.info(
            "spark-submitter: %s driver %s (submission id %s, spark app id %s)",
            "found the existing" if answer.duplicate_submission else "submitted", answer.driver,
            submission_id, answer.spark_app_id,
        )
        context["ti"].xcom_push(key="driver", value=answer.driver)
        return record, answer.duplicate_submission

    def _wait(self, context: Context, store: Any, record: Record) -> dict[str, Any]:
        assert record.driver is not None
        if self.deferrable:
            self.defer(
                trigger=SparkDriverTrigger(
                    record.driver, self.conn_id, self.poll_interval, get_logs=self.get_logs,
                    log_position=record.log.to_store() if record.log else None,
                    cancel_on_kill=self.cancel_on_kill,
                ),
                method_name="execute_complete",
            )
        self.log.info("spark-submitter: waiting for driver %s", record.driver)
        driver = record.driver

        async def wait(client: AsyncSubmitterClient) -> tuple[DriverStatus | None, Record]:
            sink = _CheckpointingSink(store, record, self.log)
            driver_log = self._driver_log(client, driver, sink)
            try:
                status = await wait_for_driver(client, driver, driver_log=driver_log,
                                               poll_interval=self.poll_interval, log=self.log)
            finally:
                self._record = sink.record
            return status, sink.record

        status, shown = self._run(wait)
        if status is None:
            raise self._lost(driver)
        return self._finish(store, shown, status)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumes the try after SparkDriverTrigger fired."""
        store = self._store(context)
        record = Record.from_store(store.get(RECORD_KEY))
        driver = event.get("driver")
        if record is None or record.driver != driver:
            raise AirflowException(f"the task state store no longer records driver {driver}: {record}")
        position = LogPosition.from_store(event.get("log_position"))
        if position is not None and position != record.log:
            # How far the trigger showed the log: a later try goes on from there.
            record = self._keep(store, dataclasses.replace(record, log=position))
        kind = event.get("status")
        if kind == FINISHED:
            return self._finish(store, record, DriverStatus.from_json(event["driver_status"]))
        if kind == LOST:
            raise self._lost(driver)
        if kind == ERROR:
            message = f"status look-up of driver {driver} failed: {event.get('message')}"
            raise AirflowFailException(message) if event.get("fatal") else AirflowException(message)
        raise AirflowException(f"unexpected event from SparkDriverTrigger: {event}")

    def on_kill(self) -> None:
        """The try is being killed: kill its driver through the submitter (`cancel_on_kill`).

        Runs in the task's SIGTERM handler or after its execution_timeout, possibly while the
        try's own client is in the middle of a request: it makes a client of its own from the
        connection read when the try began.
        """
        record, config = self._record, self._config
        if record is None or config is None or record.phase == SUCCEEDED:
            return
        target = record.driver or record.submission_id
        if not self.cancel_on_kill:
            self.log.info("spark-submitter: cancel_on_kill is off: %s keeps running", target)
            return
        try:
            with SubmitterClient(config) as client:
                status = client.kill_driver(record.driver) if record.driver else \
                    client.kill_submission(record.submission_id)
        except SubmitterError as e:
            self.log.warning("spark-submitter: could not kill %s: %s", target, e)
            return
        self.log.info("spark-submitter: %s", describe_kill(target, status))

    # --- outcomes -----------------------------------------------------------------------------

    def _finish(self, store: Any, record: Record, status: DriverStatus) -> dict[str, Any]:
        if status.phase == SUCCEEDED:
            return self._succeed(store, record, status)
        # Failed or Unknown: the retry (if any) submits the next generation (resume.next_step).
        raise AirflowException(f"Spark {status.describe()}")

    def _succeed(self, store: Any, record: Record, status: DriverStatus | None) -> dict[str, Any]:
        if record.phase != SUCCEEDED:
            # Cached: once the submitter's retention record expires, a later try still knows.
            self._keep(store, dataclasses.replace(record, phase=SUCCEEDED))
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

    # --- the driver's log ----------------------------------------------------------------------

    def _driver_log(self, client: AsyncSubmitterClient, driver: str, sink: _CheckpointingSink) -> DriverLog | None:
        if not self.get_logs:
            return None
        return DriverLog(client, driver, LogCursor(sink.record.log), sink, self.log,
                         batch_interval=CHECKPOINT_INTERVAL_S)

    def _show_rest(self, store: Any, record: Record) -> Record:
        """Shows what the finished driver of `record` logged since the last try showed its log."""
        driver = record.driver
        if not self.get_logs or driver is None:
            return record

        async def rest(client: AsyncSubmitterClient) -> Record:
            sink = _CheckpointingSink(store, record, self.log)
            driver_log = self._driver_log(client, driver, sink)
            assert driver_log is not None
            await driver_log.read_rest()
            return sink.record

        self._record = self._run(rest)
        return self._record

    # --- plumbing -----------------------------------------------------------------------------

    def _keep(self, store: Any, record: Record) -> Record:
        """Writes the record, and remembers it for on_kill."""
        store.set(RECORD_KEY, record.to_store())
        self._record = record
        return record

    def _run(self, work: Callable[[AsyncSubmitterClient], Coroutine[Any, Any, T]]) -> T:
        """Runs `work` with an asyncio client on an event loop of this try's own."""
        assert self._config is not None
        config = self._config

        async def run() -> T:
            async with AsyncSubmitterClient(config) as client:
                return await work(client)

        return self._call(lambda: asyncio.run(run()))

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
