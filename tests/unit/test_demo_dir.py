"""``spark-lineage demo --dir``: the demo deletes nothing it did not create. No Spark starts here."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from spark_lineage import cli
from spark_lineage.demo import ENTRIES, MARKER, prepare_workdir
from spark_lineage.errors import DemoDirError


def tree(root: Path) -> dict[str, str | None]:
    """Every path below ``root`` with its content (``None`` for a directory)."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_text() for path in sorted(root.rglob("*"))
    }


def users_files(root: Path) -> dict[str, str | None]:
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("mine")
    (root / "events.jsonl").write_text("not the demo's")
    return tree(root)


def test_a_new_directory_is_made_and_marked(tmp_path: Path) -> None:
    workdir = tmp_path / "a" / "b" / "demo"
    prepare_workdir(workdir)
    assert tree(workdir) == {MARKER: (workdir / MARKER).read_text()}
    assert "spark-lineage demo" in (workdir / MARKER).read_text()


def test_an_empty_directory_is_used_and_marked(tmp_path: Path) -> None:
    prepare_workdir(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == [MARKER]


def test_a_directory_the_demo_made_has_its_demo_files_cleared_and_nothing_else(tmp_path: Path) -> None:
    prepare_workdir(tmp_path)
    for name in ENTRIES:
        if name.endswith(".jsonl"):
            (tmp_path / name).write_text("{}\n")
        else:
            (tmp_path / name / "part").mkdir(parents=True)
            (tmp_path / name / "part" / "file").write_text("data")
    (tmp_path / "kept.txt").write_text("the user's")
    prepare_workdir(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([MARKER, "kept.txt"])
    assert (tmp_path / "kept.txt").read_text() == "the user's"


def test_a_directory_with_someone_elses_files_is_refused_untouched(tmp_path: Path) -> None:
    before = users_files(tmp_path)
    with pytest.raises(DemoDirError) as refused:
        prepare_workdir(tmp_path)
    assert str(tmp_path) in str(refused.value)
    assert "new or empty directory" in str(refused.value)
    assert tree(tmp_path) == before


def test_a_marker_that_is_not_a_plain_file_does_not_count(tmp_path: Path) -> None:
    users_files(tmp_path)
    (tmp_path / MARKER).mkdir()
    before = tree(tmp_path)
    with pytest.raises(DemoDirError):
        prepare_workdir(tmp_path)
    (tmp_path / MARKER).rmdir()
    (tmp_path / MARKER).symlink_to(tmp_path / "notes" / "todo.txt")
    before = tree(tmp_path)
    with pytest.raises(DemoDirError):
        prepare_workdir(tmp_path)
    assert tree(tmp_path) == before


def test_a_file_or_a_symlink_in_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    for name in ("file", "link"):
        with pytest.raises(DemoDirError, match="not a directory"):
            prepare_workdir(tmp_path / name)
    assert (tmp_path / "file").read_text() == "mine"
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_command_refuses_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = users_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))  # refused before Spark is needed
    assert cli.main(["demo", "--dir", "."]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"spark-lineage demo: {tmp_path} is not empty and was not made by the demo")
    assert "--dir" in error
    assert tree(tmp_path) == before


def test_a_directory_from_a_demo_before_the_marker_is_refused_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "events.jsonl").write_text("{}\n")
    before = tree(tmp_path)
    with pytest.raises(DemoDirError, match="delete it yourself"):
        prepare_workdir(tmp_path)
    assert tree(tmp_path) == before
