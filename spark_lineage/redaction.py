"""Keeping secrets out of everything this library emits: events, the spool, and log lines.

Three rules, applied in one place for both engines:

- **Keys** (Spark's rule): a property whose key matches ``spark.redaction.regex``, Spark's default pattern, or
  this library's own secret keys (the transport's api key and headers) has its value replaced by
  ``*********(redacted)``, as Spark's UI does. For ``spark_properties`` a value that matches counts too, as in
  Spark.
- **Text**: in any string, credentials inside URLs (``user:pass@``) are removed, and ``key=value``,
  ``key -> value``, ``'key'='value'`` and ``key: value`` pairs whose key is secret have their value replaced.
  That covers SQL ``OPTIONS``, JDBC URLs, error messages and plan text.
- **Known values**: every secret value the configuration holds (Spark confs with secret keys, the api key,
  header values, url parameter values, passwords in URLs) is replaced wherever it appears, whatever surrounds
  it, when it is at least :data:`MIN_KNOWN_SECRET_LENGTH` long.
- **URL parameters**: the transport's url parameters (``transport.urlParams.<name>``, or a query written into
  its ``url`` or ``endpoint``) are secret whatever their length (an Azure Functions ``code``, a SAS token): in
  any string, the value after ``?<name>=`` or ``&<name>=`` is replaced. What this library prints or keeps of
  a URL (the destination in the log lines and in the spool, ``doctor``, ``replay``) goes through
  :func:`public_url`, which replaces every query value: ``/api/v1/lineage?code=*********(redacted)``.

:class:`Redactor` applies them to an event's JSON before it is spooled, so neither the backend nor the spool
on disk ever holds a secret; :func:`protect_logs` applies them to the log records of this library and of the
libraries it drives (openlineage-python, py4j, urllib3) before any handler sees them.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote_plus, urlsplit

REDACTED = "*********(redacted)"
"""What a secret is replaced with: Spark's own replacement text."""
SPARK_DEFAULT_PATTERN = r"(?i)secret|password|token|access[.]?key"
"""``spark.redaction.regex``'s default in Spark 3.5 and 4.x; it applies even when a session sets its own."""
OWN_SECRET_KEYS = (
    r"(?i)api[._-]?key|authorization|credential|transport\.(?:[\w-]+\.)*(?:(?:custom_)?headers|url_?params)\."
)
"""Secret keys beyond Spark's: the transport's api key, headers (``spark.openlineage.transport.headers.*``) and
url parameters (``spark.openlineage.transport.urlParams.*``), and credential settings."""
_QUICK_LOWERCASE_NEEDLES = (
    "secret",
    "password",
    "token",
    "authorization",
    "credential",
    "headers.",
    "urlparams.",
    "url_params.",
    "accesskey",
    "access.key",
    "apikey",
    "api.key",
    "api_key",
    "api-key",
)
"""What the default patterns can match, for lowercased text, spelled out: every spooled event is looked at, and
looking for each of these strings takes a third of the time of one regular expression of them all (Python's
case-insensitive matching is slower still)."""
_JSON_PUNCTUATION = frozenset('"{}[],: \t\r\n')
"""What separates JSON values in a document's text."""
_CLEAN_KEPT = 16_384
"""Strings :meth:`Redactor.clean_strings` holds at most before it starts afresh."""
MIN_KNOWN_SECRET_LENGTH = 6
"""Shorter values (``true``, ``1234``) are still redacted under their keys, but not searched for elsewhere:
replacing them in every string would mangle ordinary text."""

_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][\w+.\-]*://)(?P<userinfo>[^/\s@'\"?#]+@)")
_ORACLE_CREDENTIALS = re.compile(r"(?P<prefix>\bjdbc:oracle:\w+:)(?P<userinfo>[^/@\s:'\"]+/[^@\s'\"]+)(?=@)")
_PAIR = re.compile(
    r"""(?P<kq>['"`]?)(?P<key>[A-Za-z_][\w.\-]*)(?P=kq)"""
    r"""(?P<sep>\s*(?:=|->|:)\s*|\s+(?=['"]))"""
    # The value is only looked at, not consumed: a pair inside another pair's value (a URL's ``password=``
    # after ``url: ``) is found too.
    r"""(?=(?P<value>'[^']*'|"[^"]*"|[^\s'"&;,)}\]]+))"""
)

_PY4J_PAIR = re.compile(r"(?m)^(?=s(?P<key>[A-Za-z_][\w.\-]*)\ns(?P<value>[^\n]*)$)")
"""A key and its value as py4j's protocol writes a call's string arguments (one ``s``-prefixed line each),
which py4j logs at DEBUG: ``spark.conf.set(key, value)``."""


_URL_SETTINGS = frozenset({"url", "endpoint"})
"""Transport settings holding a URL, whose query is the transport's url parameters."""
_URL_PARAM_KEY = re.compile(r"(?i)\btransport\.(?:[\w-]+\.)*url_?params\.(.+)$")
"""A url parameter's key in flat settings (``spark.openlineage.transport.urlParams.code``), its name captured."""
_URL_PARAMS_SETTINGS = frozenset({"urlparams", "url_params"})
"""The url parameters as a mapping (``urlParams``, lowercased), as openlineage-spark's keys name them."""


class Redactor:
    """The redaction rules of one configuration: a key pattern and the secret values it knows.

    Safe to share between threads; :meth:`learn` may be called while others redact.
    """

    def __init__(self, pattern: str | None = None, secrets: Iterable[str] = ()) -> None:
        patterns = [SPARK_DEFAULT_PATTERN, OWN_SECRET_KEYS] + ([pattern] if pattern else [])
        self.pattern_text = "|".join(f"(?:{_inline_flags_first(p)})" for p in patterns)
        self.key_pattern = re.compile(self.pattern_text)
        self._own_pattern = re.compile(pattern) if pattern else None
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._url_params: frozenset[str] = frozenset()
        self._url_param_assignments: tuple[str, ...] = ()
        self._piecewise: tuple[frozenset[str], bool] | None = None
        self._clean: tuple[frozenset[str], tuple[str, ...], set[str]] = (frozenset(), (), set())
        self._url_params_pattern: re.Pattern[str] | None = None
        self.learn(secrets)

    @property
    def secrets(self) -> frozenset[str]:
        return self._secrets

    def learn(self, values: Iterable[str]) -> None:
        """Add secret values to search for everywhere (short ones are kept out; see the module doc)."""
        found = {str(v) for v in values if v is not None and len(str(v)) >= MIN_KNOWN_SECRET_LENGTH}
        if found - self._secrets:
            with self._lock:
                self._secrets = self._secrets | found

    @property
    def url_params(self) -> frozenset[str]:
        """The names of the transport's url parameters: their values are redacted in every URL query."""
        return self._url_params

    def learn_url_params(self, params: Mapping[str, Any]) -> None:
        """Url parameters (name to value): each value is a known secret (the length rule applies), and the
        value after ``?<name>=`` / ``&<name>=`` is redacted anywhere, whatever its length."""
        names = {str(name) for name in params if str(name)}
        self.learn(str(value) for value in params.values() if value is not None)
        self.learn(quote_plus(str(value)) for value in params.values() if value is not None)  # as sent
        if names - self._url_params:
            with self._lock:
                names |= self._url_params
                spelled = sorted({spelling for name in names for spelling in (name, quote_plus(name))}, key=len)
                alternatives = "|".join(re.escape(name) for name in reversed(spelled))
                self._url_params_pattern = re.compile(rf"(?<=[?&])(?P<name>{alternatives})=[^&#\s'\"]+")
                self._url_params = frozenset(names)
                self._url_param_assignments = tuple(f"{name}=" for name in sorted(names))

    def learn_from_url(self, url: str) -> None:
        """Learn the secrets a transport's URL carries: the password in it, and its query as url parameters."""
        self.learn(url_passwords(url))
        query = urlsplit(url).query if "?" in url else ""
        if query:
            self.learn_url_params(dict(parse_qsl(query, keep_blank_values=False)))
            self.learn(value for _, _, value in (part.partition("=") for part in query.split("&")))

    def learn_from_properties(self, properties: Mapping[str, Any]) -> None:
        """Learn the values of every secret key in ``properties`` (Spark confs, catalog or transport settings),
        and the url parameters among them (``spark.openlineage.transport.urlParams.<name>``) by name."""
        self.learn(str(value) for key, value in properties.items() if self.is_secret_key(str(key)) and value)
        url_params = ((_URL_PARAM_KEY.search(str(key)), value) for key, value in properties.items())
        self.learn_url_params({match.group(1): value for match, value in url_params if match})

    def learn_from_transport(self, settings: Mapping[str, Any], path: str = "transport") -> None:
        """Learn the secrets of openlineage-python transport settings (nested, as its factory takes them):
        values of secret keys, header values, passwords inside URLs, and url parameters (``urlParams``, or
        the query of ``url`` and ``endpoint``). Other settings' values stay unknown: a value learned is
        replaced in every string of every event."""
        for key, value in settings.items():
            where = f"{path}.{key}"
            if isinstance(value, Mapping) and str(key).lower() in _URL_PARAMS_SETTINGS:
                self.learn_url_params(value)
            elif isinstance(value, Mapping):
                self.learn_from_transport(value, where)
            elif isinstance(value, (list, tuple)):
                for index, item in enumerate(value):
                    if isinstance(item, Mapping):
                        self.learn_from_transport(item, f"{where}.{index}")
            elif isinstance(value, str):
                if self.is_secret_key(where):
                    self.learn([value])
                if str(key) in _URL_SETTINGS:
                    self.learn_from_url(value)
                else:
                    self.learn(url_passwords(value))

    def is_secret_key(self, key: str) -> bool:
        return self.key_pattern.search(key) is not None

    def properties(self, properties: Mapping[str, str]) -> dict[str, str]:
        """Spark's rule for confs: a value is redacted when its key or the value itself matches."""
        return {
            key: REDACTED if self.is_secret_key(key) or self.key_pattern.search(value) else self.text(value)
            for key, value in properties.items()
        }

    def text(self, text: str) -> str:
        """``text`` without URL credentials, secret ``key=value`` values, or known secret values."""
        if not text:
            return text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if "@" in text:
            text = _URL_CREDENTIALS.sub(r"\g<scheme>", text)
            text = _ORACLE_CREDENTIALS.sub(r"\g<prefix>", text)
        url_params = self._url_params_pattern
        if url_params is not None and ("?" in text or "&" in text):
            text = url_params.sub(rf"\g<name>={REDACTED}", text)
        if self.key_pattern.search(text):
            text = self._redact_pairs(text)
        return text

    def needs_redaction(self, text: str) -> bool:
        """A quick look at a whole document: could any rule change it?"""
        lowered = text.lower()
        for needle in _QUICK_LOWERCASE_NEEDLES:
            if needle in lowered:
                return True
        if self._own_pattern is not None and self._own_pattern.search(text) is not None:
            return True
        if "@" in text and (_URL_CREDENTIALS.search(text) or _ORACLE_CREDENTIALS.search(text)) is not None:
            return True
        for secret in self._secrets:
            if secret in text:
                return True
        return any(assignment in text for assignment in self._url_param_assignments)

    def clean_strings(self) -> set[str]:
        """Strings :meth:`needs_redaction` said no to under the rules as they are now, for callers to skip and
        add to (an event's keys, names and URLs recur in every event): emptied when the rules change, and
        when it grows past :data:`_CLEAN_KEPT`."""
        known = self._clean
        if known[0] is not self._secrets or known[1] is not self._url_param_assignments or len(known[2]) > _CLEAN_KEPT:
            known = self._clean = (self._secrets, self._url_param_assignments, set())
        return known[2]

    @property
    def checks_piecewise(self) -> bool:
        """Whether :meth:`needs_redaction` of a JSON text holds only if it holds for a piece of it that lies
        within one JSON value: so a document written in pieces (:mod:`spark_lineage.delivery.encoding`) can be
        looked at piece by piece. True of the built-in rules, which never match across the punctuation between
        JSON values (``, {`` and the like); not of a pattern of the user's own, or of a known secret that holds
        such punctuation."""
        secrets = self._secrets
        known = self._piecewise
        if known is None or known[0] is not secrets:  # asked for every event: answered once per set of secrets
            known = self._piecewise = (
                secrets,
                self._own_pattern is None
                and not any(character in secret for secret in secrets for character in _JSON_PUNCTUATION),
            )
        return known[1]

    def document(self, value: Any) -> Any:
        """A JSON-like document with every rule applied: to its strings, and to the values of its secret keys."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.document(item) for item in value]
        if isinstance(value, dict):
            return {
                key: REDACTED if isinstance(item, str) and self.is_secret_key(str(key)) else self.document(item)
                for key, item in value.items()
            }
        return value

    def _redact_pairs(self, text: str) -> str:
        pieces, done = [], 0
        matches = [*_PAIR.finditer(text), *(_PY4J_PAIR.finditer(text) if "\ns" in text else ())]
        for match in sorted(matches, key=lambda m: m.start("value")):
            start, end = match.span("value")
            if start < done or not self.is_secret_key(match.group("key")):
                continue
            value = match.group("value")
            quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 else ""
            pieces += [text[done:start], f"{quote}{REDACTED}{quote}"]
            done = end
        return "".join(pieces) + text[done:] if pieces else text


def public_url(url: str) -> str:
    """``url`` as this library prints and keeps it: without credentials (``user:pass@``), and with every query
    value replaced (``?code=*********(redacted)``), whatever its length; the names stay, to say which url
    parameters the backend takes."""
    url = _URL_CREDENTIALS.sub(r"\g<scheme>", url)
    base, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hash_mark, fragment = rest.partition("#")
    parts = [f"{part.partition('=')[0]}={REDACTED}" if part.partition("=")[2] else part for part in query.split("&")]
    return f"{base}?{'&'.join(parts)}{hash_mark}{fragment}"


def url_passwords(text: str) -> list[str]:
    """The passwords written into URLs in ``text`` (``scheme://user:password@host``)."""
    found = []
    for match in _URL_CREDENTIALS.finditer(text):
        password = match.group("userinfo")[:-1].partition(":")[2]
        if password:
            found.append(password)
    return found


def _inline_flags_first(pattern: str) -> str:
    """Spark's patterns start with ``(?i)``; Python only takes global flags at the very start of a whole
    pattern, so each part's flags are scoped to it."""
    match = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    return f"(?{match.group(1)}:{pattern[match.end() :]})" if match else pattern


# --- log records ---------------------------------------------------------------------------------------------

PROTECTED_LOGGERS = ("spark_lineage", "iceberg_facets", "openlineage", "py4j", "urllib3", "requests")
"""Loggers whose records may carry what this library handles: its own, and those of the libraries it drives."""

LOG_REDACTORS_KEPT = 64
"""The rules of the most recent sessions (and ``spark.redaction.regex`` patterns) that apply to log records."""

_log_lock = threading.Lock()
_log_redactors: list[Redactor] = []
_pattern_rules: dict[str | None, Redactor] = {}
_previous_factory: Any = None


def rules_for(pattern: str | None) -> Redactor:
    """The rules of ``spark.redaction.regex`` ``pattern`` (and the defaults), without known values: what
    protects the logs while a session's confs are read, before its secrets are known. One per pattern."""
    with _log_lock:
        rules = _pattern_rules.get(pattern)
        if rules is None:
            rules = _pattern_rules[pattern] = Redactor(pattern)
    return rules


def protect_logs(redactor: Redactor) -> None:
    """Apply ``redactor`` to every record the :data:`PROTECTED_LOGGERS` make from now on, at any level, before
    any handler formats it. Installed once per process (through :func:`logging.setLogRecordFactory`, chained
    to the factory already there); later calls add their rules (those of the last
    :data:`LOG_REDACTORS_KEPT` calls apply)."""
    global _previous_factory
    with _log_lock:
        if any(existing is redactor for existing in _log_redactors):
            return
        _log_redactors.append(redactor)
        del _log_redactors[:-LOG_REDACTORS_KEPT]
        if _previous_factory is not None:
            return
        _previous_factory = logging.getLogRecordFactory()
        previous = _previous_factory

        def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record: logging.LogRecord = previous(*args, **kwargs)
            # logging.makeLogRecord (structlog's formatter, Airflow's) makes a record with no name, then fills
            # it: a record factory must never fail the logging call that made it.
            try:
                if isinstance(record.name, str) and record.name.startswith(PROTECTED_LOGGERS):
                    _redact_record(record)
            except Exception:  # noqa: BLE001 - the record as it was made
                pass
            return record

        logging.setLogRecordFactory(make_record)


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
        redacted = message
        for redactor in list(_log_redactors):
            redacted = redactor.text(redacted)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[0] is not None:
            original = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            text = original
            for redactor in list(_log_redactors):
                text = redactor.text(text)
            record.exc_text = text
            if text != original:
                # Formatters that read the exception itself (PySpark 4's JSON formatter does) would show what
                # was redacted: they get the redacted traceback text only.
                record.exc_info = None
    except Exception:  # noqa: BLE001 - a record we cannot read is left to logging's own error handling
        pass
