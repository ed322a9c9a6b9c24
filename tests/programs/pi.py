"""Estimates pi with Spark: the PySpark job the end-to-end tests run in real driver and executor
pods on kubesim.

    pi.py [PARTITIONS] [SAMPLES_PER_PARTITION]

Each partition draws from a generator seeded with its own index, so the estimate is the same
however the tasks are scheduled. The driver prints one line with the estimate and the host names
the tasks ran on (in a pod, its name), e.g.

    pi-result pi=3.141880 hits=314188 samples=400000 hosts=pi-exec-1
"""

import random
import socket
import sys

from pyspark import SparkContext


def hits_in(partition: int, samples: int) -> int:
    """How many of `samples` seeded random points in the square fall inside the unit circle."""
    rng = random.Random(partition)
    hits = 0
    for _ in range(samples):
        x = rng.random() * 2 - 1
        y = rng.random() * 2 - 1
        if x * x + y * y <= 1:
            hits += 1
    return hits


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    sc = SparkContext.getOrCreate()
    results = (
        sc.parallelize(range(partitions), partitions)
        .map(lambda p: (hits_in(p, samples), socket.gethostname()))
        .collect()
    )
    hits = sum(h for h, _ in results)
    total = partitions * samples
    hosts = ",".join(sorted({host for _, host in results}))
    print(f"pi-result pi={4.0 * hits / total:.6f} hits={hits} samples={total} hosts={hosts}", flush=True)
    sc.stop()


if __name__ == "__main__":
    main()
