"""The evidence recall weighs for each candidate turn.

For a question, :class:`Question` holds what the question itself says: its
terms, the names of the thread's speakers it mentions, the date ranges it
refers to, and its type (when, how many, who/where). For a set of candidate
turns, :func:`compute` returns one value per candidate for each feature in
:data:`FEATURES`:

==============  ==================================================================
``bm_t``        BM25 of the turn (k1 0.9, b 0.4; SQLite FTS5 only finds candidates)
``bm_w``        BM25 of the turn with two neighbours on each side (same session)
``bm_prev``     BM25 of the turn before, and ``bm_next`` of the one after
``sess_max``    the best ``bm_t`` among the candidates of the same session
``cov_t``       IDF-weighted share of the question's terms the turn contains
``cov_w``       the same for the turn's window
``de_t``        cosine of the question with the turn's vector
``de_w``        ... with the turn's window vector (itself plus half its neighbours)
``de_s``        ... with its session's mean vector
``spk``         1 when the turn's speaker is named in the question
``temp``        closeness of the turn's date to a date range the question names
``when_time``   a "when" question and a turn that states a time
``num_count``   a "how many/much/long/often" question and a turn with a number
``cap_who``     a "who/where/which" question and a turn with a proper name
``first``       the turn opens its session
``len``         log(1 + number of terms) of the turn
``bm_pair``     BM25 of the question's adjacent term pairs in the turn's window (phrases)
``bm_topic``    BM25 of the content of the turn's topic (topic tree)
``bm_sess``     BM25 of the content of the turn's session topic (topic tree)
``cov_topic``   share of the question's terms in the turn's topic (topic tree)
``cov_sess``    ... in its session's topic (topic tree)
==============  ==================================================================

The scores that depend on the query's scale (BM25, cosine) are divided by
their largest value among the candidates (:data:`MAXNORM`), so weights carry
over from one question to the next.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from functools import lru_cache
from itertools import pairwise, repeat
from typing import NamedTuple, cast

import numpy as np

from arbormem.aliases import in_own_words, replace_aliases
from arbormem.recall.termstats import TermStats
from arbormem.store.types import Row, Thread
from arbormem.text import analyze, pairs, query_terms, words
from arbormem.timeexpr import DateRange, closeness, find_ranges

FEATURES: tuple[str, ...] = (
    "bm_t", "bm_w", "bm_prev", "bm_next", "sess_max", "cov_t", "cov_w",
    "de_t", "de_w", "de_s", "spk", "temp", "when_time", "num_count", "cap_who",
    "first", "len", "bm_pair", "bm_topic", "bm_sess", "cov_topic", "cov_sess",
)  # fmt: skip
#: Features that need the topic tree (zero when it is off).
TREE_FEATURES = ("bm_topic", "bm_sess", "cov_topic", "cov_sess")
MAXNORM = frozenset(
    {
        "bm_t",
        "bm_w",
        "bm_prev",
        "bm_next",
        "sess_max",
        "de_t",
        "de_w",
        "de_s",
        "bm_topic",
        "bm_sess",
        "bm_pair",
    }
)

K1 = 0.9
B = 0.4
WINDOW = 2

_NUMBER = re.compile(
    r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|thousand|once|twice|dozen|first|second|third)\b",
    re.IGNORECASE,
)
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}")
_TIME = re.compile(
    r"\b(yesterday|today|tomorrow|tonight|ago|recently|last (?:week|weekend|month|year|night|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|next (?:week|weekend|month|year)|"
    r"this (?:week|weekend|month|year|morning)|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"(?:19|20)\d\d)\b",
    re.IGNORECASE,
)


@dataclass
class Question:
    """What a question says about the answer it wants."""

    text: str
    terms: list[str]
    names: set[str] = field(default_factory=set)
    #: The question with the names people call the speakers by replaced by the
    #: speakers' own ("Kate" -> "Emi"): what its terms are read from.
    search_text: str = ""
    #: What its vector is made from: the question in the words of the speaker it
    #: names (see :func:`arbormem.aliases.in_own_words`).
    dense_text: str = ""
    pairs: list[str] = field(default_factory=list)
    ranges: list[DateRange] = field(default_factory=list)
    when: bool = False
    count: bool = False
    who: bool = False
    #: Set by the retriever: whether the dense features came from the deep
    #: embedder's vectors (:mod:`arbormem.deep`), which have weights of their own.
    deep: bool = False

    @classmethod
    def parse(
        cls,
        text: str,
        speakers: Sequence[str] = (),
        now: datetime | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> Question:
        """Read a question; ``aliases`` maps other names (lower case) to speakers'
        (see :mod:`arbormem.aliases`)."""
        low = text.lower().strip()
        search = replace_aliases(text, aliases or {})
        tokens = set(words(search))
        names = {s for s in speakers if s and (said := _name_words(s)) and said <= tokens}
        return cls(
            text=text,
            search_text=search,
            dense_text=in_own_words(search, sorted(names)),
            terms=query_terms(search),
            pairs=list(dict.fromkeys(pairs(analyze(search)))),
            names=names,
            ranges=find_ranges(text, now),
            when=low.startswith("when")
            or " when " in low
            or "how long ago" in low
            or "what date" in low
            or "what year" in low
            or "what month" in low,
            count=any(p in low for p in ("how many", "how much", "how long", "how often")),
            who=low.startswith(("who", "where", "which")) or " which " in low or " who " in low,
        )


# Every search of a thread reads its speakers' and people's names again (dozens in a
# long thread): their words are split once.
@lru_cache(maxsize=65_536)
def _name_words(name: str) -> frozenset[str]:
    """The distinct words of a name, as :func:`~arbormem.text.words` reads them."""
    return frozenset(words(name))


class BM25:
    """BM25 over documents given as term lists, with store-wide statistics."""

    def __init__(
        self, df: Mapping[str, int], n_docs: int, avgdl: float, k1: float = K1, b: float = B
    ) -> None:
        self.k1, self.b = k1, b
        self.avgdl = avgdl or 1.0
        n = max(n_docs, 1)
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self._idf_total = sum(self.idf.values())

    def score(self, tf: Mapping[str, int], length: int) -> float:
        """BM25 of a document given the frequencies of the query's terms in it."""
        norm = self.k1 * (1.0 - self.b + self.b * length / self.avgdl)
        total = 0.0
        for t, f in tf.items():
            total += self.idf.get(t, 0.0) * f * (self.k1 + 1.0) / (f + norm)
        return total

    def coverage(self, tf: Mapping[str, int]) -> float:
        """IDF-weighted share of the query's terms the document contains."""
        if not self._idf_total:
            return 0.0
        return sum(self.idf.get(t, 0.0) for t in tf) / self._idf_total

    def scores(self, tf: np.ndarray, lengths: np.ndarray, terms: Sequence[str]) -> np.ndarray:
        """:meth:`score` of many documents at once: ``tf`` holds one row per document,
        one column per term of ``terms``; ``lengths`` the documents' lengths."""
        norm = self.k1 * (1.0 - self.b + self.b * lengths / self.avgdl)
        total = np.zeros(len(tf), dtype=np.float64)
        # Term by term, as :meth:`score` adds them; a term a document lacks adds
        # exactly 0 (norm is positive), so every row takes the same steps.
        for j, t in enumerate(terms):
            f = tf[:, j]
            total += self.idf.get(t, 0.0) * f * (self.k1 + 1.0) / (f + norm)
        return total

    def coverages(self, tf: np.ndarray, terms: Sequence[str]) -> np.ndarray:
        """:meth:`coverage` of many documents at once (``tf`` as for :meth:`scores`)."""
        total = np.zeros(len(tf), dtype=np.float64)
        if not self._idf_total:
            return total
        for j, t in enumerate(terms):
            total += self.idf.get(t, 0.0) * (tf[:, j] > 0)
        return total / self._idf_total


def _bm25(stats: TermStats, key: str, terms: Sequence[str]) -> BM25:
    n_docs, avgdl = stats.lexical_stats(key)
    df = stats.doc_frequencies(key, terms)
    return BM25({t: df.get(t, 0) for t in terms}, n_docs, avgdl)


def _bm25_pairs(stats: TermStats, pairs: Sequence[str]) -> BM25:
    """BM25 of term pairs in windows. A window's length in terms stands in for its
    number of pairs: the two differ by about one per turn, in every window alike."""
    n_docs, avgdl = stats.lexical_stats("window")
    df = stats.pair_frequencies(pairs)
    return BM25({p: df.get(p, 0) for p in pairs}, n_docs, avgdl)


@dataclass
class Candidates:
    """Candidate turns with what their features need."""

    rowids: list[int]
    rows: dict[int, Row]
    thread_of: dict[int, Thread]
    #: Each candidate's session neighbourhood, as :meth:`Backend.around` returns it.
    around: dict[int, Sequence[tuple[int, int, str]]]


@dataclass
class RowVectors:
    """Vectors by row id: the vector of ``rowid`` is row ``at[rowid]`` of ``matrix``.

    One matrix, not a vector per row, so features pick many rows in one step."""

    at: dict[int, int] = field(default_factory=dict)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    @classmethod
    def of(cls, vectors: Mapping[int, np.ndarray]) -> RowVectors:
        """The table of a mapping from row id to vector."""
        if not vectors:
            return cls()
        return cls(
            {r: i for i, r in enumerate(vectors)},
            np.stack(list(vectors.values())).astype(np.float32),
        )

    def pick(self, rowids: Sequence[int | None], dim: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of ``rowids`` row for row (zero where a row has none, or is
        None), and the mask of those that have one."""
        # (None is never a key: a missing row and no row both give -1.)
        at = cast("dict[int | None, int]", self.at)
        idx = np.fromiter(map(at.get, rowids, repeat(-1)), np.int64, len(rowids))
        present = idx >= 0
        out = np.zeros((len(rowids), dim), dtype=np.float32)
        if present.any():
            out[present] = self.matrix[idx[present]]
        return out, present


class Shape(NamedTuple):
    """What a turn's neighbourhood says whatever the question."""

    #: The row ids of the neighbourhood, in thread order.
    rids: tuple[int, ...]
    #: The turn's place among them (-1 when it is not there).
    pos: int
    #: The turn and those just before and after it (positions one off), whose
    #: vectors the dense features read.
    near: tuple[int, ...]
    #: Whether the turn opens its session (no earlier turn in the neighbourhood).
    opens: bool


#: A :class:`Shape`'s fields as a plain tuple.
_ShapeFields = tuple[tuple[int, ...], int, tuple[int, ...], bool]


class DocStats:
    """Full-text documents split into terms, kept between searches.

    A document here is one turn's analysed terms (the text :meth:`Backend.around`
    returns). The same text always gives the same terms, so entries never go
    stale; the cache only bounds its size.
    """

    def __init__(self, max_docs: int = 200_000) -> None:
        self.max_docs = max_docs
        self._docs: dict[str, tuple[str, ...]] = {}
        #: Per document, how often each of its terms occurs in it, and its length.
        #: Two mappings, not one of (length, counts) pairs: a dict of strings and
        #: numbers is left out of the garbage collector's view, a tuple holding a
        #: dict never is, and at a million turns the pairs were a third of a full
        #: collection's time (docs/postgres.md, "Where the slowest searches go").
        self.kept_counts: dict[str, dict[str, int]] = {}
        self.kept_lengths: dict[str, int] = {}
        #: Per turn content, which of :data:`_TESTS` were made (bit 2i) and held (bit
        #: 2i + 1): one small number a turn, whatever was asked of it.
        self._says: dict[str, int] = {}
        #: Per row id, its neighbourhood (the object), its position and its shape's
        #: fields. A plain tuple of numbers leaves the garbage collector's view; a
        #: named tuple (a subclass) never does, nor does the entry holding one.
        self._shapes: dict[int, tuple[Sequence[tuple[int, int, str]], int, _ShapeFields]] = {}

    def get(self, text: str) -> tuple[str, ...]:
        """The terms in order."""
        found = self._docs.get(text)
        if found is None:
            if len(self._docs) >= self.max_docs:
                self._docs.clear()
            # A tuple of strings leaves the garbage collector's view (a list never
            # does): at 200,000 documents each full collection took 50 ms more.
            found = tuple(text.split())
            self._docs[text] = found
        return found

    def counts(self, text: str) -> tuple[int, dict[str, int]]:
        """The document's length in terms and each term's count in it: a query term's
        frequency is then one look-up, where counting it in the terms read them all
        (long messages of real chats made that a large share of a search)."""
        tally = self.kept_counts.get(text)
        size = self.kept_lengths.get(text)
        if tally is None or size is None:
            if len(self.kept_counts) >= self.max_docs:
                self.kept_counts.clear()
                self.kept_lengths.clear()
            toks = text.split()
            tally = {}
            for t in toks:
                tally[t] = tally.get(t, 0) + 1
            size = self.kept_lengths[text] = len(toks)
            self.kept_counts[text] = tally
        return size, tally

    def shape(self, rowid: int, index: int, neighbourhood: Sequence[tuple[int, int, str]]) -> Shape:
        """What a turn's neighbourhood says whatever the question (see :class:`Shape`);
        ``index`` is the turn's position in its thread. Kept for the neighbourhood
        object itself (the one :class:`~arbormem.recall.reads.SearchReads` hands every
        search while the searched threads are unchanged, a new one after any change):
        another object, even an equal one, is read again."""
        found = self._shapes.get(rowid)
        if found is not None and found[0] is neighbourhood and found[1] == index:
            return Shape._make(found[2])
        if len(self._shapes) >= self.max_docs:
            self._shapes.clear()
        rids = tuple([rid for rid, _, _ in neighbourhood])
        made = Shape(
            rids,
            rids.index(rowid) if rowid in rids else -1,
            tuple([rid for rid, idx, _ in neighbourhood if index - 1 <= idx <= index + 1]),
            # (A neighbourhood is in thread order: its first turn is its earliest.)
            bool(neighbourhood) and neighbourhood[0][1] >= index,
        )
        self._shapes[rowid] = (neighbourhood, index, (made.rids, made.pos, made.near, made.opens))
        return made

    def says(self, kind: str, content: str) -> bool:
        """Whether a turn's content states a time (``when``), holds a number
        (``count``) or a proper name (``who``): the searches of a conversation
        test the same turns again and again."""
        i = _TESTS.index(kind)
        bits = self._says.get(content, 0)
        if not bits >> (2 * i) & 1:
            if not bits and len(self._says) >= self.max_docs:
                self._says.clear()
            held = _TEST_OF[kind](content)
            bits |= (1 | held << 1) << (2 * i)
            self._says[content] = bits
        return bool(bits >> (2 * i + 1) & 1)


def _found(pattern: re.Pattern[str], lowered: re.Pattern[str], text: str) -> bool:
    """Whether ``pattern`` (case-insensitive, its letters lower-case ASCII) matches
    in ``text``, found by ``lowered`` (the same pattern, case-sensitive) in the text
    lowered when that gives the same answer: three times faster on long messages.

    It does when each of the text's characters beyond ASCII has no case at all
    (emoji, most punctuation): lowering then changes only A-Z, keeps every
    position a word character or not, and the only characters a case-insensitive
    ASCII letter matches besides itself in either case (the Kelvin sign, the long s,
    the dotless i...) all have a case, so they take the slow path."""
    if text.isascii() or all(c.lower() == c == c.upper() for c in set(text) if not c.isascii()):
        return lowered.search(text.lower()) is not None
    return pattern.search(text) is not None


_TIME_LOWERED = re.compile(_TIME.pattern)
_NUMBER_LOWERED = re.compile(_NUMBER.pattern)

#: What :meth:`DocStats.says` can test a turn's content for.
_TESTS = ("when", "count", "who")
_TEST_OF = {
    "when": lambda content: _found(_TIME, _TIME_LOWERED, content),
    "count": lambda content: _found(_NUMBER, _NUMBER_LOWERED, content),
    "who": lambda content: _PROPER.search(content[1:]) is not None,
}


def features(
    stats: TermStats,
    question: Question,
    cands: Candidates,
    qvec: np.ndarray | None,
    vector_of: RowVectors,
    centroid_of: RowVectors,
    tree: Mapping[int, Mapping[str, float]] | None = None,
    docs: DocStats | None = None,
) -> np.ndarray:
    """One row per candidate, one column per name in :data:`FEATURES`."""
    ids = cands.rowids
    n = len(ids)
    X = np.zeros((n, len(FEATURES)), dtype=np.float32)
    if n == 0:
        return X
    docs = docs or DocStats()
    # The query's distinct terms in one fixed order: BM25 sums each document's terms
    # in it (the order the per-document sums always used, so scores stay as they were).
    qterms = list(set(question.terms))
    around = cands.around
    bm_turn = _bm25(stats, "turn", question.terms)
    bm_win = _bm25(stats, "window", question.terms)
    qpairs = set(question.pairs)
    # Each document of the neighbourhoods once, numbered in the order first met: row d
    # of ``tf`` holds the query terms' frequencies in document d; the last row stands
    # for "no document" (all zero).
    text_of = {rid: text for neighbourhood in around.values() for rid, _, text in neighbourhood}
    slot = {rid: d for d, rid in enumerate(text_of)}
    # (The kept counts looked up here, the method only for those not kept: a call
    # for each of a search's few hundred documents cost more than the look-up.)
    kept_counts, kept_lengths = docs.kept_counts, docs.kept_lengths
    tallies: list[dict[str, int]] = []
    lengths: list[int] = []
    for text in text_of.values():
        tally = kept_counts.get(text)
        size = kept_lengths.get(text)
        if tally is None or size is None:
            size, tally = docs.counts(text)
        tallies.append(tally)
        lengths.append(size)
    n_docs = len(lengths)
    tf = np.zeros((n_docs + 1, len(qterms)), dtype=np.float64)
    # Most documents hold none of the query's terms: only those that do are looked
    # at term by term (a set test of each document is a fraction of a look-up of
    # every term in every document), and their counts set in one step.
    column = {t: j for j, t in enumerate(qterms)}
    wanted = column.keys()
    at_doc: list[int] = []
    at_term: list[int] = []
    held_counts: list[int] = []
    pair_counts: dict[int, dict[str, int]] = {}
    for d, (text, tally) in enumerate(zip(text_of.values(), tallies)):
        if wanted.isdisjoint(tally):
            continue
        held = wanted & tally.keys()
        for t in held:
            at_doc.append(d)
            at_term.append(column[t])
            held_counts.append(tally[t])
        if not qpairs or len(held) < 2:
            continue
        # A query pair joins two query terms: only those positions can match.
        pc: dict[str, int] = {}
        for a, b in pairwise(docs.get(text)):
            if a in held and b in held and a != b:
                pr = f"{a}_{b}"
                if pr in qpairs:
                    pc[pr] = pc.get(pr, 0) + 1
        if pc:
            pair_counts[d] = pc
    if at_doc:
        tf[at_doc, at_term] = held_counts
    doc_len = np.zeros(n_docs + 1, dtype=np.float64)
    doc_len[:n_docs] = lengths
    turn_score = bm_turn.scores(tf, doc_len, qterms)
    # Candidates' neighbourhoods as rows of document slots, padded with "no document".
    width = max(max((len(around.get(r, ())) for r in ids), default=0), 1)
    # Python lists filled in the loop, arrays at the end: a numpy item set costs more.
    # The slots of the candidates' neighbourhoods one after the other, ``width`` each.
    member_slots: list[int] = []
    own_at = [n_docs] * n
    prev_at = [n_docs] * n
    next_at = [n_docs] * n
    prev_ids: list[int | None] = [None] * n
    next_ids: list[int | None] = [None] * n
    opens = [0.0] * n
    padding = [n_docs] * width
    shape_of = docs.shape
    rows = cands.rows
    for i, rowid in enumerate(ids):
        neighbourhood = around.get(rowid)
        if not neighbourhood:
            member_slots += padding
            continue
        rids, pos, _, opens_session = shape_of(rowid, rows[rowid].message.index, neighbourhood)
        member_slots += map(slot.__getitem__, rids)
        member_slots += padding[len(rids) :]
        if rowid in slot:
            own_at[i] = slot[rowid]
        if pos >= 0:
            if pos > 0:
                prev_ids[i] = rids[pos - 1]
                prev_at[i] = slot[rids[pos - 1]]
            if pos + 1 < len(rids):
                next_ids[i] = rids[pos + 1]
                next_at[i] = slot[rids[pos + 1]]
        if opens_session:
            opens[i] = 1.0
    members = np.asarray(member_slots, dtype=np.int64).reshape(n, width)
    own = np.asarray(own_at, dtype=np.int64)
    prev = np.asarray(prev_at, dtype=np.int64)
    nxt = np.asarray(next_at, dtype=np.int64)
    first = np.asarray(opens, dtype=np.float64)
    win_tf = tf[members].sum(axis=1)
    win_len = doc_len[members].sum(axis=1)
    col = FEATURES.index
    X[:, col("bm_t")] = turn_score[own]
    X[:, col("bm_w")] = bm_win.scores(win_tf, win_len, qterms)
    X[:, col("bm_prev")] = turn_score[prev]
    X[:, col("bm_next")] = turn_score[nxt]
    X[:, col("cov_t")] = bm_turn.coverages(tf[own], qterms)
    X[:, col("cov_w")] = bm_win.coverages(win_tf, qterms)
    X[:, col("first")] = first
    X[:, col("len")] = np.log1p(doc_len[own])
    # Only the pairs some candidate holds need a frequency (a phrase count each).
    found_pairs = sorted({p for pc in pair_counts.values() for p in pc})
    if found_pairs:
        bm_pairs = _bm25_pairs(stats, found_pairs)
        ptf = np.zeros((n_docs + 1, len(found_pairs)), dtype=np.float64)
        pcol = {p: j for j, p in enumerate(found_pairs)}
        for d, pc in pair_counts.items():
            for p, c in pc.items():
                ptf[d, pcol[p]] = c
        X[:, col("bm_pair")] = bm_pairs.scores(ptf[members].sum(axis=1), win_len, found_pairs)
    bm_t = turn_score[own].tolist()
    messages = [cands.rows[rowid].message for rowid in ids]
    session_best: dict[tuple[int, str], float] = {}
    thread_of = cands.thread_of
    keys = [(thread_of[rowid].id, m.session) for rowid, m in zip(ids, messages)]
    for key, score in zip(keys, bm_t):
        session_best[key] = max(session_best.get(key, 0.0), score)
    X[:, col("sess_max")] = [session_best[key] for key in keys]
    names, ranges = question.names, question.ranges
    if names:
        X[:, col("spk")] = [1.0 if m.speaker in names else 0.0 for m in messages]
    if ranges:
        # A turn's closeness depends on its day alone (in UTC): one per day.
        by_day: dict[date, float] = {}
        temp = []
        for m in messages:
            day = m.timestamp.astimezone(timezone.utc).date()
            near = by_day.get(day)
            if near is None:
                near = by_day[day] = closeness(m.timestamp, ranges)
            temp.append(near)
        X[:, col("temp")] = temp
    for name, kind, asked in (
        ("when_time", "when", question.when),
        ("num_count", "count", question.count),
        ("cap_who", "who", question.who),
    ):
        if asked:
            X[:, col(name)] = [1.0 if docs.says(kind, m.content) else 0.0 for m in messages]
    if tree:
        # The four columns in one step, each candidate's values read by one map.
        empty: Mapping[str, float] = {}
        zeros = [0.0] * len(TREE_FEATURES)
        # (One flat list made an array: numpy reads a list of lists row by row.)
        flat = [
            value
            for rowid in ids
            for value in map((tree.get(rowid) or empty).get, TREE_FEATURES, zeros)
        ]
        X[:, [col(name) for name in TREE_FEATURES]] = np.asarray(flat, dtype=np.float64).reshape(
            n, len(TREE_FEATURES)
        )
    if qvec is not None:
        _dense_features(X, ids, prev_ids, next_ids, qvec, vector_of, centroid_of)
    for name in MAXNORM:
        j = col(name)
        top = float(X[:, j].max())
        if top > 0:
            X[:, j] = np.maximum(X[:, j], 0) / top
        else:
            X[:, j] = 0.0
    return X


def _dense_features(
    X: np.ndarray,
    ids: Sequence[int],
    prev_ids: Sequence[int | None],
    next_ids: Sequence[int | None],
    qvec: np.ndarray,
    vector_of: RowVectors,
    centroid_of: RowVectors,
) -> None:
    """Fill ``de_t`` (the turn's cosine), ``de_w`` (the turn with half of each
    neighbour's vector) and ``de_s`` (the session centroid's cosine), all at once.
    ``centroid_of`` holds each candidate's session centroid under its row id."""
    dim = len(qvec)
    n = len(ids)
    # The three picks as one: a gather of three times the rows costs less.
    picked, has = vector_of.pick([*ids, *prev_ids, *next_ids], dim)
    own, prev, nxt = picked[:n], picked[n : 2 * n], picked[2 * n :]
    has_own = has[:n]
    total = own + 0.5 * prev
    total += 0.5 * nxt
    norms = np.linalg.norm(total, axis=1)
    ok = has_own & (norms > 0)
    X[has_own, FEATURES.index("de_t")] = own[has_own] @ qvec
    X[ok, FEATURES.index("de_w")] = (total[ok] @ qvec) / norms[ok]
    centroids, has_centroid = centroid_of.pick(ids, dim)
    X[has_centroid, FEATURES.index("de_s")] = centroids[has_centroid] @ qvec
