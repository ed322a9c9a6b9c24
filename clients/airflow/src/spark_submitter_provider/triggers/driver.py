"""The deferrable wait: follows the driver's log and status in the triggerer until it is finished."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseTrigger, TriggerEvent

from spark_submitter_provider.client import AsyncSubmitterClient, SubmitterError, describe_kill
from spark_submitter_provider.driver_wait import DriverLog, TaskLogSink, wait_for_driver
from spark_submitter_provider.hooks.submitter import SparkSubmitterHook, config_from_connection
from spark_submitter_provider.log_position import LogCursor, LogPosition

#: Event `status` values (the operator's `execute_complete` reads them).
FINISHED = "finished"  # the driver left Pending/Running; `driver_status` says how
LOST = "lost"  # the submitter knows no such driver (404)
ERROR = "error"  # the look-up itself failed; `fatal` says whether a retry can help


class SparkDriverTrigger(BaseTrigger):
    """Fires once the driver `namespace:pod` is no longer Pending or Running.

    While the driver runs, its log is followed (`GET …/log?follow=true`) and each line goes to
    this trigger's log, which Airflow shows with the task's; while it is Pending, or when its
    log cannot be read, the status is polled every `poll_interval` seconds. `log_position` is
    where the task log left the driver's log when the task deferred; the event hands back
    where it is now, and `execute_complete` keeps that in the task state store. (The triggerer
    has no task state store: a triggerer restart starts the trigger again from `log_position`
    and shows again what the first run of it showed.)

    Each look-up already retries 500/503 and unreachable answers a few times;
    `max_consecutive_errors` failed look-ups in a row end the wait with a retryable error, so a
    submitter that stays down fails the try (and the next try reconnects) instead of waiting
    forever. A TLS or authorisation failure ends it at once.

    `on_kill` (a user marked the deferred task failed or succeeded, or cleared it) kills the
    driver through the submitter when `cancel_on_kill`.
    """

    def __init__(self, driver: str, conn_id: str = SparkSubmitterHook.default_conn_name,
                 poll_interval: float = 10.0, max_consecutive_errors: int = 30, get_logs: bool = True,
                 log_position: dict[str, Any] | None = None, cancel_on_kill: bool = True) -> None:
        super().__init__()
        self.driver = driver
        self.conn_id = conn_id
        self.poll_interval = poll_interval
        self.max_consecutive_errors = max_consecutive_errors
        self.get_logs = get_logs
        self.log_position = log_position
        self.cancel_on_kill = cancel_on_kill

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"driver": self.driver, "conn_id": self.conn_id, "poll_interval": self.poll_interval,
             "max_consecutive_errors": self.max_consecutive_errors, "get_logs": self.get_logs,
             "log_position": self.log_position, "cancel_on_kill": self.cancel_on_kill},
        )

    def _event(self, status: str, driver_log: DriverLog | None, **fields: Any) -> TriggerEvent:
        position = driver_log.position if driver_log else None
        return TriggerEvent({"status": status, "driver": self.driver,
                             "log_position": position.to_store() if position else self.log_position,
                             **fields})

    async def _client(self) -> AsyncSubmitterClient:
        return AsyncSubmitterClient(config_from_connection(await BaseHook.aget_connection(self.conn_id)))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            client = await self._client()
        except SubmitterError as e:
            yield self._event(ERROR, None, fatal=True, message=str(e))
            return
        async with client:
            driver_log = None
            if self.get_logs:
                cursor = LogCursor(LogPosition.from_store(self.log_position))
                driver_log = DriverLog(client, self.driver, cursor, TaskLogSink(self.log), self.log)
            try:
                status = await wait_for_driver(client, self.driver, driver_log=driver_log,
                                               poll_interval=self.poll_interval, log=self.log,
                                               max_consecutive_errors=self.max_consecutive_errors)
            except SubmitterError as e:
                yield self._event(ERROR, driver_log, fatal=not e.retryable, message=str(e))
                return
        if status is None:
            yield self._event(LOST, driver_log)
        else:
            yield self._event(FINISHED, driver_log, driver_status=status.to_json())

    async def on_kill(self) -> None:
        """The user ended the deferred task: kill its driver, as the operator's on_kill does."""
        if not self.cancel_on_kill:
            self.log.info("cancel_on_kill is off: driver %s keeps running", self.driver)
            return
        try:
            async with await self._client() as client:
                status = await client.kill_driver(self.driver)
        except SubmitterError as e:
            self.log.warning("could not kill driver %s: %s", self.driver, e)
            return
        self.log.info("%s", describe_kill(self.driver, status))
