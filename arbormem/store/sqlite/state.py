"""Per-session working memory in SQLite: one JSON row per session."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from arbormem.store.sqlite.common import (
    load_json,
)
from arbormem.store.sqlite.connection import SQLiteConnection
from arbormem.store.types import (
    Thread,
)
from arbormem.timeutil import format_timestamp, utcnow

log = logging.getLogger("arbormem.store.sqlite")


class SQLiteState(SQLiteConnection):
    """Session state as JSON rows."""

    def session_state(self, thread: Thread, session: str) -> dict[str, Any]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT state FROM session_state WHERE thread_id = ? AND session_key = ?",
                (thread.id, session),
            ).fetchone()
        return load_json(row[0]) if row else {}

    def put_session_state(self, thread: Thread, session: str, state: Mapping[str, Any]) -> None:
        with self.transaction():
            # Only for a thread that still exists: a late background upkeep must not
            # leave a row that a new thread reusing the id would inherit.
            self._writer.execute(
                "INSERT OR REPLACE INTO session_state (thread_id, session_key, state, updated_at)"
                " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM threads WHERE id = ?)",
                (
                    thread.id,
                    session,
                    json.dumps(dict(state), ensure_ascii=False),
                    format_timestamp(utcnow()),
                    thread.id,
                ),
            )

    def session_states(self, thread: Thread) -> dict[str, dict[str, Any]]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT st.session_key, st.state FROM session_state st"
                " LEFT JOIN sessions s ON s.thread_id = st.thread_id AND s.key = st.session_key"
                " WHERE st.thread_id = ?"
                " ORDER BY s.first_index IS NULL, s.first_index, st.session_key",
                (thread.id,),
            ).fetchall()
        return {key: state for key, text in rows if (state := load_json(text))}
