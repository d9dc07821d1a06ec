"""The ``http`` and ``async_http`` transports: openlineage-spark's keys (``timeoutInMillis``, ``headers.*``,
``urlParams.*``, ``auth.*``) as openlineage-python's, where events go without a secret, and ``doctor``'s probe:
one completed run sent through the transport itself, its answer classified (accepted, credentials refused,
wrong url or endpoint, backend error, unreachable)."""

from __future__ import annotations

import inspect
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast
from urllib.parse import parse_qsl, urlencode, urljoin

from openlineage.client.transport.async_http import AsyncHttpConfig
from openlineage.client.transport.http import HttpConfig, HttpTransport

from spark_lineage.conf_values import positive_seconds, text_list
from spark_lineage.errors import ConfigError
from spark_lineage.findings import OK, PROBLEM, Finding
from spark_lineage.redaction import public_url
from spark_lineage.transports.base import ConfKeys, Destination, TransportKind, quiet, short_reason
from spark_lineage.transports.client_internals import http_request, made_http_session, prepare_http_session
from spark_lineage.transports.registry import register

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Config, Transport

    from spark_lineage.redaction import Redactor

NO_RETRIES = {"total": 0, "connect": 0, "read": 0, "redirect": 0, "status": 0}
"""openlineage-python's HTTP retry settings with every retry off: the spool retries, once per backend."""

_SSL_CONTEXT = tuple(
    f"sslContext.{name}"
    for name in (
        "caCertPath", "ca_cert_path", "cacertpath",
        "clientCertPath", "client_cert_path", "clientcertpath",
        "clientKeyPath", "client_key_path", "clientkeypath",
    )
)  # fmt: skip
_AUTH_SETTINGS = {
    "ApiKeyTokenProvider": ("auth.type", "auth.apiKey"),
    "JwtTokenProvider": ("auth.apiKey", "auth.tokenEndpoint"),
    "OAuth2ClientCredentialsTokenProvider": ("auth.clientId", "auth.clientSecret", "auth.tokenEndpoint"),
}
"""The keys that set each of openlineage-python's token providers, named when the backend refuses them."""
_BUILT_IN_PROVIDERS = ("api_key", "jwt", "oauth2")
"""The ``auth.type`` values openlineage-python makes a provider of its own for; any other is a class path."""


@register
class HttpKind(TransportKind):
    """openlineage-python's HTTP transport."""

    names = ("http",)
    config_class: ClassVar[type[Config] | None] = HttpConfig
    conf_keys = (
        "url", "endpoint", "timeout", "timeoutInMillis", "verify", "compression",
        "auth.", "headers.", "custom_headers.", "urlParams.", "retry.", *_SSL_CONTEXT,
    )  # fmt: skip

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        if not spec.get("url"):
            raise ConfigError(f"{where}.url is required for the {spec['type']} transport, e.g. http://localhost:5000.")
        if "timeoutInMillis" in spec:
            spec["timeout"] = positive_seconds(f"{where}.timeoutInMillis", spec.pop("timeoutInMillis"), 1000.0)
        elif "timeout" in spec:
            spec["timeout"] = positive_seconds(f"{where}.timeout", spec["timeout"], 1.0)
        if "headers" in spec:
            spec["custom_headers"] = {str(k): str(v) for k, v in dict(spec.pop("headers")).items()}
        if "urlParams" in spec:
            # openlineage-python joins url and endpoint with urljoin, which drops a query on the url: the
            # parameters go on the endpoint, whose query survives.
            query = urlencode({str(k): str(v) for k, v in dict(spec.pop("urlParams")).items()})
            endpoint = str(spec.get("endpoint", "api/v1/lineage"))
            spec["endpoint"] = endpoint + ("&" if "?" in endpoint else "?") + query
        auth = spec.get("auth")
        if isinstance(auth, Mapping):
            spec["auth"] = _auth(dict(auth), where)
        return spec

    def typed(self, spec: Mapping[str, Any], where: str) -> Config | None:
        """As every kind's, but a token provider of the user's own (``auth.type`` a class path) is checked as
        openlineage-python checks it and not made: its constructor runs once, when the transport is made."""
        auth = spec.get("auth")
        if isinstance(auth, Mapping) and str(auth.get("type", "")) not in ("", *_BUILT_IN_PROVIDERS):
            _check_token_provider(str(auth["type"]), where)
            spec = {**spec, "auth": {}}
        return super().typed(spec, where)

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        # Credentials in the url, url parameter values and header values stay out of the spool; replay gets them
        # from its own configuration.
        http = cast(HttpTransport, transport)
        url = public_url(http.url).partition("?")[0]
        endpoint, _, query = str(http.endpoint).partition("?")
        settings: dict[str, Any] = {"type": "http", "url": url, "endpoint": endpoint, "timeout": http.timeout}
        if type(getattr(http.config, "auth", None)).__name__ == "ApiKeyTokenProvider":
            settings["auth"] = {"type": "api_key"}  # the key itself comes from the replaying user
        if http.compression:
            settings["compression"] = str(getattr(http.compression, "value", http.compression))
        params = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
        if params:
            settings["urlParams"] = list(dict.fromkeys(params))
        if http.config.custom_headers:
            settings["headers"] = sorted(http.config.custom_headers)
        return Destination(f"http {public_url(urljoin(url, str(http.endpoint)))}", settings)

    def learn_secrets(self, redactor: Redactor, transport: Transport) -> None:
        """Its url's password, its url parameters, its header values and its api key."""
        config = cast(Any, transport).config
        redactor.learn_from_url(str(config.url))
        redactor.learn_from_url(str(config.endpoint))
        redactor.learn(str(value) for value in (config.custom_headers or {}).values())
        redactor.learn([str(getattr(config.auth, "api_key", None) or "")])

    def leave_retries_to_the_spool(self, transport: Transport) -> None:
        """openlineage-python's HTTP transport retries a failed request five times with backoff inside ``emit``:
        with a spool that would send a slow backend a flood of copies and hold the sender for seconds per
        event."""
        http = cast(HttpTransport, transport)
        http.config.retry = dict(NO_RETRIES)
        session = made_http_session(http)
        if session is not None:  # made already: mount an adapter without retries
            prepare_http_session(http, session)

    def target(self, transport: Transport) -> str | None:
        url = getattr(getattr(transport, "config", None), "url", None)
        return public_url(str(url)) if url else None

    def warnings(self, transport: Transport) -> list[str]:
        """A url that ends with the endpoint already (``OPENLINEAGE_URL=http://host/api/v1/lineage``):
        openlineage-python joins the two, and events go to ``/api/v1/api/v1/lineage``."""
        http = cast(HttpTransport, transport)
        url = public_url(str(http.url)).partition("?")[0]
        endpoint = str(http.endpoint).partition("?")[0].strip("/")
        path = urllib.parse.urlsplit(url).path.rstrip("/")
        if not endpoint or "://" in endpoint or not path.endswith("/" + endpoint):
            return []
        base = url.rstrip("/")[: -len(endpoint)].rstrip("/")
        return [
            f"the url {url} ends with the endpoint ({endpoint}) already: openlineage-python joins the two, so events "
            f"go to {urljoin(url, endpoint)}; give the url without it ({base})"
        ]

    def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
        """Asks the backend whether it answers, with a ``GET`` to the url and endpoint, and the transport's
        auth, headers and TLS settings: nothing is written there. With ``probe``, sends that one event instead,
        through the transport itself, as every event is sent (compression too)."""
        http = cast(HttpTransport, transport)
        return [_reach(http, keys) if probe is None else _probe(http, keys, probe)]


@register
class AsyncHttpKind(HttpKind):
    """openlineage-python's asynchronous HTTP transport: read and checked as ``http`` is (its probe is sent
    synchronously, for an answer with a status); the spool knows it by its class, as a transport of its own."""

    names = ("async_http",)
    config_class = AsyncHttpConfig
    conf_keys = (*HttpKind.conf_keys, "max_queue_size", "max_concurrent_requests")

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        return TransportKind.describe(self, transport, inner)

    def leave_retries_to_the_spool(self, transport: Transport) -> None:
        """Its retries are its own event loop's: left as they are."""

    def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
        return super().check(_synchronous(transport), keys, probe)


def _check_token_provider(path: str, where: str) -> None:
    """A ``TokenProvider`` class at ``path``, or a :class:`~spark_lineage.errors.ConfigError` naming the key."""
    from openlineage.client.transport.http import TokenProvider
    from openlineage.client.utils import import_from_string

    try:
        provider = import_from_string(path)
    except Exception as error:  # noqa: BLE001 - whatever the import raised, said with the key
        raise ConfigError(f"{where}.auth.type={path!r} cannot be imported ({short_reason(error)}).") from None
    if not inspect.isclass(provider) or not issubclass(provider, TokenProvider):
        raise ConfigError(
            f"{where}.auth.type={path!r} is not a TokenProvider class; accepted: api_key, jwt, oauth2, or the "
            "dotted path of a subclass of openlineage.client.transport.http.TokenProvider."
        )


def _auth(auth: dict[str, Any], where: str) -> dict[str, Any]:
    if str(auth.get("type", "")).replace("-", "_").lower() in ("api_key", "apikey"):
        auth["type"] = "api_key"
        if not (auth.get("apiKey") or auth.get("api_key") or auth.get("apikey")):
            raise ConfigError(f"{where}.auth.apiKey is required when {where}.auth.type=api_key.")
    elif auth.get("type") == "jwt":  # openlineage-python's JWT provider reads the reference's keys as they are
        for required in ("apiKey", "tokenEndpoint"):
            if not auth.get(required):
                raise ConfigError(f"{where}.auth.{required} is required when {where}.auth.type=jwt.")
        if isinstance(auth.get("tokenFields"), str):  # ``[token;access_token]``, as the Java client takes it
            auth["tokenFields"] = text_list(auth["tokenFields"])
    return auth


def _answer(transport: HttpTransport, keys: ConfKeys, request: Callable[[], Any]) -> Any:
    """What the backend answers ``request`` (a ``requests`` response), or the :class:`Finding` that says why it
    did not."""
    import requests

    url = public_url(urljoin(transport.url, transport.endpoint))  # no url parameter's value
    try:
        with quiet("openlineage", "urllib3"):
            return request()
    except requests.HTTPError as error:
        if error.response is not None:
            return error.response
        return Finding(PROBLEM, f"backend: {url} does not answer ({short_reason(error)})")
    except requests.Timeout:
        return Finding(PROBLEM, f"backend: {url} does not answer within {transport.timeout:g} s")
    except requests.RequestException as error:
        return Finding(PROBLEM, f"backend: {url} does not answer ({short_reason(error)})")
    except (RuntimeError, KeyError, ValueError) as error:  # a token provider that could not get a token
        auth = _AUTH_SETTINGS.get(type(transport.config.auth).__name__, ("auth.type",))
        return Finding(
            PROBLEM,
            f"backend: nothing sent to {url}: getting a token failed ({short_reason(error)}); check {keys.of(*auth)}",
        )


def _reach(transport: HttpTransport, keys: ConfKeys) -> Finding:
    def get() -> Any:
        _, headers = http_request(transport, "{}")  # the auth header and custom headers, as an event gets them
        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-encoding")}
        response = transport.session.get(
            urljoin(transport.url, transport.endpoint),
            headers=headers,
            timeout=transport.timeout,
            verify=transport.verify,
            cert=getattr(transport, "cert", None),  # openlineage-python 1.54's sslContext
            allow_redirects=False,
        )
        response.close()
        return response

    response = _answer(transport, keys, get)
    if isinstance(response, Finding):
        return response
    url = public_url(urljoin(transport.url, transport.endpoint))
    status = response.status_code
    answer = f"HTTP {status}{f' {response.reason}' if response.reason else ''}"
    if status in (401, 403):
        return _refused(url, answer, transport, keys)
    if status == 404:
        return Finding(
            PROBLEM,
            f"backend: {url} answers {answer} to a GET: the url or endpoint is wrong, or no OpenLineage backend "
            f"listens there; check {keys.of('url', 'endpoint')}",
        )
    if 300 <= status < 400 or (status >= 500 and status != 501):
        return Finding(
            PROBLEM,
            f"backend: {url} answers {answer} to a GET; check {keys.of('url', 'endpoint')}, and the backend's logs",
        )
    return Finding(
        OK, f"backend: {url} answers ({answer} to a GET, which writes nothing there; --send-test-event sends one event)"
    )


def _probe(transport: HttpTransport, keys: ConfKeys, probe: Any) -> Finding:
    response = _answer(transport, keys, lambda: transport.emit(probe))
    if isinstance(response, Finding):
        return response
    url = public_url(urljoin(transport.url, transport.endpoint))
    return _classify(url, response.status_code, response.reason, transport, keys, probe)


def _refused(url: str, answer: str, transport: HttpTransport, keys: ConfKeys) -> Finding:
    auth = _AUTH_SETTINGS.get(type(transport.config.auth).__name__)
    headers = f" (and the headers in {keys.of('headers.*')})" if transport.config.custom_headers else ""
    if auth is None:
        what = f"no credentials are configured: set {keys.of('auth.type', 'auth.apiKey')}{headers}"
    else:
        what = f"check {keys.of(*auth)}{headers}"
    return Finding(PROBLEM, f"backend: {url} refused the credentials ({answer}): {what}")


def _classify(
    url: str, status: int, reason: str | None, transport: HttpTransport, keys: ConfKeys, probe: Any
) -> Finding:
    answer = f"HTTP {status}{f' {reason}' if reason else ''}"
    if 200 <= status < 300:
        job = probe.job
        return Finding(
            OK, f"backend: {url} accepted a probe event ({answer}): job {job.name} in namespace {job.namespace}"
        )
    if status in (401, 403):
        return _refused(url, answer, transport, keys)
    if 400 <= status < 500:
        return Finding(
            PROBLEM,
            f"backend: {url} rejected a probe event ({answer}): the url or endpoint is wrong, or no OpenLineage "
            f"backend listens there; check {keys.of('url', 'endpoint')}",
        )
    if status >= 500:
        return Finding(
            PROBLEM, f"backend: {url} failed on a probe event ({answer}): the backend is in error, see its logs"
        )
    return Finding(PROBLEM, f"backend: {url} answered {answer} to a probe event; check {keys.of('url', 'endpoint')}")


def _synchronous(transport: Transport) -> HttpTransport:
    """An async_http transport's settings as the (synchronous) http transport, which answers with a status."""
    settings = cast(Any, transport).config
    return HttpTransport(
        HttpConfig(
            url=settings.url,
            endpoint=settings.endpoint,
            timeout=settings.timeout,
            verify=settings.verify,
            auth=settings.auth,
            compression=settings.compression,
            custom_headers=dict(settings.custom_headers),
            retry=dict(NO_RETRIES),
        )
    )
