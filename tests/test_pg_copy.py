"""Postings copied to PostgreSQL in COPY's text form keep every term as it was,
characters the form escapes included."""

from __future__ import annotations

from datetime import datetime, timezone

from arbormem.ids import content_hash
from arbormem.store import NewMessage, open_store

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def test_terms_with_escaped_characters_are_found(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        thread = store.thread("ann", "bot", create=True)
        assert thread is not None
        odd = ["back\\slash", "c:\\path\\n", "plain", "\\N"]
        rows = store.append(
            thread,
            [
                NewMessage(
                    id=f"m{i}",
                    role="user",
                    content=f"message {i}",
                    timestamp=T0,
                    session="s",
                    terms=" ".join(odd[: i + 1]),
                    chash=content_hash(f"message {i}"),
                )
                for i in range(len(odd))
            ],
        )
        assert store.doc_frequencies("turn", odd) == {
            term: len(odd) - i for i, term in enumerate(odd)
        }
        found = store.lexical_search([thread], "turn", ["\\N"], 10)
        assert [rowid for rowid, _ in found] == [rows[-1].rowid]
        found = store.lexical_search([thread], "turn", ["c:\\path\\n"], 10)
        assert sorted(rowid for rowid, _ in found) == sorted(r.rowid for r in rows[1:])
    finally:
        store.close()
