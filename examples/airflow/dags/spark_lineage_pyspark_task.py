"""A DAG whose task is PySpark code (``@task.pyspark``), its lineage a child of the Airflow task's.

The provider injects nothing into the session a ``@task.pyspark`` task is given, so the task asks the
OpenLineage provider for what it would inject into a ``spark-submit`` (the task as the parent, and Airflow's
own HTTP transport) and hands it to ``spark_lineage.enable``, whose keyword arguments are the
``spark.openlineage.*`` keys without their prefix. See docs/airflow.md.
"""

import os
from typing import Any

import pendulum
from airflow.sdk import DAG, task

DATA = os.environ.get("SPARK_LINEAGE_EXAMPLE_DATA", "/tmp/spark-lineage-airflow-example")

with DAG(
    dag_id="spark_lineage_pyspark_task",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark-lineage"],
):

    @task.pyspark(conn_id="spark_local")
    def big_orders(spark: Any = None, **context: Any) -> None:
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
            inject_transport_information_into_spark_properties,
        )

        import spark_lineage

        conf = inject_parent_job_information_into_spark_properties({}, context)
        conf = inject_transport_information_into_spark_properties(conf, context)
        spark_lineage.enable(spark, **{key.removeprefix("spark.openlineage."): value for key, value in conf.items()})

        orders = spark.createDataFrame([(1, 12.5), (2, 30.0)], "order_id int, amount double")
        orders.where("amount > 20").write.mode("overwrite").parquet(f"{DATA}/big_orders")

    big_orders()
