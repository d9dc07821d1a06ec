"""Transports as the spool uses them: made (:func:`make_transport`, :func:`create_client`, with every secret
known to the redactor), made again by ``spark-lineage replay`` from what the spool kept, and sent spooled JSON
through.

The spool files each event under the name of where it goes, and keeps the settings to reach it again, neither
holding a secret (:func:`spark_lineage.transports.describe`: no api key, no credentials in the url, no header
value and no url parameter value; only the names of the url parameters and headers it was reached with).
Replay puts the secrets back from its own configuration (:class:`ReplaySecrets`, :func:`with_secrets`), and
says exactly which ones it still needs. The transports' own retries are turned off
(:func:`spark_lineage.transports.leave_retries_to_the_spool`): the spool retries, once per backend.

The spool holds each event's JSON exactly as it is to be sent, so the transports that send text send it as it
is (:func:`spooled_emitter`), byte for byte, instead of rebuilding openlineage-python's event from it for the
transport to serialize again: openlineage-python's HTTP transport (with its own ``_prepare_request``:
compression, the auth header, custom headers; its session, url, timeout and TLS settings) and file transport,
and this library's console and Kafka transports (``emit_json``). Transports that need the event itself get it
rebuilt: composite and transform transports (their children, transformers and filters take the object), the
file transport's debug mode (file names from the event), and transports of other kinds or classes (async HTTP,
a user's own, a subclass of these).

``requests`` reads the environment for every request it sends (proxies and the hosts that bypass them, the CA
bundle): two passes over every environment variable, a third of a spooled HTTP send's CPU. A sender's session
reads it once per :data:`ENVIRONMENT_SECONDS` instead (:class:`EnvironmentOnce`): a proxy set or changed in the
environment while the process runs is used from then on, within that time.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import io
import os
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urljoin

import requests
from openlineage.client.transport import get_default_factory
from openlineage.client.transport.file import FileTransport, LocalFileHandler
from openlineage.client.transport.http import HttpTransport
from openlineage.client.transport.transport import Transport, TransportFactory

from spark_lineage.delivery.console import PrintingConsoleTransport, visible
from spark_lineage.delivery.kafka import AcknowledgedKafkaTransport, acknowledged
from spark_lineage.delivery.payloads import from_payload
from spark_lineage.errors import CannotRebuildError
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.transports import learn_secrets, rewritten, walk_settings
from spark_lineage.transports.client_internals import file_handler, file_path, http_request

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

    from spark_lineage.config import LineageConfig

ENVIRONMENT_SECONDS = 60.0
"""How long a sender's HTTP session uses what it read of the environment for a request (:class:`EnvironmentOnce`)."""


def make_transport(settings: dict[str, Any] | None) -> Transport:
    """The transport ``settings`` describe, as the spool sends through it: openlineage-python's transport
    factory, with a ``kafka`` transport that counts an event as sent only once the broker acknowledged it
    (:mod:`spark_lineage.delivery.kafka`), and a ``console`` one that prints (:mod:`spark_lineage.delivery.console`)."""
    return visible(get_default_factory().create(acknowledged(settings) if settings else settings))


class SecretLearningFactory(TransportFactory):
    """openlineage-python's transport factory (through :func:`make_transport`), teaching a
    :class:`~spark_lineage.redaction.Redactor` the secrets of each transport's settings before the transport is
    made (and logs its settings at DEBUG), wherever the settings came from: ``spark.openlineage.*``,
    ``openlineage.yml`` or ``OPENLINEAGE__*``."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def create(self, config: dict[str, str] | None = None) -> Transport:
        if config:
            self.redactor.learn_from_transport(config)
        return make_transport(config)


def create_client(config: LineageConfig, redactor: Redactor) -> OpenLineageClient:
    """The client ``config`` describes, with ``redactor`` knowing every secret of its transport."""
    # The OPENLINEAGE_URL shortcut: openlineage-python makes that transport without asking the factory.
    redactor.learn([os.environ.get("OPENLINEAGE_API_KEY") or ""])
    for variable in ("OPENLINEAGE_URL", "OPENLINEAGE_ENDPOINT"):
        redactor.learn_from_url(os.environ.get(variable) or "")
    redactor.learn_from_transport(config.transport or {})
    client = config.create_client(SecretLearningFactory(redactor))
    # with nothing configured, openlineage-python makes its console transport without asking the factory
    client.transport = visible(client.transport, every_event=config.console_every_event)
    learn_secrets(redactor, client.transport)
    return client


API_KEY_ENV = "OPENLINEAGE_API_KEY"
CONF_TRANSPORT = "spark.openlineage.transport."
"""The prefix of the ``--conf`` keys that give replay what the spool does not keep."""


def needs_api_key(settings: dict[str, Any]) -> bool:
    """Whether a destination kept in the spool was reached with an api key (which the spool does not keep)."""
    return any((kept.get("auth") or {}).get("type") == "api_key" for kept in walk_settings(settings))


@dataclass(frozen=True)
class ReplaySecrets:
    """What the spool does not keep, as the replaying user gives it: ``--conf
    spark.openlineage.transport.urlParams.<name>`` / ``headers.<name>`` / ``auth.apiKey``, else
    openlineage-python's own configuration and ``$OPENLINEAGE_API_KEY``."""

    api_key: str | None = None
    url_params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def is_key(key: str) -> bool:
        """Whether a ``--conf`` key gives replay a secret rather than a transport of its own."""
        rest = key[len(CONF_TRANSPORT) :] if key.startswith(CONF_TRANSPORT) else ""
        group, dot, name = rest.partition(".")
        return rest == "auth.apiKey" or (bool(dot and name) and group in ("urlParams", "headers", "custom_headers"))

    @classmethod
    def gathered(cls, confs: Mapping[str, str], client_transport: Mapping[str, Any] | None = None) -> ReplaySecrets:
        """The secrets ``--conf`` keys give (see :meth:`is_key`), over those of openlineage-python's own
        transport settings (``openlineage.yml``, ``OPENLINEAGE__TRANSPORT__*``: ``custom_headers``, the url
        parameters of its ``endpoint``) and ``$OPENLINEAGE_API_KEY``."""
        own = dict(client_transport or {})
        url_params = dict(parse_qsl(str(own.get("endpoint") or "").partition("?")[2]))
        url_params.update(_mapping(own, "urlParams", "urlparams", "url_params"))
        headers = _mapping(own, "headers", "custom_headers")
        auth = _mapping(own, "auth")
        api_key = os.environ.get(API_KEY_ENV) or auth.get("apiKey") or auth.get("api_key")
        for key, value in confs.items():
            if not cls.is_key(key):
                continue
            group, _, name = key[len(CONF_TRANSPORT) :].partition(".")
            if group == "auth":
                api_key = value
            elif group == "urlParams":
                url_params[name] = value
            else:
                headers[name] = value
        return cls(api_key or None, url_params, headers)

    def teach(self, redactor: Redactor) -> None:
        """Make these secrets known to ``redactor`` (url parameters by name too: see
        :mod:`~spark_lineage.redaction`)."""
        redactor.learn([self.api_key or "", *self.headers.values()])
        redactor.learn_url_params(self.url_params)

    def missing(self, settings: Mapping[str, Any]) -> list[str]:
        """The ``--conf`` keys a kept destination needs that these secrets do not give, in order."""
        found = [
            key
            for kept in walk_settings(settings)
            for key in (
                *(f"urlParams.{name}" for name in kept.get("urlParams") or () if name not in self.url_params),
                *(f"headers.{name}" for name in kept.get("headers") or () if self.header(name) is None),
            )
        ]
        return [CONF_TRANSPORT + key for key in dict.fromkeys(found)]

    def header(self, name: str) -> str | None:
        """A header's value (header names are case-insensitive)."""
        if name in self.headers:
            return self.headers[name]
        return next((value for key, value in self.headers.items() if key.lower() == name.lower()), None)


def _mapping(settings: Mapping[str, Any], *spellings: str) -> dict[str, str]:
    """The mapping setting ``settings`` holds under any of ``spellings``, as text; ``{}`` for none."""
    found: dict[str, str] = {}
    for spelling in spellings:
        value = settings.get(spelling)
        if isinstance(value, Mapping):
            found.update({str(key): str(item) for key, item in value.items()})
    return found


def with_secrets(settings: Mapping[str, Any], secrets: ReplaySecrets) -> dict[str, Any]:
    """Kept ``settings`` (and those of every transport inside them) with the secrets put back where they were
    used: the api key, the url parameters (on the endpoint's query, as the transport sent them) and the headers.
    A name without a value is left out (see :meth:`ReplaySecrets.missing`)."""

    def put_back(level: dict[str, Any]) -> dict[str, Any]:
        if (level.get("auth") or {}).get("type") == "api_key" and secrets.api_key:
            level["auth"] = {"type": "api_key", "apiKey": secrets.api_key}
        names = level.pop("urlParams", None) or []
        params = {name: secrets.url_params[name] for name in names if name in secrets.url_params}
        if params:
            endpoint = str(level.get("endpoint", "api/v1/lineage"))
            level["endpoint"] = endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)
        headers = {name: secrets.header(name) for name in level.pop("headers", None) or []}
        if any(value is not None for value in headers.values()):
            level["custom_headers"] = {name: value for name, value in headers.items() if value is not None}
        return level

    return rewritten(settings, put_back)


def rebuilt(destination: str, kept: dict[str, Any], secrets: ReplaySecrets) -> Any:
    """The transport a kept destination was reached with, its secrets put back from ``secrets``; the log lines of
    this process know them, as those of the process that spooled. :class:`CannotRebuildError` says, in one line
    without a secret, what to pass when something is missing or the transport cannot be made here."""
    redactor = Redactor()
    redactor.learn_from_transport(kept)  # a spool of an earlier release kept url parameters in the endpoint
    secrets.teach(redactor)
    protect_logs(redactor)
    shown = redactor.text(destination)
    missing = secrets.missing(kept)
    if needs_api_key(kept) and not secrets.api_key:
        if not missing:
            raise CannotRebuildError(
                f"{shown} takes an api key, which the spool does not keep: set {API_KEY_ENV}, or pass "
                "--conf spark.openlineage.transport.* settings"
            )
        missing.insert(0, f"{CONF_TRANSPORT}auth.apiKey")
    if missing:
        kinds = {"auth": "an api key", "urlParams": "url parameters", "headers": "headers"}
        what = [kinds[key[len(CONF_TRANSPORT) :].split(".")[0]] for key in missing]
        listed = list(dict.fromkeys(what))
        takes = ", ".join(listed[:-1]) + (" and " if len(listed) > 1 else "") + listed[-1]
        named = " ".join(f"--conf {key}=<value>" for key in missing)
        raise CannotRebuildError(f"{shown} takes {takes}, which the spool does not keep: pass {named}")
    settings = with_secrets(kept, secrets)
    redactor.learn_from_transport(settings)
    try:
        return make_transport(settings)
    except Exception as error:  # noqa: BLE001 - said in one line; the other destinations are still replayed
        raise CannotRebuildError(
            f"{shown}: its transport cannot be made here ({redactor.text(str(error))}); pass --conf "
            "spark.openlineage.transport.* settings"
        ) from None


class SpooledEmit:
    """Sends spooled events one by one, given each one's JSON as the spool holds it (``emit(text)`` raises when
    the backend did not take it), and hears when a batch of them ends."""

    __slots__ = ("_send",)

    def __init__(self, send: Callable[[str], object]) -> None:
        self._send = send

    def __call__(self, text: str) -> object:
        return self._send(text)

    def batch_ended(self) -> None:
        """The batch of events sent since the last call is over: let go of what was kept for it."""


def spooled_emitter(transport: Any) -> SpooledEmit:
    """How a sender sends spooled events through ``transport``: their JSON as it is where ``transport`` sends text
    (see the module doc), else the event rebuilt for its ``emit``. Chosen by the transport's exact class: a
    subclass may send differently, and gets the event."""
    kind = type(transport)
    if kind is HttpTransport:
        return SpooledEmit(_HttpEmitter(transport))
    if kind is FileTransport and not transport.config.debug_mode:
        if transport.config.append and isinstance(file_handler(transport), LocalFileHandler):
            return _AppendingFileEmit(transport)
        return SpooledEmit(functools.partial(_emit_file, transport))
    if kind in (PrintingConsoleTransport, AcknowledgedKafkaTransport):
        return SpooledEmit(transport.emit_json)
    return SpooledEmit(lambda text: transport.emit(from_payload(text)))


class EnvironmentOnce:
    """A ``requests`` session's ``merge_environment_settings`` (the proxies, CA bundle and certificate a request
    gets from the environment, as the session's ``trust_env`` wants) read once per :data:`ENVIRONMENT_SECONDS`
    for each kind of request, not for each request. What it answers is a copy: ``requests`` may change it."""

    __slots__ = ("_merge", "_read")

    _KEPT = 16
    """Kinds of request remembered at most (a sender makes one: its url, with its settings)."""

    def __init__(self, merge: Callable[..., dict[str, Any]]) -> None:
        self._merge = merge
        self._read: dict[Hashable, tuple[float, dict[str, Any]]] = {}

    @classmethod
    def install(cls, session: Any) -> None:
        """Make ``session`` read the environment this way (once: a session that does already is left as is)."""
        if not isinstance(session.__dict__.get("merge_environment_settings"), cls):
            session.merge_environment_settings = cls(session.merge_environment_settings)

    def __call__(self, url: str, proxies: Any, stream: Any, verify: Any, cert: Any) -> dict[str, Any]:
        key = (
            url,
            tuple(sorted((proxies or {}).items())),
            stream,
            verify,
            tuple(cert) if isinstance(cert, list) else cert,
        )
        now = time.monotonic()
        read = self._read.get(key)
        if read is None or now - read[0] >= ENVIRONMENT_SECONDS:
            if len(self._read) >= self._KEPT:
                self._read.clear()
            read = self._read[key] = (now, self._merge(url, proxies, stream, verify, cert))
        settings = dict(read[1])
        if isinstance(settings.get("proxies"), Mapping):
            settings["proxies"] = dict(settings["proxies"])
        return settings


class _HttpEmitter:
    """``transport.emit`` with a spooled event's JSON as the event's: the same request through openlineage-python's
    own ``_prepare_request`` (gzip, the auth header, custom headers) and session (its adapter, retries left to the
    spool), to the same url, with the same timeout, TLS verification and client certificate (never following a
    redirect with one), raising as ``emit`` does for an answer that is not a success.

    ``requests`` prepares every request afresh: it merges the session's headers, cookies, hooks and auth (reading
    ``~/.netrc``) and parses the url, about a third of a send's CPU. Here the request is prepared once per url,
    headers and session cookies, per :data:`ENVIRONMENT_SECONDS`, and each send gets a copy with its body, as
    ``requests`` documents for prepared requests (``Session.send``). A session with an ``auth`` of its own (which
    may sign each body) gets each request prepared afresh."""

    __slots__ = ("_prepared", "transport")

    _KEPT = 16
    """Prepared requests remembered at most (a sender makes one kind: its url, with its headers)."""

    def __init__(self, transport: HttpTransport) -> None:
        self.transport = transport
        self._prepared: dict[Hashable, tuple[Any, float, requests.PreparedRequest]] = {}

    def __call__(self, text: str) -> object:
        transport = self.transport
        previous = http.client.HTTPConnection.debuglevel
        http.client.HTTPConnection.debuglevel = 0  # as emit: a debug level set elsewhere would log the auth header
        try:
            body, headers = http_request(transport, text)
            url = urljoin(transport.url, transport.endpoint)
            cert = getattr(transport, "cert", None)  # openlineage-python 1.54's sslContext
            session = transport.session
            EnvironmentOnce.install(session)
            if session.auth is not None:
                request: dict[str, Any] = {"data": body, "headers": headers, "timeout": transport.timeout}
                if cert is not None:
                    request |= {"cert": cert, "allow_redirects": False}
                response = session.post(url, verify=transport.verify, **request)
            else:
                prepared = self._prepare(session, url, headers)
                prepared.prepare_body(body, None)
                settings = session.merge_environment_settings(url, {}, None, transport.verify, cert)
                response = session.send(prepared, timeout=transport.timeout, allow_redirects=cert is None, **settings)
            response.close()
            if cert is not None and response.is_redirect:
                raise RuntimeError(
                    "Refusing to follow redirect while a client certificate is configured: authenticating against "
                    "the redirect target was not requested."
                )
            response.raise_for_status()
            return response
        finally:
            http.client.HTTPConnection.debuglevel = previous

    def _prepare(self, session: Any, url: str, headers: Mapping[str, str]) -> requests.PreparedRequest:
        """A copy of the request ``session`` prepares for a POST of ``headers`` to ``url`` (without its body)."""
        key = (
            id(session),
            url,
            tuple(headers.items()),
            tuple((c.domain, c.path, c.name, c.value) for c in session.cookies),
        )
        now = time.monotonic()
        known = self._prepared.get(key)
        if known is None or known[0] is not session or now - known[1] >= ENVIRONMENT_SECONDS:
            if len(self._prepared) >= self._KEPT:
                self._prepared.clear()
            template = session.prepare_request(requests.Request("POST", url, headers=dict(headers)))
            known = self._prepared[key] = (session, now, template)
        return known[2].copy()


class _AppendingFileEmit(SpooledEmit):
    """:func:`_emit_file` for a local file the transport appends to, opened once for a batch of events, not once
    for each: each event is written through to the file (flushed) before it counts as sent, and the file is
    closed when the batch ends (so a file moved aside between batches is followed)."""

    __slots__ = ("_file", "_path", "transport")

    def __init__(self, transport: FileTransport) -> None:
        super().__init__(self._append)
        self.transport = transport
        self._file: Any = None
        self._path = ""

    def _append(self, text: str) -> None:
        if self._file is None:
            self._path = file_path(self.transport)
            self._file = _file_failure(self._path, lambda: file_handler(self.transport).open_file(self._path, "a"))
        file = self._file
        try:
            _file_failure(self._path, lambda: (file.write(text + "\n"), file.flush()))
        except Exception:
            self.batch_ended()
            raise

    def batch_ended(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):  # written and flushed already: nothing is lost
                file.close()


def _file_failure(path: str, action: Callable[[], Any]) -> Any:
    """``action()``, failing as ``FileTransport.emit`` fails."""
    try:
        return action()
    except (PermissionError, io.UnsupportedOperation) as error:
        raise RuntimeError(f"Log file `{path}` is not writeable") from error
    except Exception as error:
        raise RuntimeError(f"Failed to write to log file `{path}`: {error}") from error


def _emit_file(transport: FileTransport, text: str) -> None:
    """``transport.emit`` with ``text`` as the event's JSON, outside debug mode: one line appended to the file,
    or a file of its own, through the transport's own file handler (local or fsspec), failing as ``emit``
    does."""
    path = file_path(transport)

    def append() -> None:
        with file_handler(transport).open_file(path, "a" if transport.config.append else "w") as file:
            file.write(text + "\n")

    _file_failure(path, append)
