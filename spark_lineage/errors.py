"""Every exception spark_lineage and iceberg_facets raise, under one base, :class:`LineageError`.

``except spark_lineage.errors.LineageError`` catches whatever either package raises to its caller. Each class
keeps the built-in base it always had too (a :class:`ConfigError` is still a ``ValueError``), so code written
against those goes on working.

Raised to the user's code:

- :class:`ConfigError`: a setting that cannot work (``enable()``, ``iceberg_facets.enable()``, ``spark-submit``
  with ``spark.openlineage.*``); the message names the key and what it accepts.
- :class:`StoppedSessionError`: ``enable()`` was given a session whose SparkContext is stopped.
- :class:`DatasetNotFoundError`, :class:`NotebookUsageError`: ``%lineage`` options that name nothing or do not
  parse.
- :class:`DemoDirError`, :class:`ServerUsageError`, :class:`ServerStartError`: the command line's
  (``spark-lineage demo``, ``spark-lineage connect-server``), said in one line with an exit status.
- :class:`DuplicateNameError`: a second handler, rule, data source or transport registered under a name taken
  (:mod:`spark_lineage.registry`), at import.

Raised and handled inside the library (they never reach a job: the listener and the workers catch them, and
the event says what could not be read):

- :class:`JvmError` (with :class:`JvmGoneError`, :class:`DecodeError`): something could not be read from the
  JVM;
- :class:`SpoolDamagedError`: the spool file failed its check (it is set aside and a new one started);
- :class:`KafkaDeliveryError`, :class:`KafkaDeliveryTimeoutError`: the broker refused an event, or did not
  acknowledge it in time (the event stays spooled);
- :class:`CannotRebuildError`: ``spark-lineage replay`` cannot make a kept destination's transport again;
- :class:`ConnectClientError`: a Spark Connect client whose actions cannot be observed;
- :class:`UnclaimedColumnError`: a column whose lineage a Spark Connect client cannot derive from its request
  (the run's ``extractionError`` facet names it);
- :class:`BudgetExceededError`, :class:`NeedsPythonError`: a plan too large for column lineage's budget; a
  value the JVM-side probes left to Python.
"""

from __future__ import annotations

import sqlite3


class LineageError(Exception):
    """The base of every exception spark_lineage and iceberg_facets raise."""


# --- raised to the user's code ---------------------------------------------------------------------------------


class ConfigError(LineageError, ValueError):
    """A configuration value that cannot work. The message names the key and what it accepts."""


class StoppedSessionError(LineageError, RuntimeError):
    """``enable()`` was given a session whose SparkContext is stopped: there is nothing to listen to."""


class DatasetNotFoundError(LineageError, ValueError):
    """``%lineage --dataset NAME`` named no dataset the runs read or wrote."""


class NotebookUsageError(LineageError, ValueError):
    """A ``%lineage`` line that does not parse; the message says what is wrong."""


class DemoDirError(LineageError):
    """The demo's directory is one it may not use: it would have to delete what it did not create."""


class ServerUsageError(LineageError):
    """``spark-lineage connect-server``: a bad option: one line naming it and what it takes (exit status 2)."""


class ServerStartError(LineageError):
    """``spark-lineage connect-server``: the server could not start: one line saying why (exit status 1)."""


class ConnectClientError(LineageError, RuntimeError):
    """A Spark Connect client whose actions cannot be observed: its lineage stays off (``enable()`` says so in
    one line; it never reaches the caller)."""


class DuplicateNameError(LineageError, ValueError):
    """A name registered twice in one :class:`~spark_lineage.registry.Registry`; the message names both entries."""


# --- raised and handled inside the library ----------------------------------------------------------------------


class JvmError(LineageError, RuntimeError):
    """Something could not be read from the JVM; the message says what."""


class JvmGoneError(JvmError):
    """The JVM has ended: nothing can be read from it."""

    def __init__(self) -> None:
        super().__init__("the JVM ended")


class DecodeError(JvmError):
    """A text the JVM wrote is not what its writer writes (:mod:`spark_lineage.jvm.wire`)."""


class SpoolDamagedError(LineageError, sqlite3.DatabaseError):
    """The spool file failed its check when it was opened."""


class KafkaDeliveryError(LineageError, RuntimeError):
    """The broker refused the event (the producer's delivery report is an error)."""


class KafkaDeliveryTimeoutError(LineageError, TimeoutError):
    """The broker did not acknowledge the event in time."""


class CannotRebuildError(LineageError):
    """A kept destination's transport cannot be made again; the message says why and what to pass."""


class BudgetExceededError(LineageError, RuntimeError):
    """The plan is too large to analyze within the configured budget."""


class UnclaimedColumnError(LineageError):
    """A column whose lineage the Spark Connect client cannot derive honestly from its request; the message
    says why (it goes into the run's ``extractionError`` facet, never to the user's code)."""


class NeedsPythonError(LineageError):
    """A value the JVM-side probes left to Python (or could not read as Python would)."""
