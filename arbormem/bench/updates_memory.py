"""``bench updates --memory``: the same questions asked through the public API.

Each conversation goes into a fresh :class:`~arbormem.Memory` on a real SQLite file
(one ``add_many``, then ``wait()`` for the records extracted in the background), and
every question is asked as an application would: ``search_records`` for the current
value and the value at a past date, and ``context(question, budget_tokens=300)`` in
the conversation's last session for whether the prompt holds the current value
(and whether it holds only a stale one).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arbormem.bench.updates_gen import Conversation, Question
from arbormem.bench.updates_score import answers
from arbormem.records.model import Record

__all__ = ["CONTEXT_BUDGET", "evaluate_memory"]

#: The prompt budget the context check uses (tokens).
CONTEXT_BUDGET = 300


class _Book:
    """What :func:`arbormem.bench.updates.answers` reads, over a Memory."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def get(self, record_id: str) -> Record | None:
        return next((r for r in self.memory.record_history(record_id) if r.id == record_id), None)


def evaluate_memory(
    conversations: Iterable[Conversation],
    *,
    misses: list[dict[str, Any]] | None = None,
    embedder: str = "hash",
) -> dict[str, Any]:
    """Score the conversations through Memory (see the module docs)."""
    from arbormem import Memory

    current = as_of = current_ok = as_of_ok = 0
    ctx_total = ctx_ok = ctx_stale_only = 0
    messages = 0
    elapsed = 0.0
    for conv in conversations:
        with (
            tempfile.TemporaryDirectory(prefix="arbormem-updates-") as folder,
            Memory(Path(folder) / "m.db", embedder=embedder, user="bench", agent="updates") as mem,
        ):
            started = time.perf_counter()
            mem.add_many(
                [
                    {
                        "content": m.text,
                        "speaker": m.speaker,
                        "role": m.role,
                        "timestamp": m.timestamp,
                    }
                    for m in conv.messages
                ]
            )
            mem.wait()
            elapsed += time.perf_counter() - started
            messages += len(conv.messages)
            book = _Book(mem)
            last = mem.messages()[-1].session if conv.messages else None
            for q in conv.questions:
                hits = mem.search_records(q.text, k=1, as_of=q.as_of, speaker=q.asker)
                top = hits[0].record if hits else None
                ok = answers(top, q, book)  # type: ignore[arg-type]
                if q.as_of is None:
                    current += 1
                    current_ok += ok
                    if q.expect:
                        ctx_total += 1
                        held, stale = _context_holds(mem, q, last)
                        ctx_ok += held
                        ctx_stale_only += stale and not held
                else:
                    as_of += 1
                    as_of_ok += ok
                if not ok and misses is not None:
                    misses.append(
                        {
                            "conversation": conv.id,
                            "question": q.text,
                            "expect": q.expect,
                            "as_of": q.as_of.isoformat() if q.as_of else None,
                            "got": top.text if top else None,
                        }
                    )
    return {
        "questions": {"current": current, "as_of": as_of},
        "current_accuracy@1": round(current_ok / current, 4) if current else None,
        "as_of_accuracy": round(as_of_ok / as_of, 4) if as_of else None,
        "context_holds_current@300": round(ctx_ok / ctx_total, 4) if ctx_total else None,
        "context_stale_only@300": round(ctx_stale_only / ctx_total, 4) if ctx_total else None,
        "messages": messages,
        "records_messages_per_s": round(messages / elapsed, 1) if elapsed else None,
        "engine": f"Memory (public API, SQLite file, embedder {embedder})",
    }


def _context_holds(mem: Any, q: Question, session: str | None) -> tuple[bool, bool]:
    """Whether the 300-token prompt for ``q`` holds the current value, and whether it
    holds an earlier value of the same attribute."""
    assert q.expect is not None
    text = mem.context(q.text, budget_tokens=CONTEXT_BUDGET, session=session).text.casefold()
    held = q.expect.casefold() in text
    earlier = {
        r.value
        for r in mem.records(attribute=q.attribute or None, current=False)
        if r.value and not r.current and r.value.casefold() != q.expect.casefold()
    }
    return held, any(v.casefold() in text for v in earlier)
