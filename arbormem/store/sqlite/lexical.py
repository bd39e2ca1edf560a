"""The lexical index in SQLite: FTS5 tables per key, BM25, term statistics.

A full-text document is read back from its table's ``<name>_content`` shadow table
(FTS5 keeps the indexed text there, ``id`` and ``c0``), which is a plain B-tree
lookup instead of a trip through the virtual table.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from arbormem.store.sqlite.common import (
    Stats,
    batches,
    filter_sql,
)
from arbormem.store.sqlite.connection import SQLiteConnection
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.sqlite.postings import Postings, TablePostings, plain
from arbormem.store.sqlite.termcounts import TermCounts
from arbormem.store.sqlite.windows import WINDOW_RADIUS, window_doc
from arbormem.store.types import (
    LEXICAL_KEYS,
    NODE_KEYS,
    Filters,
    Thread,
)
from arbormem.text import fts_query
from arbormem.timeutil import format_timestamp

log = logging.getLogger("arbormem.store.sqlite")


class SQLiteLexical(SQLiteConnection):
    """BM25 over FTS5 tables of turns, windows and tree nodes, with their statistics."""

    #: Document frequencies of the turn index as the writer left it (see _turn_counts).
    _term_counts: TermCounts | None = None
    #: The tree nodes' documents written in the write transaction under way, by (table,
    #: node id), an empty one for a document taken out: kept back until it commits
    #: (see index_nodes).
    _node_docs: dict[tuple[str, int], str] | None = None
    #: The full-text tables held in memory for searches (see :mod:`.postings`).
    _held: TablePostings | None = None

    def _session_tail(self, sid: int, before_index: int) -> list[tuple[int, str]]:
        rows = self._writer.execute(
            "SELECT m.id, f.c0 FROM messages m JOIN turn_fts_content f ON f.id = m.id"
            " WHERE m.session_id = ? AND m.idx < ? AND +m.archived = 0"
            " ORDER BY m.idx DESC LIMIT ?",
            (sid, before_index, 2 * WINDOW_RADIUS),
        ).fetchall()
        return [(r[0], r[1]) for r in reversed(rows)]

    def _bump_stats(self, key: str, docs: int, tokens: int) -> None:
        self._writer.execute(
            "INSERT INTO lexicon_stats (key, docs, tokens) VALUES (?, ?, ?)"
            " ON CONFLICT(key) DO UPDATE SET docs = docs + excluded.docs,"
            " tokens = tokens + excluded.tokens",
            (key, docs, tokens),
        )

    def _write_window(
        self,
        rows: Sequence[tuple[int, str]],
        j: int,
        new: bool = False,
        stats: Stats | None = None,
        present_only: bool = False,
    ) -> None:
        """Replace the window document of ``rows[j]`` (its terms with its neighbours'
        in ``rows``), keeping the running statistics exact. ``new`` skips looking for
        a previous version, ``present_only`` writes only over one; with ``stats`` the
        statistics are added up there and written by the caller."""
        c = self._writer
        rowid = rows[j][0]
        old = (
            None
            if new
            else c.execute("SELECT c0 FROM window_fts_content WHERE id = ?", (rowid,)).fetchone()
        )
        if present_only and old is None:
            return
        doc = window_doc([t for _, t in rows[max(0, j - WINDOW_RADIUS) : j + WINDOW_RADIUS + 1]])
        if old is not None:
            c.execute("DELETE FROM window_fts WHERE rowid = ?", (rowid,))
        c.execute("INSERT INTO window_fts (rowid, terms) VALUES (?, ?)", (rowid, doc))
        before = len(old[0].split()) if old else 0
        docs, tokens = 0 if old else 1, len(doc.split()) - before
        if stats is None:
            self._bump_stats("window", docs, tokens)
        else:
            total = stats.setdefault("window", [0, 0])
            total[0] += docs
            total[1] += tokens

    def write_tail_windows(self, thread: Thread, session: str) -> int:
        with self.transaction():
            c = self._writer
            found = c.execute(
                "SELECT id FROM sessions WHERE thread_id = ? AND key = ?", (thread.id, session)
            ).fetchone()
            if found is None:
                return 0
            next_index = c.execute(
                "SELECT next_index FROM threads WHERE id = ?", (thread.id,)
            ).fetchone()[0]
            rows = self._session_tail(found[0], next_index)
            stats: Stats = {}
            written = 0
            for j in range(max(0, len(rows) - WINDOW_RADIUS), len(rows)):
                present = c.execute(
                    "SELECT 1 FROM window_fts_content WHERE id = ?", (rows[j][0],)
                ).fetchone()
                if present is None:
                    self._write_window(rows, j, new=True, stats=stats)
                    written += 1
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)
            return written

    def _rebuild_windows(self, session_ids: Sequence[int]) -> None:
        """Recompute the window key of every live message in these sessions from its
        live neighbours (an archived message's words reach no search)."""
        c = self._writer
        for sid in session_ids:
            rows = c.execute(
                "SELECT m.id, f.c0 FROM messages m JOIN turn_fts_content f ON f.id = m.id"
                " WHERE m.session_id = ? AND +m.archived = 0 ORDER BY m.idx",
                (sid,),
            ).fetchall()
            stats: Stats = {}
            for i in range(len(rows)):
                self._write_window(rows, i, stats=stats)
            for key, (docs, tokens) in stats.items():
                self._bump_stats(key, docs, tokens)

    def lexical_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None = None,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        if not terms or not threads:
            return []
        table = f"{key}_fts"
        with self._reading() as conn:
            if (filters is None or filters.empty) and self._only_threads(conn, threads):
                found = self._best_live(conn, table, terms, limit, "messages", after)
                if found is not None:
                    return found
            where, args = filter_sql(threads, filters)
            # The threads' stretch of row numbers bounds the full-text match: FTS5 then
            # reads only the postings inside it, and other threads' matches are never
            # joined to their rows (bm25 keeps the whole table's statistics, so the
            # scores are the same).
            lo, hi = self._message_span(conn, threads)
            lo = max(lo, after + 1)
            if filters is not None and (filters.since or filters.until):
                rng = self._rowid_range(
                    conn,
                    threads,
                    format_timestamp(filters.since) if filters.since else None,
                    format_timestamp(filters.until) if filters.until else None,
                )
                if rng is not None:
                    lo, hi = max(lo, rng[0]), min(hi, rng[1])
            if lo > hi:
                return []
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ?"
                f" AND f.rowid BETWEEN ? AND ? AND {where} ORDER BY r LIMIT ?"
            )
            rows = conn.execute(sql, [fts_query(terms), lo, hi, *args, limit]).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]

    #: Up to this many archived messages in the searched scope are scored from their
    #: own terms; past it, from the postings of the query's terms.
    ARCHIVED_LOOKUPS = 1000

    def archived_matches(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        filters: Filters | None = None,
        limit: int = 10,
    ) -> tuple[list[str], int]:
        if not terms or not threads:
            return [], 0
        wanted = list(dict.fromkeys(terms))
        with self._reading() as conn:
            if (filters is None or filters.empty) and self._only_threads(conn, threads):
                # The index alone: no row of the table is read.
                sql = "SELECT id FROM messages INDEXED BY messages_archived WHERE archived = 1"
                args: list[Any] = []
            else:
                where, args = filter_sql(threads, filters, archived=True)
                sql = f"SELECT m.id FROM messages m INDEXED BY messages_archived WHERE {where}"
            archived = [int(r[0]) for r in conn.execute(sql, args)]
            held: dict[int, int] = {}
            if len(archived) <= self.ARCHIVED_LOOKUPS:
                for chunk, marks in batches(archived):
                    for rowid, text in conn.execute(
                        f"SELECT rowid, terms FROM turn_fts WHERE rowid IN ({marks})", chunk
                    ):
                        if n := len(set(wanted).intersection(text.split())):
                            held[int(rowid)] = n
            else:
                # Joining the full-text match to the archived rows ran the match once per
                # row (17 s for 10,000 of them in a 100,000-turn thread).
                mine = set(archived)
                for term in wanted:
                    for (rowid,) in conn.execute(
                        "SELECT rowid FROM turn_fts WHERE turn_fts MATCH ?", (fts_query([term]),)
                    ):
                        if rowid in mine:
                            held[rowid] = held.get(rowid, 0) + 1
            best = sorted(held, key=lambda r: (-held[r], -r))[:limit]
            uids = {
                int(r[0]): str(r[1])
                for chunk, marks in batches(best)
                for r in conn.execute(f"SELECT id, uid FROM messages WHERE id IN ({marks})", chunk)
            }
        return [uids[r] for r in best], len(held)

    def lexical_search_spans(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        spans: Sequence[tuple[datetime, datetime]],
        filters: Filters | None = None,
    ) -> list[list[tuple[int, float]]]:
        # One pass over the terms' postings for every span: a question naming a month
        # with no year asks for that month in each year of the thread, and searching
        # each apart read the same posting lists again for every year.
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        bounds = [(format_timestamp(a), format_timestamp(b)) for a, b in spans]
        out: list[list[tuple[int, float]]] = [[] for _ in spans]
        if not terms or not threads or not spans:
            return out
        table = f"{key}_fts"
        where, args = filter_sql(threads, filters)
        query = fts_query(terms)
        with self._reading() as conn:
            ranges = [self._rowid_range(conn, threads, lo, hi) for lo, hi in bounds]
            held = (
                self._in_memory(conn, table, build=False)
                if (filters is None or filters.empty) and all(plain(t) for t in terms)
                else None
            )
            if held is not None and all(r is not None for r in ranges):
                return self._spans_held(conn, held, threads, terms, limit, bounds, ranges)
            if all(r is not None for r in ranges):
                # Each span is a stretch of row numbers: the index reads only the
                # postings inside it, and SQL keeps the best of each.
                sql = (
                    f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                    f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ?"
                    f" AND f.rowid BETWEEN ? AND ? AND {where}"
                    " AND m.ts >= ? AND m.ts < ? ORDER BY r LIMIT ?"
                )
                for i, ((lo, hi), rng) in enumerate(zip(bounds, ranges)):
                    assert rng is not None
                    if rng[0] > rng[1]:
                        continue
                    rows = conn.execute(sql, [query, *rng, *args, lo, hi, limit])
                    out[i] = [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]
                return out
            inside = " OR ".join("(m.ts >= ? AND m.ts < ?)" for _ in bounds)
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r, m.ts FROM {table} f"
                f" CROSS JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ? AND {where}"
                f" AND ({inside}) ORDER BY r"
            )
            flat = [b for pair in bounds for b in pair]
            for rowid, r, ts in conn.execute(sql, [query, *args, *flat]):
                if r >= 0:
                    break
                for i, (lo, hi) in enumerate(bounds):
                    if lo <= ts < hi and len(out[i]) < limit:
                        out[i].append((int(rowid), -float(r)))
                if all(len(found) >= limit for found in out):
                    break
        return out

    @staticmethod
    def _spans_held(
        conn: sqlite3.Connection,
        held: Postings,
        threads: Sequence[Thread],
        terms: Sequence[str],
        limit: int,
        bounds: Sequence[tuple[str, str]],
        ranges: Sequence[tuple[int, int] | None],
    ) -> list[list[tuple[int, float]]]:
        """:meth:`lexical_search_spans` from the window key's in-memory copy, with no
        filters: the query is scored once; each span's matches inside its run of
        rows are taken best first, and SQL keeps the live ones of these threads
        dated inside the span, until ``limit`` are found."""
        score, hit = held.scores(terms)
        marks = ",".join("?" * len(threads))
        ids = [t.id for t in threads]
        out: list[list[tuple[int, float]]] = [[] for _ in bounds]
        for i, ((lo, hi), rng) in enumerate(zip(bounds, ranges)):
            assert rng is not None
            inside = hit & (held.rowids >= rng[0]) & (held.rowids <= rng[1])
            ranked, _ = held.pick(score, inside, int(inside.sum()))
            step = max(limit, 16)
            for at in range(0, len(ranked), step):
                part = ranked[at : at + step]
                live = {
                    int(r)
                    for chunk, places in batches([r for r, _ in part])
                    for (r,) in conn.execute(
                        f"SELECT id FROM messages WHERE id IN ({places})"
                        f" AND thread_id IN ({marks}) AND archived = 0 AND ts >= ? AND ts < ?",
                        [*chunk, *ids, lo, hi],
                    )
                }
                out[i] += [(r, s) for r, s in part if r in live]
                if len(out[i]) >= limit:
                    break
            out[i] = out[i][:limit]
        return out

    @staticmethod
    def _rowid_range(
        conn: sqlite3.Connection, threads: Sequence[Thread], lo: str | None, hi: str | None
    ) -> tuple[int, int] | None:
        """Row numbers that hold every message of these threads dated in [lo, hi)
        (more may fall between), or None when a thread was not stored in time order
        (then no stretch of row numbers is known to hold them). An empty range has
        its first number past its last."""
        marks = ",".join("?" * len(threads))
        ids = [t.id for t in threads]
        unordered = conn.execute(
            f"SELECT 1 FROM threads WHERE id IN ({marks}) AND time_ordered = 0 LIMIT 1", ids
        ).fetchone()
        if unordered:
            return None
        runs: list[tuple[int, int]] = []
        for tid in ids:
            # In a time-ordered thread the messages from lo on are a run of row numbers
            # that starts at the first of them by time, and those before hi one that
            # ends at the last: one seek each in the (thread, time) index. (Stored
            # times are digits, which sort before "~".)
            a = conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND ts >= ? ORDER BY ts, id LIMIT 1",
                (tid, lo or ""),
            ).fetchone()
            b = conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND ts < ?"
                " ORDER BY ts DESC, id DESC LIMIT 1",
                (tid, hi or "~"),
            ).fetchone()
            if a is not None and b is not None and a[0] <= b[0]:
                runs.append((int(a[0]), int(b[0])))
        if not runs:
            return (1, 0)
        return min(r[0] for r in runs), max(r[1] for r in runs)

    @staticmethod
    def _message_span(conn: sqlite3.Connection, threads: Sequence[Thread]) -> tuple[int, int]:
        """The first and the last row number of these threads' messages: every one of
        them lies between (with other threads' rows when row numbers interleave). In
        a thread positions grow with row numbers (see ``state``), so each end is one
        seek in the (thread, position) index. An empty span has its first number
        past its last."""
        return _span(
            conn,
            threads,
            "SELECT (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY idx LIMIT 1),"
            " (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY idx DESC LIMIT 1)",
        )

    @staticmethod
    def _node_span(conn: sqlite3.Connection, threads: Sequence[Thread]) -> tuple[int, int]:
        """The smallest and the largest id of these threads' tree nodes (an empty
        span has its first number past its last). Node ids follow no order in a
        thread, and no index leads with (thread, id); but in the (thread, kind,
        frozen) index the entries of each kind and state are in id order, so the
        ends of each are one seek: the distinct (kind, frozen) pairs are found by
        jumping from one to the next, a few seeks in all whatever the tree's size."""
        return _span(
            conn,
            threads,
            "WITH RECURSIVE g(kind, frozen) AS ("
            " SELECT * FROM (SELECT kind, frozen FROM tree_nodes WHERE thread_id = ?1"
            " ORDER BY kind, frozen LIMIT 1)"
            " UNION ALL"
            " SELECT n.kind, n.frozen FROM g JOIN tree_nodes n ON n.id = COALESCE("
            "(SELECT id FROM tree_nodes WHERE thread_id = ?1 AND kind = g.kind"
            " AND frozen > g.frozen ORDER BY frozen LIMIT 1),"
            " (SELECT id FROM tree_nodes WHERE thread_id = ?1 AND kind > g.kind"
            " ORDER BY kind, frozen LIMIT 1)))"
            " SELECT MIN((SELECT id FROM tree_nodes WHERE thread_id = ?1 AND kind = g.kind"
            " AND frozen = g.frozen ORDER BY id LIMIT 1)),"
            " MAX((SELECT id FROM tree_nodes WHERE thread_id = ?1 AND kind = g.kind"
            " AND frozen = g.frozen ORDER BY id DESC LIMIT 1)) FROM g",
        )

    @staticmethod
    def _only_threads(conn: sqlite3.Connection, threads: Sequence[Thread]) -> bool:
        """Whether the store holds no thread but these. (Counting the threads read
        every row of the table, at each search of a store of many tenants.)"""
        marks = ",".join("?" * len(threads))
        other = conn.execute(
            f"SELECT 1 FROM threads WHERE id NOT IN ({marks}) LIMIT 1", [t.id for t in threads]
        ).fetchone()
        return other is None

    def _in_memory(
        self, conn: sqlite3.Connection, table: str, build: bool = True
    ) -> Postings | None:
        """The in-memory copy of ``table`` as committed, for a search outside this
        thread's own write transaction (whose rows the copy cannot hold); with
        ``build`` False, only one already held (brought up to date)."""
        if self._owns_transaction():
            return None
        if self._held is None:
            self._held = TablePostings()
        # (A connection already in a transaction reads one snapshot as it is.)
        snapshot = conn is not self._writer and not conn.in_transaction
        return self._held.current(conn, table, snapshot=snapshot, build=build)

    def _best_live(
        self,
        conn: sqlite3.Connection,
        table: str,
        terms: Sequence[str],
        limit: int,
        rows_of: str,
        after: int = 0,
    ) -> list[tuple[int, float]] | None:
        """The best ``limit`` matches of a full-text table whose rowids are ids of
        ``rows_of`` (messages or tree nodes), leaving archived ones out, for a store
        that holds only the searched threads. Joining every match to its row costs
        more than half of a search at a million turns, so the few best are taken
        with some to spare and only they are checked. None when archived rows took
        all the spare: the caller's joined query answers then."""
        held = self._in_memory(conn, table) if all(plain(t) for t in terms) else None
        if held is not None:
            return self._best_held(conn, held, terms, limit, rows_of, after)
        rows = conn.execute(
            f"SELECT rowid, bm25({table}) AS r FROM {table} WHERE {table} MATCH ?"
            " AND rowid > ? ORDER BY r LIMIT ?",
            (fts_query(terms), after, limit + 16),
        ).fetchall()
        archived = self._archived(conn, rows_of, [r[0] for r in rows])
        found = [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0 and r[0] not in archived]
        return found[:limit] if len(found) >= limit or len(rows) < limit + 16 else None

    @staticmethod
    def _archived(conn: sqlite3.Connection, rows_of: str, ids: Sequence[int]) -> set[int]:
        """Which of ``ids`` are archived rows of ``rows_of``."""
        return {
            int(i)
            for chunk, marks in batches(list(ids))
            for (i,) in conn.execute(
                f"SELECT id FROM {rows_of} INDEXED BY {rows_of}_archived"
                f" WHERE archived = 1 AND id IN ({marks})",
                chunk,
            )
        }

    def _best_held(
        self,
        conn: sqlite3.Connection,
        held: Postings,
        terms: Sequence[str],
        limit: int,
        rows_of: str,
        after: int,
    ) -> list[tuple[int, float]]:
        """:meth:`_best_live` from the table's in-memory copy: the best matches are
        taken with some to spare, more while archived rows took the spare."""
        wanted = limit + 16
        while True:
            best, more = held.best(terms, wanted, after)
            archived = self._archived(conn, rows_of, [r for r, _ in best])
            found = [(r, s) for r, s in best if r not in archived]
            if len(found) >= limit or not more:
                return found[:limit]
            wanted *= 4

    def lexical_stats(self, key: str) -> tuple[int, float]:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT docs, tokens FROM lexicon_stats WHERE key = ?", (key,)
            ).fetchone()
        if not row or not row[0]:
            return 0, 0.0
        return int(row[0]), float(row[1]) / float(row[0])

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        wanted = list(dict.fromkeys(terms))
        out: dict[str, int] = {}
        with self._reading() as conn:
            # A copy is built for searches only: a store of many threads, or one
            # whose every search is filtered, reads its vocabulary table.
            held = self._in_memory(conn, f"{key}_fts", build=False) if wanted else None
            if held is not None:
                # The index's vocabulary has a row for each term some document holds.
                for term in [t for t in wanted if plain(t)]:
                    if n := held.doc_frequency(term):
                        out[term] = n
                wanted = [t for t in wanted if not plain(t)]
            for chunk, marks in batches(wanted):
                for term, doc in conn.execute(
                    f"SELECT term, doc FROM {key}_vocab WHERE term IN ({marks})", chunk
                ):
                    out[term] = int(doc)
        return out

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        counts: dict[str, int] = {}
        with self._reading() as conn:
            # One snapshot: the counts and the state they describe must agree. (The
            # writer, inside this thread's transaction or an in-memory store's lock,
            # sees one already.)
            own = conn is not self._writer
            if own:
                conn.execute("BEGIN")
            try:
                docs, mean = self.lexical_stats(key)
                mark = self.change_mark()
                cursor = conn.execute(
                    f"SELECT term, doc FROM {key}_vocab WHERE doc >= ?", (min_docs,)
                )
                while rows := cursor.fetchmany(1024):
                    if stop is not None and stop.is_set():
                        return None
                    counts.update(rows)
            finally:
                if own:
                    conn.execute("COMMIT")
        return counts, docs, mean, mark

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        # A phrase query on the window key: both terms in a row. (A pair never spans
        # two turns, a phrase may; that extra is too rare to matter.)
        out: dict[str, int] = {}
        with self._reading() as conn:
            for pair in dict.fromkeys(pairs):
                phrase = '"' + pair.replace('"', '""').replace("_", " ") + '"'
                out[pair] = int(
                    conn.execute(
                        "SELECT COUNT(*) FROM window_fts WHERE window_fts MATCH ?", (phrase,)
                    ).fetchone()[0]
                )
        return out

    def around(self, rowids: Sequence[int], radius: int) -> dict[int, list[tuple[int, int, str]]]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, list[tuple[int, int, str]]] = {}
        with self._reading() as conn:
            anchors: list[tuple[int, int, int]] = []
            for chunk, marks in batches(ids):
                anchors += conn.execute(
                    f"SELECT id, session_id, idx FROM messages WHERE id IN ({marks})", chunk
                ).fetchall()
            # The positions near the anchors, as runs per session (overlaps merged), all
            # looked up in one statement: a search's candidates fall in a hundred
            # sessions, and a statement per session cost more than its reads.
            runs: list[tuple[int, int, int]] = []
            for sid, idx in sorted({(sid, idx) for _, sid, idx in anchors}):
                lo, hi = max(0, idx - radius), idx + radius
                if runs and runs[-1][0] == sid and lo <= runs[-1][2] + 1:
                    runs[-1] = (sid, runs[-1][1], max(hi, runs[-1][2]))
                else:
                    runs.append((sid, lo, hi))
            near: dict[int, list[tuple[int, int, str]]] = {}
            for part, _ in batches(runs, 300):
                values = ",".join("(?, ?, ?)" for _ in part)
                for sid, rid, idx, terms in conn.execute(
                    f"WITH near(sid, lo, hi) AS (VALUES {values})"
                    " SELECT near.sid, m.id, m.idx, f.c0 FROM near"
                    " CROSS JOIN messages m INDEXED BY messages_by_session"
                    " ON m.session_id = near.sid AND m.idx BETWEEN near.lo AND near.hi"
                    " JOIN turn_fts_content f ON f.id = m.id WHERE +m.archived = 0",
                    [v for run in part for v in run],
                ):
                    near.setdefault(sid, []).append((rid, idx, terms))
            for rows in near.values():
                rows.sort(key=lambda r: r[1])
            sorted_idx = {sid: [r[1] for r in rows] for sid, rows in near.items()}
            for rowid, sid, idx in anchors:
                at = sorted_idx.get(sid, [])
                lo = bisect_left(at, idx - radius)
                hi = bisect_right(at, idx + radius)
                out[rowid] = near.get(sid, [])[lo:hi]
        return out

    def index_nodes(self, key: str, docs: Mapping[int, str]) -> None:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        table = f"{key}_fts"
        with self.transaction():
            # Written when the transaction commits, all at once and by node id (see
            # _settle_node_docs); until then the writer's own reads see them (node_docs,
            # node_search).
            if self._node_docs is None:
                self._node_docs = {}
            for node_id, terms in docs.items():
                self._node_docs[(table, int(node_id))] = terms
            if docs:
                # Searches keep the topics' documents under the change mark (see
                # TreeRecall.turn_signals), and a growing topic's is replaced with no
                # message added when its index catches up (TreeGrower.flush_segments).
                self._writer.execute("UPDATE store_clock SET ticks = ticks + 1 WHERE id = 1")

    def _settle_node_docs(self) -> None:
        """Write the node documents kept back in this write transaction.

        FTS5 keeps new terms in memory until the transaction ends, but writes them out
        as a segment of their own whenever a document goes in below one already held
        (a topic named after its newer children) and at every statement that may need
        undoing halfway, for every index written so far. Written one after another in
        the growth of the tree, the topic and segment documents made a new segment at
        each, and FTS5 then merged them again at every commit; written here, in order,
        they make one per transaction. The index holds the same documents either way.
        """
        pending = self._node_docs
        if not pending:
            return
        self._node_docs = None
        c = self._writer
        for (table, node_id), terms in sorted(pending.items()):
            c.execute(f"DELETE FROM {table} WHERE rowid = ?", (node_id,))
            if terms:
                c.execute(f"INSERT INTO {table} (rowid, terms) VALUES (?, ?)", (node_id, terms))

    def _before_commit(self) -> None:
        self._settle_node_docs()
        super()._before_commit()

    def node_docs(self, key: str, ids: Sequence[int]) -> dict[int, str]:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        out: dict[int, str] = {}
        wanted = list(dict.fromkeys(int(i) for i in ids))
        with self._reading() as conn:
            for chunk, marks in batches(wanted):
                for rowid, terms in conn.execute(
                    f"SELECT id, c0 FROM {key}_fts_content WHERE id IN ({marks})", chunk
                ):
                    out[int(rowid)] = terms
            # Inside its own transaction the writer reads what it wrote, kept back or not.
            pending = self._node_docs if self._owns_transaction() else None
            if pending:
                table = f"{key}_fts"
                for node_id in wanted:
                    terms = pending.get((table, node_id))
                    if terms:
                        out[node_id] = terms
                    elif terms is not None:
                        out.pop(node_id, None)
        return out

    def node_search(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        after: int = 0,
    ) -> list[tuple[int, float]]:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        if not terms or not threads:
            return []
        table = f"{key}_fts"
        marks = ",".join("?" * len(threads))
        if self._node_docs and self._owns_transaction():
            self._settle_node_docs()  # a search inside the transaction sees its writes
        with self._reading() as conn:
            if self._only_threads(conn, threads):
                found = self._best_live(conn, table, terms, limit, "tree_nodes", after)
                if found is not None:
                    return found
            # Bounded by the threads' node ids, as lexical_search by their rows'.
            lo, hi = self._node_span(conn, threads)
            lo = max(lo, after + 1)
            if lo > hi:
                return []
            sql = (
                f"SELECT f.rowid, bm25({table}) AS r FROM {table} f"
                f" CROSS JOIN tree_nodes n ON n.id = f.rowid"
                f" WHERE {table} MATCH ? AND f.rowid BETWEEN ? AND ? AND n.thread_id IN ({marks})"
                " AND n.archived = 0 ORDER BY r LIMIT ?"
            )
            args = [fts_query(terms), lo, hi, *[t.id for t in threads], limit]
            rows = conn.execute(sql, args).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows if r[1] < 0]

    def term_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        counts = self._turn_counts() if self._owns_transaction() else None
        if counts is None:
            out = self.doc_frequencies("turn", terms)
        else:
            # The writer's own counts (see termcounts), the index read for the rest.
            out, missing = counts.split(dict.fromkeys(terms))
            if missing:
                read = self.doc_frequencies("turn", missing)
                counts.learn(read, missing)
                out.update(read)
            out = {t: n for t, n in out.items() if n}  # as the index answers: only held terms
        with self._reading() as conn:
            total = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0] or 0
        return out, int(total)

    def _turn_counts(self) -> TermCounts:
        """The writer's document frequencies of the turn index (see
        :mod:`.termcounts`), begun or begun again as needed; call inside the writer's
        own transaction only."""
        version = int(self._writer.execute("PRAGMA data_version").fetchone()[0])
        counts = self._term_counts
        if counts is None or counts.version != version:
            # Begun on an empty index, every count is known from the start.
            empty = self._writer.execute("SELECT 1 FROM turn_fts_content LIMIT 1").fetchone()
            counts = self._term_counts = TermCounts(version, complete=empty is None)
        return counts

    def _rollback(self) -> None:
        self._term_counts = None  # they counted what the rollback undoes
        self._node_docs = None  # kept back for a commit that will not come
        super()._rollback()


def _span(conn: sqlite3.Connection, threads: Sequence[Thread], sql: str) -> tuple[int, int]:
    """The smallest first and the largest last of ``sql``'s (first, last) for each
    thread (its id as ?1); a thread with none adds nothing, and an empty span has its
    first number past its last."""
    lo, hi = 1, 0
    for thread in threads:
        first, last = conn.execute(sql, (thread.id,)).fetchone()
        if first is not None and last is not None:
            lo, hi = (first, last) if lo > hi else (min(lo, first), max(hi, last))
    return int(lo), int(hi)
