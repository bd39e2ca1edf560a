"""``arbormem bench locomo``: recall on LoCoMo conversations, as BENCHMARK.md defines it.

Each conversation is ingested into a fresh store (a real SQLite file in a
temporary folder, or with ``store=URL`` a schema of its own on that PostgreSQL
database, dropped afterwards), in order, each turn stamped with its session's date; then
every question is asked, one at a time. Systems run side by side on the same
data: ``arbormem`` (the full pipeline), ``flat`` (the same with the topic tree
off, once the tree exists), ``bm25`` (lexical only, single turns), ``dense``
(cosine only, same embedder), ``window`` (the most recent turns that fit the
budget) and ``full`` (the whole history).

With ``distractors=N`` every conversation's history is diluted with N
generated turns (:mod:`arbormem.bench.synth`) between other people, never
naming either speaker, before its questions are asked. They form whole
sessions of their own, spread evenly from the conversation's first to its last
session date and merged into the timeline in time order, as a real history
arrives: every system sees the same history, so ``window`` keeps the most
recent turns of it and ``full`` pays for all of it.
"""

from __future__ import annotations

import itertools
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arbormem.bench.metrics import Accumulator
from arbormem.bench.synth import generate_turns
from arbormem.config import UNSET
from arbormem.deep import resolve_deep
from arbormem.embed import Embedder, get_embedder
from arbormem.errors import InputError
from arbormem.ingest.formats import (
    LocomoConversation,
    LocomoTurn,
    evidence_ids,
    is_locomo,
    parse_json,
    parse_locomo,
    read_bytes_as_text,
)
from arbormem.memory import Memory
from arbormem.models import Message
from arbormem.recall.rerank import Reranker, get_reranker
from arbormem.recall.retriever import RecallConfig
from arbormem.records.public import MAX_RECORDS
from arbormem.timeutil import display
from arbormem.tokens import TokenCounter, default_counter

ALL_SYSTEMS = ("arbormem", "flat", "bm25", "dense", "window", "full")
HEADLINE_CATEGORIES = (1, 2, 3, 4)
#: The session a benchmark question is asked in (new: no sliding window).
BENCH_SESSION = "bench-question"
#: Turns retrieved per question: enough for recall@20 and to fill the budget.
RANK_DEPTH = 40
#: Distractor sessions are numbered from here, far above any real LoCoMo session.
DISTRACTOR_SESSION_BASE = 10_000


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


def load_paths(paths: Sequence[str | Path]) -> list[tuple[str, LocomoConversation]]:
    """Conversations from files and folders (folders are searched for ``*.json``)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("*.json"))
            files.extend(f for f in found if is_locomo(parse_json(read_bytes_as_text(f), str(f))))
        elif p.exists():
            files.append(p)
        else:
            raise InputError("does not exist", source=str(p))
    if not files:
        raise InputError("no LoCoMo files found", source=", ".join(map(str, paths)))
    out: list[tuple[str, LocomoConversation]] = []
    for f in files:
        obj = parse_json(read_bytes_as_text(f), str(f))
        if not is_locomo(obj):
            raise InputError(
                "is not a LoCoMo file",
                source=str(f),
                hint="expected speaker_a, session_<n> and qa keys, or a list of samples",
            )
        out.extend((str(f), conv) for conv in parse_locomo(obj, str(f)))
    return out


def questions_of(conv: LocomoConversation) -> list[Question]:
    """Questions with at least one evidence id naming a turn of the conversation
    (a range ``D12:3-D12:5`` names every turn from the first to the last)."""
    order = [t.dia_id for t in conv.turns]
    known = set(order)
    out = []
    for qa in conv.qa:
        cat = qa.get("category")
        if not isinstance(cat, int) or not isinstance(qa.get("question"), str):
            continue
        evidence = {e for e in evidence_ids(qa.get("evidence", []), order) if e in known}
        if evidence:
            out.append(Question(qa["question"], cat, evidence))
    return out


def with_distractors(conv: LocomoConversation, n: int, seed: int = 0) -> LocomoConversation:
    """The conversation with ``n`` generated turns merged into its timeline.

    Generated sessions are numbered from :data:`DISTRACTOR_SESSION_BASE` (turn
    ids ``D10001:1``...), so no evidence id can match one.
    """
    if n <= 0:
        return conv
    dates = sorted(conv.session_dates.values()) or sorted(t.timestamp for t in conv.turns)
    numbers: dict[str, int] = {}
    counts: dict[int, int] = {}
    extra = []
    for turn in generate_turns(
        n,
        seed=seed,
        start=dates[0],
        end=dates[-1],
        exclude_names=(conv.speaker_a, conv.speaker_b),
    ):
        number = numbers.setdefault(turn.session, DISTRACTOR_SESSION_BASE + len(numbers) + 1)
        counts[number] = counts.get(number, 0) + 1
        extra.append(
            LocomoTurn(
                dia_id=f"D{number}:{counts[number]}",
                speaker=turn.speaker,
                content=turn.content,
                session=number,
                timestamp=turn.timestamp,
                metadata={"role": turn.role, "distractor": True},
            )
        )
    # A stable sort by time: a real session's turns share one instant and win ties, so a
    # real session is never split (a generated one, minutes long, rarely is).
    return replace(conv, turns=sorted([*conv.turns, *extra], key=lambda t: t.timestamp))


def render_turns(turns: Sequence[LocomoTurn | Message], budget: int, counter: TokenCounter) -> str:
    """Ranked turns packed into ``budget`` tokens: grouped by session under a date
    header, in time order, each line ``Speaker: text``."""
    chosen: list[int] = []
    sessions: set[str] = set()
    used = 0

    def session_key(t: LocomoTurn | Message) -> str:
        return str(t.session)

    for i, turn in enumerate(turns):
        cost = counter.count(turn.text + "\n")
        key = session_key(turn)
        if key not in sessions:
            cost += counter.count(_header(turn) + "\n") + 1
        if used + cost > budget:
            continue
        chosen.append(i)
        sessions.add(key)
        used += cost
    while chosen:
        text = _render([turns[i] for i in chosen])
        if counter.count(text) <= budget:
            return text
        chosen.pop()
    return ""


def _header(turn: LocomoTurn | Message) -> str:
    return f"[{display(turn.timestamp, seconds=False)}] {turn.session}"


def _render(turns: Sequence[LocomoTurn | Message]) -> str:
    ordered = sorted(turns, key=lambda t: (t.timestamp, _order(t)))
    lines: list[str] = []
    current = None
    for t in ordered:
        key = str(t.session)
        if key != current:
            if lines:
                lines.append("")
            lines.append(_header(t))
            current = key
        lines.append(t.text)
    return "\n".join(lines)


def _order(t: LocomoTurn | Message) -> int:
    if isinstance(t, Message):
        return t.index
    session, _, number = t.dia_id.lstrip("D").partition(":")
    return int(session) * 100_000 + int(number or 0)


def ingest_conversation(memory: Memory, conv: LocomoConversation) -> dict[str, str]:
    """Store a conversation's turns in order, one batch per run of a session's turns,
    each stamped with its session's date; returns message id -> dia_id."""
    dia_of: dict[str, str] = {}
    for number, group in itertools.groupby(conv.turns, key=lambda t: t.session):
        turns = list(group)
        stored = memory.add_many(
            [
                {
                    "content": t.content,
                    "role": t.metadata.get("role")
                    or ("user" if t.speaker == conv.speaker_a else "assistant"),
                    "speaker": t.speaker,
                    "timestamp": t.timestamp,
                    "metadata": {"dia_id": t.dia_id},
                }
                for t in turns
            ],
            session=f"session_{number}",
        )
        for m, t in zip(stored, turns):
            dia_of[m.id] = t.dia_id
    # A short session's batch counts as a live exchange, whose upkeep runs a moment
    # later in the background, and every add's records are extracted by a background
    # job: both belong to the ingest (and its timing), not to the first questions.
    memory.wait()
    return dia_of


class System:
    """One system under test, ingested fresh for each conversation."""

    name: str
    #: False for baselines that keep no store (their ingest speed is not reported).
    stores: bool = True

    def ingest(self, conv: LocomoConversation) -> None:
        raise NotImplementedError

    def finish_indexing(self) -> bool:
        """Wait for indexing that goes on in the background after ``ingest`` returned
        (the deep vectors); returns whether there was any."""
        return False

    def records_kept(self) -> int | None:
        """How many typed records the store holds (every version), None for a system
        that keeps none; read after the timed ingest."""
        return None

    def rank(self, question: str) -> list[str]:
        raise NotImplementedError

    def context(self, question: str, ranking: list[str], budget: int) -> str:
        raise NotImplementedError

    def extra_contexts(self, question: str, ranking: list[str], budget: int) -> dict[str, str]:
        """Other renderings scored beside the main context (for comparisons)."""
        return {}

    def config(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class ArbormemSystem(System):
    """arbormem itself (or one of its signals alone) on a real SQLite file."""

    def __init__(
        self,
        name: str,
        embedder: Embedder,
        counter: TokenCounter,
        recall: RecallConfig | None,
        workdir: Path,
        tree: bool = True,
        assemble: bool = False,
        ann_threshold: int | None = None,
        reranker: Reranker | None = None,
        deep: Embedder | None = None,
        store: str | None = None,
    ) -> None:
        self.name = name
        #: A PostgreSQL URL to make each conversation's store on (None: SQLite files).
        self.store = store
        self._url: str | None = None
        self.reranker = reranker
        self.deep = deep
        self.ann_threshold = ann_threshold
        self.tree = tree
        self.assemble = assemble
        self.embedder = embedder
        self.counter = counter
        self.recall = recall or RecallConfig()
        self.workdir = workdir
        self.memory: Memory | None = None
        self.dia_of: dict[str, str] = {}
        self.turn_of: dict[str, LocomoTurn] = {}
        self._n = 0

    def ingest(self, conv: LocomoConversation) -> None:
        self.close()
        self._n += 1
        path: str | Path = self.workdir / f"{self.name}-{self._n}.db"
        if self.store is not None:
            from arbormem.store.postgres.admin import drop_store, with_schema

            # A schema of its own per system and conversation, named after this run.
            self._url = with_schema(
                self.store, f"bench_{self.workdir.name[-8:]}_{self.name}_{self._n}"
            )
            drop_store(self._url)  # a leftover of an interrupted run
            path = self._url
        self.memory = Memory(
            path,
            embedder=self.embedder,
            recall=self.recall,
            tree=self.tree,
            llm=None,
            ann_threshold=UNSET if self.ann_threshold is None else self.ann_threshold,
            reranker=self.reranker,
            deep_embedder=self.deep,
        )
        self.turn_of = {t.dia_id: t for t in conv.turns}
        self.dia_of = ingest_conversation(self.memory, conv)

    def finish_indexing(self) -> bool:
        assert self.memory is not None
        if self.deep is None:
            return False
        self.memory.wait(indexed=True)
        return True

    def records_kept(self) -> int | None:
        assert self.memory is not None
        return len(self.memory.records(current=False, limit=MAX_RECORDS))

    def rank(self, question: str) -> list[str]:
        assert self.memory is not None
        hits = self.memory.search(question, k=RANK_DEPTH)
        return [self.dia_of[h.message.id] for h in hits]

    def context(self, question: str, ranking: list[str], budget: int) -> str:
        if not self.assemble:
            return render_turns([self.turn_of[d] for d in ranking], budget, self.counter)
        assert self.memory is not None
        # The question opens a new session: no sliding window, everything is recall.
        ctx = self.memory.context(question, budget_tokens=budget, session=BENCH_SESSION)
        return ctx.text

    def extra_contexts(self, question: str, ranking: list[str], budget: int) -> dict[str, str]:
        if not self.assemble:
            return {}
        return {"plain": render_turns([self.turn_of[d] for d in ranking], budget, self.counter)}

    def config(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder.model_id,
            "deep_embedder": self.deep.model_id if self.deep is not None else None,
            "recall": self.recall.to_dict(),
            "tree": self.tree,
            "ann_threshold": self.ann_threshold,
            "reranker": None
            if self.reranker is None
            else {
                "model": self.reranker.model_id,
                "depth": self.recall.rerank_depth,
                "weight": self.recall.rerank_weight,
            },
            "llm": None,
            "store": store_description(self.store),
            "context": "Memory.context() in a new session (system prompt, recalled topics "
            "and turns)"
            if self.assemble
            else "top-ranked turns by session with dates",
        }

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None
        if self._url is not None:
            from arbormem.store.postgres.admin import drop_store

            drop_store(self._url)
            self._url = None


def store_description(store: str | None) -> str:
    """What the benchmark's stores are, for its configuration."""
    if store is None:
        return "sqlite (a temporary file per conversation)"
    from arbormem.store.postgres.connection import redact

    return f"postgres ({redact(store)}, a schema per conversation, dropped after)"


class WindowSystem(System):
    """The most recent turns: what a plain sliding window would send."""

    name = "window"
    stores = False

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.turns: list[LocomoTurn] = []

    def ingest(self, conv: LocomoConversation) -> None:
        self.turns = list(conv.turns)

    def rank(self, question: str) -> list[str]:
        return [t.dia_id for t in reversed(self.turns)]

    def context(self, question: str, ranking: list[str], budget: int) -> str:
        return render_turns(list(reversed(self.turns)), budget, self.counter)

    def config(self) -> dict[str, Any]:
        return {"ranking": "most recent first", "context": "most recent turns within budget"}


class FullSystem(WindowSystem):
    """The whole history in every prompt: complete, at its full token cost."""

    name = "full"

    def rank(self, question: str) -> list[str]:
        return [t.dia_id for t in self.turns]

    def context(self, question: str, ranking: list[str], budget: int) -> str:
        return _render(self.turns)

    def config(self) -> dict[str, Any]:
        return {"ranking": "chronological", "context": "whole history, budget ignored"}


def make_systems(
    names: Sequence[str],
    embedder: Embedder,
    counter: TokenCounter,
    workdir: Path,
    recall: RecallConfig | None = None,
    ann_threshold: int | None = None,
    reranker: Reranker | None = None,
    deep: Embedder | None = None,
    store: str | None = None,
) -> list[System]:
    """The systems named; ``reranker`` reorders the best turns of ``arbormem`` and
    ``flat`` (the single-signal baselines stay single-signal); ``deep`` is the
    background embedder of every system with dense recall (see arbormem.deep);
    ``store``: a PostgreSQL URL to make the stores on (None: SQLite files)."""
    base = recall or RecallConfig()
    out: list[System] = []
    ann: dict[str, Any] = {"ann_threshold": ann_threshold, "store": store}
    full: dict[str, Any] = {**ann, "reranker": reranker, "deep": deep}
    for name in names:
        if name == "arbormem":
            out.append(
                ArbormemSystem(name, embedder, counter, base, workdir, assemble=True, **full)
            )
        elif name == "flat":
            out.append(
                ArbormemSystem(
                    name, embedder, counter, base, workdir, tree=False, assemble=True, **full
                )
            )
        elif name == "bm25":
            # BM25 over single turns, ranked by its own score alone.
            cfg = replace(
                base,
                dense=False,
                window_candidates=0,
                date_candidates=0,
                turn_candidates=100,
                weights={"bm_t": 1.0},
            )
            out.append(ArbormemSystem(name, embedder, counter, cfg, workdir, tree=False, **ann))
        elif name == "dense":
            # Cosine with the same embedder (the deep one when there is one), alone.
            cfg = replace(base, lexical=False, weights={"de_t": 1.0})
            out.append(
                ArbormemSystem(name, embedder, counter, cfg, workdir, tree=False, deep=deep, **ann)
            )
        elif name == "window":
            out.append(WindowSystem(counter))
        elif name == "full":
            out.append(FullSystem(counter))
        else:
            raise InputError(
                f"unknown system {name!r}",
                field="--systems",
                hint=f"choose from {', '.join(ALL_SYSTEMS)}",
            )
    return out


def run(
    paths: Sequence[str | Path],
    systems: Sequence[str] = ALL_SYSTEMS,
    budget: int = 1000,
    embedder: str | Embedder | None = None,
    recall: RecallConfig | None = None,
    progress: Callable[[str], None] | None = None,
    distractors: int = 0,
    ann_threshold: int | None = None,
    reranker: str | Reranker | None = None,
    deep_embedder: str | Embedder | Any | None = UNSET,
    store: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return the JSON-ready result object.

    ``distractors`` generated turns are added to each conversation (see the
    module docstring); the dataset figures count the real turns only. ``store``:
    a PostgreSQL URL on which each conversation gets a fresh store (a schema,
    dropped afterwards); None makes temporary SQLite files. ``deep_embedder`` is a
    spec (see :func:`arbormem.deep.deep_embedder`; unset: the configured one);
    questions are asked once its background indexing is done, and how long that
    took is reported.
    """
    conversations = load_paths(paths)
    counter = default_counter()
    emb = get_embedder(embedder)
    emb.embed("warm up")  # model loading is a one-off, not part of ingest throughput
    deep = resolve_deep(deep_embedder, emb)
    if deep is not None:
        deep.embed("warm up")
    second = get_reranker(reranker)
    if second is not None:
        second.score("warm up", ["loading the model is a one-off too"])
    accs = {name: Accumulator(budget) for name in systems}
    n_questions = 0
    with tempfile.TemporaryDirectory(prefix="arbormem-bench-") as tmp:
        runners = make_systems(
            systems, emb, counter, Path(tmp), recall, ann_threshold, second, deep, store=store
        )
        try:
            for i, (source, conv) in enumerate(conversations):
                questions = questions_of(conv)
                conv = with_distractors(conv, distractors, seed=i)
                n_questions += sum(1 for q in questions if q.category in HEADLINE_CATEGORIES)
                session_of = {t.dia_id: str(t.session) for t in conv.turns}
                text_of = {t.dia_id: t.text for t in conv.turns}
                for system in runners:
                    if progress:
                        progress(f"{Path(source).name}: {system.name}")
                    acc = accs[system.name]
                    t0 = time.perf_counter()
                    system.ingest(conv)
                    if system.stores:
                        acc.ingest_seconds += time.perf_counter() - t0
                        acc.ingest_turns += len(conv.turns)
                    # Questions are asked of the fully indexed store; how long it took
                    # counts from the start of the ingest.
                    if system.finish_indexing():
                        acc.index_seconds += time.perf_counter() - t0
                    # Extraction is part of the timed ingest (ingest_conversation waits
                    # for it): the records it left are counted after the clock stopped.
                    kept = system.records_kept() if system.stores else None
                    if kept is not None:
                        acc.records = (acc.records or 0) + kept
                    for q in questions:
                        t0 = time.perf_counter()
                        ranking = system.rank(q.text)
                        ms = (time.perf_counter() - t0) * 1000
                        context = system.context(q.text, ranking, budget)
                        acc.add(
                            q.category,
                            ranking,
                            q.evidence,
                            session_of,
                            context,
                            [text_of[e] for e in sorted(q.evidence)],
                            counter.count(context),
                            ms,
                            system.extra_contexts(q.text, ranking, budget),
                        )
        finally:
            for system in runners:
                system.close()
        configs = {s.name: s.config() for s in runners}
    result: dict[str, Any] = {
        "dataset": {
            "files": sorted({s for s, _ in conversations}),
            "conversations": len(conversations),
            "turns": sum(len(c.turns) for _, c in conversations),
            "questions": n_questions,
            **({"distractors": distractors} if distractors > 0 else {}),
        },
        "token_counter": counter.name,
        "budget": budget,
        "systems": {},
    }
    for name in systems:
        summary = accs[name].summary(HEADLINE_CATEGORIES)
        summary["config"] = configs[name]
        result["systems"][name] = summary
    return result


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, sort_keys=False)
