"""One version and one producer for a release: the package, its metadata, pyproject.toml, CHANGELOG.md and
every event's ``producer`` agree (tests/integration/test_release.py builds and installs the release itself)."""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.facet_v2 import sql_job
from openlineage.client.serde import Serde

from iceberg_facets import OPTIONS
from spark_lineage import extras as extras_module
from spark_lineage._version import SOURCE_REPOSITORY, __version__
from spark_lineage.config import ConfigError, resolve, resolve_options
from spark_lineage.delivery import Delivery, FailoverSpool, create_client
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.events import EventBuilder
from spark_lineage.extras import install_hint
from spark_lineage.facets import PRODUCER
from spark_lineage.redaction import Redactor
from spark_lineage.worker import ErrorLog
from tests.fixtures.recorded import recorded_session
from tests.support import validate_event

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent.parent
PLANS = ROOT / "tests" / "fixtures" / "plans"
APP_RUN = "01930000-0000-7000-8000-000000000000"


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def _application_start(**overrides: Any) -> Any:
    """An application run's START, built by the events module from a recorded session (no JVM)."""
    directory = sorted(p for p in PLANS.iterdir() if p.is_dir())[-1]
    builder = EventBuilder(resolve({}, overrides), recorded_session(directory), APP_RUN)
    return builder.application_event(RunState.START, 1_700_000_000_000)


def test_the_version_is_one_everywhere() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    top = re.search(r"^## \[(\d[^]]*)\]", changelog, re.MULTILINE)
    assert top is not None, "CHANGELOG.md has no release entry"
    # pyproject.toml reads the version from the package (dynamic): that is what a build writes into the metadata
    assert "version" in _project()["dynamic"]
    # the installed metadata (an editable install is built once: reinstall after changing the version)
    assert __version__ == top.group(1) == version("spark-lineage")
    # the README's install line names the wheel a build of this version makes
    assert f"dist/spark_lineage-{__version__}-py3-none-any.whl[spark]" in (ROOT / "README.md").read_text()


def test_the_producer_is_the_source_of_this_release() -> None:
    assert _project()["urls"]["Source"] == SOURCE_REPOSITORY
    assert f"{SOURCE_REPOSITORY}/tree/{__version__}" == PRODUCER
    event = json.loads(Serde.to_json(_application_start()))
    validate_event(event)
    assert event["producer"] == PRODUCER
    assert event["producer"].endswith(f"/{__version__}")
    assert {facet["_producer"] for facet in event["run"]["facets"].values()} == {PRODUCER}


def test_a_configured_producer_names_every_event_and_facet_of_this_library() -> None:
    mine = "https://git.example.com/data-platform/spark-lineage-fork/tree/7"
    event = _application_start(python={"producer": mine})
    # a facet another producer made (here, as openlineage-python's client adds its own) keeps its producer
    event.job.facets["sql"] = sql_job.SQLJobFacet(query="SELECT 1", producer="https://example.com/other")
    sent = json.loads(to_payload(event, producer=mine).json)
    validate_event(sent)
    assert sent["producer"] == mine
    assert {facet["_producer"] for facet in sent["run"]["facets"].values()} == {mine}
    assert sent["job"]["facets"]["jobType"]["_producer"] == mine
    assert sent["job"]["facets"]["sql"]["_producer"] == "https://example.com/other"
    # the default leaves the JSON as openlineage-python writes it
    assert to_payload(event).json == to_payload(event, producer=PRODUCER).json == Serde.to_json(event)


def test_the_configured_producer_is_what_delivery_sends(tmp_path: Path) -> None:
    mine = "https://git.example.com/data-platform/spark-lineage-fork"
    events = tmp_path / "events.jsonl"
    overrides = {"python": {"producer": mine}, "transport": {"type": "file", "location": str(events)}}
    config = resolve({}, overrides)
    delivery = Delivery(
        create_client(config, Redactor()), FailoverSpool(None, 1 << 20), ErrorLog(), Redactor(), producer=mine
    )
    delivery.submit(_application_start(**overrides))
    assert delivery.close(10)
    (sent,) = [json.loads(line) for line in events.read_text().splitlines()]
    assert sent["producer"] == mine
    assert sent["run"]["facets"]["spark_applicationDetails"]["_producer"] == mine


@pytest.mark.parametrize("extra", ["spark", "kafka", "pyiceberg", "delta"])
def test_what_to_install_for_an_extra_is_its_packages(extra: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages that say what is missing name the extra's packages, which install however spark-lineage was
    installed (``spark-lineage[kafka]`` needs a package index that has spark-lineage)."""
    # the metadata a build of this pyproject.toml has (an editable install's is as old as the install)
    extras = _project()["optional-dependencies"]
    metadata = [f'{requirement}; extra == "{name}"' for name, listed in extras.items() for requirement in listed]
    monkeypatch.setattr(extras_module, "requires", lambda name: [*_project()["dependencies"], *metadata])
    hint = install_hint(extra)
    assert hint.startswith("pip install '") and hint.endswith(f'(spark-lineage\'s "{extra}" extra)')
    assert re.findall(r"'([^']+)'", hint.partition(" (")[0]) == extras[extra]
    assert install_hint("none-such") == "pip install '.[none-such]' from a clone of spark-lineage"


def test_the_producer_setting_is_an_absolute_uri() -> None:
    assert resolve({"spark.openlineage.python.producer": " https://example.com/p "}).producer == "https://example.com/p"
    assert resolve({}).producer is None
    assert resolve_options({"producer": "urn:x"}, OPTIONS, "iceberg_facets.enable()").producer == "urn:x"
    with pytest.raises(ConfigError, match=r"spark\.openlineage\.python\.producer='spark-lineage' is not valid"):
        resolve({"spark.openlineage.python.producer": "spark-lineage"})
