"""Window documents derived from turns: which windows change, their lengths, the
statistics deltas, and the window lists each turn's postings carry.

The window key of a message is its analysed terms with those of up to two live
neighbours on each side in its session (:mod:`arbormem.store.sqlite.windows`).
PostgreSQL stores no window documents: each turn posting lists the windows its
message belongs to (their centre ids and lengths), and a window search sums
turn postings per window. This module plans a rewrite of some windows of one
session in pure Python, for the writes to apply.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from arbormem.store.sqlite.windows import WINDOW_RADIUS


@dataclass
class Member:
    """A live message of a session, in order."""

    id: int
    terms: list[str]
    #: The length of its window as stored before the rewrite (None: no window).
    wlen: int | None = None


@dataclass
class WindowPlan:
    """What rewriting some windows of a session changes."""

    #: New window lengths by centre id (written windows only).
    wlen: dict[int, int] = field(default_factory=dict)
    #: The window key's document count and token count deltas.
    docs: int = 0
    tokens: int = 0
    #: Document frequency deltas of the window key, by term.
    df: Counter[str] = field(default_factory=Counter)
    #: The window lists (centre ids, lengths) of messages whose lists were computed.
    lists: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    #: How far back (in ids) a written window reaches from its centre, at most.
    reach: int = 0
    #: How far ahead (in ids) of a window's centre a member in the computed lists
    #: lies, at most (a member lists windows centred up to this many ids before it).
    ahead: int = 0


def window_terms(order: Sequence[Member], j: int) -> list[str]:
    """The terms of the window centred on position ``j`` of a live order."""
    out: list[str] = []
    for m in order[max(0, j - WINDOW_RADIUS) : j + WINDOW_RADIUS + 1]:
        out.extend(m.terms)
    return out


def plan(
    order: Sequence[Member],
    write: Sequence[int],
    old: Mapping[int, list[str] | None],
    lists_for: Sequence[int] = (),
) -> WindowPlan:
    """Rewrite the windows at positions ``write`` of ``order`` (a session's live
    messages, or enough of its end: every window a listed member belongs to must
    lie inside it). ``old`` gives, for each written position, the terms of the
    window it replaces (None: there was none). Every other position keeps its
    stored window (``Member.wlen``). Lists are computed for the members of the
    written windows and for the positions in ``lists_for``."""
    out = WindowPlan()
    present: dict[int, int] = {i: m.wlen for i, m in enumerate(order) if m.wlen is not None}
    touched: set[int] = set(lists_for)
    for j in write:
        terms = window_terms(order, j)
        before = old.get(j)
        out.wlen[order[j].id] = len(terms)
        present[j] = len(terms)
        if before is None:
            out.docs += 1
            out.tokens += len(terms)
            out.df.update(set(terms))
        else:
            out.tokens += len(terms) - len(before)
            new_set, old_set = set(terms), set(before)
            out.df.update(new_set - old_set)
            out.df.subtract(old_set - new_set)
        lo = max(0, j - WINDOW_RADIUS)
        out.reach = max(out.reach, order[j].id - order[lo].id)
        touched.update(range(lo, min(len(order), j + WINDOW_RADIUS + 1)))
    for p in sorted(touched):
        ids: list[int] = []
        lens: list[int] = []
        for q in range(max(0, p - WINDOW_RADIUS), min(len(order), p + WINDOW_RADIUS + 1)):
            if q in present:
                ids.append(order[q].id)
                lens.append(present[q])
        out.lists[order[p].id] = (ids, lens)
        if ids:
            out.ahead = max(out.ahead, order[p].id - min(ids))
    return out
