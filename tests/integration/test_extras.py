"""Every install the docs offer lands on a PySpark line CI tests.

``pyproject.toml``'s extras are resolved as a user's installer would resolve them (uv's resolver, against the
package index, for each Python the package claims), and the PySpark each picks must be a line of
``scripts/test``'s ``SPARK_VERSIONS``; with the ``delta`` extra, delta-spark must be of the Delta line CI tests
on that PySpark line. Nothing is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.jars import delta_version, spark_line
from tests.support import REPO_ROOT

pytestmark = pytest.mark.once

PYTHONS = ("3.10", "3.11", "3.13")
"""The lowest Python the package claims, the one CI's lines run on, and the newest."""
EXTRAS = (("spark",), ("spark", "delta"), ("all",))
"""The extras the README and docs/ name that bound PySpark, alone and together (``all`` is every one; kafka,
notebook, pyiceberg and docs add nothing that bounds it)."""


def lines_ci_tests() -> set[str]:
    script = (REPO_ROOT / "scripts" / "test").read_text()
    versions = re.search(r'^SPARK_VERSIONS=\$\{SPARK_VERSIONS:-"([^"]+)"\}', script, re.MULTILINE)
    assert versions is not None, "scripts/test no longer sets SPARK_VERSIONS as this test reads it"
    return {spark_line(version) for version in versions.group(1).split()}


def uv() -> str:
    found = os.environ.get("SPARK_LINEAGE_UV") or shutil.which("uv")
    if not found:
        pytest.skip("uv is not here (scripts/test installs it and names it in $SPARK_LINEAGE_UV)")
    return found


def resolved(python: str, extras: tuple[str, ...]) -> dict[str, str]:
    """What an install of the project with ``extras`` on ``python`` gets: name -> version."""
    command = [uv(), "pip", "compile", "-q", "--no-header", "--python-version", python, "pyproject.toml"]
    for extra in extras:
        command += ["--extra", extra]
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", result.stdout, re.MULTILINE)
    return {name.lower(): version for name, version in pins}


def test_each_offered_install_resolves_to_a_tested_line() -> None:
    lines = lines_ci_tests()
    newest = max(lines, key=lambda line: tuple(int(part) for part in line.split(".")))
    cases = [(python, extras) for python in PYTHONS for extras in EXTRAS]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:  # each waits on the package index, not the CPU
        found = list(pool.map(lambda case: resolved(*case), cases))
    wrong = []
    for (python, extras), versions in zip(cases, found):
        named, pyspark = f"[{','.join(extras)}] on Python {python}", versions["pyspark"]
        if spark_line(pyspark) not in lines:
            wrong.append(f"{named} installs PySpark {pyspark}, a line CI does not test ({sorted(lines)})")
        tested_delta = delta_version(pyspark) or "none"
        if ("delta" in extras or "all" in extras) and spark_line(versions["delta-spark"]) != spark_line(tested_delta):
            wrong.append(
                f"{named} pairs PySpark {pyspark} with delta-spark {versions['delta-spark']}, not the Delta line CI "
                f"tests on that line ({tested_delta})"
            )
        # The spark extra alone gets the newest line the Python can run (PySpark 4.3 needs 3.11): the README's.
        if extras == ("spark",) and python != "3.10" and spark_line(pyspark) != newest:
            wrong.append(f"{named} installs PySpark {pyspark}, not the newest line CI tests ({newest})")
    assert wrong == []
