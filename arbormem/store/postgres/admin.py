"""Stores side by side on one PostgreSQL database, for benchmarks and tools.

A store lives in a schema of its own (``?schema=NAME`` in its URL, ``arbormem``
by default), so a benchmark makes a fresh store per conversation with one
``CREATE SCHEMA`` (no ``CREATEDB`` privilege, no extension to install again) and
drops it with ``DROP SCHEMA ... CASCADE``.
"""

from __future__ import annotations

import re
import urllib.parse

from arbormem.errors import ConfigError, StoreError
from arbormem.store.postgres.connection import DEFAULT_SCHEMA, redact, split_url


def is_server_url(target: str) -> bool:
    """Whether a ``--db`` value names a PostgreSQL store rather than a file."""
    return target.split("://", 1)[0].lower() in ("postgresql", "postgres") and "://" in target


def with_schema(url: str, schema: str) -> str:
    """The URL of the store in ``schema`` of the same database."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ConfigError(f"schema name {schema!r}: letters, digits and underscores, 63 at most")
    parts = urllib.parse.urlsplit(url)
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if k != "schema"
    ]
    query.append(("schema", schema))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def schema_of(url: str) -> str:
    return split_url(url)[1].get("schema") or DEFAULT_SCHEMA


def _connect(url: str):  # type: ignore[no-untyped-def]
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(
            "a postgresql:// store needs the postgres extra: pip install 'arbormem[postgres]'"
        ) from exc
    libpq, _ = split_url(url)
    try:
        return psycopg.connect(libpq, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {redact(url)}: {exc}".strip()) from exc


def drop_store(url: str) -> None:
    """Delete the store at ``url`` (its schema and everything in it)."""
    schema = schema_of(url)
    with _connect(url) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def store_exists(url: str) -> bool:
    """Whether the store's schema holds arbormem's tables."""
    schema = schema_of(url)
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'schema_migrations'",
            (schema,),
        ).fetchone()
    return row is not None


def store_bytes(url: str) -> int:
    """The store's tables and indexes on disk, in bytes."""
    schema = schema_of(url)
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
            " AND c.relkind IN ('r', 'm', 'p')",
            (schema,),
        ).fetchone()
    return int(row[0])
