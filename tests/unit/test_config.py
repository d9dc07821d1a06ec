"""Configuration precedence and validation, without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from openlineage.client.transport.console import ConsoleTransport
from openlineage.client.transport.file import FileTransport
from openlineage.client.transport.http import HttpTransport

from spark_lineage.config import ConfigError, is_disabled, resolve, unknown_key_warnings
from spark_lineage.config.readers import overrides as flatten_overrides


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml from the working directory
    monkeypatch.setenv("HOME", str(tmp_path))


def test_overrides_beat_spark_confs_beat_defaults() -> None:
    conf = {"spark.openlineage.namespace": "conf_ns", "spark.openlineage.appName": "conf app", "spark.master": "x"}
    config = resolve(conf, {"namespace": "override_ns"})
    assert (config.namespace, config.app_name) == ("override_ns", "conf app")
    assert resolve({}).namespace == "default"


def test_spark_transport_keys_become_an_openlineage_python_transport() -> None:
    conf = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": "http://marquez:5000",
        "spark.openlineage.transport.endpoint": "api/v1/lineage",
        "spark.openlineage.transport.timeoutInMillis": "2500",
        "spark.openlineage.transport.auth.type": "api_key",
        "spark.openlineage.transport.auth.apiKey": "secret",
        "spark.openlineage.transport.headers.X-Team": "data",
    }
    config = resolve(conf)
    assert config.transport == {
        "type": "http",
        "url": "http://marquez:5000",
        "endpoint": "api/v1/lineage",
        "timeout": 2.5,
        "auth": {"type": "api_key", "apiKey": "secret"},
        "custom_headers": {"X-Team": "data"},
    }
    transport = config.create_client().transport
    assert isinstance(transport, HttpTransport)
    assert transport.url == "http://marquez:5000"


def test_kafka_transport_keys_reach_openlineage_python_as_confluent_kafka_takes_them() -> None:
    prefix = "spark.openlineage.transport."
    conf = {
        f"{prefix}type": "kafka",
        f"{prefix}topicName": "lineage.events",
        f"{prefix}messageKey": "nightly.etl",
        f"{prefix}timeoutInMillis": "1500",
        f"{prefix}flush": "false",
        f"{prefix}properties.bootstrap.servers": "broker1:9092,broker2:9092",
        f"{prefix}properties.security.protocol": "SASL_SSL",
        f"{prefix}properties.sasl.mechanism": "PLAIN",
        f"{prefix}properties.sasl.username": "etl",
        f"{prefix}properties.sasl.password": "s3cret",
        f"{prefix}properties.acks": "all",
        f"{prefix}properties.max.in.flight.requests.per.connection": "1",
    }
    assert resolve(conf).transport == {
        "type": "kafka",
        "topic": "lineage.events",
        "messageKey": "nightly.etl",
        "timeout": 1.5,
        "flush": False,
        "config": {
            "bootstrap.servers": "broker1:9092,broker2:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "etl",
            "sasl.password": "s3cret",
            "acks": "all",
            "max.in.flight.requests.per.connection": "1",
        },
    }


def test_kafka_transport_from_overrides_nested_dotted_and_in_openlineage_pythons_spelling() -> None:
    expected = {"type": "kafka", "topic": "t", "config": {"bootstrap.servers": "b:9092", "client.id": "etl"}}
    nested = {"type": "kafka", "topicName": "t", "properties": {"bootstrap.servers": "b:9092", "client.id": "etl"}}
    assert resolve({}, {"transport": nested}).transport == expected
    dotted = {"transport.type": "kafka", "transport.topicName": "t", "transport.properties.bootstrap.servers": "b:9092"}
    assert resolve({}, {**dotted, "transport.properties.client.id": "etl"}).transport == expected
    python = {"type": "kafka", "topic": "t", "config": {"bootstrap.servers": "b:9092", "client.id": "etl"}}
    assert resolve({}, {"transport": python}).transport == expected
    with_timeout = resolve({}, {"transport": {**python, "timeout": "2.5", "message_key": "k"}}).transport
    assert with_timeout == {**expected, "timeout": 2.5, "message_key": "k"}


def test_a_kafka_transport_inside_a_composite_transport() -> None:
    prefix = "spark.openlineage.transport."
    config = resolve(
        {
            f"{prefix}type": "composite",
            f"{prefix}transports.events.type": "kafka",
            f"{prefix}transports.events.topicName": "lineage",
            f"{prefix}transports.events.properties.bootstrap.servers": "b:9092",
            f"{prefix}transports.events.properties.linger.ms": "0",
            f"{prefix}transports.local.type": "console",
        }
    )
    assert config.transport == {
        "type": "composite",
        "transports": {
            "events": {
                "type": "kafka",
                "topic": "lineage",
                "config": {"bootstrap.servers": "b:9092", "linger.ms": "0"},
            },
            "local": {"type": "console"},
        },
    }


def test_http_header_names_keep_their_dots_and_underscores() -> None:
    prefix = "spark.openlineage.transport."
    conf = {f"{prefix}type": "http", f"{prefix}url": "http://x", f"{prefix}headers.X-Api.Version": "2"}
    assert resolve(conf).transport == {"type": "http", "url": "http://x", "custom_headers": {"X-Api.Version": "2"}}
    overrides = {"transport.type": "http", "transport.url": "http://x", "transport.headers.X_Team.Name": "data"}
    assert resolve({}, overrides).transport == {
        "type": "http",
        "url": "http://x",
        "custom_headers": {"X_Team.Name": "data"},
    }
    nested = {"transport": {"type": "http", "url": "http://x", "headers": {"X_Team.Name": "data"}}}
    assert resolve({}, nested).transport == {
        "type": "http",
        "url": "http://x",
        "custom_headers": {"X_Team.Name": "data"},
    }


def test_file_transport_location_and_snake_case_overrides(tmp_path: Path) -> None:
    config = resolve({}, {"transport": {"type": "file", "location": str(tmp_path / "ol.json")}})
    assert config.transport == {"type": "file", "log_file_path": str(tmp_path / "ol.json"), "append": True}
    assert isinstance(config.create_client().transport, FileTransport)
    assert flatten_overrides({"parent_job_name": "a", "transport": {"retry": {"backoff_factor": 0}}}) == {
        "parentJobName": "a",
        "transport.retry.backoff_factor": 0,
    }, "openlineage-python's own transport settings are passed on as written"
    named = {"facets": {"spark_unknown": {"disabled": False}, "custom_environment_variables": "[HOME]"}}
    assert flatten_overrides(named) == {
        "facets.spark_unknown.disabled": False,
        "facets.custom_environment_variables": "[HOME]",
    }, "facets are named as events name them"
    assert resolve({}, named).facet_enabled("spark_unknown")
    retrying = resolve({}, {"transport": {"type": "http", "url": "http://x", "retry": {"backoff_factor": 0}}})
    assert retrying.transport == {"type": "http", "url": "http://x", "retry": {"backoff_factor": 0}}
    retrying.create_client()


def test_client_configuration_applies_when_spark_confs_name_no_transport(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = resolve({"spark.openlineage.namespace": "ns"})
    assert config.transport is None
    assert isinstance(config.create_client().transport, ConsoleTransport)  # layer 4

    monkeypatch.setenv("OPENLINEAGE_URL", "http://from-env:5000")
    assert isinstance(config.create_client().transport, HttpTransport)  # layer 3: simple env
    monkeypatch.delenv("OPENLINEAGE_URL")

    yml = tmp_path / "ol.yml"
    yml.write_text(f"transport:\n  type: file\n  log_file_path: {tmp_path / 'events.json'}\n  append: true\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(yml))
    assert isinstance(config.create_client().transport, FileTransport)  # layer 3: openlineage.yml

    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")
    spark_conf = resolve({"spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": "http://x"})
    assert isinstance(spark_conf.create_client().transport, HttpTransport)  # layer 2 beats layer 3


def test_facets_disabled_both_spellings() -> None:
    config = resolve(
        {
            "spark.openlineage.facets.disabled": "[spark_unknown;spark.logicalPlan]",
            "spark.openlineage.facets.spark_properties.disabled": "true",
            "spark.openlineage.facets.schema.disabled": "false",
        }
    )
    assert config.disabled_facets == frozenset({"spark_unknown", "spark.logicalPlan", "debug", "spark_properties"})
    assert config.facet_enabled("schema")


def test_facets_off_by_default_turn_on_with_disabled_false() -> None:
    """openlineage-spark 1.53 leaves ``spark_unknown``, ``spark.logicalPlan`` and ``debug`` out until
    ``facets.<name>.disabled=false``."""
    default = resolve({})
    assert not default.facet_enabled("spark.logicalPlan") and not default.facet_enabled("debug")
    assert default.facet_enabled("schema")
    on = resolve({"spark.openlineage.facets.spark.logicalPlan.disabled": "false"})
    assert on.facet_enabled("spark.logicalPlan")
    assert on.disabled_facets == frozenset({"spark_unknown", "debug"})
    assert not on.unknown_keys


def test_disabled_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not is_disabled({})
    assert is_disabled({"spark.openlineage.disabled": "true"})
    assert not is_disabled({"spark.openlineage.disabled": "true"}, {"disabled": False})
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "TRUE")
    assert is_disabled({})


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"transport.type": "kafkaa"}, "spark.openlineage.transport.type='kafkaa' is not a known transport; accepted"),
        ({"transport.endpoint": "api"}, "spark.openlineage.transport.type is missing; accepted values:"),
        ({"transport.type": "kafka"}, "spark.openlineage.transport.topicName is required for the kafka transport"),
        (
            {"transport.type": "kafka", "transport.topicName": "t"},
            "spark.openlineage.transport.properties.bootstrap.servers is required for the kafka transport",
        ),
        (
            {"transport.type": "kafka", "transport.topicName": "t", "transport.properties": "b:9092"},
            "spark.openlineage.transport.properties must be a mapping of Kafka producer settings",
        ),
        (
            {"transport.type": "http", "transport.url": "http://x", "transport.auth.type": "api_key"},
            "spark.openlineage.transport.auth.apiKey is required",
        ),
        ({"transport.type": "composite"}, "spark.openlineage.transport.transports.<name>.type is required"),
        (
            {"transport.type": "composite", "transport.transports.a.type": "nope"},
            "spark.openlineage.transport.transports.a.type='nope' is not a known transport",
        ),
        ({"python.shutdownTimeoutSeconds": "-1"}, "spark.openlineage.python.shutdownTimeoutSeconds='-1' is not valid"),
        (
            {"parentRunId": "not-a-uuid", "parentJobName": "j"},
            "spark.openlineage.parentRunId='not-a-uuid' is not a UUID",
        ),
        (
            {"python.filterReadOnlyActions": "sometimes"},
            "spark.openlineage.python.filterReadOnlyActions='sometimes' is not a boolean; accepted values: true, false",
        ),
        (
            {"columnLineage.datasetLineageEnabled": "maybe"},
            "spark.openlineage.columnLineage.datasetLineageEnabled='maybe' is not a boolean",
        ),
        (
            {"columnLineage.schemaSizeLimit": "lots"},
            "spark.openlineage.columnLineage.schemaSizeLimit='lots' is not valid; accepted values: integers >= 0",
        ),
        (
            {"python.columnLineage.budgetMillis": "-5"},
            "spark.openlineage.python.columnLineage.budgetMillis='-5' is not valid",
        ),
    ],
)
def test_invalid_values_name_the_key_and_what_it_accepts(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve({f"spark.openlineage.{k}": v for k, v in conf.items()})
    assert message in str(raised.value)


def test_accepted_transport_values_are_listed() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve({"spark.openlineage.transport.type": "nope"})
    for kind in ("http", "file", "console", "kafka", "composite"):
        assert kind in str(raised.value)


def test_composite_transport() -> None:
    config = resolve(
        {
            "spark.openlineage.transport.type": "composite",
            "spark.openlineage.transport.continueOnFailure": "true",
            "spark.openlineage.transport.transports.a.type": "console",
            "spark.openlineage.transport.transports.b.type": "file",
            "spark.openlineage.transport.transports.b.location": "/tmp/x.json",
        }
    )
    assert config.transport == {
        "type": "composite",
        "continue_on_failure": True,
        "transports": {
            "a": {"type": "console"},
            "b": {"type": "file", "log_file_path": "/tmp/x.json", "append": True},
        },
    }


def test_composite_transport_as_a_list_as_openlineage_python_spells_it(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    config = resolve(
        {},
        {"transport": {"type": "composite", "transports": [{"type": "console"}, {"type": "file", "location": events}]}},
    )
    assert config.transport == {
        "type": "composite",
        "transports": [{"type": "console"}, {"type": "file", "log_file_path": str(events), "append": True}],
    }
    assert type(config.create_client().transport).__name__ == "CompositeTransport"
    with pytest.raises(ConfigError, match=r"transport\.transports\[1\]\.location is required"):
        resolve({}, {"transport": {"type": "composite", "transports": [{"type": "console"}, {"type": "file"}]}})


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"python.shutdownTimeoutSeconds": "inf"}, "python.shutdownTimeoutSeconds='inf' is not valid"),
        ({"python.shutdownTimeoutSeconds": "nan"}, "python.shutdownTimeoutSeconds='nan' is not valid"),
        (
            {"transport.type": "http", "transport.url": "http://x", "transport.timeoutInMillis": "-5"},
            "spark.openlineage.transport.timeoutInMillis='-5' is not valid; accepted values: a finite number > 0",
        ),
        (
            {"transport.type": "http", "transport.url": "http://x", "transport.timeout": "inf"},
            "spark.openlineage.transport.timeout='inf' is not valid; accepted values: a finite number > 0",
        ),
        (
            {
                "transport.type": "kafka",
                "transport.topicName": "t",
                "transport.properties.bootstrap.servers": "b:9092",
                "transport.timeoutInMillis": "0",
            },
            "spark.openlineage.transport.timeoutInMillis='0' is not valid; accepted values: a finite number > 0",
        ),
        ({"python.spool.maxBytes": "-1"}, "spark.openlineage.python.spool.maxBytes='-1' is not valid"),
        ({"python.spool.maxBytes": "1e999"}, "spark.openlineage.python.spool.maxBytes='1e999' is not valid"),
        ({"python.spool.disabled": "perhaps"}, "spark.openlineage.python.spool.disabled='perhaps' is not a boolean"),
        (
            {"python.delivery.concurrency": "0"},
            "spark.openlineage.python.delivery.concurrency='0' is not valid; accepted values: integers >= 1.",
        ),
        (
            {"python.delivery.concurrency": "many"},
            "spark.openlineage.python.delivery.concurrency='many' is not valid; accepted values: integers >= 1.",
        ),
        (
            {"transport.type": "file", "transport.location": "/proc/no-such-dir/events.jsonl"},
            "spark.openlineage.transport.location='/proc/no-such-dir/events.jsonl': its directory cannot be created",
        ),
    ],
)
def test_values_that_cannot_work_are_refused_naming_the_key(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve({f"spark.openlineage.{k}": v for k, v in conf.items()})
    assert message in str(raised.value)


def test_file_transport_directory_is_created(tmp_path: Path) -> None:
    location = tmp_path / "not" / "yet" / "events.jsonl"
    resolve({"spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(location)})
    assert location.parent.is_dir()


def test_override_keys_may_carry_the_conf_prefix_and_errors_name_it_once() -> None:
    overrides = {"spark.openlineage.transport.type": "file", "spark.openlineage.transport.append": "maybe"}
    with pytest.raises(ConfigError) as raised:
        resolve({}, {**overrides, "spark.openlineage.transport.location": "/tmp/x.jsonl"})
    assert str(raised.value).startswith("spark.openlineage.transport.append='maybe' is not a boolean")


def test_unknown_keys_get_a_suggestion() -> None:
    from spark_lineage.config import unknown_key_warnings

    prefix = "spark.openlineage."
    config = resolve({f"{prefix}namespce": "x", f"{prefix}trasnport.url": "http://x", f"{prefix}zzz": "1"})
    assert unknown_key_warnings(config) == [
        f"{prefix}namespce is not a key spark_lineage knows: it is ignored; did you mean {prefix}namespace?",
        f"{prefix}trasnport.url is not a key spark_lineage knows: it is ignored; did you mean {prefix}transport.url?",
        f"{prefix}zzz is not a key spark_lineage knows: it is ignored",
    ]


def test_url_params_go_on_the_endpoint_where_openlineage_python_keeps_them() -> None:
    config = resolve(
        {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": "http://backend:5000/base/",
            "spark.openlineage.transport.urlParams.team": "data eng",
            "spark.openlineage.transport.urlParams.env": "prod",
        }
    )
    transport = config.create_client().transport
    assert isinstance(transport, HttpTransport)
    from urllib.parse import urljoin

    assert (
        urljoin(transport.url, transport.endpoint) == "http://backend:5000/base/api/v1/lineage?team=data+eng&env=prod"
    )


def test_spool_settings() -> None:
    config = resolve(
        {
            "spark.openlineage.python.spool.dir": "/var/spool/lineage",
            "spark.openlineage.python.spool.maxBytes": "1048576",
            "spark.openlineage.python.spool.disabled": "true",
        }
    )
    assert (config.spool_dir, config.spool_max_bytes, config.spool_disabled) == ("/var/spool/lineage", 1048576, True)
    assert resolve({}).spool_max_bytes == 256 * 1024 * 1024


def test_delivery_concurrency() -> None:
    assert resolve({"spark.openlineage.python.delivery.concurrency": "8"}).delivery_concurrency == 8
    assert resolve({}, {"python": {"delivery": {"concurrency": 2}}}).delivery_concurrency == 2
    assert resolve({}).delivery_concurrency == 4


def test_repr_of_the_settings_never_shows_the_api_key() -> None:
    config = resolve(
        {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": "http://x",
            "spark.openlineage.transport.auth.type": "api_key",
            "spark.openlineage.transport.auth.apiKey": "very-secret-key",
            "spark.openlineage.transport.headers.X-Token": "header-secret",
        }
    )
    assert "very-secret-key" not in repr(config) and "header-secret" not in repr(config)


def test_a_misspelt_transport_key_is_named_with_what_it_was_meant_to_be() -> None:
    """The job warns of a transport key its transport does not read, as ``doctor`` does; and when the
    misspelling is why a required key is missing, the refusal names both."""
    config = resolve(
        {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": "http://h:5000",
            "spark.openlineage.transport.timeoutInMilis": "500",
        }
    )
    assert unknown_key_warnings(config) == [
        "spark.openlineage.transport.timeoutInMilis is not a key the http transport reads: it is ignored; did you "
        "mean spark.openlineage.transport.timeoutInMillis?"
    ]
    with pytest.raises(ConfigError) as refused:
        resolve({"spark.openlineage.transport.type": "http", "spark.openlineage.transport.urll": "http://h:5000"})
    assert str(refused.value) == (
        "spark.openlineage.transport.url is required for the http transport, e.g. http://localhost:5000. Also: "
        "spark.openlineage.transport.urll is not a key the http transport reads: it is ignored; did you mean "
        "spark.openlineage.transport.url?"
    )
