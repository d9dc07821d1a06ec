"""How one setting's value is read: every error names the key as the user wrote it and says what it accepts.

Used by :mod:`spark_lineage.config` and by the transport kinds (:mod:`spark_lineage.transports`), which read
their own keys; it sits below both, so neither package imports the other back."""

from __future__ import annotations

import math
import re
from typing import Any

from spark_lineage.errors import ConfigError

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{key}={value!r} is not a boolean; accepted values: true, false.")


def number(key: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not a number.") from None


def finite(key: str, value: Any, *, minimum: float = 0.0) -> float:
    """A finite number not below ``minimum``: ``inf`` would make waits unbounded, ``nan`` comparisons false."""
    result = number(key, value)
    if not math.isfinite(result) or result < minimum:
        raise ConfigError(f"{key}={value!r} is not valid; accepted values: a finite number >= {minimum:g}.")
    return result


def positive_seconds(key: str, value: Any, per_second: float) -> float:
    """A duration given in ``1 / per_second`` units (``1000.0``: milliseconds), in seconds; finite and > 0."""
    seconds = number(key, value) / per_second
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{key}={value!r} is not valid; accepted values: a finite number > 0.")
    return seconds


def integer(key: str, value: Any, *, minimum: int) -> int:
    try:
        result = int(str(value).strip())
    except ValueError:
        result = minimum - 1
    if result < minimum:
        raise ConfigError(f"{key}={value!r} is not valid; accepted values: integers >= {minimum}.")
    return result


def text_list(value: Any) -> list[str]:
    """``a,b``, ``a;b`` or ``[a;b]`` (openlineage-spark's list spelling), or a Python list."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in re.split(r"[;,]", str(value).strip().strip("[]")) if part.strip()]


def optional_text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")
_JAVA_BACKREFERENCE = re.compile(r"\\k<([A-Za-z][A-Za-z0-9]*)>")


def java_regex(key: str, value: Any, *, groups: tuple[str, ...] = ()) -> str:
    """A regular expression written for Java (openlineage-spark's keys take Java's ``Pattern``), as Python's
    ``re`` reads it: ``(?<name>...)`` is ``(?P<name>...)`` and ``\\k<name>`` is ``(?P=name)`` there.
    ``groups`` are named groups it must have."""
    text = _JAVA_BACKREFERENCE.sub(r"(?P=\1)", _JAVA_NAMED_GROUP.sub(r"(?P<\1>", str(value)))
    try:
        compiled = re.compile(text)
    except re.error as error:
        raise ConfigError(f"{key}={value!r} is not a valid regular expression: {error}.") from None
    missing = [group for group in groups if group not in compiled.groupindex]
    if missing:
        raise ConfigError(
            f"{key}={value!r} has no named group {', '.join(missing)}; accepted: a regular expression with "
            + " and ".join(f"(?<{group}>...)" for group in missing)
            + "."
        )
    return text


def python_class(key: str, path: str, base: type[Any]) -> type[Any]:
    """The Python class at dotted ``path``, a subclass of ``base``. openlineage-spark's keys name Java classes
    there; one of those is said to be one, rather than left to fail when the first event is sent."""
    from openlineage.client.utils import import_from_string

    wanted = f"the dotted path of a Python subclass of {base.__module__}.{base.__qualname__}"
    try:
        found = import_from_string(path)
    except (ImportError, AttributeError, ValueError) as error:
        java = " (a Java class cannot run in this Python listener)" if path.startswith(("io.", "com.", "org.")) else ""
        raise ConfigError(f"{key}={path!r} cannot be imported{java}: {error}; accepted: {wanted}.") from None
    if not (isinstance(found, type) and issubclass(found, base)):
        raise ConfigError(f"{key}={path!r} is not a class derived from {base.__qualname__}; accepted: {wanted}.")
    return found
