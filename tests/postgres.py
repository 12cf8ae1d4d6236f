"""A throwaway PostgreSQL server for tests, and a fresh database per test.

``CLOSEDLOOP_TEST_POSTGRES_URL`` (set by ``.ci/run``) points at a server to use; otherwise the first test that asks
starts one with the local PostgreSQL binaries (``initdb``, ``pg_ctl``) on 127.0.0.1 at a free port, in a temporary
directory, and stops it when the test session ends. Without either, the tests that need it are skipped and say why.

``tests/conftest.py`` imports the fixtures, so any test module can ask for ``postgres_url`` (a module that imported
them itself would shadow the conftest's and trip the linter's redefinition check). The server is a process-wide
singleton, started by the first test that asks.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

__all__ = ["ENV_VAR", "postgres_server_url", "postgres_url", "server_url"]

ENV_VAR = "CLOSEDLOOP_TEST_POSTGRES_URL"
_USER, _PASSWORD = "closedloop", "s3cret-for-tests"
_server: dict[str, str] = {}


def _binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, else the newest /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> tuple[dict, int | None]:
    """initdb refuses to run as root: run the server as the ``postgres`` user (or ``nobody``) then."""
    if os.geteuid() != 0:
        return {}, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid}, entry.pw_uid
    pytest.skip("running as root and neither a 'postgres' nor a 'nobody' user exists to run a PostgreSQL server")


def _start_server() -> str:
    bin_dir = _binaries()
    if bin_dir is None:
        pytest.skip(f"no PostgreSQL server binaries (initdb, pg_ctl) found; install Debian's postgresql or set {ENV_VAR}")
    run_as, uid = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="closedloop-pg-"))
    data, sockets, pwfile = root / "data", root / "sockets", root / "pwfile"
    sockets.mkdir()
    pwfile.write_text(_PASSWORD + "\n")
    if uid is not None:
        for path in (root, sockets, pwfile):
            os.chown(path, uid, -1)
    subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", _USER, "--auth=scram-sha-256",
                    f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True, **run_as)
    port = _free_port()
    # A test server: durability off (the tests kill clients, not the server), sockets only on 127.0.0.1.
    options = f"-h 127.0.0.1 -p {port} -k {sockets} -c fsync=off -c full_page_writes=off -c max_connections=200"
    subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "-t", "60",
                    "start"], check=True, capture_output=True, **run_as)

    def stop() -> None:
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True,
                       **run_as)
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://{_USER}:{_PASSWORD}@127.0.0.1:{port}/postgres"


def server_url() -> str:
    """URL of the server's maintenance database: from ``CLOSEDLOOP_TEST_POSTGRES_URL`` or a server started here."""
    if "url" not in _server:
        _server["url"] = os.environ.get(ENV_VAR) or _start_server()
    return _server["url"]


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


def _admin(url: str, statement: str) -> None:
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'closedloop[postgres]'")
    from sqlalchemy.engine import make_url

    libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The test server's maintenance-database URL (with its password)."""
    return server_url()


@pytest.fixture
def postgres_url(postgres_server_url):
    """A fresh, empty database on the test server for one test; dropped afterwards."""
    name = f"closedloop_test_{uuid.uuid4().hex[:12]}"
    _admin(postgres_server_url, f'CREATE DATABASE "{name}"')
    yield _with_database(postgres_server_url, name)
    _admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
