"""``arbormem bench images``: what issue 26 asks of image memories, measured.

* **LoCoMo pictures**: the questions (categories 1-4) whose evidence includes a turn
  that shared a picture. Two systems on the same data: ``turns``, today's way (the
  picture's ``blip_caption`` inside the turn's text, as ``BENCHMARK.md`` defines a
  turn), and ``images``, where the turn keeps its own text and the picture is an
  image memory captioned by ``blip_caption``, linked to the turn; a hit on the
  image's caption counts as its sharing turn. recall@k as in ``BENCHMARK.md``, for
  the picture questions and for all questions.
* **Search speed**: ``search_images`` over a scope of ``n`` real PNG images with
  generated captions, one query at a time, wall time of the public call (its
  recall bookkeeping included), and the CPU time it took; p50 and p95.
"""

from __future__ import annotations

import io
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.bench.locomo import (
    HEADLINE_CATEGORIES,
    RANK_DEPTH,
    load_paths,
    questions_of,
)
from arbormem.bench.metrics import RECALL_KS, dedupe, recall_at
from arbormem.embed import Embedder, get_embedder
from arbormem.ingest.formats import LocomoConversation, LocomoTurn
from arbormem.memory import Memory


def plain_text(turn: LocomoTurn) -> str:
    """The turn's own words, without the `` [shares <caption>]`` the loader appends."""
    caption = turn.metadata.get("blip_caption")
    suffix = f" [shares {caption}]" if caption else ""
    if suffix and turn.content.endswith(suffix):
        return turn.content[: -len(suffix)]
    return turn.content


def _ingest(mem: Memory, conv: LocomoConversation, as_images: bool) -> dict[str, str]:
    """Store a conversation a session at a time; returns message id -> dia_id."""
    dia_of: dict[str, str] = {}
    by_session: dict[int, list[LocomoTurn]] = {}
    for t in conv.turns:
        by_session.setdefault(t.session, []).append(t)
    for number, turns in by_session.items():
        items = []
        for t in turns:
            meta: dict[str, Any] = {"dia_id": t.dia_id}
            if as_images and t.metadata.get("blip_caption"):
                meta["img_url"] = t.metadata.get("img_url") or [f"locomo:{t.dia_id}"]
                meta["blip_caption"] = t.metadata["blip_caption"]
            items.append(
                {
                    "content": plain_text(t) if as_images else t.content,
                    "role": "user" if t.speaker == conv.speaker_a else "assistant",
                    "speaker": t.speaker,
                    "timestamp": t.timestamp,
                    "metadata": meta,
                }
            )
        stored = mem.add_many(items, session=f"session_{number}")
        for m, t in zip(stored, turns):
            dia_of[m.id] = t.dia_id
    mem.wait()
    return dia_of


def _rank(mem: Memory, question: str, dia_of: dict[str, str]) -> list[str]:
    out = []
    for hit in mem.search(question, k=RANK_DEPTH):
        link = hit.message.metadata.get("image")
        mid = link.get("shared_in") if isinstance(link, dict) else hit.message.id
        if mid in dia_of:
            out.append(dia_of[mid])
    return dedupe(out)


def locomo_pictures(
    paths: Sequence[str | Path],
    embedder: Embedder,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Recall on the picture questions, turns against image memories (module docs)."""
    conversations = load_paths(paths)
    per_k: dict[str, dict[str, dict[int, list[float]]]] = {
        s: {g: {k: [] for k in RECALL_KS} for g in ("pictures", "all")} for s in ("turns", "images")
    }
    shared_turns = 0
    with tempfile.TemporaryDirectory(prefix="arbormem-bench-images-") as tmp:
        for n, (source, conv) in enumerate(conversations):
            pictured = {t.dia_id for t in conv.turns if t.metadata.get("blip_caption")}
            shared_turns += len(pictured)
            questions = [q for q in questions_of(conv) if q.category in HEADLINE_CATEGORIES]
            for system in ("turns", "images"):
                if progress:
                    progress(f"{Path(source).name} #{n}: {system}")
                path = Path(tmp) / f"{system}-{n}.db"
                with Memory(path, embedder=embedder, llm=None) as mem:
                    dia_of = _ingest(mem, conv, as_images=system == "images")
                    for q in questions:
                        ranking = _rank(mem, q.text, dia_of)
                        groups = ["all"] + (["pictures"] if q.evidence & pictured else [])
                        for g in groups:
                            for k in RECALL_KS:
                                per_k[system][g][k].append(recall_at(ranking, q.evidence, k))
    out: dict[str, Any] = {
        "dataset": {
            "files": sorted({s for s, _ in conversations}),
            "conversations": len(conversations),
            "turns_sharing_a_picture": shared_turns,
            "questions": len(per_k["turns"]["all"][1]),
            "picture_questions": len(per_k["turns"]["pictures"][1]),
        },
        "embedder": embedder.model_id,
        "systems": {},
    }
    for system in ("turns", "images"):
        out["systems"][system] = {
            g: {f"recall@{k}": round(float(np.mean(v)), 4) if v else None for k, v in ks.items()}
            for g, ks in per_k[system].items()
        }
    out["systems"]["turns"]["how"] = "blip_caption inside the turn text (BENCHMARK.md)"
    out["systems"]["images"]["how"] = (
        "turn text alone; the picture an image memory captioned by blip_caption"
    )
    return out


_COLORS = [
    "red",
    "blue",
    "green",
    "yellow",
    "purple",
    "orange",
    "black",
    "white",
    "grey",
    "pink",
    "brown",
    "teal",
]
_THINGS = [
    "dog",
    "cat",
    "bicycle",
    "car",
    "receipt",
    "chart",
    "whiteboard",
    "invoice",
    "mountain",
    "beach",
    "kitchen",
    "garden",
    "laptop",
    "screenshot",
    "passport",
    "ticket",
    "cake",
    "guitar",
    "painting",
    "bridge",
    "lake",
    "map",
    "menu",
    "poster",
]
_PLACES = [
    "at the office",
    "in the park",
    "at home",
    "near the harbour",
    "on the train",
    "at the museum",
    "in Lisbon",
    "at the airport",
    "in the mountains",
    "at a wedding",
    "in the classroom",
    "at night",
]


def _caption(rng: random.Random) -> str:
    return (
        f"a {rng.choice(_COLORS)} {rng.choice(_THINGS)} and a {rng.choice(_COLORS)} "
        f"{rng.choice(_THINGS)} {rng.choice(_PLACES)}"
    )


def _png(i: int, rng: random.Random) -> bytes:
    from PIL import Image

    img = Image.frombytes("RGB", (8, 8), rng.randbytes(8 * 8 * 3))
    img.putpixel((0, 0), (i & 255, (i >> 8) & 255, (i >> 16) & 255))  # distinct bytes
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def search_speed(
    n: int,
    queries: int,
    embedder: Embedder,
    k: int = 10,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``search_images`` p50/p95 over ``n`` stored images (see the module docs)."""
    rng = random.Random(seed)
    with (
        tempfile.TemporaryDirectory(prefix="arbormem-bench-images-") as tmp,
        Memory(Path(tmp) / "images.db", embedder=embedder, llm=None) as mem,
    ):
        t0 = time.perf_counter()
        for i in range(n):
            mem.add_image(_png(i, rng), caption=_caption(rng), session=f"s{i // 50}")
            if progress and (i + 1) % 1000 == 0:
                progress(f"{i + 1:,} images stored")
        mem.wait()
        ingest_s = time.perf_counter() - t0
        asked = [
            f"the {rng.choice(_COLORS)} {rng.choice(_THINGS)} {rng.choice(_PLACES)}"
            for _ in range(queries)
        ]
        # The first search of a process builds the thread's caption index.
        t = time.perf_counter()
        mem.search_images("warm up the indexes", k=k)
        first_ms = (time.perf_counter() - t) * 1000
        times, cpu = [], []
        found = 0
        for q in asked:
            t, c = time.perf_counter(), time.process_time()
            hits = mem.search_images(q, k=k)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            found += bool(hits)
        stored = len(mem.list_images())
    return {
        "images": stored,
        "queries": queries,
        "k": k,
        "embedder": embedder.model_id,
        "ingest_images_per_s": round(n / ingest_s, 1),
        "first_search_ms": round(first_ms, 1),
        "search_ms_p50": round(float(np.percentile(times, 50)), 2),
        "search_ms_p95": round(float(np.percentile(times, 95)), 2),
        "search_ms_max": round(float(max(times)), 2),
        # CPU time of the process during each call (every thread of it): what the
        # call costs on a machine shared with other work, where wall time is not.
        "search_cpu_ms_p50": round(float(np.percentile(cpu, 50)), 2),
        "search_cpu_ms_p95": round(float(np.percentile(cpu, 95)), 2),
        "queries_with_hits": found,
    }


def run(
    paths: Sequence[str | Path],
    *,
    n: int = 10_000,
    queries: int = 200,
    embedder: str | Embedder | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    emb = get_embedder(embedder)
    emb.embed("warm up")
    result: dict[str, Any] = {}
    if paths:
        result["locomo_pictures"] = locomo_pictures(paths, emb, progress)
    if n > 0:
        result["search_speed"] = search_speed(n, queries, emb, progress=progress)
    return result
