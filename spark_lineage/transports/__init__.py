"""Transport kinds: everything this library knows of each kind of openlineage-python transport, in one support
object per kind, registered by its ``type``.

openlineage-python makes and runs the transports (its factory, each transport's ``config_class``); a
:class:`TransportKind` adds what this library needs of one kind, beside it:

- how its ``spark.openlineage.transport.*`` keys (openlineage-spark's spelling) become openlineage-python's
  settings, validated against the kind's typed settings class (:meth:`~TransportKind.translate`,
  :attr:`~TransportKind.config_class`), and which keys it reads (:attr:`~TransportKind.conf_keys`);
- where it sends, for logs and the spool, without a secret (:meth:`~TransportKind.describe`), and the secrets
  it holds, for the redactor (:meth:`~TransportKind.learn_secrets`);
- how its own retries are turned off, so that the spool alone retries
  (:meth:`~TransportKind.leave_retries_to_the_spool`);
- how ``doctor`` probes its backend (:meth:`~TransportKind.check`);
- the transports inside it (:meth:`~TransportKind.children`, :meth:`~TransportKind.inner_settings`), which
  :mod:`~spark_lineage.transports.tree` walks: the recursion over composite and transform transports is
  written there, once.

A new kind is one module here: a subclass of :class:`TransportKind` with its ``names``, decorated with
:func:`register`, imported below. The only use of openlineage-python's private members is
:mod:`~spark_lineage.transports.client_internals`.
"""

from __future__ import annotations

from spark_lineage.transports import composite, console, file, http, kafka  # noqa: F401  - each registers its kinds
from spark_lineage.transports.base import ConfKeys, Destination, Inner, TransportKind
from spark_lineage.transports.http import NO_RETRIES
from spark_lineage.transports.registry import KINDS, kind_named, kind_of, register
from spark_lineage.transports.tree import (
    check,
    describe,
    known_types,
    learn_secrets,
    leave_retries_to_the_spool,
    rewritten,
    target,
    translate,
    unknown_keys,
    walk,
    walk_settings,
    warnings,
)

__all__ = [
    "KINDS",
    "NO_RETRIES",
    "ConfKeys",
    "Destination",
    "Inner",
    "TransportKind",
    "check",
    "describe",
    "kind_named",
    "kind_of",
    "known_types",
    "learn_secrets",
    "leave_retries_to_the_spool",
    "register",
    "rewritten",
    "target",
    "translate",
    "unknown_keys",
    "walk",
    "walk_settings",
    "warnings",
]
