"""A DAG that runs a PySpark job with ``spark-submit``, its lineage a child of the Airflow task's.

Nothing here is about lineage: with ``[openlineage] spark_inject_parent_job_info`` and
``spark_inject_transport_info`` on, the OpenLineage provider adds the task as the Spark application's parent,
and its own HTTP transport, to the ``--conf``s of every ``SparkSubmitOperator``; spark-lineage, installed in
the driver's Python, reads them. See docs/airflow.md.
"""

import os
from pathlib import Path

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

JOB = Path(__file__).resolve().parents[1] / "jobs" / "revenue_by_city.py"
DATA = os.environ.get("SPARK_LINEAGE_EXAMPLE_DATA", "/tmp/spark-lineage-airflow-example")

with DAG(
    dag_id="spark_lineage_submit",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark-lineage"],
):
    SparkSubmitOperator(
        task_id="revenue_by_city",
        application=str(JOB),
        application_args=[DATA],
        conn_id="spark_local",
        name="revenue_by_city",
    )
