"""Run at interpreter start-up by ``spark_lineage.pth``: lineage from configuration alone.

A ``spark-submit`` job never imports this package, so the package has to come to the job: the ``.pth`` file
installed next to it in site-packages imports this module in every interpreter of that environment. That is
why this module imports nothing beyond ``sys`` and ``os`` and does almost nothing: it puts a finder on
``sys.meta_path`` that waits for ``pyspark.sql.session`` to be imported, wraps ``SparkSession.__init__``
once it is, and steps out of the import system. Every classic SparkSession, whether from
``SparkSession.builder...getOrCreate()`` or ``SparkSession(sc)``, is then shown to
:func:`spark_lineage.activation.session_created`, which decides from the session's configuration whether
lineage goes on. Nothing heavier than this file is imported until a SparkSession exists.

Executor Python workers (which import pyspark too) are recognised by the secret Spark gives them and left
alone, as is any interpreter started with ``SPARK_LINEAGE_AUTOLOAD=0``.
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
    elif not any(isinstance(finder, _SessionModuleWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleWatcher())
    return True


class _SessionModuleWatcher:
    """A meta-path finder that only notices the import of ``pyspark.sql.session`` and hands the real
    loading to the finders after it."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != SESSION_MODULE:
            return None
        try:  # noqa: SIM105 - contextlib is not imported at start-up; this module must not import it
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)  # type: ignore[assignment]
        return spec


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
    except Exception:  # never fail the user's SparkSession
        import logging

        logging.getLogger("spark_lineage").warning("spark_lineage: could not turn lineage on", exc_info=True)


try:  # noqa: SIM105 - as above
    install()
except Exception:  # noqa: BLE001 - a broken hook must not break every interpreter start
    pass
