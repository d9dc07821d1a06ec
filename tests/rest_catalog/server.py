"""Iceberg's REST catalog server (``org.apache.iceberg.rest.RESTCatalogServer``) on loopback, for tests.

Its jars come from Maven Central (``pom.xml`` beside this file) into ``.cache/rest-catalog/`` on first use; the
server runs as a separate JVM with a JDBC (sqlite) catalog behind it and is stopped when the test is done.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent
LIB = HERE.parent.parent / ".cache" / "rest-catalog" / "lib"


def install() -> Path:
    """Resolve the server's classpath with Maven, once."""
    if not any(LIB.glob("iceberg-open-api-*-test-fixtures.jar")):
        LIB.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mvn", "-q", "-f", str(HERE / "pom.xml"), "dependency:copy-dependencies", f"-DoutputDirectory={LIB}"],
            check=True,
            timeout=900,
        )
    return LIB


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def rest_catalog_server(warehouse: Path) -> Iterator[str]:
    """Start the server with its warehouse under ``warehouse``; yields its URI; stops it afterwards."""
    lib = install()
    port = _free_port()
    env = {**os.environ, "CATALOG_REST_PORT": str(port), "CATALOG_WAREHOUSE": str(warehouse)}
    log = (warehouse.parent / "rest-catalog-server.log").open("w")
    process = subprocess.Popen(
        ["java", "-cp", f"{lib}/*", "org.apache.iceberg.rest.RESTCatalogServer"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/v1/config", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the REST catalog server did not start; see {log.name}") from None
                time.sleep(0.3)
        yield uri
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
