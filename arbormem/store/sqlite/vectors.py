"""Vectors in SQLite: little-endian float32 blobs by model and content hash, and a
running sum of each session's vectors."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from arbormem.errors import EmbedderError
from arbormem.store.sqlite.common import (
    batches,
    blob,
    read_rows,
)
from arbormem.store.sqlite.connection import SQLiteConnection
from arbormem.store.types import (
    Row,
    Thread,
)

log = logging.getLogger("arbormem.store.sqlite")


class SQLiteVectors(SQLiteConnection):
    """Vectors by model and content hash, and session sums."""

    def _add_to_session_sum(
        self,
        sid: int,
        chashes: Sequence[str],
        vectors: Mapping[str, np.ndarray] | None,
        model_id: str | None,
        new_session: bool,
    ) -> None:
        """Add new messages' vectors to their session's sum (see ``session_vectors``):
        to the stored sum, or to none for a new session, or to the session's whole
        sum read again when the stored one is missing or another model's. A session
        with a member that has no vector of the model gets no sum."""
        c = self._writer
        if not vectors or not model_id or any(h not in vectors for h in chashes):
            # Some message has no vector yet: the sum would miss it. Searches sum
            # the session from the vector index until an append rebuilds it.
            c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
            return
        added = np.stack([np.asarray(vectors[h], dtype=np.float32) for h in chashes]).sum(axis=0)
        row = c.execute(
            "SELECT model, total FROM session_vectors WHERE session_id = ?", (sid,)
        ).fetchone()
        size = 4 * len(added)
        if row is not None and row[0] == model_id and len(row[1]) == size:
            total = np.frombuffer(row[1], dtype="<f4") + added
        elif new_session:
            total = added
        else:
            blobs = [
                blob
                for (blob,) in c.execute(
                    "SELECT v.vec FROM messages m"
                    " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                    " WHERE m.session_id = ? AND m.archived = 0 ORDER BY m.idx",
                    (model_id, sid),
                )
            ]
            if not blobs or any(b is None or len(b) != size for b in blobs):
                # An older member lacks a vector (a failed embedding, another model):
                # searches sum it from the index, which embeds what is missing.
                c.execute("DELETE FROM session_vectors WHERE session_id = ?", (sid,))
                return
            # The new messages are stored already, so they are among these.
            total = np.stack([np.frombuffer(b, dtype="<f4") for b in blobs]).sum(axis=0)
        c.execute(
            "INSERT OR REPLACE INTO session_vectors (session_id, model, total) VALUES (?, ?, ?)",
            (sid, model_id, blob(total)),
        )

    def session_vector_sums(
        self, thread: Thread, sessions: Sequence[str], model_id: str
    ) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(sessions))
        out: dict[str, np.ndarray] = {}
        with self._reading() as conn:
            for chunk, marks in batches(keys, 300):
                for key, blob in conn.execute(
                    "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                    f" ON v.session_id = s.id WHERE s.thread_id = ? AND s.key IN ({marks})"
                    " AND v.model = ?",
                    [thread.id, *chunk, model_id],
                ):
                    out[key] = np.frombuffer(blob, dtype="<f4")
        return out

    def every_session_vector_sum(
        self, thread: Thread, model_id: str, dimensions: int, stop: threading.Event | None = None
    ) -> tuple[list[str], np.ndarray] | None:
        keys: list[str] = []
        chunks: list[bytes] = []
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT s.key, v.total FROM sessions s JOIN session_vectors v"
                " ON v.session_id = s.id WHERE s.thread_id = ? AND v.model = ?"
                " AND length(v.total) = ?",
                (thread.id, model_id, 4 * dimensions),
            )
            while rows := cursor.fetchmany(1024):
                if stop is not None and stop.is_set():
                    return None
                keys.extend(r[0] for r in rows)
                chunks.append(b"".join(r[1] for r in rows))
        # Read-only, over one buffer: the sums are shared by every search.
        matrix = np.frombuffer(b"".join(chunks), dtype="<f4").reshape(len(keys), dimensions)
        return keys, matrix

    def vectors(self, model_id: str, chashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        keys = list(dict.fromkeys(chashes))
        with self._reading() as conn:
            for chunk, marks in batches(keys):
                for chash, vec in conn.execute(
                    f"SELECT chash, vec FROM vectors WHERE model = ? AND chash IN ({marks})",
                    [model_id, *chunk],
                ):
                    out[chash] = np.frombuffer(vec, dtype="<f4")
        return out

    def put_vectors(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self.transaction():
            self._writer.executemany(
                # A stored vector is kept, unless it has another length (see thread_vectors).
                "INSERT INTO vectors (model, chash, dim, vec) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (model, chash) DO UPDATE SET dim = excluded.dim, vec = excluded.vec"
                " WHERE vectors.dim != excluded.dim",
                [(model_id, h, int(np.asarray(v).shape[-1]), blob(v)) for h, v in vectors.items()],
            )

    def thread_vectors(
        self,
        thread: Thread,
        model_id: str,
        after_rowid: int = 0,
        limit: int | None = None,
        dim: int | None = None,
    ) -> tuple[np.ndarray, list[str], np.ndarray, list[Row]]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT m.id, s.key, v.vec FROM messages m"
                " JOIN sessions s ON s.id = m.session_id"
                " LEFT JOIN vectors v ON v.model = ? AND v.chash = m.chash"
                " WHERE m.thread_id = ? AND m.id > ? AND m.archived = 0 ORDER BY m.id"
                " LIMIT ?",
                (model_id, thread.id, after_rowid, -1 if limit is None else limit),
            ).fetchall()
        size = None if dim is None else 4 * dim

        def usable(vec: bytes | None) -> bool:
            return vec is not None and (size is None or len(vec) == size)

        have = [r for r in rows if usable(r[2])]
        missing_ids = [r[0] for r in rows if not usable(r[2])]
        if size is None and len({len(r[2]) for r in have}) > 1:
            raise EmbedderError(
                f"stored vectors of {model_id} have different lengths; "
                "run 'arbormem reembed' to embed them again"
            )
        ids = np.fromiter((r[0] for r in have), dtype=np.int64, count=len(have))
        sessions = [r[1] for r in have]
        if have:
            matrix = np.frombuffer(b"".join(r[2] for r in have), dtype="<f4").reshape(len(have), -1)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        missing: list[Row] = []
        if missing_ids:
            with self._reading() as conn:
                missing = list(read_rows(conn, missing_ids).values())
        missing.sort(key=lambda row: row.rowid)
        return ids, sessions, matrix, missing

    def prune_vectors(self, keep_model: str) -> int:
        with self.transaction():
            cur = self._writer.execute("DELETE FROM vectors WHERE model != ?", (keep_model,))
            return int(cur.rowcount)

    def vector_models(self) -> dict[str, int]:
        with self._reading() as conn:
            return {
                m: n for m, n in conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model")
            }
