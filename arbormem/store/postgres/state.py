"""Per-session working memory in PostgreSQL: one JSON row per session."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from arbormem.store.postgres.common import load_json
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.types import Thread
from arbormem.timeutil import utcnow


class PostgresState(PostgresConnection):
    """Session state as JSON rows."""

    def session_state(self, thread: Thread, session: str) -> dict[str, Any]:
        with self._reading(thread) as conn:
            row = conn.execute(
                "SELECT state FROM session_state WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND session_key = %(k)s",
                {**self._keys(thread), "k": session},
            ).fetchone()
        return load_json(row[0]) if row else {}

    def put_session_state(self, thread: Thread, session: str, state: Mapping[str, Any]) -> None:
        with self._writing(thread) as conn:
            # Only for a thread that still exists: a late background upkeep must not
            # leave a row behind a forgotten thread.
            conn.execute(
                "INSERT INTO session_state (scope_id, thread_id, session_key, state, updated_at)"
                " SELECT %(s)s, %(t)s, %(k)s, %(v)s, %(u)s WHERE EXISTS (SELECT 1 FROM threads"
                " WHERE scope_id = %(s)s AND id = %(t)s)"
                " ON CONFLICT (scope_id, thread_id, session_key) DO UPDATE"
                " SET state = excluded.state, updated_at = excluded.updated_at",
                {
                    **self._keys(thread),
                    "k": session,
                    "v": json.dumps(dict(state), ensure_ascii=False),
                    "u": utcnow(),
                },
            )

    def session_states(self, thread: Thread) -> dict[str, dict[str, Any]]:
        with self._reading(thread) as conn:
            rows = conn.execute(
                "SELECT st.session_key, st.state FROM session_state st LEFT JOIN sessions s"
                " ON s.scope_id = st.scope_id AND s.thread_id = st.thread_id"
                " AND s.key = st.session_key WHERE st.scope_id = %(s)s AND st.thread_id = %(t)s"
                " ORDER BY s.first_index IS NULL, s.first_index, st.session_key",
                self._keys(thread),
            ).fetchall()
        return {key: state for key, text in rows if (state := load_json(text))}
