"""A Spark Connect client: pyspark's own (`SparkSession.builder.remote`), run in a pod of its
own against the server's Service (tests/tests/real_spark_connect.rs). Prints what it computed,
one `connect-...` line per query."""

import sys

from pyspark.sql import SparkSession


def main(url: str) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    print(f"connect-count {spark.range(100).count()}", flush=True)
    total = spark.sql("SELECT sum(id) AS total FROM range(1000)").collect()[0]["total"]
    print(f"connect-sum {total}", flush=True)
    # A shuffle: tasks on both sides of a stage boundary, so the executors do the work.
    buckets = sorted(
        (row["b"], row["n"])
        for row in spark.range(0, 1000, 1, 4).selectExpr("id % 3 AS b").groupBy("b").count()
        .withColumnRenamed("count", "n").collect()
    )
    print(f"connect-buckets {buckets}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
