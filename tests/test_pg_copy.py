"""Postings copied to PostgreSQL in COPY's text form keep every term as it was,
characters the form escapes included."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from arbormem.ids import content_hash
from arbormem.store import NewMessage, open_store
from arbormem.store.types import NodeRow

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
#: Terms with the characters COPY's text form escapes (a backslash, and its own ``\N``).
ODD = ["back\\slash", "c:\\path\\n", "plain", "\\N"]


@pytest.fixture
def stored(pg_url: str) -> Iterator[tuple[Any, Any]]:
    """A PostgreSQL store and a thread in it."""
    store = open_store(pg_url)
    try:
        thread = store.thread("ann", "bot", create=True)
        assert thread is not None
        yield store, thread
    finally:
        store.close()


def test_terms_with_escaped_characters_are_found(stored: tuple[Any, Any]) -> None:
    store, thread = stored
    rows = store.append(
        thread,
        [
            NewMessage(
                id=f"m{i}",
                role="user",
                content=f"message {i}",
                timestamp=T0,
                session="s",
                terms=" ".join(ODD[: i + 1]),
                chash=content_hash(f"message {i}"),
            )
            for i in range(len(ODD))
        ],
    )
    assert store.doc_frequencies("turn", ODD) == {term: len(ODD) - i for i, term in enumerate(ODD)}
    found = store.lexical_search([thread], "turn", ["\\N"], 10)
    assert [rowid for rowid, _ in found] == [rows[-1].rowid]
    found = store.lexical_search([thread], "turn", ["c:\\path\\n"], 10)
    assert sorted(rowid for rowid, _ in found) == sorted(r.rowid for r in rows[1:])


def test_node_terms_with_escaped_characters_are_found(stored: tuple[Any, Any]) -> None:
    # A node's first postings go by COPY too (its later ones by an INSERT).
    store, thread = stored
    nodes = [
        NodeRow(
            id=None,
            parent_id=None,
            kind="topic",
            seq=i,
            first_index=i,
            last_index=i,
            first_at=T0,
            last_at=T0,
        )
        for i in range(len(ODD))
    ]
    with store.transaction():
        store.put_nodes(thread, nodes)
        store.index_nodes("topic", {n.id: " ".join(ODD[: i + 1]) for i, n in enumerate(nodes)})
    ids = [n.id for n in nodes]
    assert store.doc_frequencies("topic", ODD) == {term: len(ODD) - i for i, term in enumerate(ODD)}
    found = store.node_search([thread], "topic", ["\\N"], 10)
    assert [node for node, _ in found] == [ids[-1]]
    found = store.node_search([thread], "topic", ["c:\\path\\n"], 10)
    assert sorted(node for node, _ in found) == sorted(ids[1:])
    assert store.node_docs("topic", ids) == {n: " ".join(ODD[: i + 1]) for i, n in enumerate(ids)}
    # Written again: the postings that stay are updated, the others deleted.
    store.index_nodes("topic", {ids[-1]: "\\N plain"})
    found = store.node_search([thread], "topic", ["back\\slash"], 10)
    assert sorted(node for node, _ in found) == sorted(ids[:-1])
    found = store.node_search([thread], "topic", ["\\N"], 10)
    assert [node for node, _ in found] == [ids[-1]]
