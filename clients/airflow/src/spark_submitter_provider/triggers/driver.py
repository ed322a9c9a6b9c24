"""The deferrable wait: polls the submitter's status route until the driver is finished."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseTrigger, TriggerEvent

from spark_submitter_provider.client import RECONNECT, AsyncSubmitterClient, SubmitterError
from spark_submitter_provider.hooks.submitter import SparkSubmitterHook, config_from_connection

#: Event `status` values (the operator's `execute_complete` reads them).
FINISHED = "finished"  # the driver left Pending/Running; `driver_status` says how
LOST = "lost"  # the submitter knows no such driver (404)
ERROR = "error"  # the look-up itself failed; `fatal` says whether a retry can help


class SparkDriverTrigger(BaseTrigger):
    """Fires once the driver `namespace:pod` is no longer Pending or Running.

    Polls `GET /api/v1/drivers/{namespace}/{pod}` every `poll_interval` seconds. Each look-up
    already retries 500/503 and unreachable answers a few times; `max_consecutive_errors` failed
    look-ups in a row end the wait with a retryable error, so a submitter that stays down fails
    the try (and the next try reconnects) instead of waiting forever. A TLS or authorisation
    failure ends it at once.
    """

    def __init__(self, driver: str, conn_id: str = SparkSubmitterHook.default_conn_name,
                 poll_interval: float = 10.0, max_consecutive_errors: int = 30) -> None:
        super().__init__()
        self.driver = driver
        self.conn_id = conn_id
        self.poll_interval = poll_interval
        self.max_consecutive_errors = max_consecutive_errors

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"driver": self.driver, "conn_id": self.conn_id, "poll_interval": self.poll_interval,
             "max_consecutive_errors": self.max_consecutive_errors},
        )

    def _event(self, status: str, **fields: Any) -> TriggerEvent:
        return TriggerEvent({"status": status, "driver": self.driver, **fields})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            config = config_from_connection(await BaseHook.aget_connection(self.conn_id))
            client = AsyncSubmitterClient(config)
        except SubmitterError as e:
            yield self._event(ERROR, fatal=True, message=str(e))
            return
        async with client:
            errors = 0
            while True:
                try:
                    status = await client.driver_status(self.driver)
                except SubmitterError as e:
                    errors += 1
                    if not e.retryable or errors >= self.max_consecutive_errors:
                        yield self._event(ERROR, fatal=not e.retryable, message=str(e))
                        return
                    self.log.warning("status look-up of driver %s failed (%d in a row): %s",
                                     self.driver, errors, e)
                    await asyncio.sleep(self.poll_interval)
                    continue
                errors = 0
                if status is None:
                    yield self._event(LOST)
                    return
                if status.action != RECONNECT:
                    yield self._event(FINISHED, driver_status=status.to_json())
                    return
                self.log.info("polling driver %s: %s", self.driver, status.phase)
                await asyncio.sleep(self.poll_interval)
