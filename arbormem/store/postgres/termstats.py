"""BM25's statistics in PostgreSQL, per scope: documents and tokens per key
(``lex_stats``), document frequencies (``lex_df``), adjacent pairs, the frequent
terms a process preloads, and the change marks its caches are keyed by. Kept per
thread and summed over the scopes a search names (see :mod:`.lexical`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from arbormem.store.postgres.common import KEY_CODES, term_key
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.types import LEXICAL_KEYS


class ScopeStatistics:
    """BM25's figures over some scopes' documents (see :meth:`PostgresLexical.statistics`)."""

    def __init__(self, store: PostgresStatistics, scopes: Sequence[int]) -> None:
        self.store = store
        self.scopes = tuple(sorted(set(scopes)))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ScopeStatistics)
            and other.store is self.store
            and other.scopes == self.scopes
        )

    def __hash__(self) -> int:
        return hash((id(self.store), self.scopes))

    def lexical_stats(self, key: str) -> tuple[int, float]:
        return self.store.scope_lexical_stats(self.scopes, key)

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        return self.store.scope_doc_frequencies(self.scopes, key, terms)

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        return self.store.scope_pair_frequencies(self.scopes, pairs)

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        return self.store.scope_frequent_terms(self.scopes, key, min_docs, stop)

    def change_mark(self) -> tuple[int, int]:
        return self.store.scope_mark(self.scopes)


def _like(text: str) -> str:
    """``text`` matched literally by LIKE."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _pair_args(
    scope: Sequence[int] | None, asked: Sequence[tuple[str, str, str]]
) -> dict[str, Any]:
    """The parameters of :data:`_PAIRS_SQL` for ``(pair, first, second)`` triples."""
    return {
        "s": [] if scope is None else list(scope),
        "a": [term_key(a) for _, a, _ in asked],
        "inside": [f"% {_like(a)} {_like(b)} %" for _, a, b in asked],
        "ends": [f"% {_like(a)}" for _, a, _ in asked],
        "b": [term_key(b) for _, _, b in asked],
        "starts": [f"{_like(b)} %" for _, _, b in asked],
    }


#: Every asked pair's window count in one statement. Each step is a lateral
#: subquery with a fence (LIMIT or OFFSET), so the plan is nested index lookups
#: driven by postings whatever the planner's statistics say: on tables written a
#: moment ago (which have none) a free planner once took seconds over one pair.
#:
#: The windows counted: those holding a message that has the pair inside it, and
#: those holding both a message that ends with the first term and the next live
#: message of its session with any terms, which starts with the second. What is
#: read grows with the messages that can count, not with the terms' postings:
#:
#: * Inside a message: the two terms' postings, merged in their key's order, give
#:   the messages holding both, and only those are read. Each posting of the
#:   rarer term once read its message ("last weekend": 2,254 messages hold both
#:   at 300,000 generated turns, of 7,455 and more holding either).
#: * Across two messages: led by the first term's postings that end their
#:   message (``ends``, a partial key of those alone), a few of all its postings.
_PAIRS_SQL = (
    "WITH q AS MATERIALIZED (SELECT * FROM unnest(%(a)s::text[],"
    " %(b)s::text[], %(inside)s::text[], %(ends)s::text[], %(starts)s::text[])"
    " WITH ORDINALITY AS q(a, b, inside, ends, starts, ord)),"
    # Windows holding a message that has the pair inside it: the messages in both
    # terms' postings (the two read in the key's order and merged), each read
    # for the pair, then its windows by key.
    " hits AS (SELECT q.ord, u.wid FROM q CROSS JOIN LATERAL (SELECT scope_id, thread_id, doc"
    " FROM turn_postings WHERE {in_scope} term = q.a INTERSECT SELECT scope_id, thread_id, doc"
    " FROM turn_postings WHERE {in_scope} term = q.b) p"
    " CROSS JOIN LATERAL (SELECT terms FROM messages"
    " WHERE id = p.doc AND scope_id = p.scope_id LIMIT 1) m"
    " CROSS JOIN LATERAL (SELECT wids FROM turn_windows w WHERE w.scope_id = p.scope_id"
    " AND w.doc = p.doc AND (' ' || m.terms || ' ') LIKE q.inside OFFSET 0) pw"
    " CROSS JOIN LATERAL unnest(pw.wids) AS u(wid)"
    # Windows holding a live message that ends with the first term and the next
    # live message of its session with any terms (a window's document skips those
    # with none), which starts with the second.
    " UNION SELECT q.ord, u.wid FROM q CROSS JOIN LATERAL (SELECT scope_id, thread_id, doc"
    " FROM turn_postings WHERE {in_scope} term = q.a AND ends OFFSET 0) p"
    " CROSS JOIN LATERAL (SELECT terms, archived, session_id, idx FROM messages"
    " WHERE id = p.doc AND scope_id = p.scope_id LIMIT 1) pa"
    " CROSS JOIN LATERAL (SELECT n.id, n.terms FROM messages n WHERE n.scope_id = p.scope_id"
    " AND n.session_id = pa.session_id AND n.idx > pa.idx AND NOT n.archived"
    " AND n.terms <> '' ORDER BY n.idx LIMIT 1) nx"
    # (The next message starts with the second term, so it has that term's
    # posting: its windows are those of the message.)
    " CROSS JOIN LATERAL (SELECT wids FROM turn_windows w WHERE w.scope_id = p.scope_id"
    " AND w.doc = nx.id AND (nx.terms || ' ') LIKE q.starts LIMIT 1) pb"
    " CROSS JOIN LATERAL (SELECT wids FROM turn_windows w WHERE w.scope_id = p.scope_id"
    " AND w.doc = p.doc LIMIT 1) pw"
    " CROSS JOIN LATERAL unnest(pw.wids) AS u(wid)"
    " WHERE NOT pa.archived AND (' ' || pa.terms) LIKE q.ends AND u.wid = ANY(pb.wids))"
    " SELECT q.ord, (SELECT count(*) FROM hits h WHERE h.ord = q.ord),"
    # The windows archived messages kept from before (see storage.md).
    " (SELECT count(*) FROM messages WHERE {in_scope} archived AND stale_window IS NOT NULL"
    " AND (' ' || stale_window || ' ') LIKE q.inside) FROM q ORDER BY q.ord"
)


class PostgresStatistics(PostgresConnection):
    """The term statistics of some scopes, read once per search (see ``_cached``)."""

    def scope_lexical_stats(self, scope: Sequence[int] | None, key: str) -> tuple[int, float]:
        """Documents under a key and their mean length, in these scopes (None: the store).
        Within a search every key's figures are read in one round trip (a search asks
        for several keys' in turn)."""
        scopes = None if scope is None else tuple(sorted(scope))
        key_of = ("stats", key, scopes)
        found = self._peek(key_of)
        if found is not None:
            return tuple(found)
        where = "true" if scopes is None else "scope_id = ANY(%(s)s)"
        self._settle_node_docs()
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT key, coalesce(sum(docs), 0), coalesce(sum(tokens), 0) FROM lex_stats"
                f" WHERE {where} GROUP BY key",
                {"s": None if scopes is None else list(scopes)},
            ).fetchall()
        sums = {int(k): (int(d), int(t)) for k, d, t in rows}
        out: dict[str, tuple[int, float]] = {}
        for name, code in KEY_CODES.items():
            docs, tokens = sums.get(code, (0, 0))
            out[name] = (docs, tokens / docs) if docs else (0, 0.0)
            self._remember(("stats", name, scopes), out[name])
        return out[key]

    def scope_doc_frequencies(
        self, scope: Sequence[int] | None, key: str, terms: Sequence[str]
    ) -> dict[str, int]:
        """How many documents under ``key`` hold each term, in these scopes (None: the
        store). Each count is read once per search (see ``_cached``)."""
        if key not in KEY_CODES:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        scopes = None if scope is None else tuple(sorted(scope))
        out: dict[str, int] = {}
        missing: list[str] = []
        for term in dict.fromkeys(terms):
            found = self._peek(("df", key, scopes, term))
            if found is None:
                missing.append(term)
            elif found:
                out[term] = found
        if not missing:
            return out
        # Counts read by earlier searches of these scopes while they were unchanged.
        stamp = None if scopes is None else self._peek(("mark", scopes))
        if stamp is not None:
            kept = self._kept.found(("scopes", scopes), stamp, ("df", key), missing)
            for term, count in kept.items():
                self._remember(("df", key, scopes, term), count)
                if count:
                    out[term] = count
            missing = [t for t in missing if t not in kept]
            if not missing:
                return out
        keys = {term_key(t): t for t in missing}
        # Within a search, the same terms' counts under every key in one round trip:
        # the search asks for them key after key.
        searching = self._peek(("stats", key, scopes)) is not None
        codes = list(KEY_CODES.values()) if searching else [KEY_CODES[key]]
        where = "key = ANY(%(k)s) AND term = ANY(%(w)s)" + (
            "" if scopes is None else " AND scope_id = ANY(%(s)s)"
        )
        self._settle_node_docs()
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT key, term, sum(df) FROM lex_df WHERE {where} GROUP BY key, term",
                {"k": codes, "w": list(keys), "s": None if scopes is None else list(scopes)},
            ).fetchall()
        read = {(int(k), keys[t]): int(n) for k, t, n in rows}
        for name, code in KEY_CODES.items():
            if code not in codes:
                continue
            counts = {term: read.get((code, term), 0) for term in missing}
            for term, count in counts.items():
                if name == key or self._peek(("df", name, scopes, term)) is None:
                    self._remember(("df", name, scopes, term), count)
                if name == key and count:
                    out[term] = count
            if stamp is not None:
                self._kept.keep(("scopes", scopes), stamp, ("df", name), counts)
        return out

    def scope_frequent_terms(
        self,
        scope: Sequence[int] | None,
        key: str,
        min_docs: int,
        stop: threading.Event | None = None,
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        if key not in LEXICAL_KEYS:
            raise ValueError(f"unknown lexical key {key!r}; expected one of {LEXICAL_KEYS}")
        counts: dict[str, int] = {}
        where = "key = %(k)s" + ("" if scope is None else " AND scope_id = ANY(%(s)s)")
        args = {"k": KEY_CODES[key], "s": None if scope is None else list(scope), "m": min_docs}
        self._settle_node_docs()
        with self._reading() as conn:
            # One snapshot: the counts and the state they describe must agree.
            tx = None if self._owns_transaction() else conn.transaction()
            if tx is not None:
                tx.__enter__()
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            try:
                docs, mean = self.scope_lexical_stats(scope, key)
                mark = self.change_mark() if scope is None else self.scope_mark(scope)
                with conn.cursor() as cur:
                    cur.execute(
                        f"SELECT term, sum(df) FROM lex_df WHERE {where} GROUP BY term"
                        " HAVING sum(df) >= %(m)s",
                        args,
                    )
                    while rows := cur.fetchmany(2048):
                        if stop is not None and stop.is_set():
                            return None
                        counts.update((t, int(n)) for t, n in rows if not t.startswith("#"))
            finally:
                if tx is not None:
                    tx.__exit__(None, None, None)
        return counts, docs, mean, mark

    def scope_pair_frequencies(
        self, scope: Sequence[int] | None, pairs: Sequence[str]
    ) -> dict[str, int]:
        """How many window documents of these scopes (None: the store) hold each pair,
        every pair in one statement."""
        out: dict[str, int] = {}
        asked: list[tuple[str, str, str]] = []
        for pair in dict.fromkeys(pairs):
            first, _, second = pair.partition("_")
            if not first or not second:
                out[pair] = 0
            else:
                asked.append((pair, first, second))
        if not asked:
            return out
        with self._reading() as conn:
            rows = conn.execute(
                _PAIRS_SQL.format(
                    in_scope="" if scope is None else "scope_id = ANY(%(s)s) AND",
                    turn=KEY_CODES["turn"],
                ),
                _pair_args(scope, asked),
            ).fetchall()
        for ordinal, windows, stale in rows:
            out[asked[int(ordinal) - 1][0]] = int(windows) + int(stale)
        return out

    # store-wide versions (the interface's): see statistics_for for the scoped ones

    def lexical_stats(self, key: str) -> tuple[int, float]:
        return self.scope_lexical_stats(None, key)

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        return self.scope_doc_frequencies(None, key, terms)

    def frequent_terms(
        self, key: str, min_docs: int, stop: threading.Event | None = None
    ) -> tuple[dict[str, int], int, float, tuple[int, int]] | None:
        return self.scope_frequent_terms(None, key, min_docs, stop)

    def pair_frequencies(self, pairs: Sequence[str]) -> dict[str, int]:
        return self.scope_pair_frequencies(None, pairs)

    def term_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        keys = {term_key(t): t for t in dict.fromkeys(terms)}
        # The counts and the highest row number in one round trip.
        with self._reading() as conn:
            total, counts = conn.execute(
                "SELECT (SELECT coalesce(max(id), 0) FROM messages), (SELECT array_agg(ARRAY["
                "term, n::text]) FROM (SELECT term, sum(df) AS n FROM lex_df WHERE key = %s"
                " AND term = ANY(%s) GROUP BY term) x)",
                (KEY_CODES["turn"], list(keys)),
            ).fetchone()
        out = {keys[t]: int(n) for t, n in counts or () if int(n)}
        return out, int(total)
