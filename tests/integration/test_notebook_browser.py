"""The ``%lineage`` graph as a person sees it: a real kernel runs a small notebook (nbconvert's
ExecutePreprocessor), the notebook becomes HTML as JupyterLab lays it out, and headless Chromium, at a
1000 px wide window, measures the drawing (a script added to the page writes what it measured into the DOM,
which ``--dump-dom`` returns) and takes a screenshot.

The screenshot, the HTML and the executed notebook are kept under ``$SPARK_LINEAGE_TEST_ARTEFACTS`` (else the
test's temporary directory), and their path is printed. Chromium and Graphviz's ``dot`` come from Debian's
packages (scripts/test installs them); where they are missing the test is skipped, unless
``SPARK_LINEAGE_REQUIRE_BROWSER`` is set, when it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_lineage import notebook_graph

pytestmark = [pytest.mark.spark, pytest.mark.once]

WINDOW_PX = 1000
MIN_TEXT_PX = 10.0
REQUIRE_ENV = "SPARK_LINEAGE_REQUIRE_BROWSER"
ARTEFACTS_ENV = "SPARK_LINEAGE_TEST_ARTEFACTS"

# Added to the exported page: each drawing with nodes, inline or an image (JupyterLab's HTML shows SVG output
# as an <img>), with its box on the page and its smallest text in screen pixels: the font size in the SVG's
# own units times the scale the drawing is shown at (its shown width over its viewBox width).
MEASURE = """
<pre id="lineage-measure"></pre>
<script>
window.addEventListener("load", () => {
  const parse = (text) => new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  const shown = [
    ...[...document.querySelectorAll("svg")].map((svg) => [svg, svg]),
    ...[...document.querySelectorAll('img[src^="data:image/svg+xml"]')].map((img) => {
      const data = img.src.slice(img.src.indexOf(",") + 1);
      return [img, parse(img.src.includes(";base64,") ? atob(data) : decodeURIComponent(data))];
    }),
  ].filter(([, svg]) => svg.querySelector("g.node"));
  const drawings = shown.map(([element, svg]) => {
    const box = element.getBoundingClientRect();
    const scale = box.width / svg.viewBox.baseVal.width;
    const sizes = [...svg.querySelectorAll("text")].map((text) => parseFloat(text.getAttribute("font-size")));
    return {left: box.left, right: box.right, width: box.width, height: box.height,
            minFont: Math.min(...sizes) * scale, tag: element.tagName,
            jobs: svg.querySelectorAll("g.node.job").length, datasets: svg.querySelectorAll("g.node.dataset").length,
            edges: svg.querySelectorAll("g.edge").length};
  });
  document.getElementById("lineage-measure").textContent = JSON.stringify({
    drawings: drawings,
    pageWidth: document.documentElement.scrollWidth,
    pageHeight: document.documentElement.scrollHeight,
  });
});
</script>
"""


def pipeline_cells(data: Path) -> list[str]:
    """A notebook's cells: lineage on, a session, a two-step pipeline over long paths, then ``%lineage``."""
    orders, customers = data / "raw" / "orders.csv", data / "raw" / "customers.csv"
    clean, revenue = data / "warehouse" / "clean_orders", data / "warehouse" / "revenue_by_city"
    return [
        "%load_ext spark_lineage",
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()",
        # Given schemas spare reads of the files' first lines, which would be runs of their own.
        f"orders = spark.read.schema('id INT, customer INT, amount DOUBLE').csv({str(orders)!r})\n"
        f"orders.where('amount > 0').write.parquet({str(clean)!r})",
        f"customers = spark.read.schema('customer INT, city STRING').csv({str(customers)!r})\n"
        f"spark.read.parquet({str(clean)!r}).join(customers, 'customer').groupBy('city').sum('amount')"
        f".write.parquet({str(revenue)!r})",
        "%lineage",
    ]


def browser() -> str:
    """Chromium's command, or a skip (a failure under ``SPARK_LINEAGE_REQUIRE_BROWSER``) saying what is
    missing."""
    missing = []
    command = shutil.which("chromium") or shutil.which("chromium-browser")
    if command is None:
        missing.append("chromium (apt-get install chromium)")
    if not notebook_graph.dot_available():
        missing.append("Graphviz's dot and the graphviz package (apt-get install graphviz; pip install graphviz)")
    try:
        import nbconvert  # noqa: F401
    except ImportError:
        missing.append("nbconvert (pip install nbconvert)")
    if missing:
        reason = "the notebook browser test needs " + ", ".join(missing)
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{reason} ({REQUIRE_ENV} is set)")
        pytest.skip(reason)
    assert command is not None
    return command


def chromium(command: str, *arguments: str) -> str:
    flags = ["--headless", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    done = subprocess.run([command, *flags, *arguments], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done.stdout


def outputs_text(executed: Any) -> str:
    """Everything the cells printed or showed as text."""
    parts = []
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") + output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_lineage_graph_fits_a_notebook_and_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = browser()
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExecutePreprocessor

    artefacts = Path(os.environ.get(ARTEFACTS_ENV) or tmp_path)
    artefacts.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "analytics_team" / "quarterly_sales_reporting_pipeline"
    (data / "raw").mkdir(parents=True)
    (data / "raw" / "orders.csv").write_text("1,1,10.5\n2,2,99.0\n3,1,-1.0\n")
    (data / "raw" / "customers.csv").write_text("1,paris\n2,oslo\n")
    # The kernel inherits this environment: no OpenLineage configuration, so events go to the console.
    for name in [name for name in os.environ if name.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "Lineage Graph.ipynb"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.chdir(tmp_path)

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in pipeline_cells(data)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ExecutePreprocessor(timeout=300, kernel_name="python3").preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    nbformat.write(notebook, artefacts / "lineage_graph.ipynb")

    printed = outputs_text(notebook)
    assert "spark_lineage: lineage on from the next SparkSession; events go to the console" in printed
    # Each step's line prints under the cell that ran it, and only there: one line per query.
    for index, written in ((2, data / "warehouse" / "clean_orders"), (3, data / "warehouse" / "revenue_by_city")):
        cell = "".join(output.get("text", "") for output in notebook.cells[index].outputs)
        assert re.fullmatch(rf"OpenLineage COMPLETE \S+ run \S+: .* -> {re.escape(str(written))}\n", cell), cell
    shown = next(output["data"] for output in notebook.cells[-1].outputs if output["output_type"] == "execute_result")
    assert "image/svg+xml" in shown

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    page = artefacts / "lineage_graph.html"
    page.write_text(body.replace("</body>", MEASURE + "</body>"), encoding="utf-8")

    window = f"--window-size={WINDOW_PX},1000"
    dom = chromium(command, window, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="lineage-measure">([^<]+)</pre>', dom)
    assert found, "the measuring script did not run"
    measured = json.loads(found.group(1).replace("&quot;", '"'))
    screenshot = artefacts / "lineage_graph.png"
    height = min(max(int(measured["pageHeight"]), 600), 6000)
    chromium(command, f"--window-size={WINDOW_PX},{height}", f"--screenshot={screenshot}", page.as_uri())
    print(f"\nscreenshot of the notebook at {WINDOW_PX} px: {screenshot}")

    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(measured["drawings"]) == 1, measured
    drawing = measured["drawings"][0]
    # the data flow: four datasets, and each job its edges (the join reads two inputs)
    assert (drawing["jobs"], drawing["datasets"], drawing["edges"]) == (0, 4, 3), drawing
    assert drawing["left"] >= 0 and drawing["right"] <= WINDOW_PX, f"the graph is wider than the window: {drawing}"
    assert measured["pageWidth"] <= WINDOW_PX, f"the page scrolls sideways: {measured}"
    assert drawing["minFont"] >= MIN_TEXT_PX, f"text drawn at {drawing['minFont']:.1f} px (see {screenshot})"
