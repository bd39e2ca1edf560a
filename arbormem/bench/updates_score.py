"""Whether a record answers a question of the update benchmarks
(:mod:`arbormem.bench.updates` and :mod:`arbormem.bench.updates_memory`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arbormem.bench.updates_gen import Question
from arbormem.records.model import Record, value_key
from arbormem.records.vocab import canonical_diet

if TYPE_CHECKING:
    from arbormem.records.service import RecordService


def _same(found: str | None, expect: str) -> bool:
    if not found:
        return False
    a, b = value_key(found), value_key(expect)
    if a == b or a.startswith(b + " ") or b.startswith(a + " "):
        return True
    diet_a, diet_b = canonical_diet(found), canonical_diet(expect)
    return diet_a is not None and diet_a == diet_b


def answers(record: Record | None, question: Question, book: RecordService | None = None) -> bool:
    """Whether ``record`` answers ``question``: it holds the expected value (or, when
    the attribute no longer holds, denies the value it had, by name or by closing it)."""
    if record is None:
        return False
    if question.expect is None:
        if not record.negated:
            return False
        if question.denied is None or _same(record.value, question.denied):
            return True
        closed = book.get(record.supersedes) if book is not None and record.supersedes else None
        return closed is not None and _same(closed.value, question.denied)
    return not record.negated and _same(record.value, question.expect)
