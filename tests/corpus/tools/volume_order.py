#!/usr/bin/env python3
"""Records the order in which a Spark release's own `KubernetesVolumeUtils.parseVolumesWithPrefix`
returns driver volumes for random configurations, as test data for the builder's model of the
Scala collections behind it (submission/src/builder/volumes.rs reads
tests/corpus/volume-order/<release>.txt).

    javac -d /tmp/volume-order tests/corpus/tools/VolumeOrder.java
    python3 tests/corpus/tools/volume_order.py --spark-version 3.5.9 [--seed 1] [--count 250]

Needs that release's jars (default /opt/pyspark-<version>, see scripts/corpus.py) and Java 17.
Each configuration starts with `fill N`: N settings `spark.fill.<i>=<i>` set first (the conf's
size and content decide the order when few volume keys are set), then the volume settings
without the `spark.kubernetes.driver.volumes.` prefix, in the order they are set; `=> names`
is Spark's answer (`=> !Exception` when it refuses the configuration).
"""

from __future__ import annotations

import argparse
import glob
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "spark.kubernetes.driver.volumes."
NAMES = ["a", "b", "c", "data", "logs", "tmp", "cache", "x1", "x2", "spill", "out", "in", "scratch", "work", "home", "shared"]


def volume_lines(rng: random.Random, count: int, bare: bool) -> list[str]:
    lines = []
    for name in rng.sample(NAMES, count):
        kind = "emptyDir" if bare else rng.choice(["hostPath", "emptyDir", "nfs", "persistentVolumeClaim"])
        base = f"{kind}.{name}."
        lines.append(f"{base}mount.path=/{name}{rng.randint(0, 9)}")
        if bare:
            continue
        if rng.random() < 0.3:
            lines.append(f"{base}mount.readOnly={rng.choice(['true', 'false'])}")
        if rng.random() < 0.2:
            lines.append(f"{base}mount.subPath=s{rng.randint(0, 9)}")
        elif rng.random() < 0.1:
            lines.append(f"{base}mount.subPathExpr=$(POD_NAME)")
        if kind == "hostPath":
            lines.append(f"{base}options.path=/mnt/{name}")
            if rng.random() < 0.5:
                lines.append(f"{base}options.type={rng.choice(['Directory', 'Socket'])}")
        elif kind == "emptyDir":
            if rng.random() < 0.5:
                lines.append(f"{base}options.medium=Memory")
            if rng.random() < 0.5:
                lines.append(f"{base}options.sizeLimit={rng.choice(['1Gi', '2Gi', '512Mi'])}")
        elif kind == "nfs":
            lines.append(f"{base}options.path=/exports/{name}")
            lines.append(f"{base}options.server=nfs{rng.randint(1, 3)}.example.com")
        elif rng.random() < 0.5:
            lines.append(f"{base}options.claimName=OnDemand")
            lines.append(f"{base}options.storageClass={rng.choice(['standard', 'fast'])}")
            lines.append(f"{base}options.sizeLimit={rng.choice(['1Gi', '5Gi'])}")
            if rng.random() < 0.3:
                lines.append(f"{base}label.tier={rng.choice(['hot', 'cold'])}")
            if rng.random() < 0.2:
                lines.append(f"{base}annotation.backup=daily")
        else:
            lines.append(f"{base}options.claimName=claim-{name}")
    rng.shuffle(lines)
    return lines


def configurations(seed: int, count: int) -> list[tuple[int, list[str]]]:
    """Half mixed configurations of 1-9 volumes, half two to four bare emptyDirs (at most four
    keys: the conf's own hash order shows)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        bare = i % 2 == 1
        volumes = rng.randint(2, 4) if bare else rng.randint(1, 9)
        out.append((rng.randint(0, 50), volume_lines(rng, volumes, bare)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spark-version", required=True)
    parser.add_argument("--jars", help="the release's jars folder (default: its venv under /opt)")
    parser.add_argument("--classes", default="/tmp/volume-order", help="where VolumeOrder.class is")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=250)
    args = parser.parse_args()
    jars = args.jars or next(iter(glob.glob(f"/opt/pyspark-{args.spark_version}/lib/python3*/site-packages/pyspark/jars")), None)
    if jars is None:
        raise SystemExit(f"no jars for Spark {args.spark_version}: pass --jars")
    configs = configurations(args.seed, args.count)
    stdin = "\n\n".join(
        "\n".join([f"spark.fill.{i}={i}" for i in range(fill)] + [PREFIX + l for l in lines]) for fill, lines in configs
    ) + "\n"
    proc = subprocess.run(["java", "-cp", f"{args.classes}:{jars}/*", "VolumeOrder"], input=stdin, capture_output=True,
                          text=True, check=True, timeout=600)
    answers = proc.stdout.splitlines()
    if len(answers) != len(configs):
        raise SystemExit(f"{len(answers)} answers for {len(configs)} configurations:\n{proc.stderr[-2000:]}")
    out = [f"# Spark {args.spark_version}'s own parseVolumesWithPrefix; regenerate with tests/corpus/tools/volume_order.py"]
    for (fill, lines), answer in zip(configs, answers):
        out += [f"fill {fill}", *lines, f"=> {answer}", ""]
    target = ROOT / "tests" / "corpus" / "volume-order" / f"{args.spark_version}.txt"
    target.write_text("\n".join(out))
    print(f"{target}: {len(configs)} configurations")


if __name__ == "__main__":
    main()
