"""The OpenLineage JSON Schemas vendored in tests/openlineage_spec: that they are what its README.md and SHA256SUMS
say, and that every schema URL our events name resolves in them, so the validation every other test does needs
nothing beyond the checkout."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from openlineage.client import generated
from openlineage.client.serde import Serde
from referencing.exceptions import Unresolvable

import spark_lineage.facets.iceberg
from spark_lineage.analysis import analyze
from spark_lineage.config import ColumnLineageConfig, LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import VENDORED_SPEC, facet_groups, schema_registry

PREFIX = "https://openlineage.io/spec/"
NOT_SCHEMAS = {"README.md", "LICENSE", "SHA256SUMS"}
REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "fixtures"
# Every folder of plans recorded on a real Spark session: one per fixture set and Spark line.
RECORDINGS = sorted(session.parent for session in FIXTURES.glob("*/spark-*/session.json"))


def _schema_files() -> dict[str, bytes]:
    return {
        file.relative_to(VENDORED_SPEC).as_posix(): file.read_bytes()
        for file in VENDORED_SPEC.rglob("*")
        if file.is_file() and file.name not in NOT_SCHEMAS
    }


def test_files_are_those_of_sha256sums() -> None:
    listed = {}
    for line in (VENDORED_SPEC / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split("  ", 1)
        listed[path] = digest
    assert {path: hashlib.sha256(content).hexdigest() for path, content in _schema_files().items()} == listed


def test_each_schema_sits_where_openlineage_publishes_it() -> None:
    for path, content in _schema_files().items():
        assert json.loads(content)["$id"] == PREFIX + path


def test_readme_tells_what_is_vendored() -> None:
    readme = (VENDORED_SPEC / "README.md").read_text()
    cores = re.search(r"Core spec versions: ([\d, -]+)\.", readme)
    facets = re.search(r"Facet schemas: (\d+),", readme)
    assert cores and facets, "README.md no longer says which core versions and how many facets are vendored"
    files = _schema_files()
    assert sorted(cores.group(1).split(", ")) == sorted(
        p.split("/")[0] for p in files if p.endswith("OpenLineage.json")
    )
    assert int(facets.group(1)) == sum(1 for p in files if p.startswith("facets/"))
    assert (VENDORED_SPEC / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]


def _unresolved(urls: set[str]) -> list[str]:
    """The URLs whose document is not vendored (by ``$id``), or whose fragment points at nothing in it."""
    missing = []
    for url in sorted(urls):
        try:
            schema_registry(VENDORED_SPEC).resolver().lookup(url)
        except Unresolvable:
            missing.append(url)
    return missing


def _recorded_events(recording: Path) -> list[dict[str, Any]]:
    """The events every query of a recording makes, with column lineage (its facet names a schema too)."""
    ctx = AnalysisContext(session=recorded_session(recording))
    builder = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000")
    events = []
    for plan in sorted(recording.glob("*.json")):
        if plan.name == "session.json":
            continue
        query = recorded_query(recording, plan.stem)
        events += [
            json.loads(Serde.to_json(e))
            for e in builder.query_events(query, analyze(query, ctx, ColumnLineageConfig()))
        ]
    return events


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_schema_urls_of_recorded_events_resolve(recording: Path) -> None:
    urls = set()
    for event in _recorded_events(recording):
        urls.add(event["schemaURL"])
        urls |= {facet["_schemaURL"] for _, facets in facet_groups(event) for facet in facets.values()}
    assert len(urls) > 3, "the recorded events should name the core schema and several facets"
    assert _unresolved(urls) == []


# Facet versions openlineage-python names that openlineage.io never published, so no event may carry them:
# openlineage-python 1.54 generates DataQualityMetricsDatasetFacet as 1-0-1 while OpenLineage's spec/ (through
# 8f02abfb) and the site stop at 1-0-0. This project emits no data quality facet (the test below checks that).
UNPUBLISHED = {
    "data_quality_metrics_dataset": "https://openlineage.io/spec/facets/1-0-1/DataQualityMetricsDatasetFacet.json",
}


def test_schema_urls_of_every_openlineage_python_facet_resolve() -> None:
    """Any facet of the installed openlineage-python, and our Iceberg facets, whether or not a recording has it:
    a facet this project starts to emit can not name a schema the tests would find missing."""
    urls: dict[str, str] = {}
    modules = [*_generated_modules(), spark_lineage.facets.iceberg]
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            get_schema = getattr(cls, "_get_schema", None)
            if callable(get_schema):
                urls[str(get_schema())] = module.__name__.rsplit(".", 1)[-1]
    assert len(urls) > 30
    missing = [url for url in _unresolved(set(urls)) if UNPUBLISHED.get(urls[url]) != url.split("#", 1)[0]]
    assert missing == []


def test_no_unpublished_facet_is_emitted() -> None:
    sources = [p.read_text() for package in ("spark_lineage", "iceberg_facets") for p in (REPO / package).rglob("*.py")]
    for module in UNPUBLISHED:
        assert not any(module in source for source in sources), f"{module} names a schema that was never published"


def _generated_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{generated.__name__}.{info.name}")
        for info in pkgutil.iter_modules(generated.__path__)
    ]
