"""The typed-records methods of :class:`~arbormem.Memory`, kept out of ``memory.py``.

:class:`RecordsMethods` is a base of :class:`~arbormem.Memory`: each method checks
the scope and hands the work to :class:`~arbormem.records.public.RecordsAPI` (see
docs/records.md). Extraction runs by itself after every add; these are the reads,
the explicit writes, and forgetting one record.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from arbormem import arguments
from arbormem.forgetting import Forgetter
from arbormem.models import Scope
from arbormem.records.model import Record as MemoryRecord
from arbormem.records.public import RecordsAPI
from arbormem.records.service import RecordHit
from arbormem.results import RecordsForgotten, Remembered
from arbormem.store.types import PURGE_WAIT

__all__ = ["RecordsMethods"]


class RecordsMethods:
    """Typed records with history: :meth:`remember`, :meth:`records`,
    :meth:`search_records`, :meth:`record_history`, :meth:`forget_record`."""

    _records: RecordsAPI
    _forgetter: Forgetter

    def _scope(self, user: str | None, agent: str | None) -> Scope:
        raise NotImplementedError

    def _query(self, query: Any) -> str:
        raise NotImplementedError

    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        subject: str | None = None,
        attribute: str | None = None,
        value: str | None = None,
        negated: bool = False,
        when: datetime | str | float | None = None,
        tags: Sequence[str] | None = None,
        intent: str | None = None,
        body: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> Remembered:
        """Store a typed record as given, with no extraction: ``text`` one statement
        ("Sam lives in Lyon."), ``kind`` one of :data:`arbormem.records.KINDS`. With
        ``subject``, ``attribute`` and ``value`` it updates like an extracted one: it
        closes the subject's current value of the attribute (history kept); ``when``
        is when it became true (now by default); a procedure may carry ``intent`` and
        a Markdown ``body``."""
        return self._records.remember(
            self._scope(user, agent),
            text,
            kind=kind,
            subject=subject,
            attribute=attribute,
            value=value,
            negated=negated,
            when=when,
            tags=tags,
            intent=intent,
            body=body,
        )

    def records(
        self,
        *,
        kind: str | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        current: bool = True,
        as_of: datetime | str | float | None = None,
        limit: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[MemoryRecord]:
        """The scope's typed records, newest first: those that hold now, or with
        ``current=False`` every version, or those that held at ``as_of``; filtered by
        ``kind``, ``subject`` and ``attribute``. Extraction still running is waited for."""
        return self._records.listing(
            self._scope(user, agent),
            kind=kind,
            subject=subject,
            attribute=attribute,
            current=current,
            as_of=as_of,
            limit=limit,
        )

    def search_records(
        self,
        query: str,
        *,
        k: int = 10,
        current: bool = True,
        as_of: datetime | str | float | None = None,
        kind: str | None = None,
        speaker: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[RecordHit]:
        """Typed records for ``query``, best first: those that hold now (all with
        ``current=False``; those of then with ``as_of``). ``speaker`` is who "I" is
        in the query."""
        self._query(query)
        return self._records.search(
            self._scope(user, agent),
            query,
            k=k,
            current=current,
            as_of=as_of,
            kind=kind,
            speaker=speaker,
        )

    def record_history(
        self, record_id: str, *, user: str | None = None, agent: str | None = None
    ) -> list[MemoryRecord]:
        """Every version of what a record states, oldest first (each value its
        subject's attribute had, with the dates it held)."""
        return self._records.history(self._scope(user, agent), record_id)

    def forget_record(
        self,
        record_id: str,
        *,
        user: str | None = None,
        agent: str | None = None,
        wait: float = PURGE_WAIT,
    ) -> RecordsForgotten:
        """Delete one typed record for good (messages stay). What it closed holds
        again, as if it had never been said; ``purged`` as for :meth:`forget`."""
        wait = arguments.seconds(wait, "wait")
        deleted = self._records.forget(self._scope(user, agent), record_id)
        done = self._forgetter.purge(wait=wait, rewrite=None)
        return RecordsForgotten(deleted, done.purged, done.purge_pending)

    def rebuild_records(
        self,
        *,
        start: int = 0,
        end: int | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> int:
        """Extract the records of the messages at positions ``[start, end)`` again
        (all of them by default): records are derived from the messages, as the tree
        is. Returns how many messages were read."""
        return self._records.rebuild(self._scope(user, agent), start, end)
