"""numpy arrays to and from pgvector's ``vector`` type, in its binary form.

Registered on each connection of a store: a float32 array passed as a query
parameter (or a COPY field of type ``vector``) is sent as a vector, and a
``vector`` read back is a float32 array. Lists of numbers stay arrays of SQL
numbers: only numpy arrays are vectors.
"""

from __future__ import annotations

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
