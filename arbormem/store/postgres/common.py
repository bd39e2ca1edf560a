"""What the PostgreSQL back-end's modules share: scope keys, row decoding, the
binary form of pgvector's ``vector``, lexical keys and BM25's constants."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from arbormem.models import Session
from arbormem.store.types import Row, Thread, message_row, session_row

#: FTS5's ``bm25()`` constants: the lexical search ranks exactly as SQLite's does.
K1 = 1.2
B = 0.75
#: A term's IDF is floored here, as FTS5 floors it (a term in most documents).
IDF_FLOOR = 1e-6

#: The longest term the index keys as written. A B-tree entry holds at most about
#: 2.7 KB, and a "word" of thousands of letters is possible input: longer terms are
#: keyed by a digest (queries map their terms the same way, so nothing changes for
#: search; the stored documents keep the term as written).
MAX_TERM_BYTES = 200

#: Lexical keys stored in ``lex_stats`` / ``lex_df`` by number (smaller rows).
KEY_CODES = {"turn": 0, "window": 1, "topic": 2, "segment": 3}

ROW_SELECT = (
    "SELECT m.id, m.uid, m.idx, m.role, m.speaker, m.content, m.ts, m.metadata, m.chash,"
    " s.key, t.user_id, t.agent_id, t.tenant FROM messages m"
    " JOIN sessions s ON s.scope_id = m.scope_id AND s.id = m.session_id"
    " JOIN threads t ON t.scope_id = m.scope_id AND t.id = m.thread_id"
)


def tenant_of(thread: Thread) -> str:
    """The tenant a thread belongs to."""
    return thread.tenant


@functools.lru_cache(maxsize=4096)  # asked for at every write of a thread: a digest each time
def scope_id(tenant: str, user: str) -> int:
    """The scope key of a user of a tenant: every scoped table has it in its key,
    so that a shard (Citus) or a query holds one user's rows. It is a
    digest of the two names, so a thread is found (and a query routed) from its
    names alone, with no lookup table; two scopes whose digests met would be told
    apart by the ``scopes`` table, which refuses the second."""
    digest = hashlib.blake2b(
        tenant.encode("utf-8", "surrogatepass") + b"\x00" + user.encode("utf-8", "surrogatepass"),
        digest_size=8,
        person=b"arbormem.scope",
    ).digest()
    return int.from_bytes(digest, "big") >> 1  # a positive bigint


def scope_of(thread: Thread) -> int:
    return scope_id(tenant_of(thread), thread.user)


def term_key(term: str) -> str:
    """The index key of a term (see :data:`MAX_TERM_BYTES`)."""
    if len(term) * 4 <= MAX_TERM_BYTES or len(term.encode("utf-8", "surrogatepass")) <= (
        MAX_TERM_BYTES
    ):
        return term
    return "#" + hashlib.sha1(term.encode("utf-8", "surrogatepass")).hexdigest()


def fts5_idf(n_docs: int, df: int) -> float:
    """FTS5's IDF of a term in ``df`` of ``n_docs`` documents."""
    # The two counts are read in two statements while other processes write, so a
    # term may have been counted in more documents than the total read before it.
    df = min(df, n_docs)
    idf = math.log((n_docs - df + 0.5) / (df + 0.5)) if n_docs > 0 else 0.0
    return idf if idf > 0 else IDF_FLOOR


def load_json(text: str | None) -> dict[str, Any]:
    if not text or text == "{}":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def dump_json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


def utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (the driver's zone is UTC already)."""
    return value if value.tzinfo is timezone.utc else value.astimezone(timezone.utc)


def row_of(r: Sequence[Any]) -> Row:
    return message_row(r, utc)


def session_of(r: Sequence[Any], thread: Thread) -> Session:
    return session_row(r, thread, utc)


# -- pgvector's ``vector`` in binary form -----------------------------------------------


def vector_bytes(vec: np.ndarray) -> bytes:
    """pgvector's binary form: dimensions (uint16), a zero, big-endian float32s."""
    values = np.asarray(vec, dtype=">f4").reshape(-1)
    return struct.pack(">HH", values.shape[0], 0) + values.tobytes()


def vector_of(data: bytes | bytearray | memoryview) -> np.ndarray:
    """A float32 array from pgvector's binary form."""
    raw = bytes(data)
    (dim,) = struct.unpack_from(">H", raw)
    return np.frombuffer(raw, dtype=">f4", count=dim, offset=4).astype(np.float32)


def vector_text(data: bytes | bytearray | memoryview | str) -> np.ndarray:
    """A float32 array from pgvector's text form (``[1,2,3]``)."""
    text = data if isinstance(data, str) else bytes(data).decode("ascii")
    inner = text.strip()[1:-1]
    if not inner:
        return np.zeros(0, dtype=np.float32)
    return np.asarray([float(x) for x in inner.split(",")], dtype=np.float32)


def windows_of(
    order: Sequence[int], present: Mapping[int, int], radius: int
) -> dict[int, tuple[list[int], list[int]]]:
    """For each message of a session's live order, the windows it belongs to:
    ``(window ids, window lengths)`` of the present windows (``present``: window id
    -> length) centred within ``radius`` positions of it, in order."""
    out: dict[int, tuple[list[int], list[int]]] = {}
    for i, mid in enumerate(order):
        ids: list[int] = []
        lens: list[int] = []
        for j in range(max(0, i - radius), min(len(order), i + radius + 1)):
            w = order[j]
            if w in present:
                ids.append(w)
                lens.append(present[w])
        out[mid] = (ids, lens)
    return out
