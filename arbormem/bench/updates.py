"""``arbormem bench updates``: do records know what is true now, and what was true then?

A seeded generator writes conversations between two friends over a year, in
which their attributes (home, employer, job, diet, phone, email, partner, pets,
allergies, a meeting's time) and those of a third person they talk about change
zero to three times among ordinary chatter. Changes are said in many ways, with
relative dates ("last week", "a few days ago"), pronouns, third-person reports,
and distractors: other people's facts, plans that did not happen, denials,
"used to". Then, for every person and attribute, two questions: the current
value, and the value in a past month.

Reported: **current-value accuracy@1** (the first current record that records
search returns for the question holds the current value) and **as-of accuracy**
(the first record search returns for the moment the question names holds the
value of then). Both go through :class:`arbormem.records.RecordBook` for now;
``context`` (does ``Memory.context`` at 300 tokens hold the current value) needs
the records wired into Memory and is ``None`` until a context function is passed.

Hand-written conversations in the same JSON shape (``--file``) are scored the
same way; :func:`load_conversations` documents the shape.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from arbormem.bench.updates_gen import Conversation, Message, Question, generate
from arbormem.errors import InputError
from arbormem.records.engine import RecordBook, as_of_from_query
from arbormem.records.extract import Context, Turn
from arbormem.records.model import Record, value_key
from arbormem.records.vocab import canonical_diet
from arbormem.timeutil import parse_timestamp

__all__ = [
    "Conversation",
    "Message",
    "Question",
    "evaluate",
    "generate",
    "load_conversations",
    "run",
]

TARGET_CURRENT = 0.95
TARGET_AS_OF = 0.90
#: Messages before the one read that extraction sees as context.
CONTEXT_TURNS = 3


# --------------------------------------------------------------------------- loading


def load_conversations(path: str | Path) -> list[Conversation]:
    """Conversations from a JSON file::

        {"conversations": [{
            "id": "moved-city",
            "speakers": ["Maya", "Jon"],
            "messages": [{"speaker": "Maya", "text": "...", "time": "2024-01-08T10:00:00Z"}],
            "questions": [
                {"question": "Where does Maya live now?", "subject": "Maya",
                 "attribute": "home", "expect": "Glasgow"},
                {"question": "Where did Maya live in February 2024?", "subject": "Maya",
                 "attribute": "home", "expect": "Leeds", "as_of": "2024-02-15"},
                {"question": "Is Maya allergic to anything?", "subject": "Maya",
                 "attribute": "allergy", "expect": null, "denied": "peanuts"}
            ]}]}

    ``expect: null`` means the attribute no longer holds: the first record must
    deny ``denied``. ``role`` of a message defaults to user for the first speaker.
    """
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
    items = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise InputError("expected an object with a 'conversations' list", source=source)
    out = []
    for i, item in enumerate(items):
        where = f"conversations[{i}]"
        if not isinstance(item, dict):
            raise InputError("must be an object", source=source, field=where)
        speakers = item.get("speakers")
        if not isinstance(speakers, list) or not all(isinstance(s, str) for s in speakers):
            raise InputError("must be a list of names", source=source, field=f"{where}.speakers")
        conv = Conversation(str(item.get("id", i)), tuple(speakers))
        for j, m in enumerate(item.get("messages") or []):
            at = f"{where}.messages[{j}]"
            if not isinstance(m, dict) or not isinstance(m.get("text"), str):
                raise InputError("needs a 'text' string", source=source, field=at)
            stamp = parse_timestamp(m.get("time"), field=f"{at}.time", source=source)
            speaker = m.get("speaker") or speakers[0]
            role = m.get("role") or ("user" if speaker == speakers[0] else "assistant")
            conv.messages.append(Message(f"{conv.id}-m{j}", speaker, m["text"], stamp, role))
        for j, q in enumerate(item.get("questions") or []):
            at = f"{where}.questions[{j}]"
            if not isinstance(q, dict) or not isinstance(q.get("question"), str):
                raise InputError("needs a 'question' string", source=source, field=at)
            as_of = q.get("as_of")
            conv.questions.append(
                Question(
                    q["question"],
                    str(q.get("subject", "")),
                    str(q.get("attribute", "")),
                    q.get("expect"),
                    as_of=parse_timestamp(as_of, field=f"{at}.as_of", source=source)
                    if as_of
                    else None,
                    denied=q.get("denied"),
                    asker=q.get("asker"),
                )
            )
        out.append(conv)
    return out


# --------------------------------------------------------------------------- scoring


def _same(found: str | None, expect: str) -> bool:
    if not found:
        return False
    a, b = value_key(found), value_key(expect)
    if a == b or a.startswith(b + " ") or b.startswith(a + " "):
        return True
    diet_a, diet_b = canonical_diet(found), canonical_diet(expect)
    return diet_a is not None and diet_a == diet_b


def answers(record: Record | None, question: Question, book: RecordBook | None = None) -> bool:
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


def build_book(conv: Conversation) -> RecordBook:
    """A record book fed the conversation, one message per exchange."""
    book = RecordBook()
    turns = [Turn(m.id, m.text, m.timestamp, m.speaker, m.role) for m in conv.messages]
    for n, turn in enumerate(turns):
        context = Context(
            speakers=conv.speakers, recent=tuple(turns[max(0, n - CONTEXT_TURNS) : n])
        )
        book.add_exchange([turn], context)
    return book


def evaluate(
    conversations: Iterable[Conversation],
    *,
    context: Callable[[Conversation, Question], str] | None = None,
    misses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Score the conversations; ``context`` (phase 2) gives the prompt context for a
    question, checked for the current value. ``misses`` collects the failures."""
    current = as_of = current_ok = as_of_ok = 0
    ctx_total = ctx_ok = 0
    by_attribute: dict[str, list[int]] = {}
    messages = 0
    elapsed = 0.0
    for conv in conversations:
        started = time.perf_counter()
        book = build_book(conv)
        elapsed += time.perf_counter() - started
        messages += len(conv.messages)
        now = conv.messages[-1].timestamp if conv.messages else None
        for q in conv.questions:
            if q.as_of is None:
                hits = book.search(q.text, 1, speaker=q.asker)
            else:
                moment = q.as_of or as_of_from_query(q.text, now)
                hits = book.search(q.text, 1, as_of=moment, speaker=q.asker)
            top = hits[0].record if hits else None
            ok = answers(top, q, book)
            row = by_attribute.setdefault(q.attribute, [0, 0, 0, 0])
            if q.as_of is None:
                current += 1
                current_ok += ok
                row[0] += 1
                row[1] += ok
                if context is not None and q.expect:
                    ctx_total += 1
                    ctx_ok += q.expect.casefold() in context(conv, q).casefold()
            else:
                as_of += 1
                as_of_ok += ok
                row[2] += 1
                row[3] += ok
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
        "by_attribute": {
            name: {
                "current": f"{r[1]}/{r[0]}",
                "as_of": f"{r[3]}/{r[2]}",
            }
            for name, r in sorted(by_attribute.items())
        },
        "messages": messages,
        "records_messages_per_s": round(messages / elapsed, 1) if elapsed else None,
    }


def run(
    *,
    conversations: int = 60,
    seed: int = 0,
    files: Sequence[str | Path] = (),
    show_misses: bool = False,
) -> dict[str, Any]:
    """The benchmark: generated conversations, then each file of hand-written ones."""
    out: dict[str, Any] = {
        "seed": seed,
        "targets": {"current": TARGET_CURRENT, "as_of": TARGET_AS_OF},
    }
    generated = generate(conversations, seed=seed)
    misses: list[dict[str, Any]] = []
    result = evaluate(generated, misses=misses)
    result["conversations"] = len(generated)
    out["generated"] = result
    if show_misses:
        out["generated"]["misses"] = misses
    for path in files:
        convs = load_conversations(path)
        misses = []
        result = evaluate(convs, misses=misses)
        result["conversations"] = len(convs)
        if show_misses:
            result["misses"] = misses
        out[str(path)] = result
    return out


def extract_locomo(paths: Sequence[str | Path], *, keep: bool = False) -> dict[str, Any]:
    """Run the no-LLM extractor alone over LoCoMo conversations: turns per second
    (one turn per exchange, the three before it as context), then the records a
    record book keeps of them (denials that close nothing dropped, repeats merged),
    by kind; with ``keep`` every kept record with the turns it came from."""
    from arbormem.bench.locomo import load_paths
    from arbormem.records.extract import extract

    work: list[tuple[int, list[Turn], Context]] = []
    for n_conv, (_, conv) in enumerate(load_paths(paths)):
        turns = [Turn(t.dia_id, t.content, t.timestamp, t.speaker) for t in conv.turns]
        speakers = (conv.speaker_a, conv.speaker_b)
        for n, turn in enumerate(turns):
            recent = tuple(turns[max(0, n - CONTEXT_TURNS) : n])
            work.append((n_conv, [turn], Context(speakers=speakers, recent=recent)))
    if work:
        extract(work[0][1], work[0][2])  # warm the caches the first call fills
    started, cpu = time.perf_counter(), time.process_time()
    found = [extract(exchange, context) for _, exchange, context in work]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    books: dict[int, RecordBook] = {}
    for (n_conv, exchange, context), candidates in zip(work, found):
        book = books.setdefault(n_conv, RecordBook())
        book.add_exchange(exchange, context, candidates=candidates)
    kinds: dict[str, int] = {}
    listed = []
    for book in books.values():
        for record in book.records(current=False):
            kinds[record.kind] = kinds.get(record.kind, 0) + 1
            if keep:
                listed.append(record.to_dict())
    out: dict[str, Any] = {
        "turns": len(work),
        "seconds": round(seconds, 4),
        "turns_per_s": round(len(work) / seconds, 1) if seconds else None,
        "ms_per_turn": round(1000 * seconds / len(work), 4) if work else None,
        # CPU time is what the extractor costs; wall time also counts other processes
        "cpu_seconds": round(cpu, 4),
        "turns_per_cpu_s": round(len(work) / cpu, 1) if cpu else None,
        "candidates": sum(len(c) for c in found),
        "records": sum(kinds.values()),
        "by_kind": dict(sorted(kinds.items())),
    }
    if keep:
        out["listed"] = sorted(listed, key=lambda r: (r["scope"], r["valid_from"] or ""))
    return out
