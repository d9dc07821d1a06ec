"""What a check found, as ``spark-lineage doctor`` prints it: a :class:`Level` and a one-line message.

Checks live beside what they check (a transport kind probes its own backend:
:meth:`spark_lineage.transports.TransportKind.check`); :mod:`spark_lineage.doctor` gathers and prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from spark_lineage.redaction import Redactor


class Level(Enum):
    """How a finding reads, and the mark it is printed with."""

    OK = "[ok]  "
    INFO = "[--]  "
    PROBLEM = "[!!]  "
    """Something that keeps lineage from working: ``doctor`` exits 1."""


OK, INFO, PROBLEM = Level.OK, Level.INFO, Level.PROBLEM
_PRINTED = Redactor()
"""What is printed shows where the backend is, never the credentials in its url (nor, through
:func:`~spark_lineage.redaction.public_url`, the values of its url parameters)."""


@dataclass(frozen=True)
class Finding:
    """One line of a diagnosis."""

    level: Level
    message: str

    def __str__(self) -> str:
        return self.level.value + _PRINTED.text(self.message)
