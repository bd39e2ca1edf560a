"""Names and summaries of topics, without an LLM (and with one, when configured).

A topic's keyphrases are its words weighted by TF-IDF against the whole store
(document frequencies come from the full-text index), with capitalised words
(names, places) counted a little higher. Its name is the best two- or
three-word phrase that occurs in its messages, completed from the top
keyphrases to 2-5 words; its summary is the sentences that cover most of
those keyphrases, each with its speaker, at most ``max_words`` words.

Topics built from other topics (sessions, width-control groups) are named
from their children's keyphrases and summarised as the list of their
children's names.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from arbormem.models import Message
from arbormem.text import analyze, term_of, tokens

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
#: Characters of each message read to name and summarise its topic.
DIGEST_CHARS = 20_000
# Chat filler and generic verbs: frequent in conversation, useless in a topic's name.
_FILLERS = frozenset(
    term
    for word in [
        "yeah",
        "yes",
        "oh",
        "ok",
        "okay",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "really",
        "just",
        "got",
        "get",
        "glad",
        "awesome",
        "great",
        "cool",
        "wow",
        "lol",
        "haha",
        "sure",
        "well",
        "good",
        "nice",
        "totally",
        "definitely",
        "like",
        "sounds",
        "sound",
        "make",
        "made",
        "keep",
        "let",
        "lets",
        "wanna",
        "gonna",
        "think",
        "know",
        "feel",
        "want",
        "love",
        "happy",
        "fun",
        "lot",
        "lots",
        "time",
        "things",
        "thing",
        "way",
        "day",
        "much",
        "also",
        "still",
        "even",
        "always",
        "never",
        "maybe",
        "pretty",
        "amazing",
        "wonderful",
        "especially",
        "need",
        "see",
        "say",
        "said",
        "tell",
        "told",
        "going",
        "go",
        "went",
        "come",
        "came",
        "take",
        "took",
        "look",
        "looks",
        "looking",
        "can't",
        "wait",
        "remind",
        "reminds",
        "super",
        "share",
        "shares",
        "shared",
        "photo",
        "pic",
        "picture",
        "last",
        "next",
        "week",
        "weekend",
        "yesterday",
        "today",
        "tomorrow",
        "recently",
        "year",
        "month",
        "ago",
        "lately",
        "remember",
        "found",
        "find",
        "try",
        "tried",
        "use",
        "used",
    ]
    if (term := term_of(word))
)


# Vague words that name no subject ("Anything New", "Give Others"), matched as
# written (lower case), not by stem: "kindness" and "meaning" stay, and so does a
# word capitalised inside a sentence ("New York", "Little Women").
_VAGUE = frozenset(
    {
        "anything",
        "something",
        "everything",
        "nothing",
        "anyone",
        "someone",
        "everyone",
        "other",
        "others",
        "new",
        "around",
        "together",
        "special",
        "stuff",
        "kind",
        "bit",
        "able",
        "give",
        "gave",
        "giving",
        "bring",
        "brings",
        "brought",
        "felt",
        "sitting",
        "mean",
        "means",
        "meant",
        "seems",
        "doing",
        "else",
        "huge",
        "big",
        "little",
        "whole",
    }
)


@dataclass
class Digest:
    """What naming a topic produces."""

    name: str
    summary: str
    keyphrases: list[str]
    #: term -> weight, kept for naming the topic's parents.
    weights: dict[str, float]


def _idf(df: Mapping[str, int], n_docs: int, term: str) -> float:
    return math.log((n_docs + 1) / (df.get(term, 0) + 1)) + 1.0


@dataclass
class _Analysed:
    """Messages split into sentences of (raw token, term) pairs, computed once."""

    sentences: list[tuple[int, str, list[tuple[str, str | None]]]]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> _Analysed:
        out = []
        for i, m in enumerate(messages):
            # A topic is named from how its messages begin: a pasted megabyte of log
            # would otherwise cost 15-30 times its size in token tuples.
            for sentence in _SENTENCE.split(m.content[:DIGEST_CHARS].strip()):
                if sentence:
                    raw = tokens(sentence)
                    pairs = list(zip(raw, map(_LATER_TERMS.__getitem__, raw)))
                    if pairs:
                        pairs[0] = (raw[0], _term_at(raw[0], True))
                    out.append((i, sentence, pairs))
        return cls(out)


def _term(raw: str, position: int) -> str | None:
    """The term of a token for naming, None for a vague word: one of :data:`_VAGUE`
    written in lower case or opening its sentence ("new", but not "New York")."""
    return _term_at(raw, position == 0)


@lru_cache(maxsize=200_000)
def _term_at(raw: str, first: bool) -> str | None:
    # Every token of every digested message comes here: the same words, over and over.
    if raw.lower() in _VAGUE and (first or not raw[:1].isupper()):
        return None
    return term_of(raw)


class _LaterTerms(dict[str, "str | None"]):
    """``_term_at(raw, False)`` by token, for every token of a sentence but its first:
    looked up through ``map``, a known token costs a fraction of a cached call."""

    def __missing__(self, raw: str) -> str | None:
        if len(self) >= 100_000:
            self.clear()
        term = self[raw] = _term_at(raw, False)
        return term


_LATER_TERMS = _LaterTerms()


def _surface_forms(analysed: _Analysed) -> dict[str, dict[str, int]]:
    """For each term, how it is spelled in the messages (to show words, not stems),
    and how often, in order of first use."""
    forms: dict[str, dict[str, int]] = {}
    for _, _, pairs in analysed.sentences:
        for raw, term in pairs:
            if term:
                counts = forms.get(term)
                if counts is None:
                    counts = forms[term] = {}
                word = raw.strip("'’")
                counts[word] = counts.get(word, 0) + 1
    return forms


def _display(stem: str, forms: Mapping[str, Mapping[str, int]]) -> str:
    counts = forms.get(stem)
    if not counts:
        return stem
    word = max(counts, key=counts.__getitem__)  # the most used; the first of a tie
    # Prefer a capitalised spelling when the word is mostly written that way (a name).
    capital = sum(c for w, c in counts.items() if w[:1].isupper())
    if capital * 2 >= sum(counts.values()) and not word[:1].isupper():
        word = word[:1].upper() + word[1:]
    return word


def term_weights(
    analysed: _Analysed, df: Mapping[str, int], n_docs: int
) -> tuple[dict[str, float], dict[str, dict[str, int]]]:
    forms = _surface_forms(analysed)
    weights: dict[str, float] = {}
    # A term's spellings count its every use, so they give its frequency too; they
    # are in order of first use, the order ties among equal weights keep.
    for term, spellings in forms.items():
        if len(term) < 3 or term in _FILLERS or term.isdigit():
            continue
        count = sum(spellings.values())
        w = (1.0 + math.log(count)) * _idf(df, n_docs, term)
        capital = sum(c for w_, c in spellings.items() if w_[:1].isupper())
        if capital * 2 >= count:
            w *= 1.3
        weights[term] = w
    return weights, forms


def _best_phrase(analysed: _Analysed, weights: Mapping[str, float]) -> tuple[list[str], float]:
    """The highest-weighted run of 2-3 consecutive content words in the messages."""
    best: list[str] = []
    best_score = 0.0
    for _, _, pairs in analysed.sentences:
        run: list[tuple[str, str]] = []
        for raw, term in pairs:
            if term is not None and term in weights:
                run.append((raw, term))
                continue
            if len(run) >= 2:
                best, best_score = _best_in_run(run, weights, best, best_score)
            run = []
        if len(run) >= 2:
            best, best_score = _best_in_run(run, weights, best, best_score)
    return best, best_score


def _best_in_run(
    run: Sequence[tuple[str, str]],
    weights: Mapping[str, float],
    best: list[str],
    best_score: float,
) -> tuple[list[str], float]:
    """The best of ``best`` and the 3- then 2-word chunks of one run of content words
    (a later chunk wins only with a higher score)."""
    for size in (3, 2):
        for i in range(len(run) - size + 1):
            chunk = run[i : i + size]
            if len({t for _, t in chunk}) < size:
                continue
            score = sum(weights[t] for _, t in chunk) / math.sqrt(size)
            if score > best_score:
                best, best_score = [w for w, _ in chunk], score
    return best, best_score


def _title(words: Sequence[str]) -> str:
    return " ".join(w if w[:1].isupper() or w.isupper() else w.capitalize() for w in words)


def name_from(
    ranked: Sequence[str], forms: Mapping[str, Mapping[str, int]], phrase: Sequence[str] = ()
) -> str:
    """A 2-5 word name: the phrase if there is one, completed from the ranked stems."""
    words = list(phrase)[:3]
    used = {t for w in words if (t := term_of(w))}
    for stem in ranked:
        if len(words) >= 3 or (len(words) >= 2 and phrase):
            break
        if stem not in used:
            words.append(_display(stem, forms))
            used.add(stem)
    if len(words) < 2:
        words.append("conversation" if words else "Small talk")
    return _title(words[:5])


def _truncate_words(text: str, max_words: int) -> str:
    words = text.split()
    if len(words) <= max_words:
        return text
    return " ".join(words[:max_words]).rstrip(",;:") + "…"


def digest_messages(
    messages: Sequence[Message],
    df: Mapping[str, int],
    n_docs: int,
    *,
    max_words: int = 60,
    max_keyphrases: int = 8,
) -> Digest:
    """Name, summary and keyphrases of a topic from its own messages."""
    analysed = _Analysed.of(messages)
    weights, forms = term_weights(analysed, df, n_docs)
    # The participants' own names are in every topic of their conversation: they
    # tell topics apart no better than "hello" does.
    for speaker in {m.speaker for m in messages if m.speaker}:
        for word in speaker.split():
            term = term_of(word)
            if term:
                weights.pop(term, None)
    ranked = sorted(weights, key=lambda t: -weights[t])
    top = ranked[:max_keyphrases]
    phrase, _ = _best_phrase(analysed, {t: weights[t] for t in ranked[:20]})
    name = name_from(ranked, forms, phrase)
    keyset = set(top)
    # Each candidate carries its position in the messages, so the chosen sentences
    # are shown in the order they were written.
    scored: list[tuple[float, int, str, set[str]]] = []
    for position, (i, sentence, pairs) in enumerate(analysed.sentences):
        hit = {t for _, t in pairs if t in keyset}
        if not hit:
            continue
        # fsum: the exact sum whatever the order. A set of strings iterates in an order
        # that changes with each process's string hashing, and a plain float sum with
        # it: two sentences of equal weight swapped places, and with them the summary.
        score = math.fsum(weights[t] for t in hit) / math.sqrt(len(pairs) + 4)
        if sentence.lstrip().startswith("["):
            score *= 0.5  # an attachment's caption says less than what was said
        m = messages[i]
        scored.append((score, position, f"{m.speaker or m.role}: {sentence.strip()}", hit))
    chosen: list[tuple[int, str]] = []
    words = 0
    covered: set[str] = set()
    for _, i, sentence, terms in sorted(scored, key=lambda x: -x[0]):
        if terms <= covered and chosen:
            continue
        n = len(sentence.split())
        if chosen and words + n > max_words:
            continue
        chosen.append((i, sentence))
        covered |= terms
        words += n
        if words >= max_words * 0.8 or len(chosen) >= 3:
            break
    summary = (
        " ".join(s for _, s in sorted(chosen))
        if chosen
        else ", ".join(_display(t, forms) for t in top)
    )
    return Digest(
        name=name,
        summary=_truncate_words(summary, max_words),
        keyphrases=[_display(t, forms) for t in top],
        weights={t: weights[t] for t in ranked[:40]},
    )


def digest_children(
    children: Sequence[tuple[str, Sequence[str]]], *, max_words: int = 60, group: bool = False
) -> Digest:
    """Name and summary of a topic made of other topics, from their names and keyphrases.

    A topic is named after its children; a width-control ``group`` (a stretch of
    time rather than a subject) after its first and last child ("Garden Beds to
    Car Repairs").
    """
    weight: dict[str, float] = {}
    display: dict[str, str] = {}
    for _, keyphrases in children:
        for rank, phrase in enumerate(keyphrases):
            for stem in analyze(phrase):
                weight[stem] = weight.get(stem, 0.0) + 1.0 / (1 + rank)
                display.setdefault(stem, phrase)
    ranked = sorted(weight, key=lambda t: -weight[t])
    names = [n for n, _ in children if n]
    # A topic of topics is named after its children: the first two when they fit in
    # five words, else the first (children come in time order).
    distinct = list(dict.fromkeys(names))
    if group and len(distinct) > 2:
        # A stretch of the thread: named by where it starts and ends.
        name = " ".join(distinct[0].split()[:2]) + " to " + " ".join(distinct[-1].split()[:2])
    elif len(distinct) >= 2 and len(f"{distinct[0]} {distinct[1]}".split()) <= 4:
        name = f"{distinct[0]} & {distinct[1]}"
    elif distinct:
        name = distinct[0]
    else:
        name = name_from(ranked, {t: Counter({display[t]: 1}) for t in ranked})
    summary = "Covers: " + "; ".join(dict.fromkeys(names)) + "." if names else ""
    return Digest(
        name=name,
        summary=_truncate_words(summary, max_words),
        keyphrases=[display[t] for t in ranked[:8]],
        weights=dict(weight),
    )


LLM_SUMMARY_PROMPT = (
    "You name and summarise one topic of a conversation for a memory index. "
    'Answer with JSON only: {"name": "<2 to 5 words>", "summary": "<at most %d words: the '
    'facts, decisions, preferences and names a later question could need>"}.'
)


#: Longest topic name an LLM may give, in characters (and longest word in it).
MAX_NAME_CHARS = 60
MAX_NAME_WORD = 24
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean_llm_name(value: Any) -> str:
    """An LLM's topic name as stored: 1-6 words of text, no control characters, no
    markup, not too long. Raises ValueError when it is none of that."""
    if not isinstance(value, str):
        raise ValueError("the name must be a string")
    name = " ".join(_CONTROL.sub(" ", value).split())
    n_words = len(name.split())
    if not 1 <= n_words <= 6:
        raise ValueError(f"name has {n_words} words, expected 2-5 (1-6 are accepted)")
    if len(name) > MAX_NAME_CHARS or max(len(w) for w in name.split()) > MAX_NAME_WORD:
        raise ValueError(f"name {name[:40]!r}... is too long for a topic name")
    if not any(ch.isalnum() for ch in name) or re.search(r"[<>]|&\w+;", name):
        raise ValueError(f"name {name!r} is not plain words")
    return name


def clean_llm_summary(value: Any, max_words: int) -> str:
    """An LLM's summary as stored: no control characters, at most ``max_words`` words
    and eight characters a word."""
    if not isinstance(value, str):
        raise ValueError("the summary must be a string")
    summary = " ".join(_CONTROL.sub(" ", value).split())
    if not summary:
        raise ValueError("summary is empty")
    summary = _truncate_words(summary, max_words)
    if len(summary) > max_words * 8:
        summary = summary[: max_words * 8 - 1].rstrip() + "…"
    return summary


def validate_digest(max_words: int) -> Callable[[Any], tuple[str, str]]:
    """A validator for an LLM's naming answer (raises ValueError when unusable)."""

    def check(value: Any) -> tuple[str, str]:
        if not isinstance(value, Mapping):
            raise ValueError("answer is not a JSON object")
        return clean_llm_name(value.get("name")), clean_llm_summary(value.get("summary"), max_words)

    return check
