"""The SQLite driver: Python's own ``sqlite3``, or a newer SQLite on request.

Python's ``sqlite3`` links whatever SQLite the operating system has: on Debian 12
that is 3.40, built without lookaside memory. The ``pysqlite3-binary`` wheel
(manylinux x86-64 only; ``pip install 'arbormem[sqlite351]'``) carries SQLite
3.51 with the same API. On the reference machine it runs a search of a
million-turn store in about a sixth less time (p50 63 -> 52 ms, warm cache);
LoCoMo-sized stores see no difference.

It is used only when ``ARBORMEM_SQLITE_DRIVER=pysqlite3`` is set, because two
copies of SQLite in one process do not see each other's file locks: if anything
else in the process opens the same store with the standard ``sqlite3`` module
and closes it, arbormem's write lock is dropped and another process can write at
the same time, which can corrupt the file (sqlite.org/howtocorrupt.html, 2.2.1).
Set it only in processes that open the store through arbormem alone. Both
drivers read and write the same file format.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

#: The variable that chooses the driver: ``sqlite3`` (the default) or ``pysqlite3``.
DRIVER_VARIABLE = "ARBORMEM_SQLITE_DRIVER"


def _choose() -> str:
    wanted = os.environ.get(DRIVER_VARIABLE, "").strip().lower() or "sqlite3"
    if wanted not in ("sqlite3", "pysqlite3"):
        from arbormem.errors import ConfigError

        raise ConfigError(
            f"environment variable {DRIVER_VARIABLE}={wanted!r}: expected sqlite3 or pysqlite3"
        )
    return wanted


if TYPE_CHECKING:
    import sqlite3
elif _choose() == "pysqlite3":
    try:
        import pysqlite3.dbapi2 as sqlite3
    except ImportError as exc:
        from arbormem.errors import ConfigError

        raise ConfigError(
            f"{DRIVER_VARIABLE}=pysqlite3 but pysqlite3 is not installed: "
            "pip install 'arbormem[sqlite351]' (Linux x86-64), or unset the variable"
        ) from exc
else:
    import sqlite3

__all__ = ["DRIVER_VARIABLE", "sqlite3"]
