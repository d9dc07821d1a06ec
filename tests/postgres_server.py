"""A throwaway PostgreSQL server for the tests: Debian's packages (``scripts/test`` installs them), a fresh
cluster in a temporary directory, listening on 127.0.0.1 on a free port, with a password-checked user; stopped
and removed afterwards. The system cluster is never touched.

PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` user the package creates.
The server is this process's child and is told to quit if this process dies (``setpriv --pdeathsig``), so
none outlives a test run.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server binaries here; the message says how to get them."""


@dataclass(frozen=True)
class Postgres:
    """A running server: how to reach it."""

    port: int
    user: str
    password: str
    database: str
    host: str = "127.0.0.1"

    @property
    def jdbc_url(self) -> str:
        """With the credentials as parameters: the JDBC driver has no ``user:password@`` form."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}?user={self.user}&password={self.password}"


def binaries() -> Path:
    """The directory of ``initdb`` and ``postgres``: ``$PG_BINDIR``, else Debian's newest version."""
    configured = os.environ.get("PG_BINDIR")
    found = [configured] if configured else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version)
    for directory in reversed(found):
        if Path(directory, "initdb").is_file():
            return Path(directory)
    raise PostgresUnavailableError(
        "PostgreSQL is not installed: run `apt-get install postgresql` (scripts/test does it as root), "
        "or set PG_BINDIR to the directory holding initdb and postgres."
    )


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """Start a server, yield it, stop it and remove its files."""
    bin_dir = binaries()
    as_user = _server_user()
    base = Path(tempfile.mkdtemp(prefix="spark-lineage-pg-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        if as_user is not None:
            os.chown(base, as_user.pw_uid, as_user.pw_gid)
        admin_password, server = secrets.token_hex(12), Postgres(_free_port(), "lineage", secrets.token_hex(12), "shop")
        password_file = base / "pw"
        password_file.write_text(admin_password + "\n")
        password_file.chmod(0o600)
        if as_user is not None:
            os.chown(password_file, as_user.pw_uid, as_user.pw_gid)
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(base / "data"), "-U", "postgres", f"--pwfile={password_file}",
             "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync"],
            check=True, capture_output=True, **_as(as_user),
        )  # fmt: skip
        log = (base / "server.log").open("wb")
        # setpriv makes the server quit if the test run dies (PR_SET_PDEATHSIG) before it becomes postgres.
        process = subprocess.Popen(
            ["setpriv", "--pdeathsig", "QUIT", str(bin_dir / "postgres"), "-D", str(base / "data"),
             "-p", str(server.port), "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={base}",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            stdout=log, stderr=subprocess.STDOUT, **_as(as_user),
        )  # fmt: skip
        psql = _psql_runner(bin_dir, base, server.port)
        _wait_until_ready(psql, process, base / "server.log")
        psql("postgres", f"CREATE ROLE {server.user} LOGIN PASSWORD '{server.password}'")
        psql("postgres", f"CREATE DATABASE {server.database} OWNER {server.user}")
        yield server
    finally:
        if process is not None:
            process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(base, ignore_errors=True)


def run_sql(server: Postgres, sql: str) -> None:
    """Run SQL as the server's user, over TCP with its password (so the password is really checked)."""
    environment = {**os.environ, "PGPASSWORD": server.password}
    subprocess.run(
        [str(binaries() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", server.host, "-p", str(server.port),
         "-U", server.user, "-d", server.database],
        input=sql.encode(), env=environment, check=True, capture_output=True,
    )  # fmt: skip


def _psql_runner(bin_dir: Path, socket_dir: Path, port: int) -> Callable[[str, str], None]:
    def run(database: str, sql: str) -> None:
        subprocess.run(
            [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(socket_dir), "-p", str(port),
             "-U", "postgres", "-d", database],
            input=sql.encode(), check=True, capture_output=True,
        )  # fmt: skip

    return run


def _wait_until_ready(psql: Callable[[str, str], None], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited at start-up:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            psql("postgres", "SELECT 1")
            return
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: ``postgres`` when we are root, else ourselves (``None``)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailableError("running as root needs the `postgres` user the Debian package creates") from None


def _as(user: pwd.struct_passwd | None) -> dict[str, Any]:
    """``subprocess`` arguments that run a command as ``user`` (no change when ``None``)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _version(directory: str) -> tuple[int, ...]:
    return tuple(int(part) for part in Path(directory).parent.name.split(".") if part.isdigit()) or (0,)
