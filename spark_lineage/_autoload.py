"""Lineage from configuration alone: how a job that never imports spark_lineage gets it.

A ``spark-submit`` job never imports this package, so the package has to come to the job. The one line in
``spark_lineage.pth``, which pip puts in site-packages next to the package, runs at the start of every
interpreter of that environment. To cost those interpreters nothing measurable it imports nothing: it only
puts a tiny finder (``SparkLineageStartupHook``) on ``sys.meta_path`` that answers "not mine" to every import
but ``pyspark.sql.session``, and it stays out of Spark's Python workers (``PYTHON_WORKER_FACTORY_SECRET``) and
of environments that set ``SPARK_LINEAGE_AUTOLOAD=0``. When PySpark's session module is imported, that finder
calls :func:`find_spec` here, which steps out of the import system, lets the real loader run, and wraps
``SparkSession.__init__``. Every classic SparkSession, whether from ``SparkSession.builder...getOrCreate()``
or ``SparkSession(sc)``, is then shown to :func:`spark_lineage.activation.session_created`, which decides from
the session's configuration whether lineage goes on.

:func:`install` does the same from inside a running interpreter (``%load_ext spark_lineage``).
This module itself imports only ``sys`` and ``os``, so importing PySpark pays nearly nothing for it either.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported: it would cost every interpreter start-up
if TYPE_CHECKING:
    from typing import Any

SESSION_MODULE = "pyspark.sql.session"
WORKER_ENV = "PYTHON_WORKER_FACTORY_SECRET"
"""Set by Spark for its Python workers (and their daemon) only."""
OPT_OUT_ENV = "SPARK_LINEAGE_AUTOLOAD"
_PATCHED = "_spark_lineage_patched"


HOOK_NAMES = ("SparkLineageStartupHook", "_SessionModuleWatcher")
"""The finders that wait for the session module: the .pth file's, and :func:`install`'s."""


def install(force: bool = False) -> bool:
    """Arrange for every SparkSession created from now on to be shown to the activation logic. Idempotent.
    Returns False where it must not run: in a Spark worker, or with ``SPARK_LINEAGE_AUTOLOAD=0`` unless
    ``force`` (a user who loads the notebook extension asks for it explicitly)."""
    if os.environ.get(WORKER_ENV):
        return False
    if not force and os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    module = sys.modules.get(SESSION_MODULE)
    if module is not None:
        _patch_session_class(module)
    elif not any(type(finder).__name__ in HOOK_NAMES for finder in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleWatcher())
    return True


def find_spec(fullname: str) -> Any:
    """The spec of ``pyspark.sql.session`` from the finders after ours, with a loader that wraps
    ``SparkSession.__init__`` once the module has run. Our finders leave ``sys.meta_path`` first. On any
    trouble it answers None, and the import goes on as if we were not there."""
    try:
        sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ not in HOOK_NAMES]
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)  # type: ignore[assignment]
        return spec
    except Exception:  # noqa: BLE001 - PySpark must import whatever happens here
        return None


class _SessionModuleWatcher:
    """:func:`install`'s finder: notices only the import of ``pyspark.sql.session``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return find_spec(fullname) if fullname == SESSION_MODULE else None


class _PatchingLoader:
    """Loads the module with the real loader, then wraps ``SparkSession.__init__``; anything else a loader
    is asked (``get_source`` for tracebacks, ``is_package``...) goes to the real one."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        _patch_session_class(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _patch_session_class(module: Any) -> None:
    try:
        cls = module.SparkSession
        original = cls.__init__
        if getattr(original, _PATCHED, False):
            return

        def init_then_activate(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            _session_created(self)

        init_then_activate.__doc__ = original.__doc__
        init_then_activate.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(init_then_activate, _PATCHED, True)
        cls.__init__ = init_then_activate
    except Exception:  # noqa: BLE001 - an unexpected pyspark must still import
        return


def _session_created(session: Any) -> None:
    try:
        from spark_lineage.activation import session_created

        session_created(session)
    except Exception as error:  # noqa: BLE001 - never fail the user's SparkSession
        try:
            import logging

            from spark_lineage.worker import one_line

            # One line in the job's log; the traceback is for whoever turns DEBUG on.
            log = logging.getLogger("spark_lineage")
            log.warning("spark_lineage: could not turn lineage on: %s", one_line(error))
            log.debug("spark_lineage: could not turn lineage on", exc_info=True)
        except Exception:  # noqa: BLE001 - not even saying so may fail the session
            pass
