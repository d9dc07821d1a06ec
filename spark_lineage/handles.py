"""What ``enable()`` returns in either package: the one protocol every handle on lineage keeps.

:class:`spark_lineage.session.SparkLineageHandle` (a SparkSession's lineage, from :func:`spark_lineage.enable`)
and :class:`iceberg_facets.IcebergLineageHandle` (pyiceberg's, from :func:`iceberg_facets.enable`) both keep it,
so code that turns lineage off at the end of a job needs to know neither::

    with spark_lineage.enable(spark) as handle:   # or iceberg_facets.enable()
        ...
        delivered = handle.flush(timeout=30)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from spark_lineage.config import LineageConfig


@runtime_checkable
class LineageHandle(Protocol):
    """Controls lineage that ``enable()`` turned on."""

    @property
    def enabled(self) -> bool:
        """Whether lineage is on (False for the handle of a disabled or ended lineage)."""
        ...

    @property
    def config(self) -> LineageConfig | None:
        """The settings lineage runs with; ``None`` when it is off."""
        ...

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Deliver every event captured so far. True if all were delivered within ``timeout`` seconds; what was
        not waits in the spool and is sent later."""
        ...

    def disable(self, timeout: float | None = None) -> bool:
        """Turn lineage off and deliver what was captured, within ``timeout`` seconds (default: the configured
        shutdown timeout). True if every event was delivered; what was not waits in the spool, for ``spark-lineage
        replay``."""
        ...

    def __enter__(self) -> LineageHandle: ...

    def __exit__(self, *exc: object) -> None:
        """Leaving the block disables lineage."""
        ...
