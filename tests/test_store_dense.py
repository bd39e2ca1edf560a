"""The dense-search contract (``VectorStore.nearest``, ``vectors_at``,
``session_centroids``) on every back-end: SQLite answers it in memory, PostgreSQL
with pgvector in the database; both must give what brute force gives."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from arbormem.embed import HashingEmbedder
from arbormem.ids import content_hash
from arbormem.store import Backend, NewMessage
from arbormem.text import analyze

from .backends import BACKENDS, KINDS, backend, make_backend

__all__ = ["backend"]

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
WORDS = ["kite", "lake", "tea", "river", "paint", "garden", "piano", "novel", "beach", "bread"]


def _messages(n: int, *, start: int = 0, sessions: int = 4) -> list[NewMessage]:
    out = []
    for i in range(start, start + n):
        text = f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} {WORDS[(i * 3 + 1) % 10]} {i}"
        out.append(
            NewMessage(
                id=f"m{i}",
                role="user",
                content=text,
                timestamp=T0 + timedelta(minutes=i),
                session=f"s{i % sessions}",
                terms=" ".join(analyze(text)),
                chash=content_hash(text),
            )
        )
    return out


def _brute(store: Backend, emb: HashingEmbedder, thread: object, query: str, k: int) -> list[int]:
    rows = [r for r in store.messages(thread, archived=False)]  # type: ignore[arg-type]
    matrix = emb.embed_many([r.message.text for r in rows])
    scores = matrix @ emb.embed(query)
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i].rowid))
    return [rows[i].rowid for i in order[:k]]


def test_nearest_is_brute_force_cosine_over_live_messages(backend: Backend) -> None:
    emb = HashingEmbedder(64)
    t = backend.thread("u", "a", create=True)
    assert t is not None
    ms = _messages(60)
    vecs = dict(zip((m.chash for m in ms), emb.embed_many([m.content for m in ms])))
    rows = backend.append(t, ms, vecs, emb.model_id)
    backend.set_message_leaf([rows[3].rowid, rows[4].rowid], 9)
    backend.set_archived(t, [9], True)
    backend.delete_messages([ms[5].id], t)
    for query in ("kite lake", "piano novel 17", "bread"):
        ids, scores = backend.nearest(t, emb, emb.embed(query), 10)
        want = _brute(backend, emb, t, query, 10)
        assert len(ids) == 10 and set(ids.tolist()).isdisjoint({r.rowid for r in rows[3:6]})
        # Ties in score may come in either order: compare the scores, then the sets.
        expected = emb.embed_many([backend.rows(want)[r].message.text for r in want])
        assert np.allclose(
            np.sort(scores)[::-1], np.sort(expected @ emb.embed(query))[::-1], atol=1e-5
        )
        assert np.all(np.diff(scores) <= 1e-6)
    allowed = np.asarray(sorted(r.rowid for r in rows[20:30]), dtype=np.int64)
    ids, _ = backend.nearest(t, emb, emb.embed("kite"), 5, allowed)
    assert len(ids) == 5 and set(ids.tolist()) <= set(allowed.tolist())


def test_messages_stored_without_vectors_are_embedded_by_the_search(backend: Backend) -> None:
    emb = HashingEmbedder(32)
    t = backend.thread("u", "a", create=True)
    assert t is not None
    rows = backend.append(t, _messages(12))  # no vectors: the embedder was down
    ids, _ = backend.nearest(t, emb, emb.embed("piano novel 3"), 3)
    assert len(ids) == 3 and ids[0] in {r.rowid for r in rows}
    assert backend.vector_models() == {emb.model_id: 12}  # stored for the next search
    found, matrix = backend.vectors_at(t, emb, np.asarray([rows[0].rowid, 10**12], np.int64))
    assert found.tolist() == [True, False]
    assert np.allclose(matrix[0], emb.embed(rows[0].message.text), atol=1e-6)
    # Another model's vectors are another search's: made on demand as well.
    other = HashingEmbedder(16)
    ids, _ = backend.nearest(t, other, other.embed("kite"), 4)
    assert len(ids) == 4


def test_session_centroids_are_the_unit_mean_of_live_members(backend: Backend) -> None:
    emb = HashingEmbedder(48)
    t = backend.thread("u", "a", create=True)
    assert t is not None
    ms = _messages(16, sessions=3)
    backend.append(
        t,
        ms[:10],
        dict(zip((m.chash for m in ms), emb.embed_many([m.content for m in ms]))),
        emb.model_id,
    )
    backend.append(t, ms[10:])  # without vectors: summed from what the search embeds
    got = backend.session_centroids(t, emb, ["s0", "s1", "s2", "nope"])
    assert sorted(got) == ["s0", "s1", "s2"]
    for key, centroid in got.items():
        members = [m for m in ms if m.session == key]
        total = emb.embed_many([m.content for m in members]).sum(axis=0)
        assert np.allclose(centroid, total / np.linalg.norm(total), atol=1e-5)


def test_session_centroids_follow_forgetting_archiving_and_adding(backend: Backend) -> None:
    # Searches keep what they read of sessions between them; each change must show.
    emb = HashingEmbedder(48)
    t = backend.thread("u", "a", create=True)
    assert t is not None
    ms = _messages(24, sessions=3)
    rows = backend.append(t, ms[:12])  # no vectors: centroids from what the search embeds

    def check() -> None:
        live = {r.message.id for r in backend.messages(t, archived=False)}
        got = backend.session_centroids(t, emb, ["s0", "s1", "s2"])
        for key in ("s0", "s1", "s2"):
            members = [m for m in ms if m.session == key and m.id in live]
            total = emb.embed_many([m.content for m in members]).sum(axis=0)
            assert np.allclose(got[key], total / np.linalg.norm(total), atol=1e-5), key

    check()
    backend.delete_messages([ms[3].id], t)  # s0 loses a member
    check()
    backend.set_message_leaf([rows[4].rowid], 9)
    backend.set_archived(t, [9], True)  # s1 loses one to the archive
    check()
    backend.append(t, ms[12:])  # every session gains members
    check()


def test_sqlite_session_members_outlive_another_threads_add(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a server, another user's add comes many times a second: it must not make
    # this thread's next search read its sessions' members again; its own add must.
    store = BACKENDS["sqlite-file"](tmp_path)
    emb = HashingEmbedder(48)
    mine, other = store.thread("u", "a", create=True), store.thread("v", "a", create=True)
    assert mine is not None and other is not None
    ms = _messages(12, sessions=2)
    store.append(mine, ms[:8])
    store.session_centroids(mine, emb, ["s0", "s1"])
    real = store.session_members
    asked: list[list[str]] = []

    def counting(thread: object, sessions: list[str]) -> dict[str, list[int]]:
        asked.append(list(sessions))
        return real(thread, sessions)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "session_members", counting)
    store.append(other, _messages(3, start=100, sessions=1))
    store.session_centroids(mine, emb, ["s0", "s1"])
    assert asked == []
    store.append(mine, ms[8:])
    got = store.session_centroids(mine, emb, ["s0", "s1"])
    assert asked
    for key in ("s0", "s1"):
        members = [m for m in ms if m.session == key]
        total = emb.embed_many([m.content for m in members]).sum(axis=0)
        assert np.allclose(got[key], total / np.linalg.norm(total), atol=1e-5), key
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_past_the_threshold_search_is_approximate_and_finds_the_same(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    emb = HashingEmbedder(32)
    store = make_backend(request, kind, tmp_path, ann_threshold=50)
    try:
        t = store.thread("u", "a", create=True)
        assert t is not None
        ms = _messages(120)
        store.append(
            t,
            ms,
            dict(zip((m.chash for m in ms), emb.embed_many([m.content for m in ms]))),
            emb.model_id,
        )
        prepared = store.prepare_nearest(t, emb)
        assert prepared.approximate and prepared.vectors >= 120
        hits = 0
        for query in ["kite lake", "tea 7", "beach bread", "river 33"]:
            ids, _ = store.nearest(t, emb, emb.embed(query), 10)
            q = emb.embed(query)
            true = {r.rowid: float(emb.embed(r.message.text) @ q) for r in store.messages(t)}
            tenth = sorted(true.values(), reverse=True)[9]
            # Among equal scores any may come: a hit is a score the exact top 10 reaches.
            hits += sum(1 for i in ids.tolist() if true[i] >= tenth - 1e-4)
        assert hits >= 36  # recall@10 of at least .9 on these small graphs
        # Appends after the index exists are found too.
        more = _messages(5, start=500)
        rows = store.append(
            t,
            more,
            dict(zip((m.chash for m in more), emb.embed_many([m.content for m in more]))),
            emb.model_id,
        )
        ids, _ = store.nearest(t, emb, emb.embed(more[2].content), 3)
        assert rows[2].rowid in ids.tolist()
    finally:
        store.close()
