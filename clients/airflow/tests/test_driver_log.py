"""The wait and the log follower (`driver_wait`) without Airflow, against the real submitter over
mTLS on kubesim: what reaches the task log, and what a resumed reader shows."""

from __future__ import annotations

import asyncio
import logging

from conftest import RUN_UNTIL_KILLED, Kubesim, Pki, Submitter, spark_args, split
from conftest import driver_line as line

from spark_submitter_provider.client import AsyncSubmitterClient, SubmitterConfig
from spark_submitter_provider.driver_wait import DriverLog, wait_for_driver
from spark_submitter_provider.log_position import LogCursor, LogPosition

LOG = logging.getLogger("test_driver_log")
#: Bound of each wait for the scripted driver's next line (it writes one a second).
LINE_TIMEOUT_S = 60


class Collected:
    """A sink that keeps what it is shown and lets a test wait for a line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.positions: list[LogPosition | None] = []
        self._changed = asyncio.Event()

    async def show(self, lines: list[str], position: LogPosition | None) -> None:
        self.lines += lines
        self.positions.append(position)
        self._changed.set()

    async def seen(self, text: str) -> None:
        async def until() -> None:
            while text not in self.lines:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(until(), LINE_TIMEOUT_S)


def config(submitter: Submitter, pki: Pki) -> SubmitterConfig:
    return SubmitterConfig(submitter.url, ca_cert=str(pki.ca), client_cert=str(pki.client_cert),
                           client_key=str(pki.client_key))


def submit(submitter: Submitter, namespace: str, submission_id: str) -> str:
    with submitter.client() as c:
        r = c.post("/api/v1/spark-submit", json={"submission_id": submission_id,
                                                 "spark_submit_args": spark_args(namespace, RUN_UNTIL_KILLED)})
    assert r.status_code == 201, r.text
    return f"{r.json()['namespace']}:{r.json()['driver_pod_name']}"


def test_the_log_reaches_the_sink_while_the_driver_runs_each_line_once_up_to_its_exit(
        submitter: Submitter, kubesim: Kubesim, pki: Pki, namespace: str):
    driver = submit(submitter, namespace, f"log-follow-{namespace}")

    async def scenario() -> tuple:
        sink = Collected()
        async with AsyncSubmitterClient(config(submitter, pki)) as client:
            driver_log = DriverLog(client, driver, LogCursor(), sink, LOG)
            waiting = asyncio.create_task(wait_for_driver(client, driver, driver_log=driver_log,
                                                          poll_interval=0.2, log=LOG))
            await sink.seen(line("running for 2s"))
            still_waiting = not waiting.done()
            await asyncio.to_thread(kubesim.kill_container, *split(driver), 0)
            return await waiting, sink, still_waiting

    status, sink, still_waiting = asyncio.run(scenario())
    assert still_waiting, "lines reach the sink before the driver ends"
    assert status.phase == "Succeeded"
    assert sink.lines[:3] == [line("started"), line("running for 1s"), line("running for 2s")]
    assert sink.lines[-1] == line("exited with code 0")
    assert len(sink.lines) == len(set(sink.lines)), sink.lines
    assert sink.positions[-1] is not None


def test_a_reader_resuming_from_a_position_shows_the_rest_and_nothing_twice(
        submitter: Submitter, kubesim: Kubesim, pki: Pki, namespace: str):
    driver = submit(submitter, namespace, f"log-resume-{namespace}")

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with AsyncSubmitterClient(config(submitter, pki)) as client:
            # A first reader stops in the middle (its worker died) ...
            first = Collected()
            first_log = DriverLog(client, driver, LogCursor(), first, LOG)
            following = asyncio.create_task(first_log.follow())
            await first.seen(line("running for 2s"))
            following.cancel()
            position = first_log.position
            # ... the driver goes on and ends while nobody reads ...
            await asyncio.to_thread(kubesim.kill_container, *split(driver), 0)
            # ... and the next reader starts from the position the first one kept.
            second = Collected()
            status = await wait_for_driver(client, driver, driver_log=DriverLog(
                client, driver, LogCursor(position), second, LOG), poll_interval=0.2, log=LOG)
            assert status is not None and status.phase == "Succeeded", status
            whole = Collected()
            await DriverLog(client, driver, LogCursor(), whole, LOG).read_rest()
            return first.lines, second.lines, whole.lines

    first, second, whole = asyncio.run(scenario())
    assert second, "the second reader showed the lines the first did not"
    assert first + second == whole, (first, second)
    assert whole[-1] == line("exited with code 0")
