"""What this library needs of openlineage-python beyond its public API, in one place.

openlineage-python's transports are extended as they are designed to be (its factory, its config classes), but
sending a spooled event's JSON as it is, and turning off the HTTP transport's own retries on a transport made
already, need members it keeps private. Each is named here for what it gives, and used nowhere else;
``tests/unit/test_client_internals.py`` holds each to the installed client, so a release that renames one
fails that test, not a job.
"""

from __future__ import annotations

from typing import Any

from openlineage.client.transport.file import FileTransport
from openlineage.client.transport.http import HttpTransport

PRIVATE_MEMBERS: dict[type, tuple[str, ...]] = {
    HttpTransport: ("_session", "_prepare_session", "_prepare_request"),
    FileTransport: ("_get_file_path", "_file_handler"),
}
"""The private members of openlineage-python this library uses, by class."""


def made_http_session(transport: HttpTransport) -> Any:
    """The ``requests`` session the transport made already, or ``None`` (it makes one on first use)."""
    return transport._session


def forget_http_session(transport: HttpTransport) -> None:
    """Make a copy of a transport make a session of its own on first use (a copy shares the original's)."""
    transport._session = None


def prepare_http_session(transport: HttpTransport, session: Any) -> None:
    """Mount the transport's adapter (with its retry settings as they are now) on ``session``."""
    transport._prepare_session(session)


def http_request(transport: HttpTransport, text: str) -> tuple[Any, dict[str, str]]:
    """The body and headers the transport sends an event's JSON with: compression, the auth header, custom
    headers."""
    body, headers = transport._prepare_request(text)
    return body, headers


def file_path(transport: FileTransport) -> str:
    """The file the transport writes to (outside debug mode, where the name depends on the event)."""
    return str(transport._get_file_path(None))  # type: ignore[arg-type]  # read only in debug mode


def file_handler(transport: FileTransport) -> Any:
    """The transport's file handler (local, or fsspec's), which opens the file."""
    return transport._file_handler
