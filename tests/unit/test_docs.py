"""The documentation site's pages say what the code does: every configuration key is on the configuration page,
the README stays short and its links lead to pages that exist. ``scripts/test`` builds the site with
``mkdocs build --strict`` too, which fails on a broken link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_lineage.config import keys

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()


@pytest.mark.parametrize("key", keys.KNOWN)
def test_every_key_is_described_on_the_configuration_page(key: str) -> None:
    assert f"`{key}" in CONFIGURATION or f"{key}`" in CONFIGURATION, f"docs/configuration.md does not describe {key}"


def test_the_page_has_the_generated_table_of_defaults() -> None:
    assert "<!-- settings-table -->" in CONFIGURATION
    import importlib.util

    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "docs" / "hooks" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    table = hook.settings_table()
    assert "| `python.queueSize` | `1,000` |" in table
    assert "| `python.spool.dir` | unset |" in table
    assert table.count("\n") == len(keys.SETTINGS) + len(keys.COLUMN_LINEAGE) + 1


def test_the_readme_is_short_and_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    targets = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme)
    assert "docs/configuration.md" in targets
    assert [t for t in targets if not (ROOT / t).is_file()] == []


def test_every_page_is_in_the_sites_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []
