"""Apache Airflow provider for the spark-submitter REST service (see docs/airflow.md)."""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """What Airflow's ProvidersManager reads through the `apache_airflow_provider` entry point."""
    return {
        "package-name": "airflow-provider-spark-submitter",
        "name": "Spark Submitter",
        "description": "Submit Spark applications through the spark-submitter REST service over mTLS, "
                       "show the driver's log in the task log, kill the driver when the task is killed, "
                       "and reconnect to the running driver after a crash or retry.",
        "versions": [__version__],
        "connection-types": [
            {
                "connection-type": "spark_submitter",
                "hook-class-name": "spark_submitter_provider.hooks.submitter.SparkSubmitterHook",
                "hook-name": "Spark Submitter",
            }
        ],
        "hooks": [
            {"integration-name": "Spark Submitter",
             "python-modules": ["spark_submitter_provider.hooks.submitter"]}
        ],
        "operators": [
            {"integration-name": "Spark Submitter",
             "python-modules": ["spark_submitter_provider.operators.spark_submit"]}
        ],
        "triggers": [
            {"integration-name": "Spark Submitter",
             "python-modules": ["spark_submitter_provider.triggers.driver"]}
        ],
    }
