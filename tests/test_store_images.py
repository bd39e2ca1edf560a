"""The images capability of every back-end (an SQLite file, SQLite in memory,
PostgreSQL): rows per thread and content hash, bytes kept once, forgetting that
takes the rows with their messages, and the sweep of unused bytes."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import timedelta

import pytest

from arbormem.ids import new_id
from arbormem.store import Backend
from arbormem.store.images import ImageRow
from arbormem.store.types import Thread

from .backends import backend
from .test_store_contract import T0, msg

__all__ = ["backend"]


def blob(n: int) -> tuple[str, bytes]:
    data = f"picture bytes {n}".encode() * 10
    return hashlib.sha256(data).hexdigest(), data


def image(thread: Thread, digest: str, caption_rowid: int | None, **more: object) -> ImageRow:
    fields: dict[str, object] = {
        "id": new_id(),
        "thread_id": thread.id,
        "digest": digest,
        "mime": "image/png",
        "size": 160,
        "session": "s1",
        "timestamp": T0,
        "caption": "a red square",
        "caption_source": "caller",
        "entities": ("square",),
        "phash": "00ff00ff00ff00ff",
        "caption_rowid": caption_rowid,
        "metadata": {"album": "x"},
    }
    fields.update(more)
    return ImageRow(**fields)  # type: ignore[arg-type]


def caption(backend: Backend, thread: Thread, text: str, session: str = "s1", i: int = 0) -> int:
    (row,) = backend.append(thread, [msg(f"[image] {text}", session, i)])
    return row.rowid


def test_bytes_are_kept_once_per_hash(backend: Backend) -> None:
    digest, data = blob(1)
    assert backend.blob(digest) is None
    backend.put_blob(digest, data)
    backend.put_blob(digest, data)  # again: nothing happens
    assert backend.blob(digest) == data


def test_rows_round_trip_and_are_one_per_thread_and_hash(backend: Backend) -> None:
    thread = backend.thread("ann", "bot", create=True)
    other = backend.thread("bob", "bot", create=True)
    assert thread is not None and other is not None
    digest, data = blob(1)
    backend.put_blob(digest, data)
    row = image(thread, digest, caption(backend, thread, "a red square"), width=8, height=6)
    stored = backend.insert_image(row)
    assert stored.created_at is not None
    assert replace(stored, created_at=None) == row
    assert backend.image(row.id) == stored
    assert backend.image_by_digest(thread, digest) == stored
    assert backend.image_by_digest(other, digest) is None
    with pytest.raises(Exception):  # noqa: B017 - each driver's own integrity error
        backend.insert_image(image(thread, digest, None))
    theirs = backend.insert_image(image(other, digest, caption(backend, other, "bob's copy")))
    assert backend.images([thread]) == [stored] and backend.images([other]) == [theirs]
    assert backend.images_by_id([theirs.id, stored.id, "nope"]) != []


def test_filters_updates_and_recalls(backend: Backend) -> None:
    thread = backend.thread("ann", "bot", create=True)
    assert thread is not None
    rows = []
    for n in range(3):
        digest, data = blob(n)
        backend.put_blob(digest, data)
        rowid = caption(backend, thread, f"picture {n}", i=n)
        rows.append(backend.insert_image(image(thread, digest, rowid)))
    first, second, third = rows
    assert [r.id for r in backend.images([thread])] == [r.id for r in rows]  # stored order
    backend.update_image(second.id, caption_rowid=None, expired_at=T0 + timedelta(days=9))
    assert [r.id for r in backend.images([thread], expired=False)] == [first.id, third.id]
    assert [r.id for r in backend.images([thread], expired=True)] == [second.id]
    assert backend.image(second.id).expired_at == T0 + timedelta(days=9)  # type: ignore[union-attr]
    assert [r.id for r in backend.images([thread], ids=[third.id, "nope"])] == [third.id]
    rowid = third.caption_rowid
    assert rowid is not None
    assert [r.id for r in backend.images([thread], caption_rowids=[rowid])] == [third.id]
    at = T0 + timedelta(days=3)
    backend.recall_images({first.id: 2, third.id: 1}, at)
    backend.recall_images({first.id: 1}, at)
    got = {r.id: r for r in backend.images([thread])}
    assert (got[first.id].recalls, got[third.id].recalls, got[second.id].recalls) == (3, 1, 0)
    assert got[first.id].recalled_at == at
    with pytest.raises(ValueError):
        backend.update_image(first.id, digest="x")


def test_forgetting_takes_image_rows_along_and_the_sweep_their_bytes(backend: Backend) -> None:
    thread = backend.thread("ann", "bot", create=True)
    other = backend.thread("bob", "bot", create=True)
    assert thread is not None and other is not None
    d1, b1 = blob(1)
    d2, b2 = blob(2)
    for digest, data in ((d1, b1), (d2, b2)):
        backend.put_blob(digest, data)
    one = backend.insert_image(image(thread, d1, caption(backend, thread, "one", "s1", 0)))
    two = backend.insert_image(
        image(thread, d2, caption(backend, thread, "two", "s2", 1), session="s2")
    )
    backend.insert_image(image(other, d1, caption(backend, other, "bob's one")))
    expired = backend.insert_image(
        image(thread, blob(3)[0], None, session="s2", expired_at=T0, size=0, mime="")
    )
    # The caption message goes: its image with it, in the same transaction.
    row = backend.rows([one.caption_rowid or 0])[one.caption_rowid or 0]
    backend.delete_messages([row.message.id], thread)
    assert backend.image(one.id) is None
    assert backend.sweep_blobs() == 0  # bob's image still uses those bytes
    assert backend.blob(d1) == b1
    # A session goes with its images, soft-expired ones included.
    backend.delete_session(thread, "s2")
    assert backend.image(two.id) is None and backend.image(expired.id) is None
    assert backend.sweep_blobs() == 1 and backend.blob(d2) is None
    backend.delete_thread(other)
    assert backend.images([other]) == []
    backend.purge(wait=0.0)  # every purge sweeps
    assert backend.blob(d1) is None


def test_delete_images_and_the_caption_cache(backend: Backend) -> None:
    thread = backend.thread("ann", "bot", create=True)
    assert thread is not None
    digest, data = blob(1)
    backend.put_blob(digest, data)
    row = backend.insert_image(image(thread, digest, caption(backend, thread, "one")))
    answer = {"caption": "a red square", "entities": ["square"], "importance": 0.4}
    assert backend.cached_caption(digest, "vision-1") is None
    backend.cache_caption(digest, "vision-1", answer)
    backend.cache_caption(digest, "vision-1", {**answer, "importance": 0.5})
    assert backend.cached_caption(digest, "vision-1") == {**answer, "importance": 0.5}
    assert backend.cached_caption(digest, "vision-2") is None
    assert backend.delete_images([row.id, "nope"]) == 1
    assert backend.images([thread]) == []
    backend.sweep_blobs()
    assert backend.blob(digest) is None and backend.cached_caption(digest, "vision-1") is None


def test_tenants_keep_images_apart(backend: Backend) -> None:
    mine = backend.thread("ann", "bot", create=True, tenant="acme")
    theirs = backend.thread("ann", "bot", create=True, tenant="globex")
    assert mine is not None and theirs is not None
    digest, data = blob(1)
    backend.put_blob(digest, data)
    a = backend.insert_image(image(mine, digest, caption(backend, mine, "acme's")))
    b = backend.insert_image(image(theirs, digest, caption(backend, theirs, "globex's")))
    assert backend.images([mine]) == [a] and backend.images([theirs]) == [b]
    assert backend.image_by_digest(theirs, digest) == b
