"""A PySpark driver's client of the recovery agent (docs/recovery-agent.md). Standard library only.

The agent is a sidecar in the driver pod; the operator gives the driver its address in
SPARK_RECOVERY_URL. A driver restores the latest marker once at start, skips the stages it
records, and commits a marker after each stage whose output is durable:

    recovery = RecoveryClient.from_env()
    marker = recovery.restore()            # None for a fresh application
    ...
    recovery.commit(seq, {"stage": seq, "output": path})   # raises Fenced: stop at once

What each answer means (the table in docs/recovery-agent.md):

    200                 committed (also for the exact repeat of the latest marker)
    409 FENCED          a newer driver owns the application: `Fenced`, write nothing more
    409 STALE_MARKER    progress at least this far is already recorded: `commit` returns False
    503, unreachable    retried with bounded backoff, then `Unavailable`
    anything else       `RecoveryError` (a bug in the request, or unreadable stored progress)

Run as a script, it is a small staged PySpark job that resumes after a restart; this module
imports pyspark only there, so the client works without it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

URL_ENV = "SPARK_RECOVERY_URL"

# The agent refuses larger payloads (MAX_PAYLOAD_BYTES in operator/src/agent/state.rs).
MAX_PAYLOAD_BYTES = 64 * 1024


class RecoveryError(Exception):
    """The agent answered something the driver cannot continue from."""

    def __init__(self, status: int | None, code: str | None, body: Any, message: str | None = None):
        self.status = status
        self.code = code
        self.body = body
        super().__init__(message or f"agent answered {status} {code or ''}: {body}")


class Fenced(RecoveryError):
    """A newer epoch took over the application (or its progress now belongs to another object or
    run of it). Stop writing anything and exit non-zero."""

    @property
    def epoch(self) -> int | None:
        return self.body.get("epoch") if isinstance(self.body, dict) else None

    @property
    def current_epoch(self) -> int | None:
        return self.body.get("currentEpoch") if isinstance(self.body, dict) else None


class Unavailable(RecoveryError):
    """The agent or its store stayed unavailable for longer than the retry budget."""


@dataclass(frozen=True)
class Marker:
    """A committed progress marker."""

    epoch: int
    seq: int
    payload: str
    committed_at_ms: int

    def data(self) -> Any:
        """The payload parsed as JSON (what `commit` sends for a non-string payload)."""
        return json.loads(self.payload)


@dataclass(frozen=True)
class _Reply:
    status: int
    body: Any


class RecoveryClient:
    """The driver's side of the marker API.

    `max_wait_s` bounds how long one call keeps retrying 503 answers and connection failures;
    pauses start at `first_backoff_s` and double up to `max_backoff_s`.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        max_wait_s: float = 300.0,
        first_backoff_s: float = 0.1,
        max_backoff_s: float = 5.0,
    ):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_wait_s = max_wait_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        # Filled by `restore`.
        self.epoch: int | None = None
        self.restored_from_epoch: int | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> "RecoveryClient":
        url = os.environ.get(URL_ENV)
        if not url:
            raise RecoveryError(None, None, None, f"{URL_ENV} is not set: is recovery enabled for this application?")
        return cls(url, **kwargs)

    def restore(self) -> Marker | None:
        """The latest committed marker (None for a fresh application); waits until the agent is ready."""
        reply = self._call("GET", "/v1/marker")
        if reply.status != 200:
            raise RecoveryError(reply.status, _code(reply.body), reply.body)
        self.epoch = reply.body["epoch"]
        self.restored_from_epoch = reply.body["restoredFromEpoch"]
        m = reply.body["marker"]
        if m is None:
            return None
        return Marker(m["epoch"], m["seq"], m["payload"], m["committedAtMs"])

    def commit(self, seq: int, payload: Any) -> bool:
        """Commits marker `seq`. True when it is recorded by this call or an earlier retry of it;
        False when a marker at least as far (`seq` or higher) was already recorded. Raises
        `Fenced` when a newer driver owns the application.

        A non-string payload is sent as compact JSON with sorted keys, so a retry of the same
        value is the same text (the agent accepts an exact repeat).
        """
        text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, separators=(",", ":"))
        if len(text.encode()) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload of {len(text.encode())} bytes exceeds {MAX_PAYLOAD_BYTES}")
        reply = self._call("POST", "/v1/marker", {"seq": seq, "payload": text})
        code = _code(reply.body)
        if reply.status == 200:
            return True
        if reply.status == 409 and code == "FENCED":
            raise Fenced(reply.status, code, reply.body)
        if reply.status == 409 and code == "STALE_MARKER":
            return False
        raise RecoveryError(reply.status, code, reply.body)

    def _call(self, method: str, path: str, body: Any = None) -> _Reply:
        """One request, retried on 503 and on connection failures with bounded backoff."""
        deadline = time.monotonic() + self.max_wait_s
        pause = self.first_backoff_s
        while True:
            try:
                reply = self._once(method, path, body)
                if reply.status != 503:
                    return reply
                last: Any = reply.body
                status: int | None = 503
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                last, status = repr(e), None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unavailable(status, _code(last), last, f"{method} {path}: agent unavailable for {self.max_wait_s}s: {last}")
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, self.max_backoff_s)

    def _once(self, method: str, path: str, body: Any) -> _Reply:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return _Reply(response.status, json.loads(response.read() or b"null"))
        except urllib.error.HTTPError as e:
            # An answer with an error status: the agent's JSON envelope.
            raw = e.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            return _Reply(e.code, parsed)


def _code(body: Any) -> str | None:
    return body.get("error") if isinstance(body, dict) else None


# --------------------------------------------------------------------------------------------
# Example: a staged job that resumes after the last committed stage.
#
#   spark-submit ... spark_recovery.py s3a://bucket/input s3a://bucket/work
#
# Each stage writes to a path of its own stage and epoch, and the marker's payload names every
# output so far: a successor reads only outputs a marker points at, so a fenced zombie's late
# writes (to its own epoch's paths) are never read.


def _example_main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession, functions as F  # only the example needs pyspark

    source, work = argv[1], argv[2].rstrip("/")
    recovery = RecoveryClient.from_env()
    marker = recovery.restore()
    done = marker.seq if marker else 0
    outputs: dict[str, str] = dict(marker.data()["outputs"]) if marker else {}
    print(f"epoch {recovery.epoch}: resuming after stage {done} (restored from epoch {recovery.restored_from_epoch})")

    spark = SparkSession.builder.appName("staged-with-recovery").getOrCreate()
    stages = [
        ("clean", lambda: spark.read.json(source).dropna()),
        ("daily", lambda: spark.read.parquet(outputs["clean"]).groupBy("day").agg(F.count("*").alias("n"))),
        ("top", lambda: spark.read.parquet(outputs["daily"]).orderBy(F.desc("n")).limit(10)),
    ]
    for seq, (name, build) in enumerate(stages, start=1):
        if seq <= done:
            continue
        path = f"{work}/{name}/epoch={recovery.epoch}"
        build().write.mode("overwrite").parquet(path)
        outputs[name] = path
        try:
            recovery.commit(seq, {"stage": seq, "outputs": outputs})
        except Fenced as e:
            print(f"fenced by epoch {e.current_epoch} after stage {seq}; stopping", file=sys.stderr)
            spark.stop()
            return 3
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_example_main(sys.argv))
