"""Small helpers shared by the Python end-to-end tests against kubesim."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, TypeVar

from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]


def bin_dir() -> Path:
    """The folder of this build's binaries: BIN_DIR (scripts/test.sh sets it to the folder of its
    one build), else the release folder of the target directory."""
    if os.environ.get("BIN_DIR"):
        return Path(os.environ["BIN_DIR"])
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release"


def wait_for(
    probe: Callable[[], T],
    what: str,
    timeout: float = 10.0,
    interval: float = 0.1,
) -> T:
    """Calls `probe` until it returns something truthy, at most `timeout` seconds.

    Exceptions raised by the probe count as "not yet", and the last one is reported if the wait
    runs out. Returns the truthy value.
    """
    deadline = time.monotonic() + timeout
    last_value: object = None
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
            last_value, last_error = value, None
        except AssertionError as e:  # probes may assert
            last_error = e
        except ApiException as e:
            last_error = e
        if time.monotonic() >= deadline:
            detail = f"last error: {last_error!r}" if last_error else f"last value: {last_value!r}"
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} ({detail})")
        time.sleep(interval)


def status_of(call: Callable[[], object]) -> int | None:
    """Runs an API call and returns the HTTP status of the ApiException it raised (None if none)."""
    try:
        call()
    except ApiException as e:
        return e.status
    return None


def is_gone(read: Callable[[], object]) -> bool:
    """True when `read()` raises a 404 ApiException; other errors propagate."""
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def request_count(kubesim, verb: str, resource: str) -> int:
    """How many `verb` requests on `resource` kubesim has served (its `/sim/v1/requests`)."""
    rows = kubesim.sim("GET", "requests").json()
    return sum(r["count"] for r in rows if r["verb"] == verb and r["resource"] == resource)


def lag_watch(kubesim, resource: str, seconds: float) -> None:
    """Holds every client's next watch of `resource` for `seconds` and drops the open ones.

    Returns once a re-watch has reached kubesim (its request counter moved), so until the hold
    ends a watch cache of `resource` provably misses everything that happens next. The latency
    rule is removed again at once: only the watches already held keep their delay. A watch still
    held by an earlier call is not open yet, so the drop is repeated until its re-watch arrives.
    """
    before = request_count(kubesim, "watch", resource)
    kubesim.sim("POST", "latency",
                json={"verb": "watch", "resource": resource, "millis": int(seconds * 1000)})

    def dropped_and_rewatched() -> bool:
        kubesim.sim("POST", "watches/drop")
        return request_count(kubesim, "watch", resource) > before

    try:
        wait_for(dropped_and_rewatched, f"a re-watch of {resource}", timeout=seconds + 10, interval=0.2)
    finally:
        kubesim.sim("DELETE", "latency")
