"""Uses the greeting library (tests/programs/greeting) that Spark resolved from a Maven repository
for `--packages` (`spec.deps.packages`): the driver calls it through py4j, and the executors call
it from SQL's `reflect` on every row, which works only if the jar reached their class path too.

    packages_job.py [ROWS]

The driver prints one line, e.g.

    packages-result driver=hello driver from greeting 1.0.0 executors=hello 0 from greeting 1.0.0|...
"""

import sys

from pyspark.sql import SparkSession


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    spark = SparkSession.builder.getOrCreate()
    greeting = spark.sparkContext._jvm.org.example.greeting.Greeting
    on_driver = greeting.greet("driver")
    # The argument depends on the row, so the call cannot be folded into a constant on the driver.
    on_executors = [
        r[0]
        for r in spark.range(rows)
        .repartition(2)
        .selectExpr("reflect('org.example.greeting.Greeting', 'greet', cast(id as string)) AS g")
        .orderBy("g")
        .collect()
    ]
    print(f"packages-result driver={on_driver} executors={'|'.join(on_executors)}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
