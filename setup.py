"""Packaging beyond what pyproject.toml can say: ``spark_lineage.pth`` goes to the root of site-packages.

Python runs ``import`` lines of ``.pth`` files there at every start-up; that one line is how a job that never
imports spark_lineage gets lineage from ``spark.openlineage.*`` confs alone (see spark_lineage/_autoload.py).
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_FILE = "spark_lineage.pth"


class BuildPyWithPth(build_py):
    """Copies the start-up hook into the root of the build, so wheels (and editable wheels) carry it."""

    def run(self) -> None:
        super().run()
        self.copy_file(PTH_FILE, os.path.join(self._root(), PTH_FILE), preserve_mode=False)

    def _root(self) -> str:
        if getattr(self, "editable_mode", False):
            # An editable wheel takes only the finder from build_lib; files for site-packages go straight
            # into the wheel being assembled, which is where `pip install -e` points the install command.
            return str(self.get_finalized_command("install").install_lib)
        return str(self.build_lib)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH_FILE)]

    def get_output_mapping(self) -> dict[str, str]:
        mapping = dict(super().get_output_mapping())
        mapping[os.path.join(self.build_lib, PTH_FILE)] = PTH_FILE
        return mapping


setup(cmdclass={"build_py": BuildPyWithPth})
