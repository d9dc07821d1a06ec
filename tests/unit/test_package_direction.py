"""``iceberg_facets`` depends on ``spark_lineage``, never the reverse: checked in the source and in a fresh
interpreter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    """Every module a source file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_module_of_spark_lineage_imports_iceberg_facets() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imported_modules(path) if n.split(".")[0] == "iceberg_facets")
        for path in sorted((ROOT / "spark_lineage").rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_scan_sees_an_import_of_iceberg_facets(tmp_path: Path) -> None:
    """The check above can fail: an import in a function, and a from-import, are both seen."""
    source = tmp_path / "module.py"
    source.write_text("def f():\n    import iceberg_facets.runtime\nfrom iceberg_facets.facets import x\n")
    assert _imported_modules(source) == {"iceberg_facets.runtime", "iceberg_facets.facets"}


def _modules_after(statement: str) -> list[str]:
    """The top-level packages of ours loaded after ``statement``, in a fresh interpreter."""
    code = (
        f"{statement}\nimport json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'spark_lineage', 'iceberg_facets'})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


def test_spark_lineage_with_every_plan_handler_loads_without_iceberg_facets() -> None:
    # the handlers (Iceberg's among them) and the Iceberg datasets and facets both engines build
    statement = (
        "import spark_lineage, spark_lineage.handlers, spark_lineage.handlers.iceberg, spark_lineage.facets.iceberg,"
        " spark_lineage.session, spark_lineage.delivery"
    )
    assert _modules_after(statement) == ["spark_lineage"]


def test_iceberg_facets_loads_spark_lineage() -> None:
    assert _modules_after("import iceberg_facets, iceberg_facets.facets, iceberg_facets.events") == [
        "iceberg_facets",
        "spark_lineage",
    ]
