"""An Airflow-style client of the submitter that survives its own crash without submitting twice.

The pattern of Airflow's resumable SparkSubmitOperator (shared/seeds/001): submit, persist the
driver's `namespace:pod` id in a task store *before* polling, and on a retry read the saved id and
decide from the driver's state:

    driver state on retry   action
    Running / Pending       reconnect and keep polling the same driver
    Succeeded               done, without resubmitting (also when the pod was garbage-collected:
                            the submitter retains the success in Kubernetes for a window)
    Failed / Unknown        resubmit, with a NEW submission id
    NotFound (404)          resubmit, with a NEW submission id (the submitter answers 404 only
                            after reading the API server itself: a driver its cache has not
                            seen yet reads Pending, never NotFound)

The submitter reads the driver container's state (a sidecar holding the pod Running does not
fool it) and answers the action itself (`action`: Reconnect / Done / Resubmit); this client only
follows it. A new id on resubmission matters: the same id would return the finished driver.

Plain `requests`: mTLS with `cert=(client.crt, client.key)` and `verify=ca.crt`, or plain http
against `submitter serve --insecure-dev`.

Usage (a task run; run it again after a crash with the same --task-id and --store):

    python airflow_client.py --url http://127.0.0.1:8443 --store tasks.json --task-id pi \\
        -- --master k8s://https://kubernetes.default.svc:443 --deploy-mode cluster ...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

RECONNECT, DONE, RESUBMIT = "Reconnect", "Done", "Resubmit"


class SimulatedCrash(Exception):
    """Raised right after the driver id was persisted, as if the worker died there."""


class DriverIdError(ValueError):
    """A saved driver id is not `namespace:pod`; no request is made for it."""


# A namespace is a DNS label; a pod name a DNS subdomain (what Kubernetes accepts).
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_POD = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def split_driver_id(driver: str) -> tuple[str, str]:
    """`namespace:pod` as its two halves, or DriverIdError. A malformed id must never turn into
    a request whose 404 would read as "the driver is gone, resubmit"."""
    namespace, colon, pod = driver.partition(":")
    if (not colon or not _NAMESPACE.fullmatch(namespace) or not _POD.fullmatch(pod)
            or len(pod) > 253):
        raise DriverIdError(f"{driver!r} is not a namespace:pod driver id")
    return namespace, pod


class SubmitterError(Exception):
    """The submitter answered with its error envelope (or something else unexpected)."""

    def __init__(self, status: int, body: Any):
        self.status = status
        self.body = body
        code = body.get("error_code") if isinstance(body, dict) else None
        super().__init__(f"HTTP {status} {code or ''}: {body}")


class TaskStore:
    """A tiny JSON file of per-task state, written atomically (a crash never leaves half a file)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def get(self, task_id: str) -> dict[str, Any]:
        return dict(self._load().get(task_id, {}))

    def set(self, task_id: str, **values: Any) -> None:
        data = self._load()
        data.setdefault(task_id, {}).update(values)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tasks-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.path)


class Submitter:
    """The two calls this client needs: submit, and status by `namespace:pod`."""

    def __init__(self, url: str, ca: str | None = None, cert: str | None = None,
                 key: str | None = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        if cert and key:
            self.session.cert = (cert, key)
        if ca:
            self.session.verify = ca
        self.timeout = timeout

    def _send(self, method: str, path: str, **kwargs) -> requests.Response:
        # The submitter's own retry rule: 500 and 503 are safe to retry (same id, idempotent).
        for attempt in range(5):
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
            if response.status_code not in (500, 503) or attempt == 4:
                return response
            time.sleep(min(float(response.headers.get("Retry-After", "1")), 5.0))
        raise AssertionError("unreachable")

    def submit(self, submission_id: str, args: list[str]) -> dict[str, Any]:
        response = self._send("POST", "/api/v1/spark-submit",
                              json={"submission_id": submission_id, "spark_submit_args": args})
        if response.status_code not in (200, 201):
            raise SubmitterError(response.status_code, _body(response))
        return response.json()

    def driver_status(self, driver: str) -> dict[str, Any] | None:
        """The driver's status, or None when the submitter knows no such driver (404)."""
        namespace, pod = split_driver_id(driver)
        response = self._send("GET", f"/api/v1/drivers/{namespace}/{pod}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise SubmitterError(response.status_code, _body(response))
        return response.json()


def _body(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:200]


def action_for(status: dict[str, Any] | None) -> str:
    """The seed's table: a missing driver (404) is resubmitted like a failed one."""
    if status is None:
        return RESUBMIT
    return status["action"]


@dataclass
class Outcome:
    phase: str                     # the driver's last phase (or "NotFound")
    driver: str                    # namespace:pod of the driver that finished (or is polled)
    submissions: int               # how many submissions this run made
    events: list[str] = field(default_factory=list)


@dataclass
class ResumableSparkTask:
    """One task: `execute()` either resumes the saved driver or submits a new one."""

    task_id: str
    args: list[str]
    store: TaskStore
    submitter: Submitter
    poll_interval: float = 0.5
    timeout: float = 60.0
    events: list[str] = field(default_factory=list)

    def execute(self, crash_after_submit: bool = False) -> Outcome:
        submissions = 0
        saved = self.store.get(self.task_id)
        driver = saved.get("driver")
        if driver:
            status = self.submitter.driver_status(driver)
            action = action_for(status)
            phase = status["phase"] if status else "NotFound"
            self.events.append(f"retry:{phase}:{action}")
            if action == RECONNECT:
                self.events.append("reconnect")
                return self._poll(driver, submissions)
            if action == DONE:
                self.events.append("done-without-resubmit")
                return Outcome(phase, driver, submissions, self.events)
            self.events.append("resubmit")
        # A new id for a new driver; persisted before the request so that a crash in between
        # retries with the same id (idempotent) instead of creating a second driver.
        if saved.get("pending_submission_id") and not driver:
            submission_id = saved["pending_submission_id"]
        else:
            submission_id = str(uuid.uuid4())
        self.store.set(self.task_id, pending_submission_id=submission_id, driver=None)
        answer = self.submitter.submit(submission_id, self.args)
        submissions += 1
        driver = f"{answer['namespace']}:{answer['driver_pod_name']}"
        self.store.set(self.task_id, driver=driver, submission_id=submission_id,
                       pending_submission_id=None)
        self.events.append(f"submitted:{submission_id}:{driver}")
        if crash_after_submit:
            raise SimulatedCrash(driver)
        return self._poll(driver, submissions)

    def _poll(self, driver: str, submissions: int) -> Outcome:
        deadline = time.monotonic() + self.timeout
        while True:
            status = self.submitter.driver_status(driver)
            phase = status["phase"] if status else "NotFound"
            if action_for(status) != RECONNECT or time.monotonic() >= deadline:
                self.events.append(f"finished:{phase}")
                return Outcome(phase, driver, submissions, self.events)
            time.sleep(self.poll_interval)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SUBMITTER_URL", "http://127.0.0.1:8443"))
    parser.add_argument("--ca", default=os.environ.get("SUBMITTER_CA"))
    parser.add_argument("--cert", default=os.environ.get("SUBMITTER_CERT"))
    parser.add_argument("--key", default=os.environ.get("SUBMITTER_KEY"))
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--task-id", required=True)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--crash-after-submit", action="store_true",
                        help="exit right after persisting the driver id (a simulated crash)")
    parser.add_argument("spark_submit_args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    args = options.spark_submit_args
    if args and args[0] == "--":
        args = args[1:]
    task = ResumableSparkTask(
        task_id=options.task_id, args=args, store=TaskStore(options.store),
        submitter=Submitter(options.url, options.ca, options.cert, options.key),
        timeout=options.timeout,
    )
    try:
        outcome = task.execute(crash_after_submit=options.crash_after_submit)
    except SimulatedCrash as crash:
        print(f"simulated crash after submitting {crash}", file=sys.stderr)
        return 75
    print(json.dumps({"phase": outcome.phase, "driver": outcome.driver,
                      "submissions": outcome.submissions, "events": outcome.events}))
    return {"Succeeded": 0}.get(outcome.phase, 1)


if __name__ == "__main__":
    sys.exit(main())
