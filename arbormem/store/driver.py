"""The SQLite driver: a current SQLite where one installs, else Python's own.

Python's ``sqlite3`` links whatever SQLite the operating system has: on Debian 12
that is 3.40, built without lookaside memory. The ``pysqlite3-binary`` wheel
(Linux x86-64 only) carries SQLite 3.51 with the module's API. On the reference
machine it runs a search of a million-turn store in about a sixth less time
(p50 63 -> 52 ms, warm cache; LoCoMo-sized stores see no difference). The rest
of the store imports the module from here and does not care which it got; both
read and write the same file format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3
else:
    try:
        import pysqlite3.dbapi2 as sqlite3
    except ImportError:  # not installed, or no wheel for this platform
        import sqlite3

__all__ = ["sqlite3"]
