"""The pyiceberg quickstart of docs/iceberg.md (the README shows the same), run as a new user would run it, with
every event it writes validated."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT, validate_event


def _first_python_block(path: Path, heading: str) -> str:
    section = path.read_text().split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"{path.name}'s {heading!r} section has no Python example"
    return match.group(1)


def quickstart() -> str:
    return _first_python_block(REPO_ROOT / "docs" / "iceberg.md", "## Iceberg tables from pyiceberg")


def test_the_readme_shows_the_quickstart_the_docs_run() -> None:
    assert _first_python_block(REPO_ROOT / "README.md", "## From pyiceberg") == quickstart()


def test_the_quickstart_writes_the_events_it_shows(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    warehouse = tmp_path / "warehouse"
    script.write_text(quickstart().replace("/tmp/warehouse", str(warehouse)))
    assert len([line for line in script.read_text().splitlines() if line.strip()]) <= 11
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path, env=environment, timeout=120)

    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for event in events:
        validate_event(event)
    summary = subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "events", "events.jsonl"],
        check=True,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    ).stdout
    orders = f"file:{warehouse}/shop/orders  (table shop.orders)"
    assert summary.splitlines()[0] == "4 OpenLineage events read from events.jsonl"
    assert "job default/quickstart.create_table.local_shop_orders (COMPLETE)" in summary
    assert f"    writes  {orders}  [append: +3 -0 rows, 1 attempt(s), " in summary
    assert f"job default/daily_summary (COMPLETE)\n    reads   {orders}  [1 data files read, 0 skipped]" in summary
