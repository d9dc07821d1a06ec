__version__ = "0.1.0"
"""This release; pyproject.toml reads it (``[tool.setuptools.dynamic]``), CHANGELOG.md's top entry names it."""

SOURCE_REPOSITORY = "https://github.com/spark-lineage/spark-lineage"
"""Where the source lives: pyproject.toml's ``[project.urls] Source`` (a unit test holds them equal), and the stem
of the ``producer`` URI every event carries. Not yet the project's real organisation."""
