"""Which incoming messages are already stored, so that ingesting a file again (or a
log that has grown since) stores only what is new.

A message given with an ``id`` is the stored message of that id: skipped when it is
in the same scope with the same content, an :class:`~arbormem.errors.InputError`
naming the file, line and field otherwise. A message without an id repeats a stored
message of its thread with the same role, speaker and content, and

* with a timestamp: the same time, in the same session when it names one (any
  session when it does not: the idle-gap rule names it);
* without one: in the session it names. An undated message naming no session
  repeats nothing, since it starts a session of its own (see ``Memory.ingest``).

Each stored message is repeated at most once: a file saying "ok" three times at one
moment, stored once before, adds one more "ok" when it holds four. Matches are taken
in thread order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from arbormem.errors import InputError
from arbormem.ingest.formats import Record
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import NewMessage, Thread


def find_stored(
    backend: Backend,
    thread: Thread,
    records: Sequence[Record],
    prepared: Sequence[NewMessage],
    sessions: Sequence[str | None],
) -> dict[int, Message]:
    """The positions of ``prepared`` already stored in ``thread``, each with the stored
    message it repeats. ``records`` are what was given (which fields were), and
    ``sessions`` the session each message names (its own, else the caller's)."""
    found: dict[int, Message] = {}
    used: set[str] = set()
    for i, (record, new) in enumerate(zip(records, prepared)):
        if record.id is None:
            continue
        row = backend.get(new.id)
        if row is None:
            continue
        stored = row.message
        where = record.where
        if (stored.user, stored.agent) != (thread.user, thread.agent):
            raise InputError(
                f"message id {new.id!r} is already stored in another scope",
                source=where.source,
                line=where.line,
                field=where.field("id"),
                hint="ids are unique in a store: give this message another id, or none",
            )
        if stored.content != new.content:
            raise InputError(
                f"message id {new.id!r} is already stored with different content",
                source=where.source,
                line=where.line,
                field=where.field("id"),
                hint="give the changed message a new id, or forget the stored one first",
            )
        found[i] = stored
        used.add(stored.id)
    wanted = [
        i
        for i, record in enumerate(records)
        if record.id is None and (record.timestamp is not None or sessions[i] is not None)
    ]
    if not wanted or backend.state(thread).next_index == 0:
        return found
    candidates = backend.with_hashes(thread, [prepared[i].chash for i in wanted])
    # One queue of stored messages per key, in thread order, built for the kinds of key
    # this batch asks for (dated and named, dated, undated and named).
    queues: dict[tuple[bool, bool], dict[Hashable, deque[Message]]] = {}
    for i in wanted:
        new, session = prepared[i], sessions[i]
        dated = records[i].timestamp is not None
        kind = (dated, session is not None)
        if kind not in queues:
            queues[kind] = {}
            for row in candidates:
                key = _key(row.message, row.message.session, kind)
                queues[kind].setdefault(key, deque()).append(row.message)
        queue = queues[kind].get(_key(new, session, kind))
        while queue and queue[0].id in used:
            queue.popleft()  # repeated already, under another kind of key
        if queue:
            stored = queue.popleft()
            found[i] = stored
            used.add(stored.id)
    return found


def _key(m: Message | NewMessage, session: str | None, kind: tuple[bool, bool]) -> Hashable:
    dated, named = kind
    return (
        m.role,
        m.speaker,
        m.content,
        m.timestamp if dated else None,
        session if named else None,
    )
