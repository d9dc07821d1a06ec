"""A release users can install: ``python -m build`` makes a wheel and an sdist (the wheel built from the sdist,
so the sdist holds all the wheel needs), ``twine check`` passes them, and the wheel, installed with its
``spark`` extra into a fresh virtual environment, runs the README's first command, ``spark-lineage demo``.

Installs go through uv when ``$SPARK_LINEAGE_UV`` names it or it is on PATH, else pip; both reuse their cache.
The fresh environment is held to the versions the environment running the tests has (a constraints file), so
that PySpark (450 MB) comes out of the cache rather than the network, and the demo runs on the PySpark line
under test. It is made without ``--system-site-packages``: the wheel's own requirements must bring everything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Sequence
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

import pytest

from spark_lineage._version import __version__
from spark_lineage.facets import PRODUCER
from tests.support import validate_event

pytestmark = [pytest.mark.spark, pytest.mark.once]

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venvs", ".cache", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "spark-warehouse",
    "metastore_db", "derby.log", "lineage-demo",
)  # fmt: skip
"""What a checkout holds beside its sources: version control, virtual environments, build and test output."""


def _run(what: str, command: Sequence[str | Path], timings: dict[str, float], **options: Any) -> str:
    """Run ``command`` (timed, under ``what``); its standard output, or a failure with the end of its output."""
    started = time.monotonic()
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False, **options)
    timings[what] = time.monotonic() - started
    assert result.returncode == 0, (
        f"{what} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return str(result.stdout)


def _succeeds(command: Sequence[str | Path], env: dict[str, str]) -> bool:
    """Whether ``command`` exits with 0 (its output is not wanted)."""
    return subprocess.run([str(part) for part in command], capture_output=True, check=False, env=env).returncode == 0


def _uv() -> str | None:
    """uv, as CI installs with it: ``$SPARK_LINEAGE_UV``, else the one on PATH; ``None`` means pip."""
    return os.environ.get("SPARK_LINEAGE_UV") or shutil.which("uv")


def _constraints(path: Path) -> Path:
    """Pins for everything the running environment has (but this project): what the fresh one resolves to is
    then in the installer's cache, and the same as what the other tests ran with."""
    pins = {
        dist.metadata["Name"].lower().replace("_", "-"): dist.version
        for dist in distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower().replace("_", "-") != "spark-lineage"
    }
    path.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    return path


@pytest.mark.timeout(900)  # a build, an install and a Spark application
def test_the_built_wheel_installs_and_runs_the_demo(tmp_path: Path) -> None:
    timings: dict[str, float] = {}
    uv = _uv()
    # with uv, build's isolated environment is made with it too (build finds uv on PATH)
    env = {
        **os.environ,
        "PATH": os.pathsep.join(filter(None, [str(Path(uv).parent) if uv else None, os.environ["PATH"]])),
    }

    # A copy of the sources: building writes spark_lineage.egg-info into the tree it builds, which in the
    # checkout would sit on sys.path (PYTHONPATH) ahead of the editable install's metadata.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    dist = tmp_path / "dist"
    installer = ["--installer", "uv"] if uv else []
    _run("build", [sys.executable, "-m", "build", *installer, "--outdir", dist, source], timings, env=env)
    wheel = dist / f"spark_lineage-{__version__}-py3-none-any.whl"
    sdist = dist / f"spark_lineage-{__version__}.tar.gz"
    assert sorted(dist.iterdir()) == [wheel, sdist]
    _run("twine check", [sys.executable, "-m", "twine", "check", "--strict", wheel, sdist], timings)

    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        entry_points = archive.read(f"spark_lineage-{__version__}.dist-info/entry_points.txt").decode()
    # the start-up hook at the root of site-packages, and the markers that say the packages are typed
    assert {"spark_lineage.pth", "spark_lineage/py.typed", "iceberg_facets/py.typed"} <= in_wheel
    assert "spark-lineage = spark_lineage.cli:main" in entry_points
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "CHANGELOG.md", "spark_lineage.pth"} <= in_sdist

    venv = tmp_path / "venv"
    # without pip of its own (ensurepip takes seconds): this pip installs into it (pip's --python)
    _run("venv", [sys.executable, "-m", "venv", "--without-pip", venv], timings)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--disable-pip-version-check"]
    install = [uv, "pip", "install", "-q", "--python", python] if uv else pip
    requirement = f"spark-lineage[spark] @ {wheel.as_uri()}" if uv else f"{wheel}[spark]"  # the README's pip form
    constraints = _constraints(tmp_path / "constraints.txt")
    started = time.monotonic()
    if uv and _succeeds([*install, "--offline", "-c", constraints, requirement], env):
        # uv revalidates what it downloaded unless told not to: an index that sends no caching headers makes it
        # download and build PySpark's sdist again; offline, its cache has it all or this falls back below
        timings["install (offline)"] = time.monotonic() - started
    else:
        _run("install", [*install, "-c", constraints, requirement], timings, env=env)

    # Nothing of the checkout in the fresh environment: no PYTHONPATH, and Spark's Python workers run its python.
    clean = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean["PYSPARK_PYTHON"] = str(python)
    where = _run(
        "import",
        [python, "-c", "import spark_lineage, iceberg_facets; print(spark_lineage.__file__)"],
        timings,
        env=clean,
        cwd=tmp_path,
    )
    assert Path(where.strip()).is_relative_to(venv)
    assert list(venv.glob("lib/python*/site-packages/spark_lineage.pth"))
    workdir = tmp_path / "demo"
    out = _run(
        "demo",
        [venv / "bin" / "spark-lineage", "demo", "--dir", workdir],
        timings,
        env=clean,
        cwd=tmp_path,
        timeout=600,
    )
    print("release test steps (s):", {step: round(seconds, 1) for step, seconds in timings.items()})

    events = [json.loads(line) for line in (workdir / "events.jsonl").read_text().splitlines()]
    for event in events:
        validate_event(event)
    assert {event["producer"] for event in events} == {PRODUCER}
    assert [e["eventType"] for e in events if e["job"]["name"] == "demo_pipeline"] == ["START", "COMPLETE"]
    assert "job demo/demo_pipeline.execute_insert_into_hadoop_fs_relation_command.clean_orders (COMPLETE)\n" in out
    assert f"    writes  file:{workdir}/warehouse/revenue_by_city  (table default.revenue_by_city)" in out
