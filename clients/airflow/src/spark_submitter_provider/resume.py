"""What a task try does with the driver of an earlier try: the pure part of resuming.

A task instance (dag_id, task_id, run_id, map_index) keeps one record in Airflow's task state
store, which outlives its tries:

    {"generation": 0, "submission_id": "airflow-…", "driver": "namespace:pod" | null,
     "phase": "Succeeded" | null, "log": {"at": "<timestamp>", "lines": 1} | null}

`log` is how far the task log has shown the driver's log (`log_position`), so that a later try
goes on from there instead of showing the same lines again.

The submission id is derived from the task instance and the generation, never from the try
number, so a try that dies anywhere between choosing the id and persisting the driver repeats
the same id and gets the same driver back (the submitter answers 200 `duplicate_submission`).
The generation only moves on when the table below says to resubmit: the old id names a finished
driver, and only a new id makes a new one.

    driver of the record (DriverStatus.action)   next try
    Pending / Running (Reconnect)                reconnect: wait for the same driver
    Succeeded (Done), also when garbage-collected done, without submitting
    Failed / Unknown (Resubmit)                  submit again, next generation
    not found (404)                              submit again, next generation
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from spark_submitter_provider.client import DONE, RECONNECT, DriverStatus
from spark_submitter_provider.log_position import LogPosition

#: The task state store key. Renaming it strands the records of tries in flight.
RECORD_KEY = "spark_submitter"

SUCCEEDED = "Succeeded"


def submission_id_for(dag_id: str, task_id: str, run_id: str, map_index: int, generation: int = 0,
                      base: str | None = None) -> str:
    """The deterministic submission id of a task instance's `generation`-th driver.

    `base` replaces the derived part when the DAG author chose an id. The try number is not an
    input: a retry must find the driver its predecessor submitted.
    """
    if base is None:
        key = "\0".join([dag_id, task_id, run_id, str(map_index)])
        base = "airflow-" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return base if generation == 0 else f"{base}-g{generation}"


@dataclass(frozen=True)
class Record:
    generation: int
    submission_id: str
    driver: str | None = None
    phase: str | None = None
    log: LogPosition | None = None

    @classmethod
    def from_store(cls, value: Any) -> Record | None:
        """The stored record, or None for none (or for one this version cannot read)."""
        if not isinstance(value, dict):
            return None
        generation, submission_id = value.get("generation"), value.get("submission_id")
        if not isinstance(generation, int) or not isinstance(submission_id, str):
            return None
        driver, phase = value.get("driver"), value.get("phase")
        driver = driver if isinstance(driver, str) else None
        return cls(generation, submission_id, driver, phase if isinstance(phase, str) else None,
                   # A position means nothing without the driver it is in.
                   LogPosition.from_store(value.get("log")) if driver else None)

    def to_store(self) -> dict[str, Any]:
        return {"generation": self.generation, "submission_id": self.submission_id,
                "driver": self.driver, "phase": self.phase,
                "log": self.log.to_store() if self.log else None}


@dataclass(frozen=True)
class Step:
    """What this try does: `submit` with `generation`, `wait` for `driver`, or `done`."""

    kind: Literal["submit", "wait", "done"]
    generation: int = 0
    driver: str | None = None
    why: str = ""


def needs_status(record: Record | None) -> bool:
    """Whether the decision needs the submitter's view of the recorded driver."""
    return record is not None and record.driver is not None and record.phase != SUCCEEDED


def next_step(record: Record | None, status: DriverStatus | None) -> Step:
    """The table above. `status` is the recorded driver's status (None: 404 or not asked)."""
    if record is None:
        return Step("submit", 0, why="first try of this task instance")
    if record.driver is None:
        return Step("submit", record.generation,
                    why=f"an earlier try chose submission id {record.submission_id} but recorded no "
                        f"driver; the same id returns its driver if it was created")
    if record.phase == SUCCEEDED:
        return Step("done", record.generation, record.driver,
                    why=f"driver {record.driver} succeeded in an earlier try")
    if status is None:
        return Step("submit", record.generation + 1,
                    why=f"the submitter knows no driver {record.driver} any more")
    if status.action == RECONNECT:
        return Step("wait", record.generation, record.driver,
                    why=f"driver {record.driver} is {status.phase}: reconnecting")
    if status.action == DONE:
        return Step("done", record.generation, record.driver,
                    why=f"driver {record.driver} is {status.phase}"
                        + (" (its pod was garbage-collected)" if status.pod_phase is None else ""))
    return Step("submit", record.generation + 1, why=f"{status.describe()}: submitting a new driver")
