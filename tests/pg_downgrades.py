"""Scripts that write a PostgreSQL store of the newest schema back as an older
schema kept it, for the tests of the migrations that move it forward again.

Each script undoes one migration; a test for an older one runs the newer ones'
scripts first (``TO_SCHEMA_7`` before ``TO_SCHEMA_6``, and that before
``test_pg_message_leaves.TO_SCHEMA_5``).
"""

from __future__ import annotations

import psycopg

from arbormem.store.postgres import schema as pg_schema


def downgrade(url: str, script: str) -> int:
    """Run ``script`` on the store at ``url`` (schema ``arbormem``); its version after."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO arbormem")
        for statement in pg_schema._statements(script):
            conn.execute(statement)
        return pg_schema.current_version(conn)


#: Schema 8's window reach ahead taken out of the threads, as schema 7 kept them.
TO_SCHEMA_7 = """
ALTER TABLE threads DROP COLUMN window_ahead;
DELETE FROM schema_migrations WHERE version >= 8
"""

#: Schema 7's flag on the turn postings taken out, as schema 6 kept them.
TO_SCHEMA_6 = (
    TO_SCHEMA_7
    + """;
DROP INDEX turn_postings_ending;
ALTER TABLE turn_postings DROP COLUMN ends;
DELETE FROM schema_migrations WHERE version >= 7
"""
)
