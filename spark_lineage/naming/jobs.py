"""Job names, normalized as openlineage-spark normalizes them."""

from __future__ import annotations

import re
import unicodedata

from spark_lineage.naming.locations import trim_name


def normalize_job_name(text: str | None) -> str:
    """openlineage-spark's name normalizer: ``"My App"`` -> ``my_app``, ``"InsertIntoHadoopFsRelationCommand"``
    -> ``insert_into_hadoop_fs_relation_command``."""
    if not text:
        return ""
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    stripped = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", stripped)
    spaced = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", spaced)
    spaced = re.sub(r"(\d)([A-Z])", r"\1 \2", spaced)
    return re.sub(r"[^a-zA-Z0-9]+", "_", spaced.lower())


def path_job_suffix(name: str) -> str:
    """The job-name suffix openlineage-spark derives from an output path: its last two segments."""
    trimmed = trim_name(name)
    if trimmed.rfind("/") <= 0:
        return trimmed
    parts = [part for part in trimmed.split("/")]
    while parts and parts[-1] == "":
        parts.pop()
    return f"{parts[-2]}_{parts[-1]}" if len(parts) >= 2 else parts[-1]
