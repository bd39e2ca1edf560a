"""The export format and the checks an import passes before anything is written.

An export is one JSON object::

    {"format": "arbormem-export", "version": 1, "exported_at": "...",
     "threads": [{"user": "...", "agent": "...",
                  "sessions": [{"id": "...", "metadata": {...},
                                "messages": [{"id", "index", "role", "speaker",
                                              "content", "timestamp", "metadata",
                                              "archived" (only when true)}]}]}]}

Vectors and the topic tree are derived, so they are not exported; an import
recomputes them, and archives again the exchanges marked archived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arbormem.errors import InputError
from arbormem.ingest import Where, check_name, prepare
from arbormem.models import Scope
from arbormem.store.base import Backend, NewMessage, Thread
from arbormem.timeutil import format_timestamp
from arbormem.validate import DEFAULT_LIMITS, Limits

EXPORT_FORMAT = "arbormem-export"
EXPORT_VERSION = 1


def export_thread(backend: Backend, thread: Thread) -> dict[str, Any]:
    """One thread as the export format's JSON object.

    The thread as it was when the export began: messages another process adds
    meanwhile (past the position it had reached, and perhaps in sessions read too
    late to be listed) are left for the next export."""
    end = backend.state(thread).next_index
    sessions: dict[str, dict[str, Any]] = {
        s.id: {"id": s.id, "metadata": dict(s.metadata), "messages": []}
        for s in backend.sessions(thread)
    }
    # Each message's own flag: a message archived with its exchange stays archived
    # after a new message joined that exchange (it then is only partly archived).
    archived = backend.archived_rowids(thread)
    for row in backend.iter_rows(thread):
        m = row.message
        if m.index >= end:
            break
        item = {
            "id": m.id,
            "index": m.index,
            "role": m.role,
            "speaker": m.speaker,
            "content": m.content,
            "timestamp": format_timestamp(m.timestamp),
            "metadata": dict(m.metadata),
        }
        if row.rowid in archived:
            item["archived"] = True
        sessions[m.session]["messages"].append(item)
    return {"user": thread.user, "agent": thread.agent, "sessions": list(sessions.values())}


def plan_import(
    backend: Backend, data: Any, name: str, max_bytes: int, limits: Limits = DEFAULT_LIMITS
) -> tuple[list[tuple[Scope, list[NewMessage], set[str]]], int]:
    """Validate a whole export before anything is written; returns what to append
    to each scope (with the ids of the messages to archive again) and how many
    messages were already stored. ``max_bytes`` limits each message's content,
    ``limits`` its names and metadata."""
    most = limits.name_bytes
    if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
        raise InputError(
            "is not an arbormem export",
            source=name,
            field="format",
            hint="produce one with 'arbormem export' or Memory.export()",
        )
    if data.get("version") != EXPORT_VERSION:
        raise InputError(
            f"export version {data.get('version')!r} is not supported (expected {EXPORT_VERSION})",
            source=name,
            field="version",
        )
    threads = data.get("threads")
    if not isinstance(threads, list):
        raise InputError("must be a list", source=name, field="threads")
    plan: list[tuple[Scope, list[NewMessage], set[str]]] = []
    seen_ids: set[str] = set()
    planned_next: dict[Scope, int] = {}  # per scope: the first index after this plan's
    skipped = 0
    for ti, t in enumerate(threads):
        where_t = f"threads[{ti}]"
        if not isinstance(t, Mapping):
            raise InputError("must be an object", source=name, field=where_t)
        scope = Scope(
            check_name(t.get("user"), "user", Where(name, None, where_t + "."), max_bytes=most)
            or "",
            check_name(t.get("agent"), "agent", Where(name, None, where_t + "."), max_bytes=most)
            or "",
        )
        if not scope.user or not scope.agent:
            raise InputError("needs 'user' and 'agent'", source=name, field=where_t)
        sessions = t.get("sessions")
        if not isinstance(sessions, list):
            raise InputError("must be a list", source=name, field=where_t + ".sessions")
        msgs: list[NewMessage] = []
        archived: set[str] = set()
        for si, s in enumerate(sessions):
            where_s = f"{where_t}.sessions[{si}]"
            if not isinstance(s, Mapping) or not isinstance(s.get("messages"), list):
                raise InputError(
                    "must be an object with a 'messages' list", source=name, field=where_s
                )
            key = check_name(s.get("id"), "id", Where(name, None, where_s + "."), max_bytes=most)
            if key is None:
                raise InputError("missing", source=name, field=where_s + ".id")
            for mi, m in enumerate(s["messages"]):
                new = _import_message(
                    m, key, Where(name, None, f"{where_s}.messages[{mi}]."), max_bytes, limits
                )
                if new.id in seen_ids:
                    raise InputError(
                        f"duplicate message id {new.id!r}",
                        source=name,
                        field=f"{where_s}.messages[{mi}].id",
                    )
                seen_ids.add(new.id)
                flag = m.get("archived", False)
                if not isinstance(flag, bool):
                    raise InputError(
                        f"must be true or false, got {flag!r}",
                        source=name,
                        field=f"{where_s}.messages[{mi}].archived",
                    )
                if flag:
                    archived.add(new.id)
                stored = backend.get(new.id)
                if stored is None:
                    msgs.append(new)
                elif stored.message.content == new.content and stored.message.scope == scope:
                    skipped += 1
                else:
                    raise InputError(
                        f"message id {new.id!r} already exists with different content "
                        "or in another scope",
                        source=name,
                        field=f"{where_s}.messages[{mi}].id",
                        hint="import into a fresh store, or forget the existing message",
                    )
        msgs.sort(key=lambda n: (n.index is None, n.index or 0))
        # Exported positions are kept when they all fit after what the thread holds
        # and do not collide; otherwise the messages are appended in their order.
        existing = backend.thread(scope.user, scope.agent)
        next_free = backend.state(existing).next_index if existing else 0
        # An earlier entry of this file for the same scope comes first.
        next_free = max(next_free, planned_next.get(scope, 0))
        given = [n.index for n in msgs if n.index is not None]
        if (
            len(given) != len(msgs)
            or len(set(given)) != len(given)
            or (given and min(given) < next_free)
        ):
            for n in msgs:
                n.index = None
            planned_next[scope] = next_free + len(msgs)
        elif given:
            planned_next[scope] = max(given) + 1
        plan.append((scope, msgs, archived))
    return plan, skipped


def _import_message(
    m: Any, session: str, where: Where, max_bytes: int, limits: Limits
) -> NewMessage:
    if not isinstance(m, Mapping):
        raise InputError("must be an object", source=where.source, field=where.prefix.rstrip("."))
    if m.get("timestamp") is None:
        raise InputError("missing", source=where.source, field=where.field("timestamp"))
    new = prepare(
        content=m.get("content"),
        role=m.get("role", "user"),
        speaker=m.get("speaker"),
        timestamp=m.get("timestamp"),
        metadata=m.get("metadata"),
        session=session,
        message_id=m.get("id"),
        where=where,
        max_bytes=max_bytes,
        limits=limits,
    )
    index = m.get("index")
    if index is not None and (
        isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 2**62
    ):
        raise InputError(
            "must be a non-negative integer below 2**62",
            source=where.source,
            field=where.field("index"),
        )
    new.index = index
    return new
