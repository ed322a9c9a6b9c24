"""Waiting for a driver, with its log followed into the task log: shared by the worker and the
trigger (both run it on asyncio; the worker in an event loop of its own).

The wait asks the driver's status; while it is Running, it follows the driver's log (one
`follow=true` stream, which the submitter ends when the driver container exits) instead of
polling, and asks the status again when the stream ends; while Pending, or when a stream cannot
be had, it polls every `poll_interval`. When the driver is finished it reads what is left of the
log (a driver that ended between polls, or while no try watched it), then answers the status.

The log is secondary: a log that cannot be read (429 `TOO_MANY_LOG_STREAMS`, a pod gone, a
dropped connection) is said once in the task log and tried again at the next poll; it never
fails the task. Lines are shown through a `LogSink` in batches: everything that came in since
the last batch, at most one batch every `batch_interval` seconds (the worker's sink writes its
position to the task state store before it shows a batch, and that write is what the interval
bounds). Memory: the backlog between the HTTP stream and the sink holds at most
`BACKLOG_BYTES` of lines (each at most `log_position.MAX_LINE_BYTES`); when it is full the
stream is not read, and the submitter and the API server wait. The log is never held whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from spark_submitter_provider.client import (
    RECONNECT,
    AsyncSubmitterClient,
    DriverStatus,
    SubmitterError,
    SubmitterRefused,
)
from spark_submitter_provider.log_position import (
    LineSplitter,
    LogCursor,
    LogLine,
    LogPosition,
    parse_line,
    since_seconds,
)

RUNNING = "Running"
#: Lines read and not shown yet, in bytes: what one batch can hold (about 4 MiB a second of log
#: in the worker, whose batches come at most once a second).
BACKLOG_BYTES = 4 * 1024 * 1024
#: A followed log that says nothing for this long is read anew (from its position), so a
#: connection that died without a word is noticed.
FOLLOW_READ_TIMEOUT_S = 120.0


class LogSink(Protocol):
    """Where the driver's new lines go, with the position after them."""

    async def show(self, lines: list[str], position: LogPosition | None) -> None: ...


class Logger(Protocol):
    def info(self, msg: str, *args: Any) -> None: ...

    def warning(self, msg: str, *args: Any) -> None: ...


#: Before each driver line in the task log, so it reads apart from the provider's own lines.
LINE_PREFIX = "[driver] "


class TaskLogSink:
    """Shows the driver's lines in a task's log; the position stays with the caller."""

    def __init__(self, log: Logger) -> None:
        self.log = log

    async def show(self, lines: list[str], position: LogPosition | None) -> None:
        for line in lines:
            self.log.info("%s%s", LINE_PREFIX, line)


@dataclass
class _End:
    """The reader is done: at the end of the log, or with the failure that ended it."""

    error: SubmitterError | None = None


class Backlog:
    """Lines read from the stream and not shown yet, bounded in bytes: the reader waits while it
    is full (one line larger than the bound still goes in alone)."""

    def __init__(self, max_bytes: int) -> None:
        self._items: deque[LogLine | _End] = deque()
        self._bytes = 0
        self._max = max_bytes
        self._changed = asyncio.Condition()

    async def put(self, item: LogLine | _End, size: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._bytes == 0 or self._bytes + size <= self._max)
            self._items.append(item)
            self._bytes += size
            self._changed.notify_all()

    async def wait(self) -> None:
        """Until something is there to take."""
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._items))

    async def take(self) -> list[LogLine | _End]:
        """Everything there is, at once."""
        async with self._changed:
            items = list(self._items)
            self._items.clear()
            self._bytes = 0
            self._changed.notify_all()
            return items


class DriverLog:
    """The log of one driver, shown from a position on, through the submitter's log route."""

    def __init__(self, client: AsyncSubmitterClient, driver: str, cursor: LogCursor, sink: LogSink,
                 log: Logger, batch_interval: float = 0.0) -> None:
        self.client = client
        self.driver = driver
        self.cursor = cursor
        self.sink = sink
        self.log = log
        self.batch_interval = batch_interval
        self._last_failure: str | None = None

    @property
    def position(self) -> LogPosition | None:
        return self.cursor.position

    async def follow(self) -> int:
        """Shows new lines while the driver writes them, until the stream ends; how many."""
        return await self._read(follow=True)

    async def read_rest(self) -> int:
        """Shows the lines not shown yet, up to the end of the log as it is now; how many."""
        return await self._read(follow=False)

    async def _read(self, follow: bool) -> int:
        self.cursor.restart()
        since = since_seconds(self.cursor.position, time.time_ns())
        backlog = Backlog(BACKLOG_BYTES)
        reader = asyncio.create_task(self._pump(backlog, follow, since))
        shown = 0
        last_batch = -self.batch_interval
        try:
            end: _End | None = None
            while end is None:
                await backlog.wait()
                # Lines that come while the last batch's interval runs out join this batch.
                await asyncio.sleep(max(last_batch + self.batch_interval - time.monotonic(), 0))
                new = []
                for item in await backlog.take():
                    if isinstance(item, _End):
                        end = item
                    elif self.cursor.admit(item):
                        new.append(item.text)
                if new:
                    last_batch = time.monotonic()
                    await self.sink.show(new, self.cursor.position)
                    shown += len(new)
            self._report(end.error)
            return shown
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _pump(self, backlog: Backlog, follow: bool, since: int | None) -> None:
        splitter = LineSplitter()
        try:
            async with self.client.driver_log(self.driver, follow=follow, since_seconds=since,
                                              read_timeout=FOLLOW_READ_TIMEOUT_S if follow else None) as chunks:
                async for chunk in chunks:
                    for raw in splitter.feed(chunk):
                        await backlog.put(parse_line(raw), len(raw))
            for raw in splitter.flush():
                await backlog.put(parse_line(raw), len(raw))
        except SubmitterError as e:
            await backlog.put(_End(e), 0)
            return
        await backlog.put(_End(), 0)

    def _report(self, error: SubmitterError | None) -> None:
        """Says a failure to read the log once, not at every poll while it lasts."""
        failure = None if error is None else _failure_kind(error)
        if error is not None and failure != self._last_failure:
            self.log.warning("the log of driver %s cannot be read: %s", self.driver, error)
        self._last_failure = failure


def _failure_kind(error: SubmitterError) -> str:
    if isinstance(error, SubmitterRefused):
        return f"{error.status} {error.error_code}"
    return type(error).__name__


async def wait_for_driver(client: AsyncSubmitterClient, driver: str, *, driver_log: DriverLog | None,
                          poll_interval: float, log: Logger, max_consecutive_errors: int = 1,
                          sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> DriverStatus | None:
    """Waits until the driver is no longer Pending or Running; its last status, or None when the
    submitter knows no such driver (404).

    A failed status look-up (after the client's own retries) ends the wait with its
    SubmitterError once `max_consecutive_errors` failed in a row, or at once when it is final.
    """
    errors = 0
    phase = None
    while True:
        try:
            status = await client.driver_status(driver)
        except SubmitterError as e:
            errors += 1
            if not e.retryable or errors >= max_consecutive_errors:
                raise
            log.warning("status look-up of driver %s failed (%d in a row): %s", driver, errors, e)
            await sleep(poll_interval)
            continue
        errors = 0
        if status is None:
            return None
        if status.phase != phase:
            phase = status.phase
            log.info("driver %s is %s", driver, phase)
        if status.action != RECONNECT:
            if driver_log is not None:
                await driver_log.read_rest()
            return status
        # A stream that showed lines and ended: the container may have exited, ask at once.
        if driver_log is not None and status.phase == RUNNING and await driver_log.follow() > 0:
            continue
        await sleep(poll_interval)
