"""Dataset and job naming, against the forms openlineage-spark produces."""

from __future__ import annotations

import pytest

from spark_lineage import naming
from spark_lineage.naming import DatasetIdentifier, TableName


@pytest.mark.parametrize(
    ("location", "namespace", "name"),
    [
        ("/home/test", "file", "/home/test"),
        ("file:/home/test", "file", "/home/test"),
        ("file:///home/test/", "file", "/home/test"),
        ("s3a://bucket/warehouse/t1", "s3://bucket", "warehouse/t1"),
        ("s3://bucket/key/", "s3://bucket", "key"),
        ("gs://bucket/a/b", "gs://bucket", "a/b"),
        ("hdfs://namenode:8020/data/t", "hdfs://namenode:8020", "/data/t"),
        ("abfss://container@account.dfs.core.windows.net/p/q", "abfss://container@account.dfs.core.windows.net", "p/q"),
        ("/data/events/dt=2024-01-01", "file", "/data/events"),
        ("/tmp/rdd_c/20251030", "file", "/tmp/rdd_c"),
    ],
)
def test_locations(location: str, namespace: str, name: str) -> None:
    assert naming.from_location(location) == DatasetIdentifier(namespace, name)


def test_warehouse_symlink_only_inside_the_warehouse() -> None:
    assert naming.warehouse_symlink("file:/tmp/warehouse/target", "file:/tmp/warehouse", "default", "target") == (
        TableName("file:/tmp/warehouse", "default.target", "TABLE")
    )
    assert naming.warehouse_symlink("/tmp/warehouse/db.db/t", "/tmp/warehouse/", "db", "t") == TableName(
        "file:/tmp/warehouse", "db.t"
    )
    assert naming.warehouse_symlink("file:/elsewhere/t", "file:/tmp/warehouse", "default", "t") is None
    assert naming.warehouse_symlink("file:/tmp/warehouse2/t", "file:/tmp/warehouse", "default", "t") is None


def test_default_table_location() -> None:
    assert naming.default_table_location("file:/wh", "default", "t") == "file:/wh/t"
    assert naming.default_table_location("/wh/", "sales", "t") == "file:/wh/sales.db/t"


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Open Lineage Integration HadoopFS relation", "open_lineage_integration_hadoop_fs_relation"),
        ("OLT-58", "olt_58"),
        ("Some job (Like from James)", "some_job_like_from_james"),
        ("Execute InsertIntoHadoopFsRelationCommand", "execute_insert_into_hadoop_fs_relation_command"),
        ("AdaptiveSparkPlan", "adaptive_spark_plan"),
        ("Café Ünïcode", "cafe_unicode"),
        ("", ""),
    ],
)
def test_job_name_normalizer(text: str, normalized: str) -> None:
    assert naming.normalize_job_name(text) == normalized


@pytest.mark.parametrize(
    ("name", "suffix"),
    [
        ("/tmp/warehouse/target", "warehouse_target"),
        ("/tmp/test_data/rdd_to_table/", "test_data_rdd_to_table"),
        ("/tmp/rdd_c/20251030", "tmp_rdd_c"),
        ("/target", "/target"),
        ("bucket-key", "bucket-key"),
    ],
)
def test_path_job_suffix(name: str, suffix: str) -> None:
    """Of a dataset's name, whose partition-like directories naming trimmed (the suffix does not trim again)."""
    assert naming.path_job_suffix(naming.trim_name(name)) == suffix


def test_input_directories() -> None:
    assert naming.input_directories(["/d/a.csv"], {"/d/a.csv"}) == ["/d/a.csv"]
    assert naming.input_directories(["/d/a.csv", "/d/b.csv", "/e"], {"/d/a.csv", "/d/b.csv"}) == ["/d", "/e"]


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("jdbc:sqlite:/abs/cat.db", "jdbc:sqlite:/abs/cat.db"),
        ("jdbc:sqlite:file:/abs/cat.db", "jdbc:sqlite:/abs/cat.db"),
        ("jdbc:sqlite:///abs/cat.db", "jdbc:sqlite:/abs/cat.db"),
        ("sqlite:////abs/cat.db", "jdbc:sqlite:/abs/cat.db"),
        ("sqlite:///relative/cat.db", "jdbc:sqlite:relative/cat.db"),
        ("postgresql+psycopg2://user:secret@db:5432/catalog", "jdbc:postgresql://db:5432/catalog"),
        ("jdbc:postgresql://db:5432/catalog?user=u&password=secret", "jdbc:postgresql://db:5432/catalog"),
        ("mysql+pymysql://u:p@db/catalog", "jdbc:mysql://db/catalog"),
    ],
)
def test_jdbc_catalog_uris_are_one_form_without_credentials(uri: str, canonical: str) -> None:
    assert naming.jdbc_uri(uri) == canonical


def test_a_pyiceberg_sql_catalog_is_the_jdbc_catalog_spark_sees_on_the_same_database() -> None:
    spark = naming.IcebergCatalog.from_spark_conf(
        "jcat",
        {
            "spark.sql.catalog.jcat": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.jcat.type": "jdbc",
            "spark.sql.catalog.jcat.uri": "jdbc:sqlite:/data/cat.db",
            "spark.sql.catalog.jcat.warehouse": "/data/wh",
        },
    )
    pyiceberg = naming.IcebergCatalog.from_pyiceberg(
        "jcat", "SqlCatalog", {"uri": "sqlite:////data/cat.db", "warehouse": "/data/wh"}
    )
    assert spark == pyiceberg == naming.IcebergCatalog("jcat", "jdbc", "/data/wh", "jdbc:sqlite:/data/cat.db")
    assert pyiceberg.symlink("db.t") == TableName("jdbc:sqlite:/data/cat.db", "db.t")


@pytest.mark.parametrize(
    ("class_name", "properties", "symlink_namespace"),
    [
        ("RestCatalog", {"uri": "http://rest:8181"}, "http://rest:8181"),
        ("HiveCatalog", {"uri": "thrift://metastore:9083"}, "hive://metastore:9083"),
        ("GlueCatalog", {}, None),
        ("InMemoryCatalog", {"warehouse": "/tmp/wh"}, None),
    ],
)
def test_pyiceberg_catalog_types(class_name: str, properties: dict[str, str], symlink_namespace: str | None) -> None:
    symlink = naming.IcebergCatalog.from_pyiceberg("c", class_name, properties).symlink("db.t")
    assert (symlink.namespace if symlink else None) == symlink_namespace


@pytest.mark.parametrize(
    ("servers", "namespace"),
    [
        ("broker1:9092,broker2:9092", "kafka://broker1:9092"),
        (" 127.0.0.1:29092 ", "kafka://127.0.0.1:29092"),
        ("SASL_SSL://kafka.prod:9093", "kafka://kafka.prod:9093"),
        ("broker1", "kafka://broker1:-1"),  # no port: the reference's URI parser says -1
        (None, "kafka://"),
        ("", "kafka://"),
    ],
)
def test_kafka_namespace_is_the_first_bootstrap_server(servers: str | None, namespace: str) -> None:
    assert naming.kafka_dataset(servers, "orders") == DatasetIdentifier(namespace, "orders")


@pytest.mark.parametrize(
    ("options", "topics"),
    [
        ({"subscribe": "orders"}, ["orders"]),
        ({"subscribe": "orders, payments"}, ["orders", "payments"]),
        ({"topic": "out"}, ["out"]),
        ({"assign": '{"a":[0,1],"b":[2]}'}, ["a", "b"]),
        ({"assign": "not json"}, []),
        ({"subscribepattern": "ord.*"}, []),
    ],
)
def test_kafka_option_topics(options: dict[str, str], topics: list[str]) -> None:
    assert naming.option_topics(options) == topics


def test_session_catalog_names_tables_in_the_metastore_with_hive_support() -> None:
    """openlineage-spark's order: ``spark.sql.hive.metastore.uris``, ``hive.metastore.uris``, then the Hadoop
    configuration's (``spark.hadoop.…``); the first URI of a list; and only when the session has Hive support."""
    hive = {"spark.sql.catalogImplementation": "hive"}
    cases = [
        ({**hive, "spark.sql.hive.metastore.uris": "thrift://ms1:9083,thrift://ms2:9083"}, "hive://ms1:9083"),
        (
            {**hive, "hive.metastore.uris": "thrift://ms:9083", "spark.hadoop.hive.metastore.uris": "thrift://x:1"},
            "hive://ms:9083",
        ),
        (
            {**hive, "spark.hadoop.hive.metastore.uris": "thrift://metastore.example:9083"},
            "hive://metastore.example:9083",
        ),
        ({"spark.sql.hive.metastore.uris": "thrift://ms:9083"}, None),
        (hive, None),
    ]
    for conf, metastore in cases:
        assert naming.SessionCatalog.from_spark_conf(conf, "file:/wh").metastore == metastore, conf
    catalog = naming.SessionCatalog.from_spark_conf(cases[2][0], "file:/wh")
    # In the metastore, a table is named wherever it lives; without one, only inside the warehouse.
    assert catalog.table_symlink("s3a://bucket/t", "sales", "t") == TableName(
        "hive://metastore.example:9083", "sales.t"
    )
    plain = naming.SessionCatalog.from_spark_conf({}, "/wh/")
    assert plain.table_symlink("file:/wh/t", "default", "t") == TableName("file:/wh", "default.t")
    assert plain.table_symlink("s3a://bucket/t", "default", "t") is None
    assert (plain.hive_support, plain.warehouse_uri) == (False, "file:/wh")
