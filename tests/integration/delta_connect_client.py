"""A Spark Connect client of the Delta application's server (``tests/integration/delta_job.py`` with
``--client``), whose server runs no lineage then: it saves to a Delta path with lineage of its own, from its
protos alone, for ``tests/integration/test_delta.py`` to compare with the server side's save of the same kind.

    python -m tests.integration.delta_connect_client SC_URL RECEIVER_URL BASE

Run by the client's own interpreter (PySpark's Connect client, no JVM); it imports nothing of the tests.
"""

from __future__ import annotations

import sys


def main(url: str, receiver: str, base: str) -> None:
    from pyspark.sql import SparkSession

    import spark_lineage

    spark = SparkSession.builder.remote(url).getOrCreate()
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver})
    source = spark.read.parquet(f"{base}/source")
    people = f"{base}/paths/client_people"
    source.write.format("delta").save(people)
    source.where("id > 1").write.format("delta").mode("append").save(people)
    assert handle.flush(60), "the client's events were not delivered"
    handle.disable(timeout=60)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
