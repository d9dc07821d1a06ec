"""The README's first command: ``spark-lineage demo``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import validate_event

pytestmark = pytest.mark.spark


@pytest.mark.once
def test_demo_runs_and_summarizes_its_lineage(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "demo", "--dir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    events = [json.loads(line) for line in (workdir / "events.jsonl").read_text().splitlines()]
    for event in events:
        validate_event(event)
    assert [e["eventType"] for e in events if e["job"]["name"] == "demo_pipeline"] == ["START", "COMPLETE"]
    out = result.stdout
    assert (
        f"job demo/demo_pipeline.execute_insert_into_hadoop_fs_relation_command.clean_orders (COMPLETE)\n"
        f"    reads   file:{workdir}/raw/orders.csv\n"
        f"    writes  file:{workdir}/clean/orders  [4 rows," in out
    )
    assert (
        "      amount      <- orders.csv.amount (identity)\n"
        "      customer_id <- orders.csv.customer_id (identity)\n"
        "      order_id    <- orders.csv.order_id (identity)\n"
        "      (rows)      <- orders.csv.amount (filter), orders.csv.status (filter)\n" in out
    )
    assert "      revenue <- orders.amount (aggregation)\n" in out
    assert (
        f"    reads   file:{workdir}/clean/orders\n    reads   file:{workdir}/raw/customers.csv\n"
        f"    writes  file:{workdir}/warehouse/revenue_by_city  (table default.revenue_by_city)" in out
    )
    assert_readme_shows(out, workdir)


def assert_readme_shows(out: str, workdir: Path) -> None:
    """The README's sample output is the demo's on the PySpark it says pip resolves by default (the line this
    test runs on in CI): the same lines, but for the directory, the run id and the files' sizes."""
    import pyspark

    from tests.support import REPO_ROOT

    readme = (REPO_ROOT / "README.md").read_text()
    default = re.search(r"the newest PySpark pip resolves \(([\d.]+) today\)", readme)
    assert default is not None, "the README no longer says which PySpark pip resolves by default"
    if pyspark.__version__ != default.group(1):
        pytest.skip(f"the README shows PySpark {default.group(1)}'s output; this is {pyspark.__version__}")
    shown = readme.split("OpenLineage events written to /…/lineage-demo/events.jsonl\n", 1)[1].split("```", 1)[0]

    def normal(text: str) -> str:
        text = re.sub(r"run [0-9a-f-]{36}", "run <id>", text)
        return re.sub(r"\d+ bytes", "<n> bytes", text)

    printed = out.split(f"OpenLineage events written to {workdir}/events.jsonl\n", 1)[1]
    assert normal(printed.replace(str(workdir), "/…/lineage-demo")) == normal(shown)
