"""numpy arrays to and from pgvector's ``vector`` type, in its binary form.

Registered on each connection of a store: a float32 array passed as a query
parameter (or a COPY field of type ``vector``) is sent as a vector, and a
``vector`` read back is a float32 array. Lists of numbers stay arrays of SQL
numbers: only numpy arrays are vectors.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np

from arbormem.store.postgres.common import vector_bytes, vector_of, vector_text


def register_vector(conn: Any) -> None:
    """Teach a connection the ``vector`` type of the database it is connected to."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise RuntimeError("the database has no 'vector' type (CREATE EXTENSION vector)")

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: Any) -> bytes:
            return vector_bytes(obj)

    class VectorTextDumper(Dumper):
        format = Format.TEXT
        oid = info.oid

        def dump(self, obj: Any) -> bytes:
            values = np.asarray(obj, dtype=np.float32).reshape(-1)
            return ("[" + ",".join(repr(float(x)) for x in values) + "]").encode()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return vector_of(data)

    class VectorTextLoader(Loader):
        format = Format.TEXT

        def load(self, data: Any) -> np.ndarray:
            return vector_text(data)

    info.register(conn)
    conn.adapters.register_dumper(np.ndarray, VectorTextDumper)
    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)
    conn.adapters.register_loader(info.oid, VectorTextLoader)


# -- arrays in their text form ------------------------------------------------------------
#
# psycopg dumps a list parameter element by element in Python, and the write of an
# import's postings and tree nodes passes tens of thousands of elements at a time:
# a tenth of the importing thread's time. These build PostgreSQL's text form of a
# one-dimensional array at once instead, for a parameter the statement casts to its
# array type (``%s::int8[]``); the server reads it back to the same values.

_QUOTED = str.maketrans({"\\": "\\\\", '"': '\\"'})


def int_array(values: Iterable[int | None]) -> str:
    """Integers (None: NULL) as an array literal."""
    return "{" + ",".join(map(str, values)).replace("None", "NULL") + "}"


def text_array(values: Iterable[str | None]) -> str:
    """Strings (None: NULL) as an array literal, each quoted."""
    items = list(values)
    if None not in items:
        joined = "\x00".join(items)  # type: ignore[arg-type]
        if "\\" not in joined and '"' not in joined:
            return '{"' + joined.replace("\x00", '","') + '"}' if items else "{}"
    return (
        "{"
        + ",".join("NULL" if v is None else '"' + v.translate(_QUOTED) + '"' for v in items)
        + "}"
    )


def bool_array(values: Iterable[bool]) -> str:
    """Booleans as an array literal."""
    return "{" + ",".join("t" if v else "f" for v in values) + "}"


def time_array(values: Iterable[datetime | None]) -> str:
    """Times (None: NULL) as an array literal, in ISO 8601 with their offset."""
    return "{" + ",".join("NULL" if v is None else '"' + v.isoformat() + '"' for v in values) + "}"
