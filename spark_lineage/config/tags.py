"""``job.tags`` and ``run.tags`` read as openlineage-spark reads them: tags separated by ``;``, each ``key``,
``key:value`` or ``key:value:source`` (value ``true`` and source ``CONFIG`` when not given); ``\\:`` and
``\\;`` are a literal colon and semicolon. A malformed tag (an empty key, value or source) is skipped, as in
the reference."""

from __future__ import annotations

from typing import Any

from spark_lineage.config.settings import Tag

_COLON, _SEMICOLON = "\x01", "\x02"
"""Stand-ins for escaped separators while the text is split (the reference uses the same two)."""


def parse_tags(value: Any) -> tuple[Tag, ...]:
    """Tags from a conf value: ``"a:1;label"``; ``"[a:1;label]"`` (openlineage-spark's list spelling, split
    on ``;`` before escapes are read, as its conf parser does); or a Python list of tag texts."""
    if isinstance(value, (list, tuple)):
        texts = [_unescape_separators(str(item)) for item in value if str(item).strip()]
    else:
        text = str(value)
        if text.startswith("[") and text.endswith("]"):
            texts = [_unescape_separators(part) for part in text[1:-1].split(";")]
        else:
            texts = _unescape_separators(text).split(";")
    tags = (_tag(text) for text in texts if text.strip())
    return tuple(tag for tag in tags if tag is not None)


def _tag(text: str) -> Tag | None:
    elements = text.split(":")
    while elements and elements[-1] == "":  # Java's String.split drops trailing empty strings
        elements.pop()
    if not elements or any(not element.strip() for element in elements[:3]):
        return None
    given = [_restore(element).strip() for element in elements[:3]]
    key, value, source = [*given, *("true", "CONFIG")[len(given) - 1 :]]
    return Tag(key=key, value=value, source=source)


def _unescape_separators(text: str) -> str:
    """``\\:`` and ``\\;`` become stand-ins; any other backslash stays as written."""
    result: list[str] = []
    escaped = False
    for char in text:
        if char == "\\" and not escaped:
            escaped = True
            continue
        if escaped:
            result.append({":": _COLON, ";": _SEMICOLON}.get(char, "\\" + char))
            escaped = False
        else:
            result.append(char)
    if escaped:
        result.append("\\")
    return "".join(result)


def _restore(text: str) -> str:
    return text.replace(_COLON, ":").replace(_SEMICOLON, ";")
