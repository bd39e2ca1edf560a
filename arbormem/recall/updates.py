"""Updates among search results: a later turn that replaces what an earlier one said.

"She can eat nuts now" after "she is allergic to nuts": :func:`mark_updates`
marks the earlier hit as superseded by the later one and moves the update up
when the ranking had them close.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from itertools import pairwise

from arbormem.models import Hit
from arbormem.text import analyze, query_terms, words

#: Words that announce a statement replaces an earlier one (matched before stop words go).
#: Deliberately narrow: "now" and "actually" are everywhere in chat and would
#: reorder ordinary results.
_UPDATE_MARKERS = frozenset(
    [
        "anymore",
        "changed",
        "instead",
        "update",
        "updated",
        "cleared",
        "switched",
        "outgrew",
        "stopped",
        "cancelled",
        "canceled",
    ]
)


def mark_updates(hits: list[Hit], query: str) -> list[Hit]:
    """Mark a hit that a later hit updates ("she can eat nuts now" after "she is
    allergic to nuts"), and make sure the update does not rank below it.

    Two hits are about the same thing when they share at least two of the
    query's terms (the speakers' names aside); the later one updates the earlier
    when it also carries an update word ("anymore", "no longer", "changed", "instead", "cleared"...).
    The update is moved up only when its score is within a quarter of the
    earlier one's.
    """
    q = set(query_terms(query))
    if len(hits) < 2 or len(q) < 2:
        return hits
    head, tail = hits[:UPDATE_DEPTH], hits[UPDATE_DEPTH:]
    return _mark(head, q) + tail


#: Only the best hits are compared for updates: what an agent reads first.
UPDATE_DEPTH = 20


def _mark(hits: list[Hit], q: set[str]) -> list[Hit]:
    # A speaker's name says who spoke, not what about: every turn of theirs holds it,
    # and two of them sharing it and one more word were taken for the same fact.
    # (So the query terms a hit shares are those of its content.)
    q = q - {t for h in hits for t in _terms(h.message.speaker or "")}
    shared = [q.intersection(_terms(h.message.content)) for h in hits]
    # Only a hit holding two of the query's terms and an update word can update
    # another (most searches have none, and nothing to compare).
    updates = [
        j for j, s in enumerate(shared) if len(s) >= 2 and _has_marker(hits[j].message.content)
    ]
    if not updates:
        return hits

    def later(j: int, i: int) -> bool:
        a, b = hits[j].message, hits[i].message
        # Positions order one thread; across agents (all_agents) only times compare.
        if (a.user, a.agent) == (b.user, b.agent):
            return a.index > b.index
        return a.timestamp > b.timestamp

    order = list(range(len(hits)))
    marked = list(hits)
    for i in range(len(hits)):
        for j in updates:
            if not later(j, i) or marked[i].superseded_by:
                continue
            if len(shared[i] & shared[j]) < 2:
                continue
            marked[i] = replace(marked[i], superseded_by=hits[j].message.id)
            pos_i, pos_j = order.index(i), order.index(j)
            # The update goes right before what it updates, when the ranking had them
            # close anyway; a far weaker "update" is more likely a false alarm.
            if pos_j > pos_i and hits[j].score >= 0.75 * hits[i].score:
                order.insert(pos_i, order.pop(pos_j))
    return [marked[i] for i in order]


# A conversation's searches return the same turns again and again: what is read of a
# text here is kept by the text (the same text always reads the same).
@lru_cache(maxsize=8192)
def _terms(text: str) -> frozenset[str]:
    """The distinct index terms of a text."""
    return frozenset(analyze(text))


@lru_cache(maxsize=8192)
def _has_marker(content: str) -> bool:
    """Whether a text carries an update word ("anymore", "no longer"...)."""
    said = words(content)
    return bool(set(said) & _UPDATE_MARKERS) or any(
        a == "no" and b == "longer" for a, b in pairwise(said)
    )
