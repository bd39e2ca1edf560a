"""An in-memory record book: the records layer with no database.

:class:`RecordBook` is :class:`~arbormem.records.service.RecordService` over
:class:`~arbormem.store.records_memory.MemoryRecordStore`, the reference
implementation of the store's records capability. Extraction, updates, history,
"as of" questions, search, composites and export behave exactly as they do over
a storage back-end (``arbormem bench updates --store`` checks that the figures
match), so the rules can be exercised and measured without one.
"""

from __future__ import annotations

from typing import Any

from arbormem.errors import InputError
from arbormem.records.service import (
    WEIGHTS,
    RecordHit,
    RecordService,
    as_of_from_query,
    parse_export,
)
from arbormem.store.records_memory import MemoryRecordStore
from arbormem.store.types import Thread

__all__ = ["WEIGHTS", "RecordBook", "RecordHit", "as_of_from_query"]


class RecordBook(RecordService):
    """Typed records with history, in memory, for one scope (``user/agent``, or
    ``tenant:user/agent``).
    Not thread-safe; one writer at a time.

    >>> from datetime import datetime, timezone
    >>> from arbormem.records import Turn
    >>> book = RecordBook()
    >>> t = datetime(2024, 5, 1, tzinfo=timezone.utc)
    >>> _ = book.add_exchange([Turn("m1", "I moved to Lyon last week.", t, "Sam")])
    >>> [r.text for r in book.records(subject="Sam")]
    ['Sam lives in Lyon.']
    """

    def __init__(self, scope: str = "default/default") -> None:
        text = scope if isinstance(scope, str) else ""
        tenant, colon, rest = text.partition(":")
        if not colon or "/" in tenant:  # a colon after the slash is the agent's
            tenant, rest = "", text
        user, slash, agent = rest.partition("/")
        if not (user and slash and agent):
            raise InputError(
                f"scope {scope!r} is not user/agent (or tenant:user/agent)",
                field="scope",
                hint="e.g. 'sam/bot'",
            )
        super().__init__(MemoryRecordStore(), Thread(0, user, agent, tenant))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<input>") -> RecordBook:
        """A book restored from :meth:`to_dict` output; bad data raises
        :class:`~arbormem.errors.InputError` naming the record and field."""
        scope = data.get("scope", "default/default") if isinstance(data, dict) else None
        if scope is not None and (not isinstance(scope, str) or "/" not in scope):
            raise InputError("must be a user/agent string", source=source, field="scope")
        book = cls(scope or "default/default")
        parse_export(data, book.scope, source=source)  # checked before anything is written
        book.load(data, source=source)
        return book
