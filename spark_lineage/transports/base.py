"""What a transport kind is to this library: :class:`TransportKind`, the one support object each kind of
openlineage-python transport gets, and the small values its methods pass around.

A kind answers for the transports of its ``type`` (openlineage-python's ``Transport.kind``): how its
``spark.openlineage.transport.*`` keys become openlineage-python's settings, its typed settings class, where it
sends (for logs and the spool, without a secret), the secrets it holds, how its own retries are turned off,
how ``doctor`` probes its backend, and the transports inside it. The walks over composite and transform
transports are written once, in :mod:`spark_lineage.transports.tree`, from :meth:`TransportKind.children` and
:meth:`TransportKind.inner_settings`. A transport of a kind nobody registered (a user's own class) is served by
this base class as it is: its class names it, and nothing of it is checked.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from spark_lineage.errors import ConfigError
from spark_lineage.findings import INFO, Finding

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Config, Transport

    from spark_lineage.redaction import Redactor

CHECK_TIMEOUT_SECONDS = 5.0
"""How long ``doctor`` waits for a backend to answer its probe."""


class Destination(NamedTuple):
    """Where a transport sends, and how to make it again."""

    name: str
    """For people and for the spool, without a secret: ``http http://host:5000/api/v1/lineage``."""
    settings: dict[str, Any]
    """openlineage-python's settings for the same transport, without any secret (see
    :mod:`spark_lineage.delivery.transports` for how replay puts them back)."""


@dataclass(frozen=True)
class Inner:
    """Where a transport's settings hold those of another: ``transports`` under a name or at an index (a
    composite transport), or ``transport`` (a transform transport)."""

    setting: str
    key: str | int | None = None

    def where(self, where: str) -> str:
        """The key of the inner settings, for error messages, given the outer's (``where``)."""
        if self.key is None:
            return f"{where}.{self.setting}"
        if isinstance(self.key, int):
            return f"{where}.{self.setting}[{self.key}]"
        return f"{where}.{self.setting}.{self.key}"

    def replaced(self, settings: Mapping[str, Any], inner: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``settings`` with ``inner`` in this place."""
        result = dict(settings)
        if self.key is None:
            result[self.setting] = inner
            return result
        holder = result[self.setting]
        if isinstance(self.key, int):
            items = list(holder)
            items[self.key] = inner
            result[self.setting] = items
        else:
            result[self.setting] = {**holder, self.key: inner}
        return result


@dataclass(frozen=True)
class ConfKeys:
    """What the user set a transport with, to name what to fix: ``spark.openlineage.transport`` (or a part of a
    composite transport), or ``None`` for the openlineage-python client's own configuration."""

    prefix: str | None

    def of(self, *settings: str) -> str:
        """The keys of ``settings`` (``url``, ``auth.apiKey``) as the user sets them."""
        if self.prefix is None:
            client_keys = {"url": "OPENLINEAGE_URL", "endpoint": "OPENLINEAGE_ENDPOINT", "auth": "OPENLINEAGE_API_KEY"}
            names = [client_keys.get(setting.split(".")[0], f"transport.{setting}") for setting in settings]
            return " / ".join(dict.fromkeys(names)) + " (or transport.* in openlineage.yml)"
        return " and ".join(f"{self.prefix}.{setting}" for setting in settings)

    def inner(self, setting: str) -> ConfKeys:
        """The keys of a transport inside this one (``transports.<name>``, ``transport``)."""
        return ConfKeys(None if self.prefix is None else f"{self.prefix}.{setting}")


class TransportKind:
    """The support object of one kind of transport; subclass it, set :attr:`names`, and register it with
    :func:`spark_lineage.transports.register`. Every method has a default that fits a transport this library
    knows nothing of."""

    names: ClassVar[tuple[str, ...]] = ()
    """The ``type`` values (openlineage-python's ``Transport.kind``) this kind serves."""
    config_class: ClassVar[type[Config] | None] = None
    """openlineage-python's typed settings of this kind: translated settings must make one (``from_dict``), or
    the configuration is refused with the key to fix, before any event is sent."""
    sends: ClassVar[bool] = True
    """Whether its transports send events anywhere (``noop`` does not)."""
    conf_keys: ClassVar[tuple[str, ...] | None] = None
    """The ``spark.openlineage.transport.*`` keys (after ``transport.``, besides ``type``) this kind reads, in
    openlineage-spark's spelling and openlineage-python's; one ending in ``.`` is a group of keys of their own
    (``headers.X-Team``). ``None``: what it reads is not listed, and no key of it is judged unknown."""

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        """This transport's own settings (not those inside it: see :meth:`inner_settings`) in openlineage-spark's
        spelling or openlineage-python's, for openlineage-python. ``where`` is the key prefix, for errors
        (:class:`~spark_lineage.errors.ConfigError`)."""
        return spec

    def typed(self, spec: Mapping[str, Any], where: str) -> Config | None:
        """Translated settings as :attr:`config_class`, or a :class:`~spark_lineage.errors.ConfigError` naming
        ``where``; ``None`` for a kind without one."""
        if self.config_class is None:
            return None
        try:
            return self.config_class.from_dict(dict(spec))
        except (RuntimeError, ValueError, TypeError, KeyError, AttributeError, ImportError) as error:
            kind = spec.get("type")
            raise ConfigError(f"{where}: the {kind} transport does not take these settings ({error}).") from None

    def inner_settings(self, settings: Mapping[str, Any]) -> list[tuple[Inner, Mapping[str, Any]]]:
        """The settings of the transports inside this one, each with its place."""
        return []

    def children(self, transport: Transport) -> list[Transport]:
        """The transports inside this one (made already)."""
        return []

    def child_keys(self, keys: ConfKeys, child: Transport, index: int) -> ConfKeys:
        """What the user set the ``index``-th of :meth:`children` with."""
        return keys

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        """Where ``transport`` sends, given where the transports inside it send (``inner``, in the order of
        :meth:`children`). By default, its class: a transport this library cannot make again without its
        settings."""
        cls = type(transport)
        path = f"{cls.__module__}.{cls.__qualname__}"
        return Destination(f"{getattr(transport, 'kind', None) or cls.__name__} {path}", {"type": path})

    def learn_secrets(self, redactor: Redactor, transport: Transport) -> None:
        """Teach ``redactor`` the secrets ``transport`` holds itself (not those inside it)."""

    def leave_retries_to_the_spool(self, transport: Transport) -> None:
        """Turn off ``transport``'s own retries: the spool retries, once per backend."""

    def target(self, transport: Transport) -> str | None:
        """Where ``transport`` sends, for ``doctor``'s summary line, without a secret; ``None`` when it cannot
        say."""
        return None

    def warnings(self, transport: Transport) -> list[str]:
        """What is wrong with ``transport``'s settings that can be told without contacting anything (a url that
        holds the endpoint already): ``doctor`` shows each as a problem, and a job logs each once."""
        return []

    def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
        """``doctor``'s check of the backend, which writes nothing there unless ``probe`` is given: then it is
        the one event the check may send (``--send-test-event``). Called only for transports with no
        :meth:`children`."""
        kind = getattr(transport, "kind", None) or type(transport).__name__
        return [Finding(INFO, f"backend: nothing to check for a {kind} transport")]


@contextmanager
def quiet(*loggers: str) -> Iterator[None]:
    """A check's answer is reported once, by ``doctor``: the libraries' own log lines about it are held back."""
    previous = [(logging.getLogger(name), logging.getLogger(name).level) for name in loggers]
    for logger, _ in previous:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in previous:
            logger.setLevel(level)


def short_reason(error: BaseException) -> str:
    """The cause, without the chain of wrappers ``requests`` and ``urllib3`` put around it."""
    text = str(error)
    for pattern in (r"\[Errno -?\d+\][^'\")]*", r"\[SSL[^\]]*\][^'\")]*", r"Read timed out[^'\")]*"):
        match = re.search(pattern, text)
        if match:
            return match.group(0).strip().rstrip(".")
    return text
