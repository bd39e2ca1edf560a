"""A PostgreSQL back-end with pgvector, for several processes (and machines) on
one database (``pip install 'arbormem[postgres]'``).

One class, :class:`PostgresBackend`, assembled from one module per capability of
:mod:`arbormem.store` as the SQLite back-end is: :mod:`.connection` (the pool,
transactions and per-thread locks), :mod:`.messages` (and :mod:`.deleting`),
:mod:`.lexical` (with :mod:`.bm25`, :mod:`.windows` and :mod:`.termstats`), :mod:`.vectors`,
:mod:`.tree`, :mod:`.state`, :mod:`.records` and :mod:`.images`; :mod:`.schema` holds the tables and their
migrations, :mod:`.adapt` the ``vector`` type's binary form.
``open_store("postgresql://...")`` opens it (see :func:`open_postgres`).
"""

from __future__ import annotations

from typing import Any

from arbormem.store.base import Backend
from arbormem.store.postgres.deleting import PostgresDeletes


class PostgresBackend(PostgresDeletes, Backend):
    """Messages, postings, vectors, trees, session state, typed records and image
    memories in a PostgreSQL database."""


def open_postgres(url: str, **options: Any) -> PostgresBackend:
    """The opener :func:`arbormem.store.open_store` calls for ``postgresql://`` URLs."""
    return PostgresBackend(url, **options)


__all__ = ["PostgresBackend", "open_postgres"]
