"""The export format and the checks an import passes before anything is written.

An export is one JSON object::

    {"format": "arbormem-export", "version": 4, "exported_at": "...",
     "threads": [{"user": "...", "agent": "...",
                  "records" (version 3): {"format": 1, "records": [...],
                                          "composites": [...]},
                  "images" (version 4): [{"id", "sha256", ..., "data"}],
                  "sessions": [{"id": "...", "metadata": {...},
                                "messages": [{"id", "index", "role", "speaker",
                                              "content", "timestamp", "metadata",
                                              "archived" (only when true)}],
                                "state" (only when stored): {"mode", "tracker",
                                    "summary", "summary_upto", "seen", "floor"}}]}]}

``state`` is the session's working memory (:mod:`arbormem.context.working`): its memory
mode, what the mode tracks, and its rolling summary. A session that holds only a
state (a mode set before its first message) is listed with no messages. ``records``
are the thread's typed records and composites, every version, as
:meth:`arbormem.records.RecordService.to_dict` writes them; an import puts them in
the thread it restores (their ``scope`` becomes that thread's). ``images`` are the
thread's image memories with their bytes in base64 (see :mod:`arbormem.images.transfer`).
Version 1 had no states, version 2 no records and version 3 no images; their exports
still import (the records of their messages are extracted again after the import; their
images come back as the caption messages they had, without the pictures).

Vectors and the topic tree are derived, so they are not exported; an import
recomputes them, and archives again the exchanges marked archived.
"""

from __future__ import annotations

import bisect
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from arbormem import arguments
from arbormem.arguments import DEFAULT_LIMITS, Limits
from arbormem.context.modes import MODES, get_mode
from arbormem.context.trackers import new_tracker, tracker_from_dict
from arbormem.errors import ArbormemError, InputError
from arbormem.images.transfer import PlannedImage, check_images, export_images
from arbormem.ingest.formats import parse_json, read_bytes_as_text
from arbormem.ingest.validate import Where, check_name, prepare
from arbormem.models import Scope
from arbormem.records.model import Composite, Record
from arbormem.records.service import RecordService, parse_export
from arbormem.results import Exported
from arbormem.store.base import Backend
from arbormem.store.types import NewMessage, Thread
from arbormem.timeutil import format_timestamp, utcnow

log = logging.getLogger(__name__)

EXPORT_FORMAT = "arbormem-export"
EXPORT_VERSION = 4
#: The versions an import reads (1: before session states were exported; 2: before
#: records were; 3: before images were).
IMPORT_VERSIONS = (1, 2, 3, 4)
#: Positions stay below this (as message indices do).
MAX_POSITION = 2**62


class ThreadPlan(NamedTuple):
    """What an import appends to one scope."""

    scope: Scope
    messages: list[NewMessage]
    #: Ids of the messages to archive again.
    archived: set[str]
    #: Session states by session, their positions in the store's numbering.
    states: dict[str, dict[str, Any]]
    #: The thread's records and composites, checked (None: the export has none).
    records: tuple[list[Record], list[Composite]] | None = None
    #: The thread's image memories, checked, bytes included.
    images: tuple[PlannedImage, ...] = ()


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
    states = backend.session_states(thread)
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
    for key, stored in states.items():
        try:
            state = check_state(stored, Where(f"session {key!r} of {thread.user}/{thread.agent}"))
        except InputError as exc:
            # Loading it would rebuild it too: a damaged state is worth nothing.
            log.warning("a damaged session state is left out of the export: %s", exc)
            continue
        sessions.setdefault(key, {"id": key, "metadata": {}, "messages": []})["state"] = state
    records = RecordService(backend, thread).to_dict()
    records.pop("scope")  # an import gives them the scope of the thread it restores
    for item in (*records["records"], *records["composites"]):
        item.pop("scope")
    return {
        "user": thread.user,
        "agent": thread.agent,
        "sessions": list(sessions.values()),
        "records": records,
        "images": export_images(backend, thread),
    }


def _import_records(
    value: Any, scope: Scope, name: str, where: str
) -> tuple[list[Record], list[Composite]]:
    """A thread's exported records, checked, in ``scope``."""
    if not isinstance(value, Mapping) or not all(
        isinstance(value.get(k, []), list) for k in ("records", "composites")
    ):
        raise InputError(
            "must be an object with 'records' and 'composites' lists", source=name, field=where
        )
    scoped = {
        **value,
        "scope": str(scope),
        "records": [_scoped(r, scope) for r in value.get("records", [])],
        "composites": [_scoped(c, scope) for c in value.get("composites", [])],
    }
    try:
        return parse_export(scoped, str(scope), source=name)
    except InputError as exc:
        raise InputError(
            exc.problem, source=name, field=f"{where}.{exc.field}", hint=exc.hint
        ) from None


def _scoped(item: Any, scope: Scope) -> Any:
    return {**item, "scope": str(scope)} if isinstance(item, Mapping) else item


def check_state(value: Any, where: Where) -> dict[str, Any]:
    """A session state from an export (or the store), checked and in its stored form.

    Keys other than those :class:`arbormem.context.working.SessionMemory` stores are
    left out; a missing tracker is an empty one of the mode."""

    def fail(message: str, name: str) -> InputError:
        return InputError(message, source=where.source, field=where.field(name))

    if not isinstance(value, Mapping):
        raise fail(f"must be an object, got {type(value).__name__}", "state")
    try:
        mode = get_mode(value.get("mode", "")).name
    except ArbormemError:
        raise fail(
            f"must be one of {', '.join(MODES)}, got {value.get('mode')!r}", "state.mode"
        ) from None
    saved = value.get("tracker")
    if saved is None:
        tracker = new_tracker(mode).to_dict()
    elif not isinstance(saved, Mapping) or saved.get("mode") != mode:
        raise fail(f"must be a saved {mode} tracker (its 'mode' is {mode!r})", "state.tracker")
    else:
        try:
            tracker = tracker_from_dict(saved).to_dict()
        except ArbormemError as exc:
            raise fail(f"cannot be restored: {exc}", "state.tracker") from None
    summary = value.get("summary") or ""
    if not isinstance(summary, str):
        raise fail(f"must be a string, got {type(summary).__name__}", "state.summary")
    out: dict[str, Any] = {"mode": mode, "tracker": tracker, "summary": summary}
    for name in ("summary_upto", "seen", "floor"):
        n = value.get(name) or 0
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < MAX_POSITION:
            raise fail("must be a non-negative integer below 2**62", f"state.{name}")
        out[name] = n
    return out


def _renumbered(state: dict[str, Any], given: list[int], first: int) -> dict[str, Any]:
    """``state`` with its positions moved along with messages appended from ``first``
    on, in the order of their exported positions ``given`` (sorted): a position
    becomes that of the first message at or after it."""
    moved = dict(state)
    for name in ("summary_upto", "seen", "floor"):
        moved[name] = first + bisect.bisect_left(given, state[name])
    return moved


def plan_import(
    backend: Backend,
    data: Any,
    name: str,
    max_bytes: int,
    limits: Limits = DEFAULT_LIMITS,
    tenant: str = "",
) -> tuple[list[ThreadPlan], int]:
    """Validate a whole export before anything is written; returns what to append
    to each scope and how many messages were already stored. ``max_bytes`` limits
    each message's content, ``limits`` its names and metadata; the threads go to
    ``tenant`` (an export names no tenant: it is restored where it is imported)."""
    most = limits.name_bytes
    if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
        raise InputError(
            "is not an arbormem export",
            source=name,
            field="format",
            hint="produce one with 'arbormem export' or Memory.export()",
        )
    version = data.get("version")
    if isinstance(version, bool) or version not in IMPORT_VERSIONS:
        raise InputError(
            f"export version {version!r} is not supported (this arbormem reads "
            f"{', '.join(map(str, IMPORT_VERSIONS[:-1]))} and {IMPORT_VERSIONS[-1]})",
            source=name,
            field="version",
        )
    threads = data.get("threads")
    if not isinstance(threads, list):
        raise InputError("must be a list", source=name, field="threads")
    plan: list[ThreadPlan] = []
    seen_ids: set[str] = set()
    seen_images: set[str] = set()
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
            tenant,
        )
        if not scope.user or not scope.agent:
            raise InputError("needs 'user' and 'agent'", source=name, field=where_t)
        sessions = t.get("sessions")
        if not isinstance(sessions, list):
            raise InputError("must be a list", source=name, field=where_t + ".sessions")
        msgs: list[NewMessage] = []
        archived: set[str] = set()
        states: dict[str, dict[str, Any]] = {}
        sessions_of: dict[str, str] = {}  # the thread's message ids, with their session
        for si, s in enumerate(sessions):
            where_s = f"{where_t}.sessions[{si}]"
            if not isinstance(s, Mapping) or not isinstance(s.get("messages"), list):
                raise InputError(
                    "must be an object with a 'messages' list", source=name, field=where_s
                )
            key = check_name(s.get("id"), "id", Where(name, None, where_s + "."), max_bytes=most)
            if key is None:
                raise InputError("missing", source=name, field=where_s + ".id")
            if s.get("state") is not None:
                states[key] = check_state(s["state"], Where(name, None, where_s + "."))
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
                sessions_of[new.id] = key
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
        existing = backend.thread(scope.user, scope.agent, tenant=scope.tenant)
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
            states = {k: _renumbered(st, given, next_free) for k, st in states.items()}
        elif given:
            planned_next[scope] = max(given) + 1
        records = (
            _import_records(t["records"], scope, name, where_t + ".records")
            if t.get("records") is not None
            else None
        )
        images = (
            tuple(check_images(t["images"], sessions_of, name, where_t + ".images", seen_images))
            if t.get("images") is not None
            else ()
        )
        plan.append(ThreadPlan(scope, msgs, archived, states, records, images))
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


def export_document(backend: Backend, threads: Sequence[Thread]) -> dict[str, Any]:
    """The export format's document for these threads."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": format_timestamp(utcnow()),
        "threads": [export_thread(backend, t) for t in threads],
    }


def export_target(backend: Backend, dest: Any) -> Path | None:
    """Where an export goes (None: nowhere), refused when it cannot be written there."""
    target = None if dest is None else arguments.path(dest, "dest")
    if target is not None and (target.is_dir() or not target.name):
        raise InputError("is a folder", field="dest", hint="give a file path to write to")
    if target is not None and backend.owns_path(target):
        # Replacing the database with its own export destroyed the store.
        raise InputError(
            "is this store's own file", source=str(target), hint="export to another file"
        )
    return target


def export_to(backend: Backend, threads: Sequence[Thread], target: Path | None) -> Exported:
    """The export of ``threads``, also written to ``target`` when given."""
    document = export_document(backend, threads)
    if target is not None:
        write_export(document, target)
    return Exported(
        document=document,
        threads=len(document["threads"]),
        messages=sum(
            len(s["messages"]) for t in document["threads"] for s in t.get("sessions", [])
        ),
        records=sum(len(t.get("records", {}).get("records", [])) for t in document["threads"]),
        images=sum(len(t.get("images", [])) for t in document["threads"]),
        path=None if target is None else str(target),
    )


def read_import(source: Any) -> tuple[Any, str]:
    """An export to import (parsed JSON, or a file read and parsed) and its name."""
    if isinstance(source, Mapping):
        return source, "<import>"
    path = arguments.path(source, "source")
    return parse_json(read_bytes_as_text(path), str(path)), str(path)


def write_export(document: Mapping[str, Any], path: Path) -> None:
    """Write an export to ``path`` atomically: all of it, or the old file left as it was."""
    # A name of its own: a fixed '<dest>.tmp' overwrote any file of that name.
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        tmp.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        if tmp.is_file():
            tmp.unlink()
        raise InputError(
            f"cannot write the export there: {exc.strerror or exc}",
            source=str(path),
            hint="give a file path in a folder that exists and can be written",
        ) from None
