"""The records capability: each thread's typed records, their sources, composites
and the extraction cursor.

Records (:class:`~arbormem.records.model.Record`) are derived from a thread's
messages: one self-contained statement each, typed and dated, with the ids of the
messages it comes from. What a new statement does to the records kept (merge,
supersede, close) is decided above the store, by
:mod:`arbormem.records.resolve`, through :class:`arbormem.records.service.RecordService`;
the store keeps them, finds them, and keeps them consistent when messages are
forgotten. It never decides what is true.

The contract, for every back-end:

* a record is stored under its thread, whose scope (``user/agent``, with the tenant
  in front in a tenant's store) it carries in :attr:`Record.scope`: writing one of
  another scope is refused;
* its id is unique in its thread; writing a record with a stored id replaces it;
* lists come back in the order records were first written, unless a method says
  otherwise (that order breaks every tie, so results do not depend on the back-end);
* a message forgotten (:meth:`~arbormem.store.messages.MessageStore.delete_messages`,
  ``delete_session``, ``delete_thread``) leaves every record's sources in the same
  transaction (:meth:`RecordStore.forget_record_sources`): a record left with no
  source is deleted, with the composites built on it;
* a deleted record is spliced out of the supersession chains it is part of, so
  what held before it holds again (see :meth:`RecordStore.delete_records`).

:class:`~arbormem.store.records_memory.MemoryRecordStore` is the reference
implementation; ``tests/test_store_records.py`` is the contract suite.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from arbormem.errors import StoreError
from arbormem.models import Scope
from arbormem.store.core import StoreCore
from arbormem.store.types import Thread

if TYPE_CHECKING:
    # Only for annotations: the records package imports the store, not the reverse.
    from arbormem.records.model import Composite, Record

__all__ = [
    "RecordStore",
    "check_scope",
    "record_terms",
    "sort_time",
    "subject_words",
    "thread_scope",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def thread_scope(thread: Thread) -> str:
    """The scope string records of ``thread`` carry: ``user/agent``, or
    ``tenant:user/agent`` in a tenant's store (as :class:`~arbormem.models.Scope` prints)."""
    return str(Scope(thread.user, thread.agent, thread.tenant))


def check_scope(thread: Thread, items: Iterable[Record | Composite]) -> None:
    """Raise :class:`StoreError` when an item belongs to another scope than ``thread``'s."""
    scope = thread_scope(thread)
    for item in items:
        if item.scope != scope:
            raise StoreError(
                f"{item.id} belongs to scope {item.scope!r}, not to {scope!r}: "
                "write it to its own thread"
            )


def subject_words(subject: str | None) -> str | None:
    """A subject as stored for matching: the words of
    :func:`arbormem.records.resolve.subject_key`, sorted, each between spaces
    (``" lee sam "``), so that a word is found whole by a substring search.
    None when there is no subject."""
    from arbormem.records.resolve import subject_key

    words = sorted(subject_key(subject))
    return f" {' '.join(words)} " if words else None


def record_terms(record: Record) -> list[str]:
    """The index terms of a record, distinct, in first-seen order: its text, subject and
    value analysed as messages are (:func:`arbormem.text.analyze`)."""
    from arbormem.text import analyze

    parts = (record.text, record.subject, record.value)
    return list(dict.fromkeys(analyze(" ".join(p for p in parts if p))))


def sort_time(record: Record) -> datetime:
    """The moment "newest first" sorts a record by: last updated, else created,
    else became true."""
    return record.updated_at or record.created_at or record.valid_from or _EPOCH


class RecordStore(StoreCore):
    """Typed records of each thread, their sources, composites and extraction cursor.

    Writes happen inside :meth:`~arbormem.store.core.StoreCore.transaction` (a
    write method called outside one opens its own); reads inside a transaction
    see its writes.
    """

    # ------------------------------------------------------------------ reading

    @abc.abstractmethod
    def record(self, thread: Thread, record_id: str) -> Record | None:
        """The record with this id, current or closed; None if the thread has none."""

    @abc.abstractmethod
    def records_about(self, thread: Thread, subject: str, attribute: str) -> list[Record]:
        """Every record, current or closed, stating ``attribute`` of a subject that
        :func:`~arbormem.records.resolve.same_subject` matches with ``subject``:
        one subject's words hold all of the other's ("Sam" and "Sam Lee"; "the weekly
        sync" and "sync"). In the order first written."""

    @abc.abstractmethod
    def similar_records(self, thread: Thread, kind: str, text: str, limit: int = 5) -> list[Record]:
        """Current records of ``kind`` sharing index terms (:func:`record_terms`) with
        ``text``: those sharing the most first, then in the order first written; at
        most ``limit``."""

    @abc.abstractmethod
    def record_candidates(
        self,
        thread: Thread,
        terms: Sequence[str],
        attributes: Sequence[str] = (),
        *,
        kinds: Sequence[str] | None = None,
        current: bool = True,
        limit: int | None = None,
    ) -> list[Record]:
        """The pool a search scores: records holding any of ``terms`` (analysed index
        terms) or stating one of ``attributes``, of ``kinds`` when given, current
        ones only when ``current``. In the order first written.

        With ``limit``, at most that many of the term matches are kept, the best by
        the back-end's full-text ranking; attribute matches are all kept."""

    @abc.abstractmethod
    def list_records(
        self,
        thread: Thread,
        *,
        kind: str | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        current: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Record]:
        """Records passing the filters, newest first (by :func:`sort_time`, then in the
        order first written): ``subject`` matched as in :meth:`records_about`;
        ``current=False`` includes closed ones. ``offset`` and ``limit`` page through
        them. (Records "as of" a moment are chosen above the store, from all of them:
        see :func:`arbormem.records.resolve.value_at`.)"""

    @abc.abstractmethod
    def record_subjects(self, thread: Thread) -> list[str]:
        """The distinct subjects of the thread's records, current or closed, in the
        order first written."""

    @abc.abstractmethod
    def records_for_messages(self, thread: Thread, message_ids: Sequence[str]) -> list[Record]:
        """Records with any of these message ids among their sources, in the order
        first written (to rebuild what a range of messages gave)."""

    @abc.abstractmethod
    def composites(self, thread: Thread) -> list[Composite]:
        """The thread's composites, in the order written."""

    @abc.abstractmethod
    def records_cursor(self, thread: Thread) -> int:
        """The position of the first message extraction has not read yet (0 at first)."""

    # ------------------------------------------------------------------ writing

    @abc.abstractmethod
    def write_records(self, thread: Thread, records: Sequence[Record]) -> None:
        """Store records, replacing those with the same id, and keep the lookup of
        records by source message in step. A record whose scope is not the thread's
        raises :class:`StoreError`, and so does a thread the store no longer holds;
        nothing is written then."""

    @abc.abstractmethod
    def touch_records(self, thread: Thread, record_ids: Iterable[str]) -> None:
        """Count one recall of each record (each distinct id once); unknown ids are
        ignored. Nothing else about the record changes."""

    @abc.abstractmethod
    def delete_records(self, thread: Thread, record_ids: Iterable[str]) -> list[str]:
        """Delete records, and the composites built on them (at every level); returns
        the ids of the records deleted, in the order first written.

        Each deleted record is spliced out of its supersession chains: a record it
        closed takes over its ``valid_to`` and ``superseded_by`` (so it holds again if
        the deleted one still held), and a record that replaced it takes over its
        ``supersedes``. Forgetting a change thus leaves what held before it. As with
        messages, the deleted records' words leave the files with the next
        :meth:`~arbormem.store.messages.MessageStore.purge`."""

    @abc.abstractmethod
    def forget_record_sources(self, thread: Thread, message_ids: Sequence[str]) -> list[str]:
        """Take these message ids out of every record's sources; records that had one
        of them and are left with none are deleted as by :meth:`delete_records`.
        Returns the ids deleted. Deleting messages from the store does this itself."""

    @abc.abstractmethod
    def replace_composites(self, thread: Thread, composites: Sequence[Composite]) -> None:
        """Replace the thread's composites by these (their scope must be the thread's)."""

    @abc.abstractmethod
    def set_records_cursor(self, thread: Thread, index: int) -> None:
        """Store the position of the first message extraction has not read yet."""
