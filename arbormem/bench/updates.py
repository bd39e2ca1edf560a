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
value of then). Records are kept by :class:`arbormem.records.RecordBook` (in
memory), or with ``store`` in a real SQLite store through
:class:`arbormem.records.RecordService`: the same rules over the store, which
must give the same figures. With ``memory`` the questions go through the public
API instead (:mod:`arbormem.bench.updates_memory`), which also reports whether
``Memory.context`` at 300 tokens holds the current value.

Hand-written conversations in the same JSON shape (``--file``) are scored the
same way; :func:`load_conversations` documents the shape.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arbormem.bench.updates_gen import Conversation, Message, Question, generate
from arbormem.bench.updates_score import answers
from arbormem.errors import InputError
from arbormem.records.engine import RecordBook, as_of_from_query
from arbormem.records.extract import Context, Turn
from arbormem.records.service import RecordService
from arbormem.timeutil import parse_timestamp

if TYPE_CHECKING:
    from arbormem.store import Backend

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


def build_book(conv: Conversation, store: Backend | None = None) -> RecordService:
    """A record book fed the conversation, one message per exchange: in memory, or
    in a new thread of ``store`` (named after the conversation)."""
    book: RecordService
    if store is None:
        book = RecordBook()
    else:
        user = f"{conv.id}-{len(store.threads())}"  # new even when an id repeats
        thread = store.thread(user, "updates", create=True)
        assert thread is not None
        book = RecordService(store, thread)
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
    store: Backend | None = None,
) -> dict[str, Any]:
    """Score the conversations; ``context`` (phase 2) gives the prompt context for a
    question, checked for the current value. ``misses`` collects the failures.
    With ``store`` the records are kept there (a thread per conversation)."""
    current = as_of = current_ok = as_of_ok = 0
    ctx_total = ctx_ok = 0
    by_attribute: dict[str, list[int]] = {}
    messages = 0
    elapsed = 0.0
    for conv in conversations:
        started = time.perf_counter()
        book = build_book(conv, store)
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
        "engine": "sqlite store" if store is not None else "in-memory record book",
    }


@contextmanager
def scratch_store() -> Iterator[Backend]:
    """A new SQLite store in a temporary folder, removed afterwards."""
    from arbormem.store.sqlite import SQLiteBackend

    with tempfile.TemporaryDirectory(prefix="arbormem-updates-") as folder:
        store = SQLiteBackend(Path(folder) / "records.db")
        try:
            yield store
        finally:
            store.close()


def run(
    *,
    conversations: int = 60,
    seed: int = 0,
    files: Sequence[str | Path] = (),
    show_misses: bool = False,
    store: bool = False,
    memory: bool = False,
    embedder: str = "hash",
) -> dict[str, Any]:
    """The benchmark: generated conversations, then each file of hand-written ones.
    With ``store`` each set's records are kept in a new SQLite store; with ``memory``
    every question goes through the public API, context@300 included (see
    :mod:`arbormem.bench.updates_memory`; ``embedder`` is the memory's)."""
    out: dict[str, Any] = {
        "seed": seed,
        "targets": {"current": TARGET_CURRENT, "as_of": TARGET_AS_OF},
    }

    def scored(convs: list[Conversation], misses: list[dict[str, Any]]) -> dict[str, Any]:
        if memory:
            from arbormem.bench.updates_memory import evaluate_memory

            return evaluate_memory(convs, misses=misses, embedder=embedder)
        if not store:
            return evaluate(convs, misses=misses)
        with scratch_store() as backend:
            return evaluate(convs, misses=misses, store=backend)

    generated = generate(conversations, seed=seed)
    misses: list[dict[str, Any]] = []
    result = scored(generated, misses)
    result["conversations"] = len(generated)
    out["generated"] = result
    if show_misses:
        out["generated"]["misses"] = misses
    for path in files:
        convs = load_conversations(path)
        misses = []
        result = scored(convs, misses)
        result["conversations"] = len(convs)
        if show_misses:
            result["misses"] = misses
        out[str(path)] = result
    return out


def extract_locomo(
    paths: Sequence[str | Path], *, keep: bool = False, store: bool = False
) -> dict[str, Any]:
    """Run the no-LLM extractor alone over LoCoMo conversations: turns per second
    (one turn per exchange, the three before it as context), then the records a
    record book keeps of them (denials that close nothing dropped, repeats merged),
    by kind; with ``keep`` every kept record with the turns it came from. With
    ``store``, also what keeping them in a SQLite store costs (see :func:`store_cost`)."""
    from arbormem.bench.locomo import load_paths
    from arbormem.records.extract import extract

    work: list[tuple[int, list[Turn], Context]] = []
    for n_conv, (_, conv) in enumerate(load_paths(paths)):
        turns = [Turn(t.dia_id, t.content, t.timestamp, t.speaker) for t in conv.turns]
        speakers = (conv.speaker_a, conv.speaker_b)
        scope = f"locomo/{n_conv}"
        for n, turn in enumerate(turns):
            recent = tuple(turns[max(0, n - CONTEXT_TURNS) : n])
            work.append((n_conv, [turn], Context(speakers=speakers, recent=recent, scope=scope)))
    if work:
        extract(work[0][1], work[0][2])  # warm the caches the first call fills
    started, cpu = time.perf_counter(), time.process_time()
    found = [extract(exchange, context) for _, exchange, context in work]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    books: dict[int, RecordBook] = {}
    kept_started, kept_cpu = time.perf_counter(), time.process_time()
    for (n_conv, exchange, context), candidates in zip(work, found):
        book = books.setdefault(n_conv, RecordBook(context.scope))
        book.add_exchange(exchange, context, candidates=candidates)
    kept_seconds = time.perf_counter() - kept_started
    kept_cpu = time.process_time() - kept_cpu
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
        "in_memory": _costs(kept_seconds, kept_cpu, len(work), sum(1 for c in found if c)),
    }
    if store:
        out["store"] = store_cost(work, found, books)
    if keep:
        out["listed"] = sorted(listed, key=lambda r: (r["scope"], r["valid_from"] or ""))
    return out


def _costs(seconds: float, cpu: float, turns: int, written: int) -> dict[str, Any]:
    """Time spent keeping records, per turn and per exchange that gave candidates."""
    return {
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4),
        "ms_per_turn": round(1000 * seconds / turns, 4) if turns else None,
        "cpu_ms_per_turn": round(1000 * cpu / turns, 4) if turns else None,
        "ms_per_written_exchange": round(1000 * seconds / written, 4) if written else None,
        "cpu_ms_per_written_exchange": round(1000 * cpu / written, 4) if written else None,
    }


def store_cost(
    work: Sequence[tuple[int, list[Turn], Context]],
    found: Sequence[Sequence[Any]],
    books: dict[int, RecordBook],
) -> dict[str, Any]:
    """What resolving and writing already extracted candidates costs in a SQLite store
    (a new file, a thread per conversation), two ways: a transaction per exchange
    (records written on their own, as a job that keeps up exchange by exchange
    would), and one per conversation (a job writing large batches; records written
    inside the transaction that stores the messages cost about as much, as the
    message's commit is paid anyway). Extraction itself is not counted here. The
    records kept must be those the in-memory book keeps."""
    written = sum(1 for c in found if c)
    out: dict[str, Any] = {"exchanges_with_candidates": written}
    for mode in ("transaction_per_exchange", "transaction_per_conversation"):
        with scratch_store() as backend:
            services: dict[int, RecordService] = {}
            for n_conv in books:
                thread = backend.thread("locomo", str(n_conv), create=True)
                assert thread is not None
                services[n_conv] = RecordService(backend, thread)
            started, cpu = time.perf_counter(), time.process_time()
            if mode == "transaction_per_exchange":
                for (n_conv, exchange, context), candidates in zip(work, found):
                    services[n_conv].add_exchange(exchange, context, candidates=candidates)
            else:
                for n_conv, service in services.items():
                    with backend.transaction():
                        for (n, exchange, context), candidates in zip(work, found):
                            if n == n_conv:
                                service.add_exchange(exchange, context, candidates=candidates)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            same = all(services[n].to_dict() == books[n].to_dict() for n in books)
            out[mode] = {**_costs(seconds, cpu, len(work), written), "same_as_in_memory": same}
    return out
