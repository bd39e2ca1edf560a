"""The write path: from incoming messages to committed rows and a grown tree.

:class:`Writer` does what :meth:`Memory.add <arbormem.Memory.add>`, ``add_many``,
``ingest``, ``import_`` and ``reembed`` ask for, on an :class:`~arbormem.engine.Engine`:

1. every message is checked and normalised (:mod:`arbormem.ingest.validate`);
2. its text is embedded, before the write lock is taken (a failing embedder does not
   lose a message: it is stored without a vector and embedded later);
3. under the write lock, each message gets its session (named, or by the idle gap);
   with an LLM, the first exchange of a live add is placed in the tree by it;
4. in one transaction, the messages are appended with their index rows and vectors,
   and the topic tree grows with them;
5. afterwards, a live exchange's session upkeep is scheduled on the job runner, and
   newly frozen topics are named by the LLM there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from arbormem import arguments
from arbormem.engine import Engine
from arbormem.errors import InputError, StoreError
from arbormem.images.transfer import restore_images
from arbormem.ingest.dedup import find_stored
from arbormem.ingest.formats import Record
from arbormem.ingest.transfer import plan_import
from arbormem.ingest.validate import Where, check_metadata, check_name, prepare
from arbormem.models import Ingested, Message, Scope
from arbormem.results import Imported, Reembedded
from arbormem.store.types import NewMessage, Thread
from arbormem.timeutil import utcnow
from arbormem.tree.grow import Decision

log = logging.getLogger(__name__)

#: Batches up to this size count as live conversation (upkeep runs after them).
LIVE_BATCH = 8
#: With a progress callback, add_many stores (and reports) this many messages at a time.
PROGRESS_STEP = 2_000


def session_name(
    value: Any, where: Where = Where(), *, max_bytes: int = arguments.MAX_NAME_BYTES
) -> str | None:
    """A session name as add stores it and import reads it back: stripped, never
    blank (a padded name found nothing once add began to strip it). A whole number
    is read as its digits, as the file formats read it."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return check_name(value, "session", where, max_bytes=max_bytes)


def _undated_starts(records: Sequence[Record], sessions: Sequence[str | None]) -> list[bool]:
    """Which messages open a session of their own: the first naming no session of each
    source (a file; the caller's mappings are one) of which no message has a timestamp.
    Dated now, such messages joined whatever session was under ``session_gap`` old,
    however unrelated (issue 20)."""
    dated = {r.where.source for r in records if r.timestamp is not None}
    started: set[str | None] = set()
    out = []
    for r, name in zip(records, sessions):
        source = r.where.source
        starts = name is None and source not in dated and source not in started
        if starts:
            started.add(source)
        out.append(starts)
    return out


class Writer:
    """The write path of one engine (see the module docs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings = engine.settings
        self.limits = engine.settings.limits
        self.backend = engine.backend
        self.embedder = engine.embedder
        self.grower = engine.grower
        self.trees = engine.trees
        self.llm = engine.llm
        self.tree_config = engine.tree_config
        #: The metadata :meth:`records` checked last on each calling thread, by id (see
        #: :meth:`_checked_metadata`).
        self._checked = threading.local()

    def records(self, messages: Iterable[Mapping[str, Any] | Record]) -> list[Record]:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
            raise InputError(
                f"must be a list of messages, got {arguments.type_name(messages)}",
                field="messages",
                hint="pass [{'content': ...}, ...]; add() takes one message",
            )
        records = []
        checked: dict[int, dict[str, Any]] = {}
        for i, item in enumerate(messages):
            if isinstance(item, Record):
                records.append(item)
                continue
            if not isinstance(item, Mapping):
                raise InputError(
                    f"must be a mapping with 'content', got {type(item).__name__}",
                    field=f"messages[{i}]",
                )
            where = Where(prefix=f"messages[{i}].")
            metadata = check_metadata(
                item.get("metadata"), where, max_bytes=self.limits.metadata_bytes
            )
            checked[id(metadata)] = metadata
            records.append(
                Record(
                    content=item.get("content"),
                    role=item.get("role", "user"),
                    speaker=item.get("speaker", item.get("name")),
                    timestamp=item.get("timestamp"),
                    metadata=metadata,
                    session=item.get("session"),
                    id=item.get("id"),
                    where=where,
                )
            )
        self._checked.metadata = checked
        return records

    def _checked_metadata(self, records: Sequence[Record]) -> list[bool]:
        """Which of ``records`` hold metadata that :meth:`records` checked on this thread
        just before (the very object it made, not a copy or a replacement), so that
        :func:`prepare` does not check it again: checked twice, it cost a fiftieth of
        a bulk add. Taken once: a later add checks its own."""
        checked: dict[int, Any] = getattr(self._checked, "metadata", None) or {}
        self._checked.metadata = None
        return [checked.get(id(r.metadata)) is r.metadata for r in records]

    def add(
        self,
        records: Sequence[Record],
        *,
        scope: Scope,
        session: str | None = None,
        progress: Callable[[int], None] | None = None,
        ingest: bool = False,
    ) -> Ingested:
        """Store ``records`` in ``scope`` in one transaction, growing the tree with
        them; with ``ingest``, those already stored are skipped (see
        :mod:`arbormem.ingest.dedup`)."""
        now = utcnow()
        prepared = [
            prepare(
                content=r.content,
                role=r.role,
                speaker=r.speaker,
                timestamp=r.timestamp,
                metadata=r.metadata,
                session="",
                message_id=r.id,
                where=r.where,
                max_bytes=self.limits.message_bytes,
                now=now,
                limits=self.limits,
                metadata_checked=checked,
            )
            for r, checked in zip(records, self._checked_metadata(records))
        ]
        if not prepared:
            return Ingested((), ())
        given: set[str] = set()
        for r, p in zip(records, prepared):
            if r.id is not None and p.id in given:
                raise InputError(
                    f"duplicate message id {p.id!r}: an id may appear once",
                    source=r.where.source,
                    line=r.where.line,
                    field=r.where.field("id"),
                )
            given.add(p.id)
        # Named as export writes them and import reads them back: stripped, never blank.
        most = self.limits.name_bytes
        batch = session_name(session, max_bytes=most)  # the caller's session=, named so
        explicit = [
            batch if r.session is None else session_name(r.session, r.where, max_bytes=most)
            for r in records
        ]
        fresh = _undated_starts(records, explicit) if ingest else [False] * len(records)
        # A live exchange (not a bulk load) gets the session's upkeep afterwards, which
        # also writes the window keys its newest messages would change again.
        live = len(prepared) <= LIVE_BATCH and any(p.role == "assistant" for p in prepared)
        self.backend.writable()  # before embedding what could not be stored
        self.engine.records.expect(len(prepared))
        vectors = self.embed_new(prepared)
        with self.engine.write_lock:
            thread = self.engine.thread(scope, create=True)
            assert thread is not None
            if thread.id not in self.engine.tails_checked:
                # A process that died before its upkeep ran left the window keys of
                # its last session's newest turns unwritten: the first write mends it.
                self.engine.tails_checked.add(thread.id)
                last = self.backend.last_session(thread)
                if last is not None:
                    self.backend.write_tail_windows(thread, last.id)
            # Sessions are named before the LLM is asked where an exchange belongs
            # (it is only asked inside the current session), and again in the
            # transaction, where another process's writes are visible.
            self._assign_sessions(thread, prepared, explicit, fresh)
            decisions = self._llm_decisions(thread, prepared)
            with self.grower.dropped_on_failure(), self.backend.transaction():
                # In the transaction, where another writer's messages are visible.
                found = (
                    find_stored(self.backend, thread, records, prepared, explicit) if ingest else {}
                )
                todo = [i for i in range(len(prepared)) if i not in found]
                if found and progress is not None:
                    progress(len(found))  # done with: already stored
                new = [prepared[i] for i in todo]
                self._assign_sessions(
                    thread, new, [explicit[i] for i in todo], [fresh[i] for i in todo]
                )
                try:
                    rows = (
                        self.backend.append(
                            thread, new, vectors, self.embedder.model_id, defer_tail=live
                        )
                        if new
                        else []
                    )
                except StoreError:
                    named = self._stored_id_error(records, new)
                    if named is None:
                        raise
                    raise named from None
                # The tree grows a part at a time, so a caller's progress bar moves
                # while a large file goes in. Every row is stored first: names weigh
                # terms by the store's counts, which then include the whole batch.
                step = PROGRESS_STEP if progress is not None else max(len(rows), 1)
                for start in range(0, len(rows), step):
                    part = rows[start : start + step]
                    self.grower.grow(thread, part, vectors, decisions)
                    if progress is not None:
                        progress(len(part))
        self.engine.touch([thread], wrote=bool(rows), rowids=[row.rowid for row in rows])
        self.trees.name_with_llm(thread)
        if rows:  # records follow the log in the background (Memory.wait() flushes)
            self.engine.records.schedule(thread)
        # After a reply, the session's tracker and rolling summary catch up in the
        # background. Bulk loads skip this; the next live reply catches them up.
        if live:
            for session in dict.fromkeys(r.message.session for r in rows):
                self.engine.schedule_upkeep(thread, session)
        stored = iter(r.message for r in rows)
        return Ingested(
            tuple(found[i] if i in found else next(stored) for i in range(len(prepared))),
            tuple(sorted(found)),
        )

    def _stored_id_error(
        self, records: Sequence[Record], new: Sequence[NewMessage]
    ) -> InputError | None:
        """After the store refused to append ``new``: the error naming the file, line
        and field of a given id it holds already (the store's own names none), if that
        was why. Looked for only then, so a bulk add with ids pays nothing for it."""
        where = {p.id: r.where for r, p in zip(records, new) if r.id is not None}
        try:
            held = next((i for i in where if self.backend.get(i) is not None), None)
        except StoreError:
            return None
        if held is None:
            return None
        return InputError(
            f"message id {held!r} is already stored",
            source=where[held].source,
            line=where[held].line,
            field=where[held].field("id"),
            hint="give another id, or none; 'arbormem ingest' (Memory.ingest) skips "
            "messages already stored",
        )

    def _llm_decisions(
        self, thread: Thread, prepared: Sequence[NewMessage]
    ) -> dict[str, Decision] | None:
        """Let the LLM place the first exchange of a live add (before the write starts).

        Bulk loads (more than one user message) are placed by the heuristic:
        one LLM round trip per exchange would make imports crawl.
        """
        if self.llm is None or not self.tree_config.enabled:
            return None
        users = [m for m in prepared if m.role == "user"]
        if len(users) != 1:
            return None
        first = users[0]
        probe = Message(
            id=first.id,
            role=first.role,
            content=first.content,
            timestamp=first.timestamp,
            session=first.session or "",
            index=-1,
            speaker=first.speaker,
        )
        decision = self.grower.llm_decision(thread, probe)
        return {first.id: decision} if decision else None

    def embed_new(self, prepared: Sequence[NewMessage]) -> dict[str, np.ndarray] | None:
        """Vectors for content not already embedded with the current model.

        A failing embedder does not lose messages: they are stored without a
        vector and embedded on a later search or by ``reembed``.
        """
        model = self.embedder.model_id
        texts: dict[str, str] = {}
        for m in prepared:
            texts.setdefault(m.chash, f"{m.speaker}: {m.content}" if m.speaker else m.content)
        try:
            dim = self.embedder.dimensions
            stored = self.backend.vectors(model, list(texts))
            have = {h: v for h, v in stored.items() if v.shape[-1] == dim}  # see reembed
            todo = [h for h in texts if h not in have]
            if todo:
                fresh = self.embedder.embed_many([texts[h] for h in todo])
                have.update(zip(todo, fresh))
            return have
        except Exception as exc:  # any embedder's failure: the messages are stored all the same
            log.warning("embedding failed, storing messages without vectors for now: %s", exc)
            return None

    def _assign_sessions(
        self,
        thread: Thread,
        prepared: Sequence[NewMessage],
        explicit: Sequence[str | None],
        fresh: Sequence[bool],
    ) -> None:
        """Name the session of each message: given, or by the idle-gap rule; a
        ``fresh`` one opens a new session whatever the gap."""
        last = self.backend.last_session(thread)
        current = last.id if last else None
        current_at = last.last_at if last else None
        # The thread's session names are read only when a new one must be named: read
        # on every add, they made each add slower as the sessions grew (2.2 -> 24.7 ms
        # at 2,000 sessions in a review's measurement).
        stored: set[str] | None = None
        named: set[str] = set()  # the sessions of this batch so far
        for message, name, starts in zip(prepared, explicit, fresh):
            if name is not None:
                message.session = str(name)
            else:
                if (
                    starts
                    or current is None
                    or current_at is None
                    or message.timestamp - current_at > self.settings.session_gap
                    or message.timestamp < current_at - self.settings.session_gap
                ):
                    if stored is None:
                        stored = {s.id for s in self.backend.sessions(thread)}
                    taken = stored | named
                    n = len(taken) + 1
                    while f"session-{n}" in taken:
                        n += 1
                    current = f"session-{n}"
                message.session = current
            named.add(message.session)
            current = message.session
            current_at = message.timestamp

    def import_(self, data: Any, name: str, tenant: str) -> Imported:
        """Restore a parsed export into ``tenant`` (see :meth:`Memory.import_
        <arbormem.Memory.import_>`): planned, embedded, then written in one transaction."""
        plan, skipped = plan_import(
            self.backend, data, name, self.limits.message_bytes, self.limits, tenant
        )
        self.backend.writable()
        vectors = self.embed_new([m for p in plan for m in p.messages])
        added = archived_again = left_live = states_restored = records_restored = 0
        images_restored = 0
        touched: list[Thread] = []
        written: list[tuple[Thread, list[int]]] = []
        # Threads that exist are checked before the transaction: a check running in the
        # background must not wait for it (an in-memory store has a single connection).
        for scope, *_ in plan:
            self.engine.thread(scope)
        with self.engine.write_lock, self.grower.dropped_on_failure(), self.backend.transaction():
            # Planned again where no other writer can come in between: another process
            # importing the same file, or adding to one of its threads, since the plan
            # above (its messages are then skipped, or the positions given up). A
            # message embedded for neither plan is stored without a vector, and the
            # first search embeds it.
            plan, skipped = plan_import(
                self.backend, data, name, self.limits.message_bytes, self.limits, tenant
            )
            for scope, msgs, archived, states, records, images in plan:
                thread = self.engine.thread(scope, create=True)
                assert thread is not None
                touched.append(thread)
                # Extraction had read the whole thread: the records exported with the
                # messages stand for theirs, so they are not extracted again.
                caught_up = (
                    self.backend.records_cursor(thread) >= self.backend.state(thread).next_index
                )
                # Only this thread's vectors: passing all of them made every thread
                # write the whole export's again (quadratic in the number of threads).
                mine = (
                    {m.chash: vectors[m.chash] for m in msgs if m.chash in vectors}
                    if vectors is not None
                    else None
                )
                rows = self.backend.append(thread, msgs, mine, self.embedder.model_id)
                written.append((thread, [r.rowid for r in rows]))
                self.grower.grow(thread, rows, mine)
                if images:
                    appended = {r.message.id: r.rowid for r in rows}
                    images_restored += restore_images(self.backend, thread, images, appended)
                marked = [r.rowid for r in rows if r.message.id in archived]
                if marked:
                    done = self.trees.archive(thread, marked)
                    archived_again += done
                    left_live += len(marked) - done
                added += len(rows)
                for key, state in states.items():
                    # A session's own state wins: it may be newer than the export's.
                    if not self.backend.session_state(thread, key):
                        self.backend.put_session_state(thread, key, state)
                        states_restored += 1
                if records is not None:
                    self.backend.write_records(thread, records[0])
                    if records[1]:
                        self.backend.replace_composites(thread, records[1])
                    records_restored += len(records[0])
                    if caught_up:
                        self.backend.set_records_cursor(
                            thread, self.backend.state(thread).next_index
                        )
        for thread in touched:  # what no export's records stand for is extracted
            self.engine.records.schedule(thread)
        if self.engine.deep is not None:
            # The imported rows are this process's to embed in the background (not
            # another process's, which it would leave to that one for a while).
            for thread, rowids in written:
                if rowids:
                    self.engine.deep.notify(thread, wrote=True, rowids=rowids)
        if left_live:
            # An exchange is archived whole or not at all: the tree is off, or an
            # imported message joined an exchange of this store (its open one).
            log.warning(
                "%s: %d message(s) marked archived are back in recall: their exchanges "
                "could not be archived whole%s",
                name,
                left_live,
                " (the topic tree is off)" if not self.tree_config.enabled else "",
            )
        return Imported(
            threads=len(plan),
            messages=added,
            skipped=skipped,
            archived=archived_again,
            not_archived=left_live,
            session_states=states_restored,
            records=records_restored,
            images=images_restored,
        )

    def reembed(self, *, prune: bool, progress: Callable[[int], None] | None) -> Reembedded:
        """Embed every message (of every tenant) lacking a vector of the current model;
        with ``prune``, delete other models' vectors."""
        self.backend.writable()
        model = self.embedder.model_id
        embedded = 0
        for thread in self.backend.threads(tenant=None):  # the store's vectors, every tenant's
            _, _, _, missing = self.backend.thread_vectors(
                thread, model, dim=self.embedder.dimensions
            )
            for start in range(0, len(missing), 2048):
                chunk = missing[start : start + 2048]
                vecs = self.embedder.embed_many([r.message.text for r in chunk])
                self.backend.put_vectors(model, {r.chash: v for r, v in zip(chunk, vecs)})
                embedded += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        # The deep embedder's vectors are the store's too (see arbormem.deep).
        deep = self.engine.deep
        also = [deep.model_id] if deep is not None else []
        if self.engine.clip is not None:  # the pictures' vectors (arbormem.images.clip)
            also.append(self.engine.clip.model_id)
        pruned = self.backend.prune_vectors(model, *also) if prune else 0
        return Reembedded(embedded=embedded, pruned=pruned)
