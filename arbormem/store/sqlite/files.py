"""The files one SQLite store is made of, for tools that copy, measure or remove a
store whole: the database, its write-ahead log and shared-memory index, a
rollback journal left by a crash, and the folder of saved vector indexes beside it
(see :mod:`arbormem.store.sidecar`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from arbormem.store.sqlite.driver import sqlite3

#: Suffixes SQLite adds to the database's name for its companion files.
COMPANIONS = ("-wal", "-shm", "-journal")


def store_files(path: str | os.PathLike[str]) -> list[Path]:
    """The store's files that exist now, the database first (folders not included)."""
    base = Path(path)
    return [p for p in (base, *(Path(f"{base}{s}") for s in COMPANIONS)) if p.is_file()]


def cache_folder(path: str | os.PathLike[str]) -> Path:
    """The folder beside the store where saved vector indexes live."""
    return Path(f"{Path(path)}.ann")


def remove_store(path: str | os.PathLike[str]) -> None:
    """Delete the store and everything beside it that belongs to it."""
    base = Path(path)
    for suffix in ("", *COMPANIONS):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(cache_folder(base), ignore_errors=True)


def store_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of the database with its log and shared-memory files."""
    total = 0
    for f in store_files(path):
        try:
            total += f.stat().st_size
        except OSError:  # removed meanwhile
            pass
    return total


def log_holds_pages(path: str | os.PathLike[str]) -> bool:
    """Whether the write-ahead log beside the database holds any page."""
    wal = Path(f"{Path(path)}-wal")
    try:
        return wal.is_file() and wal.stat().st_size > 0
    except OSError:
        return False


def holds_no_message(path: str | os.PathLike[str]) -> bool:
    """Whether the arbormem store at ``path`` holds no message (False when it cannot
    be read, so that a caller deciding whether to delete it keeps it)."""
    try:
        # as_uri() quotes the path: a '#' or '%' in it cut the name short, and a stray
        # empty file was created under the cut name.
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            return bool(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def engine_version() -> str:
    """The version of the SQLite library the store runs on."""
    return sqlite3.sqlite_version
