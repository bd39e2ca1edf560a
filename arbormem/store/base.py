"""The storage back-end interface: every capability in one object.

A back-end keeps messages verbatim, their lexical index, their vectors, each
thread's topic tree and each session's working memory, all partitioned by thread
(one user with one agent). Everything above it (recall, the topic tree, the API)
talks to storage only through this interface. It is the union of narrow
capabilities, each an abstract class with its own contract:

* :class:`~arbormem.store.core.StoreCore`: transactions, read-only stores, closing;
* :class:`~arbormem.store.messages.MessageStore`: threads, sessions, messages;
* :class:`~arbormem.store.lexical.LexicalIndex`: BM25 and term statistics;
* :class:`~arbormem.store.vectors.VectorStore`: embeddings and nearest neighbours;
* :class:`~arbormem.store.tree.TreeStore`: topic trees and their log;
* :class:`~arbormem.store.state.SessionStateStore`: per-session working memory.

The contract tests (``tests/test_store_*.py``) run every back-end through each.

Writes happen inside :meth:`~arbormem.store.core.StoreCore.transaction`; a write
method called outside one opens its own. Either the whole transaction lands or
nothing does.
"""

from __future__ import annotations

from collections.abc import Sequence

from arbormem.store.lexical import LexicalIndex
from arbormem.store.messages import MessageStore
from arbormem.store.state import SessionStateStore
from arbormem.store.tree import TreeStore
from arbormem.store.types import Filters, Thread
from arbormem.store.vectors import VectorStore
from arbormem.text import analyze_message


class Backend(MessageStore, LexicalIndex, VectorStore, TreeStore, SessionStateStore):
    """Durable storage for messages, their indexes, vectors, trees and session state."""

    # -- reference implementations that span capabilities ------------------------------

    def archived_matches(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        filters: Filters | None = None,
        limit: int = 10,
    ) -> tuple[list[str], int]:
        """See :meth:`LexicalIndex.archived_matches`. This reference version reads every
        archived message of the threads; a back-end with a full-text index does better."""
        wanted = set(terms)
        rowids = sorted(r for t in threads for r in self.archived_rowids(t))
        found: list[tuple[int, int, str]] = []
        for rowid, row in self.rows(rowids).items():
            m = row.message
            if filters is not None and not (
                (not filters.sessions or m.session in filters.sessions)
                and (filters.since is None or m.timestamp >= filters.since)
                and (filters.until is None or m.timestamp < filters.until)
                and (not filters.roles or m.role in filters.roles)
            ):
                continue
            if n := len(wanted.intersection(analyze_message(m.content, m.speaker))):
                found.append((-n, -rowid, m.id))
        found.sort()
        return [mid for _, _, mid in found[:limit]], len(found)
