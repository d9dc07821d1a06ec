"""openlineage-spark's keys beyond transport and column lineage: each one set, and its exact effect on the
events (validated against the OpenLineage schemas), or the warning that says it does not apply here."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.dataset.trimmers import DatasetNameTrimmer
from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde
from openlineage.client.transport.http import TokenProvider

from spark_lineage import analysis, naming
from spark_lineage.config import ConfigError, JobOwner, Tag, not_applicable_warnings, resolve, unknown_key_warnings
from spark_lineage.config.tags import parse_tags
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import ColumnLineage, ColumnSource, DatasetLineage, InputColumn, QueryLineage, Transformation
from spark_lineage.naming import DatasetIdentifier
from spark_lineage.plan import CapturedQuery, SessionInfo
from tests.support import validate_event

P = "spark.openlineage."
RUN_ID = "01930000-0000-7000-8000-000000000000"
SESSION = SessionInfo(app_name="orders app", app_id="local-1", spark_version="3.5.9", master="local[1]", warehouse=None)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))


def _events(
    conf: dict[str, str], lineage: QueryLineage | None = None, environ: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The application START and a query's START and COMPLETE, as JSON, each validated."""
    builder = EventBuilder(resolve(conf), SESSION, RUN_ID, environ or {})
    query = CapturedQuery(
        func_name="save",
        start_ms=1_000,
        end_ms=2_000,
        tree=None,
        executed_node="Execute InsertIntoHadoopFsRelationCommand",
    )
    events = [builder.application_event(RunState.START, 500), *builder.query_events(query, lineage or QueryLineage())]
    documents = [json.loads(Serde.to_json(event)) for event in events]
    for document in documents:
        validate_event(document)
    return documents


# --- job.owners.*, job.tags, run.tags -----------------------------------------------------------------------


def test_job_owners_become_the_ownership_job_facet_of_every_event() -> None:
    events = _events({P + "job.owners.team": "Data Platform", P + "job.owners.person": "jdoe"})
    for event in events:
        assert event["job"]["facets"]["ownership"]["owners"] == [
            {"name": "Data Platform", "type": "team"},
            {"name": "jdoe", "type": "person"},
        ]


def test_job_and_run_tags_become_tags_facets_with_the_references_defaults() -> None:
    events = _events({P + "job.tags": "key:value;label;another:tag:SPARK", P + "run.tags": "[env:prod;nightly]"})
    for event in events:
        assert event["job"]["facets"]["tags"]["tags"] == [
            {"key": "key", "value": "value", "source": "CONFIG"},
            {"key": "label", "value": "true", "source": "CONFIG"},
            {"key": "another", "value": "tag", "source": "SPARK"},
        ]
        assert event["run"]["facets"]["tags"]["tags"] == [
            {"key": "env", "value": "prod", "source": "CONFIG"},
            {"key": "nightly", "value": "true", "source": "CONFIG"},
        ]


def test_tags_are_parsed_as_the_reference_parses_them() -> None:
    # Escaped separators are literal; an empty key, value or source skips the tag; "key:" is a label (Java's
    # split drops the trailing empty part); parts beyond the third are dropped.
    assert parse_tags(r"a\:b:c\;d;:x;k::s;label:;  ;one:two:three:four") == (
        Tag("a:b", "c;d"),
        Tag("label"),
        Tag("one", "two", "three"),
    )
    assert parse_tags(["x:1", "y"]) == (Tag("x", "1"), Tag("y"))


def test_openlineage_python_adds_its_own_tags_to_ours() -> None:
    from spark_lineage.delivery import prepare

    config = resolve({P + "run.tags": "env:prod", P + "job.tags": "tier:gold"})
    client = config.create_client()
    client.config.tags.job = {"owner_team": "lineage"}
    event = EventBuilder(config, SESSION, RUN_ID, {}).application_event(RunState.START, 500)
    prepared = json.loads(Serde.to_json(prepare(client, event)))
    validate_event(prepared)
    assert [t["key"] for t in prepared["run"]["facets"]["tags"]["tags"]] == ["env", "openlineage_client_version"]
    assert prepared["job"]["facets"]["tags"]["tags"] == [
        {"key": "tier", "value": "gold", "source": "CONFIG"},
        {"key": "owner_team", "value": "lineage", "source": "USER"},
    ]


# --- appName, overriddenAppName, applicationRunId, jobName.replaceDotWithUnderscore --------------------------


def test_overridden_app_name_is_the_other_spelling_of_app_name() -> None:
    assert _events({P + "overriddenAppName": "Nightly Orders"})[0]["job"]["name"] == "nightly_orders"
    assert resolve({P + "overriddenAppName": "b", P + "appName": "a"}).app_name == "a"


def test_application_run_id_is_the_application_runs_id_and_the_query_runs_parent() -> None:
    run_id = "0190f0e1-5c2b-7cc1-9f0e-3d0e2b6f1a2c"
    assert resolve({P + "applicationRunId": run_id.upper()}).application_run_id == run_id
    with pytest.raises(ConfigError, match=r"spark\.openlineage\.applicationRunId='nope' is not a UUID"):
        resolve({P + "applicationRunId": "nope"})


def test_replace_dot_with_underscore_changes_nothing_the_normalizer_left() -> None:
    # The reference replaces dots in the normalized plan-node part only, which has none: names are unchanged.
    lineage = QueryLineage(job_suffix="out.table")
    plain = _events({}, lineage)[1]["job"]["name"]
    replaced = _events({P + "jobName.replaceDotWithUnderscore": "true"}, lineage)[1]["job"]["name"]
    assert plain == replaced == "orders_app.execute_insert_into_hadoop_fs_relation_command.out_table"


# --- facets.custom_environment_variables ---------------------------------------------------------------------


def test_custom_environment_variables_become_the_environment_properties_run_facet() -> None:
    events = _events(
        {P + "facets.custom_environment_variables": "[CLUSTER;REGION;UNSET]"}, environ={"CLUSTER": "c1", "REGION": "eu"}
    )
    for event in events:
        facet = event["run"]["facets"]["environment-properties"]
        assert facet["environment-properties"] == {"CLUSTER": "c1", "REGION": "eu"}
    disabled = _events(
        {P + "facets.custom_environment_variables": "[CLUSTER]", P + "facets.environment-properties.disabled": "true"}
    )
    assert "environment-properties" not in disabled[0]["run"]["facets"]


# --- dataset.removePath.pattern, dataset.namespaceResolvers.* --------------------------------------------------


def _jdbc_to_files() -> QueryLineage:
    source = DatasetIdentifier("postgres://db-replica-2.internal:5432", "shop.public.orders")
    column = ColumnSource(InputColumn(source, "id"), (Transformation("DIRECT", "IDENTITY"),))
    output = DatasetLineage(
        DatasetIdentifier("s3://lake", "warehouse/orders/region/eu"),
        column_lineage=ColumnLineage(fields={"id": [column]}, dataset=[column]),
    )
    return QueryLineage(inputs=[DatasetLineage(source)], outputs=[output])


def test_remove_path_pattern_cuts_the_remove_group_from_dataset_names() -> None:
    conf = {P + "dataset.removePath.pattern": r"(.*)(?<remove>\/.*\/.*)"}
    query_complete = _events(conf, _jdbc_to_files())[2]
    assert [o["name"] for o in query_complete["outputs"]] == ["warehouse/orders"]
    # No "/x/y" after a first part in "shop.public.orders": the input keeps its name.
    assert [i["name"] for i in query_complete["inputs"]] == ["shop.public.orders"]


def test_remove_path_pattern_needs_a_remove_group() -> None:
    with pytest.raises(ConfigError, match=r"dataset\.removePath\.pattern='\(\.\*\)' has no named group remove"):
        resolve({P + "dataset.removePath.pattern": "(.*)"})


@pytest.mark.parametrize(
    ("settings", "namespace"),
    [
        ({"type": "hostList", "hosts": "[db-replica-1.internal;db-replica-2.internal]"}, "postgres://warehouse:5432"),
        (
            {"type": "hostList", "hosts": "[DB-REPLICA-2.internal]", "schema": "mysql"},
            "postgres://db-replica-2.internal:5432",
        ),
        ({"type": "pattern", "regex": r"db-replica-\d+\.internal"}, "postgres://warehouse:5432"),
        (
            {"type": "patternGroup", "regex": r"(?<cluster>db)-replica-\d+\.internal", "matchingGroup": "cluster"},
            "postgres://db:5432",
        ),
    ],
)
def test_namespace_resolvers_rename_namespaces_everywhere_they_name_the_dataset(
    settings: dict[str, str], namespace: str
) -> None:
    conf = {f"{P}dataset.namespaceResolvers.warehouse.{k}": v for k, v in settings.items()}
    complete = _events(conf, _jdbc_to_files())[2]
    (source,) = complete["inputs"]
    assert source["namespace"] == namespace
    assert source["facets"]["dataSource"] == {**source["facets"]["dataSource"], "name": namespace, "uri": namespace}
    lineage = complete["outputs"][0]["facets"]["columnLineage"]
    assert lineage["fields"]["id"]["inputFields"][0]["namespace"] == namespace
    assert lineage["dataset"][0]["namespace"] == namespace


def test_a_namespace_resolver_must_be_complete() -> None:
    with pytest.raises(ConfigError, match=r"namespaceResolvers\.w\.type='hostlist' is not a namespace resolver"):
        resolve({P + "dataset.namespaceResolvers.w.type": "hostlist"})
    with pytest.raises(ConfigError, match=r"namespaceResolvers\.w\.matchingGroup is required"):
        resolve(
            {P + "dataset.namespaceResolvers.w.type": "patternGroup", P + "dataset.namespaceResolvers.w.regex": "x"}
        )


# --- dataset.disabledTrimmers, dataset.extraTrimmers ---------------------------------------------------------


@pytest.fixture
def _default_trimmers() -> Any:
    yield
    naming.use_trimmers()


@pytest.mark.usefixtures("_default_trimmers")
def test_disabled_trimmers_take_the_java_or_the_python_class_name() -> None:
    assert naming.from_location("s3://b/events/dt=2024-01-01").name == "events"
    config = resolve(
        {P + "dataset.disabledTrimmers": "io.openlineage.client.dataset.partition.trimmer.KeyValueTrimmer"}
    )
    assert config.dataset_naming.disabled_trimmers == ("openlineage.client.dataset.trimmers.KeyValueTrimmer",)
    naming.use_trimmers(config.dataset_naming.disabled_trimmers)
    assert naming.from_location("s3://b/events/dt=2024-01-01").name == "events/dt=2024-01-01"
    assert naming.from_location("s3://b/events/20240101").name == "events"  # DateTrimmer still on


class UnderscoreSuffixTrimmer(DatasetNameTrimmer):
    """Drops a last part that starts with an underscore: a test's extra trimmer."""

    def trim(self, name: str) -> str:
        return self._remove_last_part(name) if self._get_last_part(name).startswith("_") else name


@pytest.mark.usefixtures("_default_trimmers")
def test_extra_trimmers_are_python_classes_and_a_java_one_is_an_error() -> None:
    path = f"{__name__}.UnderscoreSuffixTrimmer"
    config = resolve({P + "dataset.extraTrimmers": path})
    naming.use_trimmers(extra=config.dataset_naming.extra_trimmers)
    assert naming.from_location("s3://b/events/_staging").name == "events"
    with pytest.raises(
        ConfigError, match=r"dataset\.extraTrimmers='com\.acme\.MyTrimmer' cannot be imported \(a Java class"
    ):
        resolve({P + "dataset.extraTrimmers": "com.acme.MyTrimmer"})
    with pytest.raises(ConfigError, match=r"dataset\.disabledTrimmers: 'DateTrimmer' is not a built-in trimmer"):
        resolve({P + "dataset.disabledTrimmers": "DateTrimmer"})


# --- filter.allowedSparkNodes, filter.deniedSparkNodes ---------------------------------------------------------


COMMANDS = "org.apache.spark.sql.execution.datasources"


def test_allowed_and_denied_spark_nodes_change_which_plan_roots_are_reported() -> None:
    config = resolve(
        {
            P + "filter.allowedSparkNodes": "[org.apache.spark.sql.catalyst.plans.logical.Aggregate]",
            P + "filter.deniedSparkNodes": f"[{COMMANDS}.InsertIntoHadoopFsRelationCommand;Aggregate]",
        }
    )
    rules = {"filter_read_only": True, "allowed": config.allowed_spark_nodes, "denied": config.denied_spark_nodes}
    assert analysis.is_reported("Aggregate", "collect", **rules)  # allowed wins over denied, as in the reference
    assert not analysis.is_reported("InsertIntoHadoopFsRelationCommand", "save", **rules)
    assert not analysis.is_reported("Project", "collect", **rules)  # still filtered by default
    assert not analysis.is_reported("Aggregate", "collect", filter_read_only=True)


# --- transport.transformerClass, transport.auth.type=jwt, transport.sslContext.* -----------------------------


def test_transformer_class_is_a_python_path_and_a_java_class_is_an_error() -> None:
    base = {P + "transport.type": "transform", P + "transport.transport.type": "console"}
    module = "openlineage.client.transport.transform.transformers.job_namespace_replace_transformer"
    path = f"{module}.JobNamespaceReplaceTransformer"
    config = resolve({**base, P + "transport.transformerClass": path})
    assert config.transport is not None and config.transport["transformer_class"] == path
    with pytest.raises(
        ConfigError, match=r"transport\.transformerClass='io\.acme\.Redact' cannot be imported \(a Java class"
    ):
        resolve({**base, P + "transport.transformerClass": "io.acme.Redact"})


def test_jwt_auth_reaches_openlineage_python_with_the_references_keys() -> None:
    http = {P + "transport.type": "http", P + "transport.url": "http://marquez:5000"}
    config = resolve(
        {
            **http,
            P + "transport.auth.type": "jwt",
            P + "transport.auth.apiKey": "k",
            P + "transport.auth.tokenEndpoint": "https://auth.example.com/token",
            P + "transport.auth.tokenFields": "[token;access_token]",
        }
    )
    assert config.transport is not None
    assert config.transport["auth"]["tokenFields"] == ["token", "access_token"]
    assert type(config.create_client().transport.config.auth).__name__ == "JwtTokenProvider"
    with pytest.raises(ConfigError, match=r"transport\.auth\.tokenEndpoint is required when .*auth\.type=jwt"):
        resolve({**http, P + "transport.auth.type": "jwt", P + "transport.auth.apiKey": "k"})


class CountedTokenProvider(TokenProvider):
    """A user's own token provider whose constructor has an effect: it counts its constructions."""

    made = 0

    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        type(self).made += 1


def test_a_users_token_provider_is_checked_at_resolve_and_made_once_with_the_transport() -> None:
    http = {P + "transport.type": "http", P + "transport.url": "http://marquez:5000"}
    path = f"{__name__}.CountedTokenProvider"
    CountedTokenProvider.made = 0
    config = resolve({**http, P + "transport.auth.type": path})
    assert CountedTokenProvider.made == 0, "resolving the configuration made the provider"
    assert type(config.create_client().transport.config.auth) is CountedTokenProvider
    assert CountedTokenProvider.made == 1
    with pytest.raises(ConfigError, match=r"transport\.auth\.type='no\.such\.Provider' cannot be imported"):
        resolve({**http, P + "transport.auth.type": "no.such.Provider"})
    with pytest.raises(ConfigError, match=r"transport\.auth\.type='json\.dumps' is not a TokenProvider class"):
        resolve({**http, P + "transport.auth.type": "json.dumps"})


def test_ssl_context_pem_files_reach_openlineage_python_and_a_java_keystore_is_not_applicable() -> None:
    conf = {
        P + "transport.type": "http",
        P + "transport.url": "https://marquez:5000",
        P + "transport.sslContext.caCertPath": "/etc/ca.pem",
        P + "transport.sslContext.keyStorePath": "/etc/keystore.jks",
        P + "transport.sslContext.storePassword": "changeit",
    }
    config = resolve(conf)
    assert config.transport is not None and config.transport["sslContext"] == {"caCertPath": "/etc/ca.pem"}
    assert config.not_applicable_keys == ("transport.sslContext.keyStorePath", "transport.sslContext.storePassword")


# --- the keys that do not apply here ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("circuitBreaker.type", "guards the JVM"),
        ("timeout.buildDatasetsTimePercentage", "shares of a circuitBreaker timeout"),
        ("debugFacet", "facets.debug.disabled=false"),
        ("facets.debug.disabled", "describes the Java agent itself"),
        ("debug.smart", "no published schema"),
        ("facets.variables", "facets.custom_environment_variables"),
        ("metrics.type", "Micrometer"),
    ],
)
def test_keys_that_do_not_apply_are_warned_about_with_why(key: str, reason: str) -> None:
    config = resolve({P + key: "x"})
    assert config.unknown_keys == ()
    (warning,) = not_applicable_warnings(config)
    assert warning.startswith(f"{P}{key} is an openlineage-spark key that does not apply here, so it is ignored: ")
    assert reason in warning


def test_other_keys_are_still_unknown() -> None:
    config = resolve({P + "redact.pattern": "x", P + "circuitBreakers.type": "x"})
    assert config.not_applicable_keys == ()
    assert [w.split(" is ")[0] for w in unknown_key_warnings(config)] == [
        P + "circuitBreakers.type",
        P + "redact.pattern",
    ]


def test_enable_warns_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    from spark_lineage import activation

    config = resolve({P + "circuitBreaker.type": "java"})
    caplog.set_level(logging.WARNING, logger="spark_lineage")
    activation._warned.discard(not_applicable_warnings(config)[0])
    for _ in range(2):
        activation._warn_about_keys(config)
    assert [r.getMessage() for r in caplog.records] == ["spark_lineage: " + not_applicable_warnings(config)[0]]


def test_owners_and_dataset_settings_are_read_as_typed_settings() -> None:
    config = resolve(
        {
            P + "job.owners.team": "Data",
            P + "dataset.namespaceResolvers.w.type": "pattern",
            P + "dataset.namespaceResolvers.w.regex": "(?<h>x)",
        }
    )
    assert config.job_owners == (JobOwner("team", "Data"),)
    assert config.dataset_naming.namespace_resolvers[0].regex == "(?P<h>x)"


# --- both engines --------------------------------------------------------------------------------------------


def test_pyiceberg_events_carry_the_same_configured_facets_parent_and_root_as_sparks() -> None:
    """One implementation builds what every event carries (``RunEventFactory``): a pyiceberg commit's event and a
    Spark application's, under one configuration, agree on tags, owners, environment, parent, root and time."""
    from iceberg_facets.events import IcebergEventBuilder, RunIdentity
    from iceberg_facets.records import CommitRecord, SnapshotInfo, TableInfo

    parent_run, root_run = "0190f0e1-5c2b-7cc1-9f0e-3d0e2b6f1a2c", "0190f0e1-5c2b-7cc1-9f0e-3d0e2b6f1a2d"
    conf = {
        P + "job.tags": "tier:gold",
        P + "run.tags": "env:prod",
        P + "job.owners.team": "Data Platform",
        P + "facets.custom_environment_variables": "[CLUSTER]",
        P + "parentJobNamespace": "airflow",
        P + "parentJobName": "dag.task",
        P + "parentRunId": parent_run,
        P + "rootParentJobNamespace": "airflow",
        P + "rootParentJobName": "dag",
        P + "rootParentRunId": root_run,
        P + "namespace": "lake",
    }
    config = resolve(conf)
    spark = _events(conf, environ={"CLUSTER": "c1"})[0]
    table = TableInfo("cat", "SqlCatalog", {"uri": "sqlite:///c.db"}, "db.t", "file:/w/db/t")
    commit = CommitRecord(table, [SnapshotInfo(7, 1, "append", {})], 1, 3, 1_000, 1_003)
    builder = IcebergEventBuilder(config, "loader", "0.10.0", environ={"CLUSTER": "c1"})
    event = json.loads(Serde.to_json(builder.commit_event(commit, RunIdentity(RUN_ID, "loader.append.cat_db_t"))))
    validate_event(event)
    for key in ("tags", "environment-properties", "parent"):
        assert event["run"]["facets"][key] == spark["run"]["facets"][key], key
    for key in ("tags", "ownership"):
        assert event["job"]["facets"][key] == spark["job"]["facets"][key], key
    assert event["run"]["facets"]["parent"]["run"]["runId"] == parent_run
    assert event["run"]["facets"]["parent"]["root"]["run"]["runId"] == root_run
    assert event["job"]["namespace"] == spark["job"]["namespace"] == "lake"
    assert event["eventTime"] == "1970-01-01T00:00:01.003+00:00"
