"""Events to JSON, exactly as openlineage-python's ``Serde.to_json`` writes them, at a fraction of its cost.

``Serde.to_json`` converts an event with ``attr.asdict`` and then walks the result again to drop nulls and turn
enums into their values. The events of one query share most of their parts: the same input datasets, facets
and job facets appear in its START, RUNNING and COMPLETE events. :class:`EventEncoder` converts each attrs
object once, in a single walk that applies Serde's rules as it goes, and reuses the result for every later
event of the same encoder that holds the same object; a facet marked :func:`lasting` (made once per value and
never changed: a dataset's schema, the session's facets) is converted once for all encoders. The JSON is then
written by :func:`json.dumps`, with Serde's options, so the text is Serde's, byte for byte
(``tests/unit/test_encoding.py`` holds it to that).

An event's input and output datasets (most of its text: schemas, column lineage) and its run and job facets are
written once each per encoder, and a lasting facet once in all: the rest of the event is written with a marker
in each one's place, and the markers are replaced by their JSON. ``json.dumps`` writes lists and dicts item by
item with fixed separators, so the text is the one it would write of the whole.

:meth:`EventEncoder.holds` asks a check (the redactor's quick look) of the strings an event holds, keys and
values, as they are before JSON escapes them, in one text: each converted dict once per encoder, so a query's
RUNNING and COMPLETE events are looked into only where their START differs; a lasting facet's dict, once
under the same rules (the same ``clean`` set), for all encoders.

Serde's rules, as it applies them: attrs objects become dicts of their fields (by attribute name, so
``_producer`` stays ``_producer``); tuples, lists and sets become lists; a ``None`` value is left out of a dict,
and a ``None`` or empty-dict item out of a list; enums become their values, dates and times their ISO form and
UUIDs their text (where the installed Serde does so: openlineage-python 1.54 and later), numpy's ``int64`` an
``int``; anything else is written as it is (or as a ``<<non-serializable: …>>`` marker).
"""

from __future__ import annotations

import datetime
import enum
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import attr
from openlineage.client.serde import Serde

_FIELDS: dict[type, tuple[str, ...] | None] = {}
"""Each class's attrs fields, by name (``None`` for a class that is no attrs class), once looked up."""


def attrs_field_names(cls: type) -> tuple[str, ...] | None:
    """The attribute names of an attrs class's fields (``None`` for a class that is no attrs class)."""
    if cls in _FIELDS:
        return _FIELDS[cls]
    names = _FIELDS[cls] = tuple(field.name for field in attr.fields(cls)) if attr.has(cls) else None
    return names


def _non_serializable(value: Any) -> str:
    return f"<<non-serializable: {type(value).__qualname__}>>"


_MARKER = f"\x00spark-lineage-dataset-{uuid.uuid4().hex}-"
"""What stands for a dataset in the text of the rest of its event, before its number (a string no event holds:
a NUL, and a token of this process's)."""
_MARKED = re.compile(re.escape(json.dumps(_MARKER)[:-1]) + r'(\d+)"')
"""A marker as ``json.dumps`` writes it."""
_DATASET_KEYS = ("inputs", "outputs")
_FACETED_KEYS = ("run", "job")
"""The parts of an event whose facets are written apart, each facet once per encoder (a lasting one once in all)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_non_serializable)


_LASTING: OrderedDict[int, list[Any]] = OrderedDict()
"""The attrs objects marked :func:`lasting`, by id, the one an encoder met last at the end: each one (kept, so that
its id stays its own), its converted dict once an encoder made it, which every encoder then takes, the ``clean``
set of the rules a check of :meth:`EventEncoder.holds` found that dict clean under (or ``None``), and the dict's
JSON once written (or ``None``)."""
_LASTING_DICTS: dict[int, list[Any]] = {}
"""The same entries as :data:`_LASTING`, by the id of their converted dict."""
_LASTING_KEPT = 4096
"""Lasting objects remembered at most: beyond, the one no encoder met for longest is forgotten (converted per
encoder from then on). A session's own facets, in every event, stay; a facet of one query's (its statistics, the
reasons of its ``extractionError``) goes."""

_T = TypeVar("_T")


def lasting(value: _T) -> _T:
    """Mark an attrs object that is never changed once made (a facet made once per value and shared by the events
    of many queries): encoders convert it once in all, not once each. Returns it."""
    if id(value) not in _LASTING:
        while len(_LASTING) >= _LASTING_KEPT:
            _forget_lasting()
        _LASTING[id(value)] = [value, None, None, None]
    return value


def _forget_lasting() -> None:
    """Forget the lasting object no encoder met for longest."""
    try:
        _, entry = _LASTING.popitem(last=False)
    except KeyError:  # another thread emptied it meanwhile
        return
    if entry[1] is not None:
        _LASTING_DICTS.pop(id(entry[1]), None)


def _met(key: int) -> None:
    """A lasting object an encoder met: the last to be forgotten."""
    try:  # noqa: SIM105 - once per lasting object an event holds: no context manager's cost
        _LASTING.move_to_end(key)
    except KeyError:  # forgotten meanwhile, on another thread
        pass


class EventEncoder:
    """Encodes events, converting each attrs object it meets once (the objects stay referenced by the encoder,
    so their identities stay theirs). Use one encoder for events built together, then let it go."""

    def __init__(self) -> None:
        self._converted: dict[int, tuple[Any, Any]] = {}
        self._written: dict[int, tuple[Any, str]] = {}
        """Each dataset's and run or job facet's converted dict (kept, so that its identity stays its own) and its
        JSON, by that identity."""
        self._looked: dict[int, Any] = {}
        """Each converted dict a check looked into and did not hold for (kept), by its identity."""
        self._clean: set[str] | None = None
        """The ``clean`` set of the :meth:`holds` under way."""

    def encode(self, event: Any) -> str:
        """``event`` as ``Serde.to_json(event)`` writes it: an attrs object or a dict (anything else raises
        ``TypeError``, as Serde does)."""
        if not (isinstance(event, dict) or attr.has(type(event))):
            raise TypeError(f"not an event: {type(event).__qualname__}")
        document = self.plain(event)
        parts: list[Any] = []  # the dicts written apart, in the order of their markers
        if isinstance(document, dict):
            document = dict(document)  # the converted event stays as it is: it may be met again
            for key in _DATASET_KEYS:
                items = document.get(key)
                if isinstance(items, list) and items:
                    document[key] = [f"{_MARKER}{len(parts) + index}" for index in range(len(items))]
                    parts.extend(items)
            for key in _FACETED_KEYS:
                holder = document.get(key)
                facets = holder.get("facets") if isinstance(holder, dict) else None
                if isinstance(facets, dict) and facets:
                    marked = {}
                    for name, facet in facets.items():
                        if type(facet) is dict:
                            marked[name] = f"{_MARKER}{len(parts)}"
                            parts.append(facet)
                        else:
                            marked[name] = facet
                    document[key] = {**holder, "facets": marked}  # type: ignore[dict-item]
        rest = _dumps(document)
        if not parts:
            return rest
        texts = [self._write(part) for part in parts]
        return _MARKED.sub(lambda found: texts[int(found.group(1))], rest)

    def holds(self, event: Any, check: Callable[[str], bool], clean: set[str] | None = None) -> bool:
        """Whether ``check`` holds for the strings of ``event`` (an attrs object or a dict): its keys (the names
        of attrs fields among them), text values, and what stands for a value JSON cannot hold, as they are,
        not as JSON writes them (``\\u00fc`` for ``ü``), joined by NULs. ``check`` must hold for such a text
        whenever it holds for one of the strings. Each converted dict it did not hold for is looked into once
        per encoder: the parts a query's events share are looked at with its START. ``clean``: strings ``check``
        is known not to hold for, left out (and those it did not hold for are added: the caller bounds it, and
        gives a new set when ``check`` changes); a :func:`lasting` facet's dict looked into under the same set
        is left out too, whichever encoder looked."""
        looked: list[Any] = []
        strings: list[str] = []
        self._clean = clean
        self._gather(self.plain(event), strings, looked)
        if clean is not None:
            strings = [text for text in strings if text not in clean]
        if strings and check("\x00".join(strings)):
            return True
        if clean is not None:
            clean.update(strings)
        for value in looked:
            self._looked[id(value)] = value
            if clean is not None:
                entry = _LASTING_DICTS.get(id(value))
                if entry is not None:
                    entry[2] = clean
        return False

    def _write(self, part: Any) -> str:
        """The JSON of a converted dataset or facet: once per encoder, and once in all for a lasting facet's."""
        known = self._written.get(id(part))
        if known is None:
            entry = _LASTING_DICTS.get(id(part))
            if entry is None:
                known = self._written[id(part)] = (part, _dumps(part))
            else:
                if entry[3] is None:
                    entry[3] = _dumps(part)
                known = self._written[id(part)] = (part, entry[3])
        return known[1]

    def _gather(self, value: Any, strings: list[str], looked: list[Any]) -> None:
        """Add the strings of ``value`` (a converted value) to ``strings``, and its dicts to ``looked``, leaving
        out the dicts looked into before."""
        cls = type(value)
        if cls is dict:
            if id(value) in self._looked:
                return
            entry = _LASTING_DICTS.get(id(value))
            if entry is not None and entry[2] is not None and entry[2] is self._clean:
                return
            looked.append(value)
            for key, item in value.items():
                strings.append(key if type(key) is str else str(key))
                if type(item) is str:
                    strings.append(item)
                elif item is not None and type(item) not in _NUMBERS:
                    self._gather(item, strings, looked)
        elif cls is list:
            for item in value:
                if type(item) is str:
                    strings.append(item)
                elif item is not None and type(item) not in _NUMBERS:
                    self._gather(item, strings, looked)
        elif cls is str:
            strings.append(value)
        elif value is not None and cls not in _NUMBERS:
            strings.append(value if isinstance(value, str) else _non_serializable(value))

    def plain(self, value: Any) -> Any:
        """``value`` as Serde's ``to_dict`` makes it (for an attrs object: a dict of its non-null fields)."""
        cls = type(value)
        if cls in _AS_IS or value is None:
            return value
        known = self._converted.get(id(value))
        if known is not None:  # an attrs object met before (kept by the encoder: its id is still its own)
            return known[1]
        names = _FIELDS[cls] if cls in _FIELDS else attrs_field_names(cls)
        if names is not None:
            marked = _LASTING.get(id(value))
            if marked is not None and (marked[0] is not value or marked[1] is not None):
                if marked[0] is value:  # converted by an encoder before
                    _met(id(value))
                    self._converted[id(value)] = (value, marked[1])
                    return marked[1]
                marked = None
            converted = {}
            for name in names:
                field_value = getattr(value, name)
                # Most fields are text or numbers: written as they are, without a call each.
                item = field_value if type(field_value) in _AS_IS else self.plain(field_value)
                if item is not None:
                    converted[name] = item
            self._converted[id(value)] = (value, converted)
            if marked is not None:
                _met(id(value))
                marked[1] = converted
                _LASTING_DICTS[id(converted)] = marked
            return converted
        if isinstance(value, dict):
            converted = {}
            for key, entry in value.items():
                item = entry if type(entry) in _AS_IS else self.plain(entry)
                if item is not None:
                    converted[key] = item
            return converted
        if isinstance(value, (list, tuple, set, frozenset)):
            items = []
            for entry in value:
                if entry is None:
                    continue
                item = entry if type(entry) in _AS_IS else self.plain(entry)
                if item is not None and not (isinstance(item, dict) and not item):
                    items.append(item)
            return items
        return _scalar(value)


_AS_IS = frozenset({str, int, float, bool})
"""The types Serde writes as they are (exactly these: an enum that is also a ``str`` is written as its value)."""
_NUMBERS = frozenset({int, float, bool})


def _serde_writes(value: Any) -> bool:
    """Whether the installed openlineage-python's Serde writes ``value`` as text (1.54 and later write dates,
    times and UUIDs so; 1.53 leaves them to the non-serializable marker)."""
    return isinstance(Serde.remove_nulls_and_enums(value), str)


_DATES_AS_TEXT = _serde_writes(datetime.date(2000, 1, 1))
_UUIDS_AS_TEXT = _serde_writes(uuid.UUID(int=0))


def _scalar(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if _DATES_AS_TEXT and isinstance(value, datetime.date):  # datetimes too
        return value.isoformat()
    if _UUIDS_AS_TEXT and isinstance(value, uuid.UUID):
        return str(value)
    if getattr(type(value), "__name__", None) == "int64":  # numpy's
        return int(value)
    return value
