"""The ``file`` transport: openlineage-spark's ``location`` as openlineage-python's ``log_file_path`` (its
directory made, or refused, when the configuration is read, not at the first event), events appended by
default as the reference does, and ``doctor``'s check that the directory is writable."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from openlineage.client.transport.file import FileConfig

from spark_lineage.conf_values import boolean
from spark_lineage.errors import ConfigError
from spark_lineage.findings import OK, PROBLEM, Finding
from spark_lineage.transports.base import ConfKeys, Destination, TransportKind
from spark_lineage.transports.registry import register

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Transport


@register
class FileKind(TransportKind):
    """openlineage-python's file transport."""

    names = ("file",)
    config_class = FileConfig
    conf_keys = ("location", "log_file_path", "append")

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        location = spec.pop("location", None) or spec.get("log_file_path")
        if not location:
            raise ConfigError(f"{where}.location is required for the file transport: the file to append events to.")
        location = str(location)
        if "://" not in location:  # a local file: its directory must exist, or be made now, not at the first event
            directory = Path(location).expanduser().parent
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ConfigError(
                    f"{where}.location={location!r}: its directory cannot be created ({error})."
                ) from None
            if not directory.is_dir():
                raise ConfigError(f"{where}.location={location!r}: {directory} is not a directory.")
        spec["log_file_path"] = location
        spec["append"] = boolean(f"{where}.append", spec.get("append", True))
        return spec

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        config = cast(FileConfig, cast(Any, transport).config)
        settings = {"type": "file", "log_file_path": config.log_file_path, "append": config.append}
        return Destination(f"file {config.log_file_path}", settings)

    def target(self, transport: Transport) -> str | None:
        path = getattr(getattr(transport, "config", None), "log_file_path", None)
        return str(path) if path else None

    def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
        target = self.target(transport)
        if not target or "://" in target:  # a remote file system (fsspec): nothing is written to check it
            return super().check(transport, keys, probe)
        path = Path(target).expanduser().resolve()
        directory = path.parent
        try:  # as the transport would: a file made there (and taken away); permissions alone do not tell (root)
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".spark-lineage-doctor-"):
                pass
            if path.exists():
                with path.open("a"):
                    pass
        except OSError as error:
            return [Finding(PROBLEM, f"backend: {path} cannot be written: {error.strerror or type(error).__name__}")]
        return [Finding(OK, f"backend: {path} can be written (a file was made in {directory}, and removed)")]
