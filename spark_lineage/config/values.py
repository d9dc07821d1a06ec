"""How one setting's value is read: every error names the key as the user wrote it and says what it accepts."""

from __future__ import annotations

import math
import re
from typing import Any

from spark_lineage.config.settings import ConfigError

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
