"""New store files copied from a schema built once per process.

A new store used to get its schema by running every migration in turn on its own
file: about 20 ms of CPU each time, most of it in table renames (SQLite then reads
every other definition again), which was a twentieth of ingesting a 500-turn
conversation into a fresh store. Now the migrations run once per process, on an
in-memory database, and its compacted image (``VACUUM INTO``) is kept. A new store
is that image written to a file of its own beside the store's name, then put in
place under that name with a hard link, which fails if the name was taken meanwhile
(another process creating the same store): the file there is then opened as it is,
and its migrations run as they always did. The tables, their definitions and their
rows are those the migrations give (the times the migrations were applied are
stamped on the copy), so opening the file finds nothing to do.

Where the image cannot be made or linked (a file system without hard links, a
folder that refuses the temporary file), the migrations run on the new file as
before.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import uuid
from pathlib import Path

from arbormem.store.sqlite.common import PAGE_BYTES
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.sqlite.schema import migrate
from arbormem.timeutil import format_timestamp, utcnow

__all__ = ["create_from_template"]

log = logging.getLogger("arbormem.store.sqlite")

#: Permissions of a new store file, as SQLite gives its own (before the umask).
FILE_MODE = 0o644

_lock = threading.Lock()
_image: bytes | None = None
_unusable = False


def _build() -> bytes:
    """The image of an empty store at the latest schema."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute(f"PRAGMA page_size = {PAGE_BYTES}")
        migrate(conn, ":memory:")
        with tempfile.TemporaryDirectory(prefix="arbormem-template-") as folder:
            target = Path(folder) / "template.db"
            conn.execute("VACUUM INTO ?", (str(target),))
            return target.read_bytes()
    finally:
        conn.close()


def _template() -> bytes | None:
    global _image, _unusable
    with _lock:
        if _image is None and not _unusable:
            try:
                _image = _build()
            except (sqlite3.Error, OSError) as exc:
                log.info("new stores run their migrations: no schema image (%s)", exc)
                _unusable = True
        return _image


def create_from_template(path: str) -> bool:
    """Create the store file ``path`` from the schema image; False when a file is
    there already or the copy cannot be made (the caller then migrates the file)."""
    if os.path.lexists(path):
        return False
    image = _template()
    if image is None:
        return False
    folder = os.path.dirname(path) or "."
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.new")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except OSError as exc:
        log.debug("%s: migrating a new file instead of copying the schema: %s", path, exc)
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(image)
        _stamp(temporary)
        os.link(temporary, path)  # fails if the name was taken meanwhile
        return True
    except (OSError, sqlite3.Error) as exc:
        if not isinstance(exc, FileExistsError):
            log.debug("%s: migrating a new file instead of copying the schema: %s", path, exc)
        return False
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _stamp(path: str) -> None:
    """Date the copy's migrations now: they describe this store, made now."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # The file is nobody's yet: no journal, no waiting for the disk.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("UPDATE schema_migrations SET applied_at = ?", (format_timestamp(utcnow()),))
    finally:
        conn.close()
