"""Full-text tables held in memory, for BM25 without a trip through FTS5.

In a store of a few thousand turns, FTS5's ``bm25()`` query costs about a
millisecond each, and a search runs four of them (turns, windows, topics,
segments): a fifth of its time. Every document of such a table fits in memory
as posting arrays (term -> rows and their counts), over which numpy scores a
query in a tenth of that, with exactly FTS5's figures:

* the tokens are FTS5's: a word of ASCII lower-case letters and digits is one
  token as written, any other word is split by SQLite's own ``unicode61``
  tokenizer (on a private in-memory database), so case folding and separators
  are the index's, whatever Python's Unicode tables say;
* BM25 is FTS5's ``bm25()`` (k1 1.2, b 0.75, one column of weight 1): idf
  ``log((N - n + 0.5) / (n + 0.5))``, 1e-6 where that is not positive, each
  phrase's term added in the query's order, in the same floating-point steps,
  so scores are equal to the last bit and ties fall as FTS5's (by row number);
* the document count and total length the copy holds must equal the ones FTS5
  keeps (its averages record), or the copy is not used.

A copy describes the table as committed at its *label*: FTS5's structure record
(every committed write to the table changes it), its averages record, and the
store's clock (raised by every forget and rewrite, :mod:`.schema` migration 13).
A search reads the label first (one statement): the same, the copy answers;
only the structure moved (documents appended), the rows past the copy's newest
are added, if the counts then agree with FTS5's; anything else, or another
connection's forget, drops it. A write transaction under way is never seen
(the store's writer searches inside its own transaction through SQL).
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np

from arbormem.store.sqlite.driver import sqlite3

__all__ = ["K1", "B", "Postings", "TablePostings", "Tokenizer", "plain"]

#: FTS5's bm25() constants.
K1 = 1.2
B = 0.75
#: The tokenizer of every table held here (see schema.py).
TOKENIZE = "unicode61 remove_diacritics 0"
#: Longest word taken as one token as written (a longer one goes to the tokenizer).
MAX_PLAIN = 200
_PLAIN = re.compile(f"[a-z0-9]{{1,{MAX_PLAIN}}}")
_PLAIN_DOC = re.compile(r"[a-z0-9 ]*")
#: FTS5's record ids in its ``_data`` table: the averages and the structure.
_AVERAGES, _STRUCTURE = 1, 10

#: Tables up to this many tokens in all are held (about 8 bytes a posting, and
#: about 0.5 µs a token to read: a fifth of a second for the largest).
MAX_TOKENS = 500_000
#: Up to this many tokens (about 10 ms to read) a copy is built at a table's first
#: search; a larger one once two searches in a row found the table unchanged, so
#: that a process that searches once (a command line's search) never pays for it.
BUILD_AT_ONCE = 20_000


def plain(term: str) -> bool:
    """Whether ``term`` is one FTS5 token as written (ASCII lower-case letters and
    digits): only such terms are looked up here."""
    return _PLAIN.fullmatch(term) is not None


class Tokenizer:
    """FTS5's ``unicode61 remove_diacritics 0`` tokens of a document (see the module
    docs); the tokens of words that are not plain are remembered."""

    def __init__(self, max_words: int = 200_000) -> None:
        self.max_words = max_words
        self._lock = threading.Lock()
        self._words: dict[str, tuple[str, ...]] = {}

    def tokens(self, text: str) -> list[str]:
        """The document's tokens in order."""
        if _PLAIN_DOC.fullmatch(text):
            return text.split()
        words = text.split()
        known = self._words
        odd = {w for w in words if not _PLAIN.fullmatch(w)}
        missing = [w for w in odd if w not in known]
        split = {w: known[w] for w in odd if w in known}
        if missing:
            split.update(self.learn(missing))
        out: list[str] = []
        for w in words:
            if w in split:
                out.extend(split[w])
            else:
                out.append(w)
        return out

    def learn(self, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Split ``words`` with SQLite's tokenizer, and remember them."""
        found: dict[int, list[tuple[int, str]]] = {i: [] for i in range(len(words))}
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            conn.execute(f"CREATE VIRTUAL TABLE w USING fts5 (x, tokenize = '{TOKENIZE}')")
            conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (w, 'instance')")
            conn.executemany(
                "INSERT INTO w (rowid, x) VALUES (?, ?)", [(i + 1, w) for i, w in enumerate(words)]
            )
            for doc, offset, term in conn.execute("SELECT doc, offset, term FROM v"):
                found[int(doc) - 1].append((int(offset), str(term)))
        finally:
            conn.close()
        out = {w: tuple(t for _, t in sorted(found[i])) for i, w in enumerate(words)}
        with self._lock:
            if len(self._words) + len(out) > self.max_words:
                self._words = {}
            self._words.update(out)
        return out


#: One tokenizer for the process: the split of a word never changes.
TOKENIZER = Tokenizer()


def _varints(blob: bytes, count: int) -> list[int]:
    """The first ``count`` SQLite varints of ``blob`` (as FTS5 writes its records)."""
    out: list[int] = []
    at = 0
    for _ in range(count):
        value = 0
        for i in range(9):
            byte = blob[at]
            at += 1
            if i == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def averages(blob: bytes | None) -> tuple[int, int]:
    """FTS5's document count and total tokens (one column) from its averages record."""
    if not blob:
        return 0, 0
    rows, tokens = _varints(blob, 2)
    return rows, tokens


Label = tuple[bytes, bytes, int]


class Postings:
    """The documents of one full-text table as posting arrays (see the module docs)."""

    def __init__(self, label: Label) -> None:
        self.label = label
        #: Row number of each document, by slot (the order they were added in).
        self.rowids = np.zeros(0, dtype=np.int64)
        #: Each document's length in tokens, by slot.
        self.lengths = np.zeros(0, dtype=np.float64)
        self.docs = 0
        self.tokens = 0
        self.newest = 0
        #: term -> (2, n) array: the slots of the documents holding it, and its count
        #: in each.
        self.postings: dict[str, np.ndarray] = {}
        self._norm: np.ndarray | None = None

    def add(self, docs: Sequence[tuple[int, Sequence[str]]]) -> None:
        """Add documents (row number, tokens), numbered above every one held."""
        if not docs:
            return
        lists: dict[str, list[int]] = {}
        base = self.docs
        rowids = np.fromiter((r for r, _ in docs), np.int64, len(docs))
        if int(rowids.min()) <= self.newest or len(np.unique(rowids)) != len(rowids):
            raise ValueError("documents must be numbered above every one held, once each")
        lengths = np.zeros(len(docs), dtype=np.float64)
        for i, (_, toks) in enumerate(docs):
            lengths[i] = len(toks)
            slot = base + i
            for term, n in Counter(toks).items():
                found = lists.get(term)
                if found is None:
                    lists[term] = [slot, n]
                else:
                    found += (slot, n)
        for term, flat in lists.items():
            arr = np.array(flat, dtype=np.int32).reshape(-1, 2).T
            old = self.postings.get(term)
            self.postings[term] = np.ascontiguousarray(
                arr if old is None else np.concatenate([old, arr], axis=1)
            )
        self.rowids = np.concatenate([self.rowids, rowids])
        self.lengths = np.concatenate([self.lengths, lengths])
        self.docs += len(docs)
        self.tokens += int(lengths.sum())
        self.newest = max(self.newest, int(rowids.max()))
        self._norm = None

    def extended(self, docs: Sequence[tuple[int, Sequence[str]]], label: Label) -> Postings:
        """A new copy with these documents added (as :meth:`add`) under ``label``; this
        one is left as it was, for the searches reading it meanwhile."""
        grown = copy.copy(self)
        grown.postings = dict(self.postings)
        grown.add(docs)
        grown.label = label
        return grown

    def doc_frequency(self, term: str) -> int:
        """How many documents hold ``term`` (a plain one)."""
        found = self.postings.get(term)
        return 0 if found is None else int(found.shape[1])

    def _idf(self, hits: int) -> float:
        # As fts5Bm25GetData computes it, from the same integers.
        idf = math.log((self.docs - hits + 0.5) / (hits + 0.5))
        return idf if idf > 0.0 else 1e-6

    def scores(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """FTS5's bm25 of every document for the query OR-ing ``terms`` (each a
        phrase, repeats included, all plain), as a positive score per slot, and
        the mask of the documents that match."""
        n = self.docs
        if self._norm is None:
            avgdl = float(self.tokens) / float(n) if n else 0.0
            # k1 * (1 - b + b * D / avgdl), in FTS5's order of operations.
            self._norm = K1 * ((1.0 - B) + (B * self.lengths) / avgdl)
        norm = self._norm
        score = np.zeros(n, dtype=np.float64)
        hit = np.zeros(n, dtype=bool)
        for term in terms:
            found = self.postings.get(term)
            if found is None:
                continue  # a phrase no document holds adds 0 everywhere
            slots = found[0]
            tf = found[1].astype(np.float64)
            idf = self._idf(found.shape[1])
            score[slots] += idf * ((tf * (K1 + 1.0)) / (tf + norm[slots]))
            hit[slots] = True
        return score, hit

    def best(
        self, terms: Sequence[str], limit: int, after: int = 0
    ) -> tuple[list[tuple[int, float]], bool]:
        """The ``limit`` best matches numbered above ``after``, as ``ORDER BY
        bm25(...) LIMIT`` gives them (best first, ties by row number), with their
        scores; and whether more match."""
        score, hit = self.scores(terms)
        if after > 0:
            hit &= self.rowids > after
        return self.pick(score, hit, limit)

    def pick(
        self, score: np.ndarray, hit: np.ndarray, limit: int
    ) -> tuple[list[tuple[int, float]], bool]:
        """:meth:`best` of the documents in ``hit``, given their :meth:`scores`."""
        slots = np.flatnonzero(hit)
        more = len(slots) > limit
        if len(slots) > 4 * limit and limit > 0:
            # Only the documents scoring at least the limit-th best can be in it.
            kth = np.partition(score[slots], len(slots) - limit)[len(slots) - limit]
            slots = slots[score[slots] >= kth]
        order = np.lexsort((self.rowids[slots], -score[slots]))[:limit]
        picked = slots[order]
        return list(zip(self.rowids[picked].tolist(), score[picked].tolist())), more


class TablePostings:
    """The in-memory copies of a store's full-text tables, each kept under its
    label (see the module docs); safe to share between threads."""

    def __init__(self, max_tokens: int = MAX_TOKENS, at_once: int = BUILD_AT_ONCE) -> None:
        self.max_tokens = max_tokens
        self.at_once = at_once
        self._copies: dict[str, Postings] = {}
        #: Per table, the label the last search found when it built nothing.
        self._seen: dict[str, Label] = {}
        #: Tables whose copy was dropped once (changed otherwise than by appends).
        self._changing: set[str] = set()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._tokenizes: dict[str, bool] = {}

    def drop(self) -> None:
        """Forget every copy (they are rebuilt when needed)."""
        with self._lock:
            self._copies.clear()
            self._seen.clear()

    def current(
        self, conn: sqlite3.Connection, table: str, snapshot: bool, build: bool = True
    ) -> Postings | None:
        """The copy of ``table`` as ``conn`` sees it committed, brought up to date or
        built as needed; None when the table is not held (too large, another
        search is updating it, or its tokenizer is not the one copied here).
        ``snapshot``: read in a transaction of its own (False when ``conn`` is
        already consistent, as an in-memory store's writer under its lock); with
        ``build`` False, a copy is only brought up to date, never built."""
        if not self._tokenizer_ok(conn, table):
            return None
        with self._lock:
            lock = self._locks.setdefault(table, threading.Lock())
        if not lock.acquire(blocking=False):
            return None  # another thread is building it: SQL answers meanwhile
        try:
            label = _label(conn, table)
            held = self._copies.get(table)
            if held is not None and held.label == label:
                return held
            _, tokens = averages(label[1])
            if tokens > self.max_tokens:
                self._copies.pop(table, None)
                return None
            if held is not None:
                if held.label[2] == label[2]:
                    grown = self._extend(conn, table, held, snapshot)
                    if grown is not None:
                        self._copies[table] = grown
                        return grown
                del self._copies[table]
                self._changing.add(table)
            # A table changed otherwise than by appends (a window key rewritten as its
            # session grows, topics renamed) may change again before the next search:
            # its copy is built again once two searches in a row found it unchanged.
            if not build:
                return None
            waits = tokens > self.at_once or table in self._changing
            if waits and self._seen.get(table) != label:
                self._seen[table] = label
                return None
            built = self._build(conn, table, snapshot)
            if built is not None:
                self._copies[table] = built
            return built
        finally:
            lock.release()

    def _tokenizer_ok(self, conn: sqlite3.Connection, table: str) -> bool:
        ok = self._tokenizes.get(table)
        if ok is None:
            row = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            sql = " ".join(str(row[0]).split()) if row else ""
            ok = self._tokenizes[table] = (
                sql.lower().startswith(f"create virtual table {table} using fts5 (terms,")
                and f"tokenize = '{TOKENIZE}')" in sql
            )
        return ok

    def _read(
        self, conn: sqlite3.Connection, table: str, after: int, snapshot: bool
    ) -> tuple[Label, list[tuple[int, list[str]]]]:
        """The table's label and its documents numbered above ``after``, in one
        snapshot, tokenized."""
        if snapshot:
            conn.execute("BEGIN")
        try:
            label = _label(conn, table)
            rows = conn.execute(
                f"SELECT id, c0 FROM {table}_content WHERE id > ? ORDER BY id", (after,)
            ).fetchall()
        finally:
            if snapshot:
                conn.execute("COMMIT")
        tokens = TOKENIZER.tokens
        return label, [(int(r), tokens(str(t or ""))) for r, t in rows]

    def _build(self, conn: sqlite3.Connection, table: str, snapshot: bool) -> Postings | None:
        label, docs = self._read(conn, table, 0, snapshot)
        built = Postings(label)
        built.add(docs)
        return built if _agrees(built, label) else None

    def _extend(
        self, conn: sqlite3.Connection, table: str, held: Postings, snapshot: bool
    ) -> Postings | None:
        """The copy with the documents appended since it was read, if that is all
        that changed (the counts agree with FTS5's, the store's clock is the
        same); None otherwise."""
        label, docs = self._read(conn, table, held.newest, snapshot)
        want_docs, want_tokens = averages(label[1])
        if label[2] != held.label[2] or held.docs + len(docs) != want_docs:
            return None
        if held.tokens + sum(len(t) for _, t in docs) != want_tokens:
            return None
        return held.extended(docs, label)


def _label(conn: sqlite3.Connection, table: str) -> Label:
    row = conn.execute(
        f"SELECT (SELECT block FROM {table}_data WHERE id = {_STRUCTURE}),"
        f" (SELECT block FROM {table}_data WHERE id = {_AVERAGES}),"
        " (SELECT ticks FROM store_clock WHERE id = 1)"
    ).fetchone()
    return bytes(row[0] or b""), bytes(row[1] or b""), int(row[2] or 0)


def _agrees(held: Postings, label: Label) -> bool:
    """Whether the copy holds as many documents and tokens as FTS5 counts."""
    docs, tokens = averages(label[1])
    return held.docs == docs and held.tokens == tokens
