"""MkDocs hook: the configuration page's table of every key and its default, generated from the table the
library reads its settings with (``spark_lineage.config.keys``), so the page cannot drift from the code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- settings-table -->"


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, (tuple, frozenset, list)):
        return "none" if not value else "`" + ";".join(sorted(str(v) for v in value)) + "`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value:,}`" if isinstance(value, int) else f"`{value}`"


def settings_table() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from spark_lineage.config import keys

    rows = ["| key (`spark.openlineage.` + …) | default |", "|---|---|"]
    for key in sorted((*keys.SETTINGS, *keys.COLUMN_LINEAGE), key=lambda k: k.name.lower()):
        rows.append(f"| `{key.name}` | {_default(key.default)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, settings_table())
    return markdown
