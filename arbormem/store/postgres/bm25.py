"""BM25 searches as SQL statements, and several of them sent as one.

A search ranks by three keys one after the other (turns, windows, topics), each a
statement of its own; on a database server each is a round trip, and on a busy
machine every round trip may wait for the scheduler. :func:`run_together` sends
several searches in one statement and gives back each one's hits exactly as its
own statement would have (the same scores, in the same order): the lexical
capability uses it to answer the next keys of a search before they are asked
(see ``PostgresLexical._search_ahead``) and the date spans of a question at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from arbormem.store.types import Filters

#: FTS5's BM25 with its constants (k1 = 1.2, b = 0.75), per posting: the term's
#: ``idf``, its frequency ``{tf}`` and the document's length ``{length}``;
#: ``%(avgdl)s`` the mean length. In float8 throughout (literals would be numeric).
SCORE = (
    "idf * ({tf})::float8 * 2.2::float8 / (({tf})::float8 + 1.2::float8"
    " * (0.25::float8 + 0.75::float8 * ({length})::float8 / %(avgdl)s::float8))"
)
#: The query's terms with their IDF, numbered (a term given twice counts twice, as
#: in an FTS5 query that names it twice).
TERMS = "unnest(%(terms)s::text[], %(idf)s::float8[]) WITH ORDINALITY AS q(term, idf, ord)"
#: A query term's postings, one index range each: written as a lateral subquery
#: with a fence (OFFSET 0) so that the plan stays that whatever the planner's
#: statistics say (a freshly written table's are none).
POSTINGS = (
    "SELECT scope_id, doc, tf, len FROM turn_postings p WHERE p.scope_id = ANY(%(s)s)"
    " AND p.thread_id = ANY(%(threads)s) AND p.term = q.term AND p.doc > %(after)s OFFSET 0"
)

#: Runs of document ids (``lo``, ``hi``, both included) a search reads the postings of.
RUNS = "unnest(%(r_lo)s::int8[], %(r_hi)s::int8[]) AS r(lo, hi)"

#: How many messages of a question's date spans, read in time order, cost about
#: as much as reading one hit's message by its id (the one a random read of the
#: table, the other a run of neighbours): at 100,000 turns two spans of 10,000
#: messages were read in half the time of their 4,200 hits' messages.
SPAN_ROWS_PER_HIT = 4

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


@dataclass
class Query:
    """One search's statement (its hits: ``id, score`` rows, best first) and its
    parameters."""

    sql: str
    args: dict[str, Any] = field(default_factory=dict)


def filter_sql(filters: Filters | None, column: str = "m") -> tuple[str, dict[str, Any]]:
    """Conditions on the messages ``column`` for the filters (besides scope and
    threads), with their parameters."""
    sql = ""
    args: dict[str, Any] = {}
    if filters is None:
        return sql, args
    if filters.sessions:
        sql += (
            f" AND {column}.session_id IN (SELECT id FROM sessions WHERE scope_id = ANY(%(s)s)"
            " AND thread_id = ANY(%(threads)s) AND key = ANY(%(f_sessions)s))"
        )
        args["f_sessions"] = list(filters.sessions)
    if filters.since is not None:
        sql += f" AND {column}.ts >= %(f_since)s"
        args["f_since"] = filters.since
    if filters.until is not None:
        sql += f" AND {column}.ts < %(f_until)s"
        args["f_until"] = filters.until
    if filters.roles:
        sql += f" AND {column}.role = ANY(%(f_roles)s)"
        args["f_roles"] = list(filters.roles)
    return sql, args


def _hits_sql(key: str, runs: bool = False) -> str:
    """The scored documents of a turn or window search (``id, score`` rows in no
    order, archived messages and filters not applied), with the parameters of
    :func:`message_query`. With ``runs``, only the postings of documents in the
    runs of ids ``%(r_lo)s``, ``%(r_hi)s`` (disjoint, bounds included) are read."""
    postings = POSTINGS
    terms = TERMS
    if runs:
        # Each term's postings in each run: one index range a run. The runs are
        # disjoint, so no posting is read twice, and each document's postings
        # still come term by term, as the sums below expect.
        terms = f"{TERMS} CROSS JOIN {RUNS}"
        postings = POSTINGS.replace("p.doc > %(after)s", "p.doc BETWEEN r.lo AND r.hi")
    if key == "turn":
        return (
            "SELECT p.doc AS id, sum("
            + SCORE.format(tf="p.tf", length="p.len")
            + f") AS score FROM {terms} CROSS JOIN LATERAL ({postings}) p GROUP BY p.doc"
        )
    # A window's frequency of a term is the sum of its members' (each posting's
    # message lists its windows in ``turn_windows``, read by its key for each
    # posting, in the postings' order); its members lie at most ``window_reach``
    # ids before it.
    return (
        "SELECT wid AS id, sum("
        + SCORE.format(tf="tf", length="wlen")
        + ") AS score FROM (SELECT wid, wlen, ord, min(idf) AS idf, sum(tf) AS tf FROM"
        " (SELECT unnest(w.wids) AS wid, unnest(w.wlens) AS wlen, q.ord, q.idf, p.tf"
        f" FROM {terms} CROSS JOIN LATERAL ({postings.replace('%(after)s', '%(from)s')}) p"
        " CROSS JOIN LATERAL (SELECT wids, wlens FROM turn_windows w WHERE"
        " w.scope_id = p.scope_id AND w.doc = p.doc OFFSET 0) w)"
        " x WHERE wid > %(after)s GROUP BY wid, wlen, ord) w"
        " GROUP BY wid"
    )


def message_query(key: str, args: dict[str, Any], filters: Filters | None) -> Query:
    """The turn or window search with ``args`` (scopes ``s``, ``threads``, ``terms``
    and their ``idf``, ``avgdl``, ``after``, ``limit``, and for windows ``from``:
    the lowest message id whose postings may list a window above ``after``)."""
    where, fargs = filter_sql(filters)
    args = {**args, **fargs}
    hits = _hits_sql(key)
    if where:
        # The hits are scored once, then filtered: joined as a subquery, the
        # planner (which expects a handful of messages in a date range) scored
        # them again for every message of the range, 30 to 130 ms on LoCoMo.
        sql = (
            f"WITH h AS MATERIALIZED ({hits}) SELECT h.id, h.score FROM h"
            " JOIN messages m ON m.id = h.id"
            f" AND m.scope_id = ANY(%(s)s) WHERE NOT m.archived{where}"
            " ORDER BY h.score DESC, h.id LIMIT %(limit)s"
        )
    elif key == "turn":
        sql = (
            f"SELECT id, score FROM ({hits}) h WHERE id NOT IN (SELECT id FROM messages"
            " WHERE scope_id = ANY(%(s)s) AND thread_id = ANY(%(threads)s) AND archived)"
            " ORDER BY score DESC, id LIMIT %(limit)s"
        )
    else:  # archived messages are in no window
        sql = f"SELECT id, score FROM ({hits}) h ORDER BY score DESC, id LIMIT %(limit)s"
    return Query(sql, args)


def spans_query(
    key: str,
    args: dict[str, Any],
    filters: Filters | None,
    spans: Sequence[tuple[datetime, datetime]],
    runs: Sequence[tuple[int, int]] | None = None,
) -> Query:
    """The turn or window search of :func:`message_query` within each of several
    date spans (``[since, until)``, already narrowed by the filters' own), as one
    statement whose rows are ``part, id, score`` (``part``: the span's place in
    ``spans``), each part's hits those of its own search.

    ``runs`` (disjoint, sorted ``(lo, hi)`` ids, both included), when given, hold
    every document whose postings can score a hit in a span: only their postings
    are read (see ``PostgresLexical._span_runs``). Without them every posting of
    the terms is scored.

    The documents are scored once for every span: the same terms score the same
    documents the same way whatever the span, and sent as one search per span (a
    union) a question naming two or three spans scored the window key's postings
    two or three times over, the largest statement of a dated search at 100,000
    turns. The hits' messages are then read once, and each hit ranked within
    every span that holds it."""
    base = replace(filters, since=None, until=None) if filters is not None else None
    where, fargs = filter_sql(base)
    in_span = (
        "m.scope_id = ANY(%(s)s) AND m.thread_id = ANY(%(threads)s)"
        " AND m.ts >= sp.lo AND m.ts < sp.hi"
    )
    # The hits' messages are read one of two ways: through the time index, every
    # message of the spans (hashed against the hits), when the spans hold fewer
    # than SPAN_ROWS_PER_HIT messages a hit; else each hit's message by its id.
    # The count stops there, and the way not taken is never run (a one-time
    # filter). Both give the same rows.
    sql = (
        f"WITH h AS MATERIALIZED ({_hits_sql(key, runs is not None)}),"
        " sp AS MATERIALIZED (SELECT * FROM unnest(%(sp_lo)s::timestamptz[],"
        " %(sp_hi)s::timestamptz[]) WITH ORDINALITY AS sp(lo, hi, part)),"
        " n AS MATERIALIZED (SELECT count(*) AS hits FROM h),"
        " few AS MATERIALIZED (SELECT (SELECT count(*) FROM sp CROSS JOIN LATERAL"
        f" (SELECT 1 FROM messages m WHERE {in_span} LIMIT (SELECT hits FROM n)"
        f" * {SPAN_ROWS_PER_HIT}) c) < (SELECT hits FROM n) * {SPAN_ROWS_PER_HIT} AS yes),"
        " found AS (SELECT sp.part, h.id, h.score FROM sp CROSS JOIN LATERAL"
        f" (SELECT m.id FROM messages m WHERE {in_span} AND NOT m.archived{where} OFFSET 0) m"
        " JOIN h ON h.id = m.id WHERE (SELECT yes FROM few)"
        " UNION ALL SELECT sp.part, h.id, h.score FROM h"
        " JOIN messages m ON m.id = h.id AND m.scope_id = ANY(%(s)s)"
        " JOIN sp ON m.ts >= sp.lo AND m.ts < sp.hi"
        f" WHERE NOT m.archived{where} AND NOT (SELECT yes FROM few))"
        " SELECT part - 1, id, score FROM (SELECT part, id, score, row_number() OVER"
        " (PARTITION BY part ORDER BY score DESC, id) AS r FROM found) x"
        " WHERE r <= %(limit)s"
    )
    return Query(
        sql,
        {
            **args,
            **fargs,
            "sp_lo": [lo for lo, _ in spans],
            "sp_hi": [hi for _, hi in spans],
            "r_lo": [lo for lo, _ in runs or ()],
            "r_hi": [hi for _, hi in runs or ()],
        },
    )


def node_query(args: dict[str, Any]) -> Query:
    """The topic or segment search with ``args`` (as for :func:`message_query`,
    with the key's code ``k`` and no filters)."""
    sql = (
        "SELECT id, score FROM (SELECT p.node AS id, sum("
        + SCORE.format(tf="p.tf", length="p.len")
        + f") AS score FROM {TERMS} CROSS JOIN LATERAL (SELECT node, tf, len"
        " FROM node_postings p WHERE p.scope_id = ANY(%(s)s) AND p.key = %(k)s"
        " AND p.thread_id = ANY(%(threads)s) AND p.term = q.term AND p.node > %(after)s"
        " OFFSET 0) p GROUP BY p.node) h WHERE id NOT IN (SELECT id FROM"
        " tree_nodes WHERE scope_id = ANY(%(s)s) AND archived)"
        " ORDER BY score DESC, id LIMIT %(limit)s"
    )
    return Query(sql, args)


def together(queries: Sequence[Query]) -> Query:
    """One statement whose rows are ``part, id, score``: each query's hits, tagged
    with its place in ``queries`` (its parameters renamed apart)."""
    parts: list[str] = []
    args: dict[str, Any] = {}
    for i, query in enumerate(queries):
        prefix = f"q{i}_"
        parts.append(
            f"SELECT {i}::int4 AS part, id, score FROM ("
            + _PLACEHOLDER.sub(lambda m, p=prefix: f"%({p}{m.group(1)})s", query.sql)  # type: ignore[misc]
            + f") r{i}"
        )
        args.update({prefix + k: v for k, v in query.args.items()})
    return Query(" UNION ALL ".join(parts), args)


def hits_of(rows: Sequence[tuple[Any, ...]], n: int) -> list[list[tuple[int, float]]]:
    """The rows of :func:`together`'s statement as each of the ``n`` queries'
    hits: positive scores, best first, ties by id (each query's own order, which
    a union need not keep)."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for part, rid, score in rows:
        if score > 0:
            out[int(part)].append((int(rid), float(score)))
    for hits in out:
        hits.sort(key=lambda h: (-h[1], h[0]))
    return out
