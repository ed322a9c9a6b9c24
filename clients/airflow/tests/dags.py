"""The DAGs of the provider's end-to-end tests (copied into the test deployment's dags folder).

Each test triggers a run with `conf = {"args": [...spark-submit argv...]}`: the argument vector
(namespace, kubesim's scripted-container annotations) is the test's, the DAG only says how the
operator waits and retries.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from spark_submitter_provider.operators.spark_submit import SparkSubmitterOperator


def spark_dag(dag_id: str, **operator_kwargs) -> DAG:
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2025, 1, 1), catchup=False,
             render_template_as_native_obj=True, tags=["spark-submitter-test"]) as dag:
        SparkSubmitterOperator(
            task_id="spark_pi",
            spark_submit_args="{{ dag_run.conf['args'] }}",
            poll_interval=0.3,
            retry_delay=timedelta(seconds=1),
            **operator_kwargs,
        )
    return dag


# The worker polls; a killed worker is retried once.
worker_wait = spark_dag("spark_worker_wait", deferrable=False, retries=1)
# The same, for the driver that succeeds and is garbage-collected while no worker runs.
collected_driver = spark_dag("spark_collected_driver", deferrable=False, retries=1)
# The triggerer polls.
deferred_wait = spark_dag("spark_deferred_wait", deferrable=True, retries=0)
# A failing driver: the retry submits a new generation.
failing_driver = spark_dag("spark_failing_driver", deferrable=True, retries=1)
# A client certificate from a CA the submitter does not trust: retries must not be spent on it.
rogue_certificate = spark_dag("spark_rogue_certificate", conn_id="spark_submitter_rogue", retries=3)
# Tasks the user ends while they wait (cleared, marked failed): on_kill kills the driver.
killed_in_worker = spark_dag("spark_killed_in_worker", deferrable=False, retries=0)
killed_deferred = spark_dag("spark_killed_deferred", deferrable=True, retries=0)

DAG_COUNT = 7
