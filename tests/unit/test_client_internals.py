"""openlineage-python's private members this library uses (``spark_lineage.transports.client_internals``) are
still there in the installed client, and answer what they are used for: a release that renames or changes one
fails here, not in a job."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from spark_lineage.transports import client_internals as internals

ROOT = Path(__file__).resolve().parents[2]


def _http(**settings: object) -> HttpTransport:
    return HttpTransport(HttpConfig.from_dict({"url": "http://127.0.0.1:9", **settings}))


@pytest.mark.parametrize(("cls", "name"), [(c, n) for c, names in internals.PRIVATE_MEMBERS.items() for n in names])
def test_each_private_member_is_there(cls: type, name: str, tmp_path: Path) -> None:
    instance = _http() if cls is HttpTransport else FileTransport(FileConfig(log_file_path=str(tmp_path / "e")))
    assert hasattr(instance, name), f"openlineage-python's {cls.__name__} has no {name} any more"


def test_the_http_members_give_the_request_and_the_session() -> None:
    transport = _http(compression="gzip", custom_headers={"X-Team": "data"}, auth={"type": "api_key", "apiKey": "k"})
    body, headers = internals.http_request(transport, '{"a": 1}')
    assert json.loads(gzip.decompress(body)) == {"a": 1}
    assert headers["X-Team"] == "data" and headers["Authorization"] == "Bearer k"
    assert headers["Content-Encoding"] == "gzip"
    assert internals.made_http_session(transport) is None
    session = transport.session  # made on first use
    assert internals.made_http_session(transport) is session
    internals.prepare_http_session(transport, session)
    internals.forget_http_session(transport)
    assert internals.made_http_session(transport) is None


def test_the_file_members_give_the_path_and_its_handler(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    transport = FileTransport(FileConfig(log_file_path=str(path), append=True))
    assert internals.file_path(transport) == str(path)
    with internals.file_handler(transport).open_file(str(path), "a") as file:
        file.write("x\n")
    assert path.read_text() == "x\n"


def test_no_other_module_uses_the_clients_private_members() -> None:
    names = {name for members in internals.PRIVATE_MEMBERS.values() for name in members}
    users = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "spark_lineage").rglob("*.py")
        if path.name != "client_internals.py"
        and any(f".{name}" in path.read_text(encoding="utf-8") for name in names - {"_session"})
    }
    assert users == set()
