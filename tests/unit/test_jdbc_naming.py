"""JDBC tables as datasets: the namespace and name openlineage-spark 1.53 gives each URL form (checked against
its JdbcDatasetUtils), and no credential or connection parameter anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import ColumnLineageConfig, LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext
from spark_lineage.naming import DatasetIdentifier, jdbc_dataset
from spark_lineage.plan import CapturedQuery, SessionInfo
from tests.support import validate_event

AS_THE_REFERENCE_NAMES_THEM = [
    # PostgreSQL: postgres://host:port, the URL's database before the table's parts, no default schema added.
    ("jdbc:postgresql://host:5432/db?user=u&password=p", "schema.table", "postgres://host:5432", "db.schema.table"),
    ("jdbc:postgresql://host:5432/db?user=u&password=p", "table", "postgres://host:5432", "db.table"),
    ("jdbc:postgresql://host/db", "public.orders", "postgres://host:5432", "db.public.orders"),
    ("jdbc:postgresql://u:p@Host.Example.COM/DB", "Sch.T", "postgres://host.example.com:5432", "DB.Sch.T"),
    ("JDBC:PostgreSQL://HOST:5432/DB", "S.T", "postgres://host:5432", "DB.S.T"),
    ("jdbc:postgresql://host:5432", "t", "postgres://host:5432", "t"),
    ("jdbc:postgresql://host:5432/db?currentSchema=s", "t", "postgres://host:5432", "db.t"),
    ("jdbc:postgresql://[::1]:5433/db", "s.t", "postgres://[::1]:5433", "db.s.t"),
    ("jdbc:postgresql://h1:5432,h2/db", "s.t", "postgres://h1:5432,h2:5432", "db.s.t"),
    ("jdbc:postgresql://h1,h2/db?user=u&password=p", "s.t", "postgres://h1:5432,h2:5432", "db.s.t"),
    ("jdbc:postgresql://my_host:5432/db?user=u&password=p", "s.t", "postgresql://my_host:5432/db", "s.t"),
    (
        "jdbc:postgresql://hostname?ssl=true&applicationName=MyApp",
        "schema.table1",
        "postgres://hostname:5432",
        "schema.table1",
    ),
    # MySQL: the URL's database only before one-part tables.
    ("jdbc:mysql://host:3306/db", "t", "mysql://host:3306", "db.t"),
    ("jdbc:mysql://host:3306/db", "other.t", "mysql://host:3306", "other.t"),
    ("jdbc:mysql://host/db?user=u&password=p&useSSL=false", "t", "mysql://host:3306", "db.t"),
    ("jdbc:mysql://u:p@host/db", "t", "mysql://host:3306", "db.t"),
    ("jdbc:mysql:replication://h1,h2/db", "t", "mysql://h1:3306,h2:3306", "db.t"),
    ("jdbc:mysql+srv://username:pwd@domain.com:3307", "schema.table1", "mysql://domain.com:3307", "schema.table1"),
    (
        "jdbc:mysql://username:pwd@myhost1:1111,username:pwd@myhost2:2222",
        "schema.table1",
        "mysql://myhost1:1111,myhost2:2222",
        "schema.table1",
    ),
    ("jdbc:mariadb://host:3306/db", "t", "mariadb://host:3306", "db.t"),
    # SQLite: the database file is the namespace.
    ("jdbc:sqlite:/abs/path/file.db", "table", "sqlite:/abs/path/file.db", "table"),
    ("jdbc:sqlite:/abs/path/file.db?journal_mode=WAL", "t", "sqlite:/abs/path/file.db", "t"),
    ("jdbc:sqlite:file:///abs/path/file.db", "table", "sqlite:file:///abs/path/file.db", "table"),
    # SQL Server: databaseName from the URL, else from the connection's properties.
    ("jdbc:sqlserver://host:1433;databaseName=db", "dbo.t", "sqlserver://host:1433", "db.dbo.t"),
    ("jdbc:sqlserver://host:1433;databaseName=db;user=u;password=p", "dbo.t", "sqlserver://host:1433", "db.dbo.t"),
    ("jdbc:sqlserver://Host\\Inst:1433;database=db", "dbo.t", "sqlserver://host:1433/Inst", "db.dbo.t"),
    ("jdbc:sqlserver://;serverName=srv;portNumber=1444;databaseName=db", "dbo.t", "sqlserver://srv:1444", "db.dbo.t"),
    ("jdbc:jtds:sqlserver://host:1433/db", "dbo.t", "sqlserver://host:1433", "db.dbo.t"),
    (
        "jDBC:SQLSERVER://TEST.HOST.COM\\MYINSTANCE;DATABASENAME=MYDB",
        "SCHEMA.TABLE1",
        "sqlserver://test.host.com/MYINSTANCE",
        "MYDB.SCHEMA.TABLE1",
    ),
    # Oracle: the service or SID before the table's parts.
    ("jdbc:oracle:thin:@host:1521:sid", "schema.t", "oracle://host:1521", "sid.schema.t"),
    ("jdbc:oracle:thin:@//host:1521/service", "schema.t", "oracle://host:1521", "service.schema.t"),
    ("jdbc:oracle:thin:scott/tiger@//Host:1521/svc", "s.t", "oracle://host:1521", "svc.s.t"),
    ("jdbc:oracle:thin:@tcp://hostname", "schema.table1", "oracle://hostname:1521", "schema.table1"),
    (
        "jdbc:oracle:thin:@(DESCRIPTION=(ADDRESS_LIST=(ADDRESS=(PROTOCOL=tcp)(HOST=host1))"
        "(ADDRESS=(PROTOCOL=tcp)(HOST=host2)(PORT=1522)))(CONNECT_DATA=(SID=orcl)))",
        "schema.table1",
        "oracle://host1:1521,host2:1522",
        "orcl.schema.table1",
    ),
    (
        "jdbc:oracle:thin:@ldap://oid:5000/mydb1,cn=OracleContext,dc=myco,dc=com",
        "schema.table1",
        "oracle://oid:5000",
        "mydb1.schema.table1",
    ),
    # Others from the reference's list.
    ("jdbc:db2://host:50000/SAMPLE", "S.T", "db2://host:50000", "SAMPLE.S.T"),
    ("jdbc:teradata://host/DATABASE=db,DBS_PORT=1025,USER=u,PASSWORD=p", "t", "teradata://host:1025", "db.t"),
    (
        "jdbc:redshift://cluster.abc123.us-west-2.redshift.amazonaws.com:5439/dev?user=u&password=p",
        "public.t",
        "redshift://cluster.abc123.us-west-2.redshift.amazonaws.com:5439",
        "dev.public.t",
    ),
    ("jdbc:trino://host:8080/hive", "s.t", "trino://host:8080", "hive.s.t"),
    ("jdbc:clickhouse://host:8123/db", "t", "clickhouse://host:8123", "db.t"),
    ("jdbc:ch:https://host/db", "t", "clickhouse://host:8123", "db.t"),
    (
        "jdbc:cassandra://[::1]--127.0.0.1:9042--host1/keyspace",
        "table1",
        "cassandra://[::1]:9042,127.0.0.1:9042,host1:9042",
        "keyspace.table1",
    ),
    ("jdbc:vertica://host:5433/db", "s.t", "vertica://host:5433", "db.s.t"),
    ("jdbc:unknown://fred:sec%40ret@hostname", "schema.table1", "unknown://hostname", "schema.table1"),
    ("jdbc:h2:/abs/path/db;USER=sa;PASSWORD=x", "t", "h2:/abs/path/db", "t"),
]


@pytest.mark.parametrize(("url", "table", "namespace", "name"), AS_THE_REFERENCE_NAMES_THEM)
def test_named_as_the_reference_names_them(url: str, table: str, namespace: str, name: str) -> None:
    assert jdbc_dataset(url, table) == DatasetIdentifier(namespace, name)


BETTER_THAN_THE_REFERENCE = [
    # The reference keeps the password in the name (Db2's `:k=v;` properties, Databricks' `;PWD=`), and
    # non-credential parameters in the namespace; no parameter ever appears here.
    ("jdbc:db2://host/SAMPLE:user=u;password=p;", "S.T", "db2://host:6789", "SAMPLE.S.T"),
    (
        "jdbc:databricks://adb-1.azuredatabricks.net:443/default;transportMode=http;httpPath=/sql;UID=token;PWD=dapi123",
        "t",
        "databricks://adb-1.azuredatabricks.net:443",
        "default.t",
    ),
    ("jdbc:unknown://hostname;ssl=true;applicationName=MyApp;", "schema.table1", "unknown://hostname", "schema.table1"),
    ("jdbc:h2:mem:testdb;DB_CLOSE_DELAY=-1", "t", "h2:mem:testdb", "t"),
]


@pytest.mark.parametrize(("url", "table", "namespace", "name"), BETTER_THAN_THE_REFERENCE)
def test_no_parameter_or_secret_ever_appears(url: str, table: str, namespace: str, name: str) -> None:
    identifier = jdbc_dataset(url, table)
    assert identifier == DatasetIdentifier(namespace, name)
    for secret in ("password", "PWD", "dapi123", "user=", "UID"):
        assert secret not in identifier.namespace + identifier.name


def test_sql_server_takes_its_database_from_connection_properties() -> None:
    assert jdbc_dataset("jdbc:sqlserver://host:1433", "dbo.t", {"databaseName": "db2"}) == DatasetIdentifier(
        "sqlserver://host:1433", "db2.dbo.t"
    )
    assert jdbc_dataset("jdbc:sqlserver://host1;databaseName=db", "dbo.t", {"databaseName": "other"}).name == "db.dbo.t"


def test_derby_is_a_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DERBY_SYSTEM_HOME", "/some/path")
    assert jdbc_dataset("jdbc:derby:;databaseName=../parent/path", "schema.table1") == DatasetIdentifier(
        "file:/some/parent/path", "schema.table1"
    )


CREDENTIALED_URLS = [
    (
        "jdbc:postgresql://alice:s3cret@db.example.com:5432/shop?user=alice&password=s3cret",
        "postgres://db.example.com:5432",
    ),
    ("jdbc:mysql://alice:s3cret@db.example.com/shop?password=s3cret", "mysql://db.example.com:3306"),
    (
        "jdbc:sqlserver://db.example.com:1433;databaseName=shop;user=alice;password=s3cret",
        "sqlserver://db.example.com:1433",
    ),
]


@pytest.mark.parametrize(("url", "namespace"), CREDENTIALED_URLS)
@pytest.mark.parametrize("fixture", ["cl_jdbc_read_table", "cl_jdbc_write_append_and_overwrite-1"])
def test_no_credential_reaches_an_event(url: str, namespace: str, fixture: str) -> None:
    """A recorded JDBC read and JDBC save, their URL swapped for one that carries a user and a password: the
    events name the database, and neither the password nor the user appears anywhere in them."""
    plans = Path(__file__).parent.parent / "fixtures" / "plans" / "spark-3.5"
    recorded = (
        (plans / f"{fixture}.json")
        .read_text()
        .replace('"jdbc:sqlite:/tmp/spark-lineage-fixtures/parity/shop.db"', json.dumps(url))
    )
    assert "s3cret" in recorded
    query = CapturedQuery.from_dict(json.loads(recorded))
    session = SessionInfo("app", "local-1", "3.5.9", "local[1]", None)
    lineage = analyze(query, AnalysisContext(session=session), ColumnLineageConfig())
    events = EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").query_events(query, lineage)
    text = "".join(Serde.to_json(event) for event in events)
    for event in events:
        validate_event(json.loads(Serde.to_json(event)))
    assert "s3cret" not in text and "alice" not in text
    assert namespace in {d.identifier.namespace for d in [*lineage.inputs, *lineage.outputs]}
