"""One errors module: every exception either package raises derives from ``LineageError`` and is defined in
``spark_lineage/errors.py``, keeping the built-in base it always had."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import spark_lineage
from spark_lineage import errors
from spark_lineage.errors import LineageError

ROOT = Path(__file__).resolve().parents[2]
EXCEPTIONS = [
    value
    for _, value in inspect.getmembers(errors, inspect.isclass)
    if issubclass(value, BaseException) and value.__module__ == errors.__name__
]


def _exception_classes_defined_in(path: Path) -> list[str]:
    """The exception classes a module defines (a base whose name ends in Error or Exception)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(base) for base in node.bases]
            if any(base.split(".")[-1].endswith(("Error", "Exception")) for base in bases):
                found.append(node.name)
    return found


def test_no_module_but_errors_defines_a_public_exception() -> None:
    defined = {
        str(path.relative_to(ROOT)): [name for name in _exception_classes_defined_in(path) if not name.startswith("_")]
        for package in ("spark_lineage", "iceberg_facets")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "spark_lineage" / "errors.py"
    }
    assert {path: names for path, names in defined.items() if names} == {}


def test_the_scan_finds_an_exception_class(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text("import sqlite3\nclass A(sqlite3.DatabaseError):\n    pass\nclass B:\n    pass\n")
    assert _exception_classes_defined_in(source) == ["A"]


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_exception_is_a_lineage_error_and_documented(cls: type[BaseException]) -> None:
    assert issubclass(cls, LineageError)
    assert f":class:`{cls.__name__}`" in (errors.__doc__ or "")


def test_each_keeps_the_built_in_base_callers_may_catch() -> None:
    import sqlite3

    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.SpoolDamagedError, sqlite3.DatabaseError)
    assert issubclass(errors.KafkaDeliveryTimeoutError, TimeoutError)
    assert issubclass(errors.DecodeError, errors.JvmError) and issubclass(errors.JvmGoneError, RuntimeError)


def test_the_package_exports_the_public_ones_from_the_errors_module() -> None:
    from spark_lineage.config import ConfigError

    assert spark_lineage.LineageError is LineageError
    assert spark_lineage.ConfigError is ConfigError is errors.ConfigError
    assert spark_lineage.StoppedSessionError is errors.StoppedSessionError
