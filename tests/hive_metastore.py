"""A throwaway Hive metastore server for the tests: the ``HiveMetaStore`` that PySpark's own jars hold, over an
embedded Derby database in a directory of its own, listening on 127.0.0.1 on a free port; stopped when the
block ends. It lets a Spark session with Hive support reach its tables through ``hive.metastore.uris``, as a
cluster's sessions do."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

_STARTUP_SECONDS = 180
_SITE = """<configuration>
<property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName={db};create=true</value></property>
<property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
<property><name>hive.metastore.schema.verification</name><value>false</value></property>
<property><name>hive.metastore.warehouse.dir</name><value>{warehouse}</value></property>
<property><name>hive.async.log.enabled</name><value>false</value></property>
</configuration>
"""
# Hive's asynchronous logging needs the LMAX disruptor, which PySpark does not ship: it is turned off.


@contextlib.contextmanager
def hive_metastore(directory: Path, warehouse: Path) -> Iterator[str]:
    """Run a metastore keeping its database in ``directory``; yields its ``thrift://127.0.0.1:<port>`` URI."""
    import pyspark

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hive-site.xml").write_text(_SITE.format(db=directory / "metastore_db", warehouse=warehouse))
    java = str(Path(os.environ["JAVA_HOME"], "bin", "java")) if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        raise RuntimeError("no java here to run the Hive metastore")
    port = _free_port()
    classpath = f"{directory}:{Path(pyspark.__file__).parent / 'jars'}/*"
    command = [java, f"-Dderby.system.home={directory}", "-cp", classpath]
    command += ["org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port)]
    with (directory / "metastore.log").open("w") as log:
        server = subprocess.Popen(command, cwd=directory, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(port, server)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the Hive metastore exited with {server.returncode} (see its metastore.log)")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Hive metastore did not listen on port {port} within {_STARTUP_SECONDS} s")
