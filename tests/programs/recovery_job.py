"""A staged PySpark job that resumes after its driver is replaced: the real-Spark fenced-restart
test's and `sandbox demo --spark`'s job.

    recovery_job.py STAGES TASK_SECONDS

Stage k sums the squares of range(k * 200000) in 4 tasks, each taking at least TASK_SECONDS (so a
driver can be killed in the middle of a stage). After each stage the driver commits a marker
through the recovery agent (docs/examples/spark_recovery.py, laid beside this file) whose payload
holds every result so far; a rerun restores the latest marker and skips the stages it records.
The results are the same however often the driver is replaced. The driver prints:

    recovery-restored epoch=E stage=S           S = 0 for a fresh start
    recovery-started stage=K epoch=E
    recovery-committed stage=K epoch=E result=R
    recovery-fenced stage=K epoch=E             a newer driver owns the application: exit 3
    recovery-result epoch=E results=R1,R2,...
"""

import sys
import time

from pyspark import SparkContext

from spark_recovery import Fenced, RecoveryClient

ROWS_PER_STAGE = 200_000
TASKS = 4


def squares(stage: int, task: int, seconds: float) -> int:
    """Task `task`'s share of stage `stage`: the sum of i*i over its slice of the stage's range."""
    time.sleep(seconds)
    n = stage * ROWS_PER_STAGE
    return sum(i * i for i in range(task, n, TASKS))


def say(line: str) -> None:
    print(line, flush=True)


def main() -> int:
    stages = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    recovery = RecoveryClient.from_env()
    marker = recovery.restore()
    results = {int(k): v for k, v in (marker.data()["results"].items() if marker else [])}
    done = marker.seq if marker else 0
    epoch = recovery.epoch
    say(f"recovery-restored epoch={epoch} stage={done}")
    sc = SparkContext.getOrCreate()
    for stage in range(done + 1, stages + 1):
        say(f"recovery-started stage={stage} epoch={epoch}")
        result = (
            sc.parallelize(range(TASKS), TASKS)
            .map(lambda task, stage=stage: squares(stage, task, seconds))
            .sum()
        )
        results[stage] = result
        try:
            recovery.commit(stage, {"results": {str(k): v for k, v in results.items()}})
        except Fenced:
            say(f"recovery-fenced stage={stage} epoch={epoch}")
            sc.stop()
            return 3
        say(f"recovery-committed stage={stage} epoch={epoch} result={result}")
    ordered = ",".join(str(results[k]) for k in sorted(results))
    say(f"recovery-result epoch={epoch} results={ordered}")
    sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
