"""The lexical index in PostgreSQL: arbormem's own inverted index in plain
tables, BM25 summed in SQL, and the term statistics the ranker reads.

* ``turn_postings`` holds one row per (thread, term, message) with the term's
  frequency and the message's length, in a covering B-tree: a turn search is an
  index-only range scan per query term (``doc > after`` inside the range).
* The window key stores no documents: ``turn_windows`` lists, for each message
  with terms, the windows it belongs to (centre ids and lengths, see
  :mod:`.windows`), so a window search sums the turn postings per window.
* Topic and segment documents of tree nodes are postings of their own
  (``node_postings``).
* BM25 is FTS5's (k1 1.2, b 0.75, IDF floored at 1e-6) over the statistics of the
  searched threads' **scope** (a user of a tenant): documents, tokens and
  document frequencies are kept per thread (``lex_stats``, ``lex_df``) and summed
  over the scope's threads. SQLite's are store-wide; for a store of one scope the
  figures are the same (docs/storage.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from arbormem.store.postgres.adapt import int_array, text_array
from arbormem.store.postgres.bm25 import (
    Query,
    hits_of,
    message_query,
    node_query,
    spans_query,
    together,
)
from arbormem.store.postgres.bm25 import (
    filter_sql as _filter_sql,
)
from arbormem.store.postgres.common import (
    KEY_CODES,
    MAX_TERM_BYTES,
    fts5_idf,
    scope_of,
    term_key,
)
from arbormem.store.postgres.kept import STORE
from arbormem.store.postgres.termstats import PostgresStatistics, ScopeStatistics
from arbormem.store.postgres.windows import Member, WindowPlan, plan
from arbormem.store.sqlite.windows import WINDOW_RADIUS
from arbormem.store.types import LEXICAL_KEYS, NODE_KEYS, Filters, Thread


def _scopes(threads: Sequence[Thread]) -> list[int]:
    """The scopes of the threads a search names (one, unless it spans users: its
    statistics are then those of all the scopes it names)."""
    return sorted({scope_of(t) for t in threads})


def _bump_in(
    conn: Any,
    s: int,
    t: int,
    stats: Mapping[str, tuple[int, int]],
    df: Mapping[str, Counter[str]],
    *,
    ctes: str = "",
    args: Mapping[str, Any] | None = None,
) -> None:
    """Add documents and tokens (``lex_stats``) and document frequencies
    (``lex_df``) to the rows of thread ``t`` of scope ``s``, in one statement,
    after the writes ``ctes`` (``name AS (...),`` each, with ``args``)."""
    rows = [(KEY_CODES[k], d, n) for k, (d, n) in stats.items() if d or n]
    keys: list[int] = []
    terms: list[str] = []
    deltas: list[int] = []
    for key, counts in df.items():
        merged: Counter[str] = Counter()
        for term, n in counts.items():
            if n:
                merged[term_key(term)] += n
        for term in sorted(merged):  # in key order: two writers never wait on each other
            if merged[term]:
                keys.append(KEY_CODES[key])
                terms.append(term)
                deltas.append(merged[term])
    if not rows and not terms and not ctes:
        return
    conn.execute(
        f"WITH {ctes} stats AS (INSERT INTO lex_stats (scope_id, thread_id, key, docs, tokens)"
        " SELECT %(s)s, %(t)s, k, d, n FROM unnest(%(sk)s::int2[], %(sd)s::int8[],"
        " %(sn)s::int8[]) AS u(k, d, n) ON CONFLICT (scope_id, key, thread_id) DO UPDATE"
        " SET docs = lex_stats.docs + excluded.docs, tokens = lex_stats.tokens + excluded.tokens)"
        " INSERT INTO lex_df (scope_id, key, term, thread_id, df)"
        " SELECT %(s)s, k, w, %(t)s, d FROM unnest(%(k)s::int2[], %(w)s::text[], %(d)s::int8[])"
        " AS u(k, w, d) ON CONFLICT (scope_id, key, term, thread_id) DO UPDATE"
        " SET df = lex_df.df + excluded.df",
        {
            **(args or {}),
            "s": s,
            "t": t,
            "sk": [r[0] for r in rows],
            "sd": [r[1] for r in rows],
            "sn": [r[2] for r in rows],
            "k": int_array(keys),
            "w": text_array(terms),
            "d": int_array(deltas),
        },
    )


def _term_counts(terms: Sequence[str]) -> Counter[str]:
    """How many times each term's key (see :func:`.common.term_key`) is in ``terms``."""
    counts = Counter(terms)
    if any(len(term) * 4 > MAX_TERM_BYTES for term in counts):
        return Counter(term_key(term) for term in terms)  # a key of its own for a long one
    return counts


#: Postings per write of a COPY.
COPY_CHUNK = 4096


def _copy_text(
    conn: Any, copy: str, head: str, postings: Sequence[tuple[str, int, int, int | str]]
) -> None:
    """Send postings ``(term, doc or node, tf, rest)`` with the statement ``copy``, in
    COPY's text form made here (psycopg's binary rows convert every value in Python,
    a tenth of an import's time on the client), each line led by ``head`` (the
    columns before the term, numbers). ``rest`` is the length, or the columns from
    the length on already in COPY's text form.

    A term is a word of a document split on white space, so it holds no tab, line
    break or carriage return: the one character of COPY's to escape it can hold is
    the backslash, escaped in each chunk at once (the numbers hold none)."""
    if not postings:
        return
    with conn.cursor() as cur, cur.copy(copy) as cp:
        for i in range(0, len(postings), COPY_CHUNK):
            text = "".join(
                [
                    f"{head}{term}\t{doc}\t{tf}\t{rest}\n"
                    for term, doc, tf, rest in postings[i : i + COPY_CHUNK]
                ]
            )
            cp.write(text.replace("\\", "\\\\") if "\\" in text else text)


class PostgresLexical(PostgresStatistics):
    """BM25 over turn postings (windows derived from them) and node postings."""

    def statistics(self, threads: Sequence[Thread]) -> ScopeStatistics:
        # Per scope (a user of a tenant): one tenant's words never weigh another's
        # search, no row is written by every write, and the counts live on the
        # shard of the scope. For a store of one scope, the store's own figures.
        return ScopeStatistics(self, _scopes(threads))

    # -- writing: statistics and postings -------------------------------------------

    @staticmethod
    def _bump(
        conn: Any,
        thread: Thread,
        stats: Mapping[str, tuple[int, int]],
        df: Mapping[str, Counter[str]],
    ) -> None:
        """Add documents, tokens and document frequencies to a thread's rows."""
        _bump_in(conn, scope_of(thread), thread.id, stats, df)

    @staticmethod
    def _copy_postings(conn: Any, thread: Thread, terms_of: Mapping[int, Sequence[str]]) -> None:
        """Write the turn postings of new messages (their terms by id)."""
        # Each posting says whether its message's terms end with it (``ends``):
        # a pair that spans two messages is counted from the first's postings
        # that end with the pair's first term, a few of all its postings. The
        # message's length and that flag go as one piece of text, made once per
        # message (the sort below never reaches it: term and doc are unique).
        postings: list[tuple[str, int, int, int | str]] = []
        for doc, terms in terms_of.items():
            if not terms:
                continue
            last = term_key(terms[-1])
            inner, ending = f"{len(terms)}\tf", f"{len(terms)}\tt"
            postings += [
                (term, doc, tf, ending if term == last else inner)
                for term, tf in _term_counts(terms).items()
            ]
        # In the key's order (scope, thread, term, doc) rather than message by
        # message: each insertion into the key then lands next to the one before
        # it, on a page just touched (about a third less of the server's work for
        # the COPY). The rows are the same; searches read them through the key.
        postings.sort()
        _copy_text(
            conn,
            "COPY turn_postings (scope_id, thread_id, term, doc, tf, len, ends) FROM STDIN",
            f"{scope_of(thread)}\t{thread.id}\t",
            postings,
        )

    @staticmethod
    def _set_lists(
        conn: Any,
        thread: Thread,
        lists: Mapping[int, tuple[list[int], list[int]]],
        terms_of: Mapping[int, Sequence[str]],
    ) -> None:
        """Give messages (new or stored) their window lists, one ``turn_windows``
        row each; a message with no terms has no postings, and so no row."""
        docs = sorted(doc for doc in lists if terms_of.get(doc))
        if not docs:
            return
        # One row per message, not its lists on each of its postings: stored on
        # every posting (and in their covering key) the lists were two thirds of
        # the postings' bytes, and a session's growth rewrote every posting of
        # its last messages (see docs/postgres.md, "A leaner store").
        conn.execute(
            "INSERT INTO turn_windows (scope_id, doc, thread_id, wids, wlens)"
            " SELECT %(s)s, u.d, %(t)s, u.w::int8[], u.l::int4[] FROM unnest(%(d)s::int8[],"
            " %(w)s::text[], %(l)s::text[]) AS u(d, w, l) ON CONFLICT (scope_id, doc)"
            " DO UPDATE SET wids = excluded.wids, wlens = excluded.wlens",
            {
                "s": scope_of(thread),
                "t": thread.id,
                "d": int_array(docs),
                "w": text_array(int_array(lists[d][0]) for d in docs),
                "l": text_array(int_array(lists[d][1]) for d in docs),
            },
        )

    @staticmethod
    def _set_wlens(conn: Any, thread: Thread, wlen: Mapping[int, int | None]) -> None:
        if not wlen:
            return
        conn.execute(
            "UPDATE messages m SET wlen = u.w FROM unnest(%(ids)s::int8[], %(w)s::int4[])"
            " AS u(id, w) WHERE m.id = ANY(%(ids)s::int8[]) AND m.id = u.id"
            " AND m.scope_id = %(s)s",
            {"s": scope_of(thread), "ids": list(wlen), "w": list(wlen.values())},
        )

    def _apply_plan(
        self,
        conn: Any,
        thread: Thread,
        result: WindowPlan,
        terms_of: Mapping[int, Sequence[str]],
        stored: Iterable[int],
    ) -> None:
        """Write what a plan changed of stored messages (their window lengths and
        postings' lists), the window statistics and the thread's reach."""
        stored_ids = set(stored)
        self._set_wlens(conn, thread, {i: w for i, w in result.wlen.items() if i in stored_ids})
        self._set_lists(
            conn, thread, {i: v for i, v in result.lists.items() if i in stored_ids}, terms_of
        )
        self._bump(conn, thread, {"window": (result.docs, result.tokens)}, {"window": result.df})
        if result.reach or result.ahead:
            conn.execute(
                "UPDATE threads SET window_reach = greatest(window_reach, %(r)s),"
                " window_ahead = greatest(window_ahead, %(a)s)"
                " WHERE scope_id = %(s)s AND id = %(t)s",
                {"r": result.reach, "a": result.ahead, **self._keys(thread)},
            )

    @staticmethod
    def _live_order(conn: Any, thread: Thread, session_id: int) -> list[tuple[Any, ...]]:
        """A session's messages in order, archived ones too: (id, terms, wlen,
        archived, stale_window)."""
        return list(
            conn.execute(
                "SELECT id, terms, wlen, archived, stale_window FROM messages"
                " WHERE scope_id = %s AND session_id = %s ORDER BY idx",
                (scope_of(thread), session_id),
            ).fetchall()
        )

    def _rebuild_windows(
        self,
        conn: Any,
        thread: Thread,
        before: Mapping[int, list[tuple[Any, ...]]],
        gone: set[int] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        """Rewrite every live window of these sessions, given each session's
        messages as :meth:`_live_order` read them before the change and the ids
        deleted since; the messages' archived flags are read again."""
        for sid, old_rows in before.items():
            now = {r[0]: r for r in self._live_order(conn, thread, sid)}
            old_live = [Member(r[0], r[1].split() if r[1] else []) for r in old_rows if not r[3]]
            old_pos = {m.id: i for i, m in enumerate(old_live)}
            order: list[Member] = []
            old: dict[int, list[str] | None] = {}
            for r in old_rows:
                if r[0] in gone or r[0] not in now or now[r[0]][3]:
                    continue
                member = Member(r[0], r[1].split() if r[1] else [], None)
                pos = len(order)
                if r[2] is None:
                    old[pos] = None
                elif r[3]:  # restored: its window was the stale one
                    old[pos] = (r[4] or "").split()
                else:
                    old[pos] = [
                        t
                        for m in old_live[
                            max(0, old_pos[r[0]] - WINDOW_RADIUS) : old_pos[r[0]]
                            + WINDOW_RADIUS
                            + 1
                        ]
                        for t in m.terms
                    ]
                order.append(member)
            result = plan(order, list(range(len(order))), old)
            terms_of = {m.id: m.terms for m in order}
            self._apply_plan(conn, thread, result, terms_of, terms_of)
            # Messages that left the live order belong to no window now.
            left = [
                r[0]
                for r in old_rows
                if r[0] not in gone and r[0] in now and now[r[0]][3] and not r[3]
            ]
            if left:
                self._set_lists(
                    conn,
                    thread,
                    {i: ([], []) for i in left},
                    {r[0]: (r[1] or "").split() for r in old_rows},
                )

    def write_tail_windows(self, thread: Thread, session: str) -> int:
        with self._writing(thread) as conn:
            k = self._keys(thread)
            found = conn.execute(
                "SELECT id FROM sessions WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND key = %(key)s",
                {**k, "key": session},
            ).fetchone()
            if found is None:
                return 0
            tail = self._tail(conn, thread, [int(found[0])])[int(found[0])]
            write = [
                j
                for j in range(max(0, len(tail) - WINDOW_RADIUS), len(tail))
                if tail[j].wlen is None
            ]
            if not write:
                return 0
            result = plan(tail, write, {j: None for j in write})
            terms_of = {m.id: m.terms for m in tail}
            self._apply_plan(conn, thread, result, terms_of, terms_of)
            conn.execute(
                "UPDATE threads SET changes = changes + 1 WHERE scope_id = %(s)s AND id = %(t)s",
                k,
            )
            return len(write)

    @staticmethod
    def _tail(conn: Any, thread: Thread, session_ids: Sequence[int]) -> dict[int, list[Member]]:
        """The last few live messages of each session (enough for every window a
        new message changes), in order."""
        out: dict[int, list[Member]] = {sid: [] for sid in session_ids}
        if not session_ids:
            return out
        rows = conn.execute(
            "SELECT x.sid, m.id, m.terms, m.wlen FROM unnest(%(sids)s::int8[]) AS x(sid)"
            " CROSS JOIN LATERAL (SELECT id, terms, wlen, idx FROM messages"
            " WHERE scope_id = %(s)s AND session_id = x.sid AND NOT archived"
            " ORDER BY idx DESC LIMIT %(n)s) m ORDER BY x.sid, m.idx",
            {"s": scope_of(thread), "sids": list(session_ids), "n": 3 * WINDOW_RADIUS},
        ).fetchall()
        for sid, mid, terms, wlen in rows:
            out[sid].append(Member(mid, terms.split() if terms else [], wlen))
        return out

    # -- searching ---------------------------------------------------------------------

    def _idf(
        self, scopes: Sequence[int], key: str, terms: Sequence[str]
    ) -> tuple[list[float], float] | None:
        """FTS5's IDF of each term (as given, repeats included) over these scopes'
        documents under ``key``, and their mean length; None when there are none."""
        n, avgdl = self.scope_lexical_stats(scopes, key)
        if not n:
            return None
        df = self.scope_doc_frequencies(scopes, key, terms)
        return [fts5_idf(n, df.get(t, 0)) for t in terms], avgdl

    def _message_query(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        filters: Filters | None,
        after: int,
    ) -> Query | None:
        """The statement of a turn or window search (None: no documents under the key)."""
        args = self._message_args(threads, key, terms, limit, after)
        return None if args is None else message_query(key, args, filters)

    def _message_args(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        after: int,
    ) -> dict[str, Any] | None:
        """The parameters of a turn or window search (see :func:`.bm25.message_query`;
        None: no documents under the key)."""
        scopes = _scopes(threads)
        weights = self._idf(scopes, key, terms)
        if weights is None:
            return None
        keys = [term_key(t) for t in terms]
        idf = weights[0]
        if key == "window":
            # A window's score sums its terms in an order the caller's cannot change
            # (the order of the grouped rows follows the terms' numbers): so the
            # search of the windows made ahead of time with the turns' terms (see
            # _search_ahead) is exactly the one asked for with the same terms in the
            # windows' own order.
            pairs = sorted(zip(keys, idf))
            keys, idf = [k for k, _ in pairs], [w for _, w in pairs]
        args: dict[str, Any] = {
            "s": scopes,
            "terms": keys,
            "idf": idf,
            "avgdl": weights[1],
            "threads": sorted({t.id for t in threads}),
            "after": after,
            "limit": limit,
        }
        if key == "window":
            # A window's members lie at most ``window_reach`` ids before it.
            reach = 0
            if after > 0:
                known = [self._peek(("reach", t.id)) for t in threads]
                if all(r is not None for r in known):
                    reach = max(known)  # as the search read its threads
                else:
                    with self._reading() as conn:
                        reach = conn.execute(
                            "SELECT coalesce(max(window_reach), 0) FROM threads"
                            " WHERE scope_id = ANY(%(s)s) AND id = ANY(%(threads)s)",
                            args,
                        ).fetchone()[0]
            args["from"] = after - int(reach)
        return args

    def _node_query(
        self, threads: Sequence[Thread], key: str, terms: Sequence[str], limit: int, after: int
    ) -> Query | None:
        """The statement of a topic or segment search (None: no documents under the key)."""
        scopes = _scopes(threads)
        self._settle_node_docs()
        weights = self._idf(scopes, key, terms)
        if weights is None:
            return None
        return node_query(
            {
                "s": scopes,
                "k": KEY_CODES[key],
                "terms": [term_key(t) for t in terms],
                "idf": weights[0],
                "avgdl": weights[1],
                "threads": sorted({t.id for t in threads}),
                "after": after,
                "limit": limit,
            }
        )

    def _run(self, queries: Sequence[Query]) -> list[list[tuple[int, float]]]:
        """The hits of each query, all sent in one statement."""
        if len(queries) == 1:
            with self._reading() as conn:
                rows = conn.execute(queries[0].sql, queries[0].args).fetchall()
            return [[(int(r[0]), float(r[1])) for r in rows if r[1] > 0]]
        query = together(queries)
        with self._reading() as conn:
            rows = conn.execute(query.sql, query.args).fetchall()
        return hits_of(rows, len(queries))

    @staticmethod
    def _ahead_key(
        key: str,
        threads: Sequence[Thread],
        terms: Sequence[str],
        limit: int,
        filters: Filters | None,
        after: int,
    ) -> tuple[Any, ...]:
        """What identifies a search for :meth:`_search_ahead`: a window search's
        terms in any order (see _message_query), the others' as given."""
        words = tuple(sorted(terms)) if key == "window" else tuple(terms)
        return ("ahead", key, tuple(sorted({t.id for t in threads})), words, limit, filters, after)

    def _window_postings(self, threads: Sequence[Thread], terms: Sequence[str]) -> int:
        """How many window documents hold these terms, summed (as a search spends its
        posting budget; read with the search's other counts)."""
        df = self.scope_doc_frequencies(_scopes(threads), "window", terms)
        return sum(df.get(t, 0) for t in terms)

    def _search_ahead(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        filters: Filters | None,
        after: int,
    ) -> list[tuple[tuple[Any, ...], Query | None]]:
        """The searches a search of the turns (under way, with these arguments) is
        followed by, guessed, with what identifies each: the windows and the topics'
        contents with the same terms, as many hits as the last such search asked
        for. A search asks for them next, with these terms unless its posting budget
        cut them (each key's budget spends its own counts), and with nothing to skip
        when the turns' search had nothing to skip; they are answered in the turns'
        round trip and kept for the rest of the search (see ``_remember``), and one
        asked otherwise is searched as usual.

        The windows are guessed only when their postings of these terms are no more
        than those of a window search seen asking for them all (nothing skipped): a
        window's count of a term is about five times the turns', so its budget is
        spent first, and a guess made past it would read every posting of a common
        term for nothing."""
        if after != 0 or self._peek(("stats", "turn", tuple(_scopes(threads)))) is None:
            return []  # no search under way (or rows to skip, whose cut is not known)
        ahead: list[tuple[tuple[Any, ...], Query | None]] = []
        limit = self._ahead_limits.get("window")
        if limit and self._window_postings(threads, terms) <= self._ahead_limits.get("spent", 0):
            ahead.append(
                (
                    self._ahead_key("window", threads, terms, limit, filters, 0),
                    self._message_query(threads, "window", terms, limit, filters, 0),
                )
            )
        limit = self._ahead_limits.get("segment")
        if limit:
            ahead.append(
                (
                    self._ahead_key("segment", threads, terms, limit, None, 0),
                    self._node_query(threads, "segment", terms, limit, 0),
                )
            )
        return ahead

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
        if not terms or not threads or limit <= 0:
            return []
        if key == "window":
            self._ahead_limits["window"] = limit
            searching = self._peek(("stats", "turn", tuple(_scopes(threads)))) is not None
            if after == 0 and searching:  # the windows' postings of these terms were affordable
                spent = self._window_postings(threads, terms)
                self._ahead_limits["spent"] = max(self._ahead_limits.get("spent", 0), spent)
        found = self._peek(self._ahead_key(key, threads, terms, limit, filters, after))
        if found is not None:
            return list(found)
        query = self._message_query(threads, key, terms, limit, filters, after)
        if query is None:
            return []
        ahead = self._search_ahead(threads, terms, filters, after) if key == "turn" else []
        sent = [q for _, q in ahead if q is not None]
        results = self._run([query, *sent])
        got = iter(results[1:])
        for ahead_key, ahead_query in ahead:
            self._remember(ahead_key, [] if ahead_query is None else next(got))
        return results[0]

    def lexical_search_spans(
        self,
        threads: Sequence[Thread],
        key: str,
        terms: Sequence[str],
        limit: int,
        spans: Sequence[tuple[datetime, datetime]],
        filters: Filters | None = None,
    ) -> list[list[tuple[int, float]]]:
        # Every span in one statement (a question with dates names several).
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        out: list[list[tuple[int, float]]] = [[] for _ in spans]
        if not terms or not threads or limit <= 0:
            return out
        base = filters or Filters()
        narrowed: list[tuple[datetime, datetime]] = []
        slots: list[int] = []
        for i, (since, until) in enumerate(spans):
            lo = max(since, base.since) if base.since is not None else since
            hi = min(until, base.until) if base.until is not None else until
            if lo >= hi:
                continue
            narrowed.append((lo, hi))
            slots.append(i)
        if not narrowed:
            return out
        args = self._message_args(threads, key, terms, limit, 0)
        if args is None:
            return out  # no documents under the key
        runs = self._span_runs(threads, key, narrowed)
        if runs == []:
            return out  # no message is dated in any span
        query = spans_query(key, args, base, narrowed, runs)
        with self._reading() as conn:
            rows = conn.execute(query.sql, query.args).fetchall()
        for i, hits in zip(slots, hits_of(rows, len(narrowed))):
            out[i] = hits
        return out

    def _span_runs(
        self, threads: Sequence[Thread], key: str, spans: Sequence[tuple[datetime, datetime]]
    ) -> list[tuple[int, int]] | None:
        """The runs of message ids (disjoint, in order, both ends included) whose
        postings can score a hit of these threads dated in one of the spans: an
        empty list when no message is, None when a thread was not stored in time
        order (then no run of ids is known to hold a span's messages).

        In a thread stored in time order ids grow with time, so a span's messages
        are a run of ids from the first of them by time to the last: one seek each
        in the (thread, time) key. A window's members lie up to ``window_reach``
        ids before its centre and ``window_ahead`` after it, so for the window key
        each run is widened by both. A run may hold other messages (another
        thread's, or those the widening takes in), which the statement still checks
        against the spans: the runs only bound what it reads."""
        with self._reading() as conn:
            ordered, reach, ahead, found = conn.execute(
                "WITH th AS (SELECT scope_id, id, time_ordered, window_reach, window_ahead"
                " FROM threads WHERE scope_id = ANY(%(s)s) AND id = ANY(%(t)s))"
                " SELECT (SELECT bool_and(time_ordered) FROM th),"
                " (SELECT coalesce(max(window_reach), 0) FROM th),"
                " (SELECT coalesce(max(window_ahead), 0) FROM th),"
                " (SELECT array_agg(ARRAY[a, b]) FROM (SELECT"
                " (SELECT m.id FROM messages m WHERE m.scope_id = th.scope_id"
                " AND m.thread_id = th.id AND m.ts >= sp.lo ORDER BY m.ts, m.id LIMIT 1) AS a,"
                " (SELECT m.id FROM messages m WHERE m.scope_id = th.scope_id"
                " AND m.thread_id = th.id AND m.ts < sp.hi"
                " ORDER BY m.ts DESC, m.id DESC LIMIT 1) AS b"
                " FROM th CROSS JOIN unnest(%(lo)s::timestamptz[], %(hi)s::timestamptz[])"
                " AS sp(lo, hi)) x WHERE a <= b)",
                {
                    "s": _scopes(threads),
                    "t": sorted({t.id for t in threads}),
                    "lo": [lo for lo, _ in spans],
                    "hi": [hi for _, hi in spans],
                },
            ).fetchone()
        if not ordered:
            return None
        back, forth = (int(reach), int(ahead)) if key == "window" else (0, 0)
        runs: list[tuple[int, int]] = []
        for a, b in sorted((int(a) - back, int(b) + forth) for a, b in found or ()):
            if runs and a <= runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], max(runs[-1][1], b))
            else:
                runs.append((a, b))
        return runs

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
        if not terms or not threads or limit <= 0:
            return []
        if key == "segment":
            self._ahead_limits["segment"] = limit
        found = self._peek(self._ahead_key(key, threads, terms, limit, None, after))
        if found is not None:
            return list(found)
        query = self._node_query(threads, key, terms, limit, after)
        return [] if query is None else self._run([query])[0]

    # -- documents ---------------------------------------------------------------------

    def around(self, rowids: Sequence[int], radius: int) -> dict[int, list[tuple[int, int, str]]]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, list[tuple[int, int, str]]] = {}
        if not ids:
            return out
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT a.id, n.id, n.idx, n.terms FROM messages a"
                " CROSS JOIN LATERAL (SELECT id, idx, terms FROM messages m"
                " WHERE m.scope_id = a.scope_id AND m.session_id = a.session_id"
                " AND m.idx BETWEEN a.idx - %(r)s AND a.idx + %(r)s AND NOT m.archived) n"
                " WHERE a.id = ANY(%(ids)s) ORDER BY a.id, n.idx",
                {"ids": ids, "r": radius},
            ).fetchall()
        for anchor in ids:
            out[anchor] = []
        for anchor, rid, idx, terms in rows:
            out[int(anchor)].append((int(rid), int(idx), terms))
        return {k: v for k, v in out.items() if v or k in out}

    def index_nodes(self, key: str, docs: Mapping[int, str]) -> None:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        if not docs:
            return
        # Tree upkeep indexes a growing topic again at nearly every message it adds,
        # and each time the whole document: written at once, an import of a
        # thousand turns rewrote the postings of its open topics a thousand times.
        # The documents are kept in the transaction instead, the last one of each
        # node winning, and written once, just before it commits (or before a read
        # or delete that has to see them: see _settle_node_docs).
        with self.transaction():
            tx = self._tx()
            assert tx is not None
            for node, doc in docs.items():
                tx.node_docs[(key, int(node))] = doc or ""
            self._before_commit(self._settle_node_docs)

    def _settle_node_docs(self) -> None:
        """Write the documents :meth:`index_nodes` put off in this Python thread's
        transaction (nothing outside one, or when none is pending)."""
        tx = self._tx()
        if tx is None or not tx.node_docs:
            return
        pending, tx.node_docs = tx.node_docs, {}
        conn = tx.conn
        found = conn.execute(
            "SELECT id, scope_id, thread_id, topic_terms, segment_terms FROM tree_nodes"
            " WHERE id = ANY(%s)",
            (sorted({node for _, node in pending}),),
        ).fetchall()
        groups: dict[tuple[int, int, str], list[tuple[int, str | None]]] = {}
        for node, s, t, topic, segment in found:
            for key, old in (("topic", topic), ("segment", segment)):
                if (key, int(node)) in pending:
                    groups.setdefault((int(s), int(t), key), []).append((int(node), old))
        for (s, t, key), nodes in sorted(groups.items()):
            docs = {node: pending[(key, node)] for node, _ in nodes}
            self._index_thread_nodes(conn, s, t, key, f"{key}_terms", nodes, docs)

    def _index_thread_nodes(
        self,
        conn: Any,
        s: int,
        t: int,
        key: str,
        column: str,
        nodes: Sequence[tuple[int, str | None]],
        docs: Mapping[int, str],
    ) -> None:
        tx = self._tx()
        assert tx is not None
        if t not in tx.locked:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (t * 4,))
            tx.locked.add(t)
        tx.loud.add(t)
        code = KEY_CODES[key]
        docs_delta = tokens_delta = 0
        df: Counter[str] = Counter()
        # Each posting as (term, node, ...): its place in the postings' key, which
        # the lists are sorted by below.
        gone: list[tuple[str, int]] = []
        added: list[tuple[str, int, int, int]] = []
        #: The postings of nodes that had no document: none of theirs is stored yet.
        fresh: list[tuple[str, int, int, int]] = []
        for node, old in nodes:
            new = docs.get(node, "") or ""
            old_terms = old.split() if old else []
            new_terms = new.split()
            if old is not None and old != "":
                docs_delta -= 1
                tokens_delta -= len(old_terms)
                df.subtract(set(old_terms))
            counts = _term_counts(new_terms)
            if new_terms:
                length = len(new_terms)
                docs_delta += 1
                tokens_delta += length
                df.update(set(new_terms))
                (fresh if old is None else added).extend(
                    [(term, node, tf, length) for term, tf in counts.items()]
                )
            if old_terms:
                gone.extend(
                    [(term, node) for term in _term_counts(old_terms).keys() - counts.keys()]
                )
        # In the key's order (term, then node): each insertion into the postings'
        # key then lands next to the one before it (a frozen topic's first postings
        # are most of an import's rows; node by node, every one was a descent to
        # another page of the key).
        gone.sort()
        added.sort()
        fresh.sort()
        # Most of an import's postings are a frozen topic's first: written without
        # looking for a row to update (half the index's work), with COPY, which
        # stores them a page at a time rather than row by row as an INSERT does.
        _copy_text(
            conn,
            "COPY node_postings (scope_id, key, thread_id, term, node, tf, len) FROM STDIN",
            f"{s}\t{code}\t{t}\t",
            fresh,
        )
        # The postings that went, those that came (or changed), the nodes' documents
        # and the statistics, in one statement: the rows each part writes are apart.
        # Each part names the rows it changes by arrays its index can look up
        # (``= ANY``) besides joining them: statistics of tables an import grows are
        # stale, and a plan made with them scanned every posting of the thread (or
        # every node of the scope) at each write, a cost that grew with the thread.
        _bump_in(
            conn,
            s,
            t,
            {key: (docs_delta, tokens_delta)},
            {key: df},
            ctes=(
                "gone AS (DELETE FROM node_postings p USING unnest(%(gn)s::int8[],"
                " %(gt)s::text[]) AS u(node, term) WHERE p.scope_id = %(s)s AND p.key = %(c)s"
                " AND p.thread_id = %(t)s AND p.term = ANY(%(gt)s::text[])"
                " AND p.node = ANY(%(gn)s::int8[]) AND p.term = u.term AND p.node = u.node),"
                " came AS (INSERT INTO node_postings (scope_id, key, thread_id, term, node, tf,"
                " len) SELECT %(s)s, %(c)s, %(t)s, u.term, u.node, u.tf, u.len FROM"
                " unnest(%(an)s::int8[], %(at)s::text[], %(af)s::int4[], %(al)s::int4[])"
                " AS u(node, term, tf, len) ON CONFLICT (scope_id, key, thread_id, term, node)"
                " DO UPDATE SET tf = excluded.tf, len = excluded.len),"
                f" docs AS (UPDATE tree_nodes n SET {column} = u.d FROM unnest(%(ni)s::int8[],"
                " %(nd)s::text[]) AS u(id, d) WHERE n.id = ANY(%(ni)s::int8[]) AND n.id = u.id"
                " AND n.scope_id = %(s)s),"
            ),
            args={
                "c": code,
                "gn": int_array(n for _, n in gone),
                "gt": text_array(w for w, _ in gone),
                "an": int_array(a[1] for a in added),
                "at": text_array(a[0] for a in added),
                "af": int_array(a[2] for a in added),
                "al": int_array(a[3] for a in added),
                "ni": int_array(node for node, _ in nodes),
                "nd": text_array((docs.get(node) or None) for node, _ in nodes),
            },
        )

    def node_docs(self, key: str, ids: Sequence[int]) -> dict[int, str]:
        if key not in NODE_KEYS:
            raise ValueError(f"unknown node key {key!r}; expected one of {NODE_KEYS}")
        wanted = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}
        self._settle_node_docs()

        def read(missing: list[int]) -> dict[int, str]:
            with self._reading() as conn:
                rows = conn.execute(
                    f"SELECT id, {key}_terms FROM tree_nodes WHERE id = ANY(%s)"
                    f" AND {key}_terms IS NOT NULL",
                    (missing,),
                ).fetchall()
            return {int(i): d for i, d in rows}

        # Kept between searches while the store is unchanged (see .kept).
        return dict(self._kept.get_many(STORE, self._store_stamp(), ("doc", key), wanted, read))

    def archived_matches(
        self,
        threads: Sequence[Thread],
        terms: Sequence[str],
        filters: Filters | None = None,
        limit: int = 10,
    ) -> tuple[list[str], int]:
        if not terms or not threads:
            return [], 0
        if all(self._peek(("archived", t.id)) is False for t in threads):
            return [], 0  # the search found its threads with no archived message
        wanted = set(terms)
        where, args = _filter_sql(filters)
        args.update({"s": _scopes(threads), "threads": sorted({t.id for t in threads})})
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT m.id, m.uid, m.terms FROM messages m WHERE m.scope_id = ANY(%(s)s)"
                f" AND m.thread_id = ANY(%(threads)s) AND m.archived{where}",
                args,
            ).fetchall()
        held = []
        for rowid, uid, text in rows:
            if n := len(wanted.intersection((text or "").split())):
                held.append((-n, -int(rowid), uid))
        held.sort()
        return [uid for _, _, uid in held[:limit]], len(held)
