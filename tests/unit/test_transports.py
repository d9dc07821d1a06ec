"""The transport kinds (``spark_lineage.transports``): one support object per kind, its typed settings
openlineage-python's own, and the walks over composite and transform transports written once."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.transport import get_default_factory
from openlineage.client.transport.composite import CompositeConfig, CompositeTransport
from openlineage.client.transport.transport import Config, Transport

from spark_lineage import transports
from spark_lineage.delivery.transports import ReplaySecrets, make_transport, with_secrets
from spark_lineage.errors import ConfigError, DuplicateNameError
from spark_lineage.findings import INFO, OK, PROBLEM, Finding
from spark_lineage.redaction import Redactor
from spark_lineage.transports import ConfKeys, Destination, TransportKind

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "spark.openlineage.transport"


def test_each_built_in_kind_is_typed_by_openlineage_pythons_own_settings_class() -> None:
    factory_made = get_default_factory().transports  # type: ignore[attr-defined]
    for name in transports.KINDS:
        kind = transports.kind_named(name)
        assert kind.config_class is not None and issubclass(kind.config_class, Config), name
        made = factory_made[name]
        assert kind.config_class is made.config_class, f"{name}: {kind.config_class} is not {made.config_class}"
    assert sorted(transports.KINDS) == [
        "async_http", "composite", "console", "file", "http", "kafka", "noop", "transform",
    ]  # fmt: skip


def test_settings_are_translated_through_every_level_and_errors_name_the_key(tmp_path: Path) -> None:
    spec = {
        "type": "composite",
        "continueOnFailure": "false",
        "transports": {
            "backend": {"url": "http://h:5000", "timeoutInMillis": "2500", "headers": {"X-Team": "data"}},
            "wrapped": {
                "type": "transform",
                "transformerClass": "openlineage.client.transport.transform.transform.EventTransformer",
                "transport": {"type": "file", "location": str(tmp_path / "e.jsonl")},
            },
        },
    }
    assert transports.translate(spec, PREFIX) == {
        "type": "composite",
        "continue_on_failure": False,
        "transports": {
            "backend": {"type": "http", "url": "http://h:5000", "timeout": 2.5, "custom_headers": {"X-Team": "data"}},
            "wrapped": {
                "type": "transform",
                "transformer_class": "openlineage.client.transport.transform.transform.EventTransformer",
                "transport": {"type": "file", "log_file_path": str(tmp_path / "e.jsonl"), "append": True},
            },
        },
    }
    broken = {
        **spec,
        "transports": {
            "a": {
                "type": "transform",
                "transformerClass": spec["transports"]["wrapped"]["transformerClass"],
                "transport": {"type": "http"},
            }
        },
    }  # type: ignore[index]
    with pytest.raises(
        ConfigError, match=r"^spark\.openlineage\.transport\.transports\.a\.transport\.url is required "
    ):
        transports.translate(broken, PREFIX)
    listed = {"type": "composite", "transports": [{"type": "console"}, {"type": "kafka", "topicName": "t"}]}
    with pytest.raises(ConfigError, match=r"^spark\.openlineage\.transport\.transports\[1\]\.properties\.bootstrap"):
        transports.translate(listed, PREFIX)


def test_settings_the_typed_class_refuses_are_refused_with_the_key_before_any_event() -> None:
    with pytest.raises(ConfigError) as refused:
        transports.translate({"type": "http", "url": "http://h", "compression": "zip"}, f"{PREFIX}.transports.a")
    assert str(refused.value) == (
        "spark.openlineage.transport.transports.a: the http transport does not take these settings "
        "('zip' is not a valid HttpCompression)."
    )


def test_a_transport_tree_is_walked_depth_first(tmp_path: Path) -> None:
    file = {"type": "file", "log_file_path": str(tmp_path / "e"), "append": True}
    inner = {"type": "composite", "transports": [{"type": "console"}]}
    composite = CompositeTransport(
        CompositeConfig.from_dict({"transports": [{"type": "http", "url": "http://h"}, inner, file]})
    )
    assert [each.kind for each in transports.walk(composite)] == ["composite", "http", "composite", "console", "file"]
    first = next(iter(transports.walk(composite)))
    assert first is composite


def _nested(tmp_path: Path) -> Transport:
    return make_transport(
        {
            "type": "composite",
            "transports": [
                {
                    "type": "http",
                    "url": "http://user:passw0rd-long@h:5000",
                    "endpoint": "api/v1/lineage?code=s3cret-code",
                    "auth": {"type": "api_key", "apiKey": "k3y-abcdef"},
                    "custom_headers": {"X-Token": "t0ken-abcdef"},
                },
                {
                    "type": "transform",
                    "transformer_class": "openlineage.client.transport.transform.transform.EventTransformer",
                    "transport": {"type": "file", "log_file_path": str(tmp_path / "e.jsonl"), "append": True},
                },
            ],
        }
    )


def test_what_is_described_and_learned_reaches_inside_and_holds_no_secret(tmp_path: Path) -> None:
    transport = _nested(tmp_path)
    described = transports.describe(transport)
    assert described == Destination(
        f"composite(http http://h:5000/api/v1/lineage?code=*********(redacted), transform file {tmp_path}/e.jsonl)",
        {
            "type": "composite",
            "transports": [
                {
                    "type": "http",
                    "url": "http://h:5000",
                    "endpoint": "api/v1/lineage",
                    "timeout": 5.0,
                    "auth": {"type": "api_key"},
                    "urlParams": ["code"],
                    "headers": ["X-Token"],
                },
                {
                    "type": "transform",
                    "transport": {"type": "file", "log_file_path": f"{tmp_path}/e.jsonl", "append": True},
                },
            ],
        },
    )
    assert [kept["type"] for kept in transports.walk_settings(described.settings)] == [
        "composite", "http", "transform", "file",
    ]  # fmt: skip
    redactor = Redactor()
    transports.learn_secrets(redactor, transport)
    assert (
        redactor.text("passw0rd-long s3cret-code k3y-abcdef t0ken-abcdef h")
        == " ".join(["*********(redacted)"] * 4) + " h"
    )


def test_replay_puts_the_secrets_back_at_every_level(tmp_path: Path) -> None:
    kept = transports.describe(_nested(tmp_path)).settings
    secrets = ReplaySecrets(
        api_key="k3y-abcdef", url_params={"code": "s3cret-code"}, headers={"x-token": "t0ken-abcdef"}
    )
    assert secrets.missing(kept) == []
    http = with_secrets(kept, secrets)["transports"][0]
    assert http == {
        "type": "http",
        "url": "http://h:5000",
        "endpoint": "api/v1/lineage?code=s3cret-code",
        "timeout": 5.0,
        "auth": {"type": "api_key", "apiKey": "k3y-abcdef"},
        "custom_headers": {"X-Token": "t0ken-abcdef"},
    }
    assert ReplaySecrets().missing(kept) == [f"{PREFIX}.urlParams.code", f"{PREFIX}.headers.X-Token"]


def test_retries_are_left_to_the_spool_inside_composite_and_transform_transports(tmp_path: Path) -> None:
    transport = _nested(tmp_path)
    http = next(each for each in transports.walk(transport) if each.kind == "http")
    assert http.config.retry["total"] == 5  # type: ignore[attr-defined]  # openlineage-python's default
    transports.leave_retries_to_the_spool(transport)
    assert http.config.retry == transports.NO_RETRIES  # type: ignore[attr-defined]


def test_doctor_checks_each_part_by_the_keys_it_was_set_with(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    transport = make_transport(
        {
            "type": "composite",
            "transports": {
                "kept": {"type": "file", "log_file_path": str(tmp_path / "e.jsonl")},
                "lost": {"type": "file", "log_file_path": str(tmp_path / "a-file" / "e.jsonl")},
                "shown": {"type": "console"},
            },
        }
    )
    assert transports.check(transport, ConfKeys(PREFIX), probe=None) == [
        Finding(OK, f"backend: {tmp_path / 'e.jsonl'} can be written (a file was made in {tmp_path}, and removed)"),
        Finding(PROBLEM, f"backend: {tmp_path / 'a-file' / 'e.jsonl'} cannot be written: Not a directory"),
        Finding(INFO, "backend: nothing to check for a console transport"),
    ]
    composite = transports.kind_of(transport)
    inside = composite.children(transport)
    assert [composite.child_keys(ConfKeys(PREFIX), child, i).of("location") for i, child in enumerate(inside)] == [
        f"{PREFIX}.transports.{name}.location" for name in ("kept", "lost", "shown")
    ]


class _Mine(Transport):
    kind = "mine"

    def __init__(self, config: Config) -> None:
        self.config = config

    def emit(self, event: Any) -> None:
        return None


@pytest.fixture
def restored_kinds() -> Iterator[None]:
    saved = {name: transports.KINDS.get(name) for name in transports.KINDS}
    yield
    transports.KINDS._entries.clear()
    transports.KINDS._entries.update(saved)  # type: ignore[arg-type]


@pytest.mark.usefixtures("restored_kinds")
def test_a_kind_of_ones_own_serves_its_transports_and_a_taken_name_is_refused() -> None:
    mine = _Mine(Config())
    assert transports.describe(mine) == Destination(
        f"mine {__name__}._Mine", {"type": f"{__name__}._Mine"}
    )  # not known: named by its class

    @transports.register
    class MineKind(TransportKind):
        names = ("mine",)

        def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
            return Destination("mine somewhere", {"type": "mine"})

        def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
            return [Finding(OK, f"backend: mine answers ({keys.of('url')})")]

    assert transports.describe(mine) == Destination("mine somewhere", {"type": "mine"})
    assert transports.check(mine, ConfKeys(PREFIX), None) == [
        Finding(OK, "backend: mine answers (spark.openlineage.transport.url)")
    ]

    class OtherHttp(TransportKind):
        names = ("http",)

    with pytest.raises(DuplicateNameError, match=r"two transport kinds for 'http': spark_lineage\.transports\.http\."):
        transports.register(OtherHttp)
    assert transports.register(replace=True)(OtherHttp) is OtherHttp
    assert type(transports.kind_named("http")) is OtherHttp


def test_no_module_outside_the_transport_kinds_knows_a_kind_by_name() -> None:
    """What a kind is (``"composite"``, ``"kafka"``, ``"file"``…) is its support object's: every other module
    asks :mod:`spark_lineage.transports`. A kind compared by name elsewhere fails here, with where."""
    kinds = set(transports.KINDS)
    found = []
    for path in sorted([*(ROOT / "spark_lineage").rglob("*.py"), *(ROOT / "iceberg_facets").rglob("*.py")]):
        if "transports" in path.relative_to(ROOT).parts[1:-1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
                names += [
                    e.value
                    for c in node.comparators
                    if isinstance(c, (ast.Tuple, ast.List, ast.Set))
                    for e in c.elts
                    if isinstance(e, ast.Constant)
                ]
                if any(name in kinds for name in names) and "kind" in ast.unparse(node) + ast.unparse(node.left):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_a_job_says_once_where_a_url_that_holds_the_endpoint_sends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """openlineage-python joins url and endpoint: the job sends where it does, and says so once per process."""
    from openlineage.client import OpenLineageClient

    from spark_lineage.delivery import Delivery, FailoverSpool
    from spark_lineage.worker import ErrorLog

    url = "http://127.0.0.1:9/lineage-backend/api/v1/lineage"
    with caplog.at_level("WARNING", logger="spark_lineage"):
        for index in range(2):
            client = OpenLineageClient(transport=make_transport({"type": "http", "url": url}))
            delivery = Delivery(client, FailoverSpool(tmp_path / str(index)), ErrorLog(), Redactor())
            assert delivery.destination == "http http://127.0.0.1:9/lineage-backend/api/v1/api/v1/lineage"
            delivery.close(0)
    assert [record.getMessage() for record in caplog.records] == [
        f"spark_lineage: the url {url} ends with the endpoint (api/v1/lineage) already: openlineage-python joins "
        "the two, so events go to http://127.0.0.1:9/lineage-backend/api/v1/api/v1/lineage; give the url without "
        "it (http://127.0.0.1:9/lineage-backend)"
    ]
    assert transports.warnings(make_transport({"type": "http", "url": "http://h/lineage-backend"})) == []
