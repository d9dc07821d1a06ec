"""What to install for an optional part of the library (an extra: ``spark``, ``kafka``, ``pyiceberg``), for the
messages that say something is missing.

They name the extra's packages themselves, as the installed package's metadata lists them: ``pip install`` of
those works however spark-lineage was installed (from a clone, a built wheel, or a package index once it is
published there), where ``pip install 'spark-lineage[kafka]'`` works only from an index that has it.
"""

from __future__ import annotations

import re
import shlex
from importlib.metadata import PackageNotFoundError, requires

DISTRIBUTION = "spark-lineage"


def install_hint(extra: str) -> str:
    """``pip install 'a>=1' 'b>=2' (spark-lineage's "<extra>" extra)``; without the package's metadata (sources
    not installed), how to install the extra from a clone."""
    try:
        requirements = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        requirements = []
    mine = re.compile(r"""extra\s*==\s*["']""" + re.escape(extra) + """["']""")
    packages = [text.split(";", 1)[0].strip() for text in requirements if mine.search(text.partition(";")[2])]
    if not packages:
        return f"pip install '.[{extra}]' from a clone of spark-lineage"
    return f'pip install {" ".join(shlex.quote(package) for package in packages)} ({DISTRIBUTION}\'s "{extra}" extra)'
