"""Document frequencies of the turn index, kept by the writer as it writes.

Topic names weigh words by how many turns hold them (``term_frequencies``). FTS5
answers that from its vocabulary table by walking each term's posting list in every
segment: 20 to 50 µs a term, which was a tenth of a bulk ingest's writing. The
writer knows every turn it indexes, so it keeps the counts itself, for the terms it
has read or written since it last knew them all:

* a count is read from the index once, then moved with every turn this connection
  indexes; a store whose turn index was empty when counting began has every count
  (a term not counted is in no turn);
* anything else that changes which turns the index holds (a forget, a rolled-back
  write, another connection's commit) drops the counts, and they are read again.

The counts are used only inside the writer's own transaction, where they describe
what the index holds at that moment (its uncommitted rows included), so every
figure is the one the vocabulary table would give. A term is counted only when the
index's tokenizer surely keeps it as one token (ASCII letters and digits, not too
long, and not found inside another term); any other is always read from the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["TermCounts", "countable"]

#: Longest term counted here: a longer one (hardly ever seen) is read from the index.
MAX_TERM = 200
_ASCII_RUN = re.compile(r"[a-z0-9]+")


def countable(term: str) -> bool:
    """Whether the index's ``unicode61`` tokenizer keeps ``term`` as one token, as
    written: ASCII lower-case letters and digits."""
    return 0 < len(term) <= MAX_TERM and term.isascii() and term.isalnum() and term.lower() == term


class TermCounts:
    """Turns holding each term, as this connection's writes left the index (see the
    module docs). ``complete``: every term of the index is counted."""

    def __init__(self, version: int, *, complete: bool) -> None:
        #: The connection's ``PRAGMA data_version`` these counts go with: another
        #: connection's commit changes it.
        self.version = version
        self.complete = complete
        self.counts: dict[str, int] = {}
        #: ASCII runs inside other terms indexed here: the tokenizer may split such a
        #: term where its table of letters differs from Python's, so they are read.
        self.uncertain: set[str] = set()

    def split(self, terms: Iterable[str]) -> tuple[dict[str, int], list[str]]:
        """The counts known for ``terms``, and the terms that must be read."""
        known: dict[str, int] = {}
        missing: list[str] = []
        counts = self.counts
        for term in terms:
            n = counts.get(term)
            if n is not None:
                known[term] = n
            elif self.complete and countable(term) and term not in self.uncertain:
                known[term] = 0
            else:
                missing.append(term)
        return known, missing

    def learn(self, read: dict[str, int], asked: Sequence[str]) -> None:
        """Keep the counts just read from the index (a term it lacks has none)."""
        for term in asked:
            if countable(term) and term not in self.uncertain:
                self.counts[term] = read.get(term, 0)

    def indexed(self, terms: str) -> None:
        """Count one turn indexed with these space-separated terms."""
        counts = self.counts
        complete = self.complete
        for term in set(terms.split()):
            n = counts.get(term)
            if n is not None:
                counts[term] = n + 1
            elif countable(term):
                if complete and term not in self.uncertain:
                    counts[term] = 1
            elif not term.isascii():
                for run in _ASCII_RUN.findall(term):
                    self.uncertain.add(run)
                    counts.pop(run, None)
