"""A plain PySpark job, as Airflow's ``SparkSubmitOperator`` runs it: it never imports spark_lineage.

Lineage comes from configuration alone: the OpenLineage provider adds the Airflow task as the parent
(``spark.openlineage.parent*``) and its own transport (``spark.openlineage.transport.*``) to the
``spark-submit`` command, and spark-lineage, installed in the driver's Python, turns on for a session whose
configuration names a transport.

    spark-submit revenue_by_city.py <directory>
"""

import sys

from pyspark.sql import SparkSession


def main(base: str) -> None:
    spark = SparkSession.builder.appName("revenue_by_city").getOrCreate()
    orders = spark.createDataFrame(
        [(1, "paris", 12.5), (2, "oslo", 30.0), (3, "paris", 7.5)], "order_id int, city string, amount double"
    )
    orders.write.mode("overwrite").parquet(f"{base}/orders")
    revenue = spark.read.parquet(f"{base}/orders").groupBy("city").sum("amount")
    revenue.withColumnRenamed("sum(amount)", "revenue").write.mode("overwrite").parquet(f"{base}/revenue_by_city")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
