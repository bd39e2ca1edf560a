"""Lexical analysis shared by indexing and querying.

Text becomes a list of *terms*: lower-cased words with possessives and
apostrophes folded, English stop words dropped, Snowball-stemmed, numbers kept
as they are. The same analyser runs on stored messages and on queries, and on
every storage back-end, so BM25 scores mean the same thing everywhere.

People write chat informally, so words are evened out first: stretched letters
are shrunk ("sooooo" is "so", "goooood" is "good"), common chat shorthand is
spelt out ("bf" is "boyfriend", "rn" is "right now", "bday" is "birthday"),
contractions written without their apostrophe ("cant", "wouldve") and chat
fillers ("lol", "haha", "yeah", "hmm") are stop words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

import Stemmer

# A generic English stop-word list (function words, auxiliaries, pronouns).
STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren",
        "arent",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "couldn",
        "couldnt",
        "d",
        "did",
        "didn",
        "didnt",
        "do",
        "does",
        "doesn",
        "doesnt",
        "doing",
        "don",
        "dont",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn",
        "hadnt",
        "has",
        "hasn",
        "hasnt",
        "have",
        "haven",
        "havent",
        "having",
        "he",
        "hed",
        "hell",
        "hes",
        "her",
        "here",
        "heres",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "hows",
        "i",
        "id",
        "ill",
        "im",
        "ive",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "isnt",
        "it",
        "its",
        "itself",
        "just",
        "ll",
        "lets",
        "m",
        "me",
        "more",
        "most",
        "mustn",
        "mustnt",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "o",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "re",
        "s",
        "same",
        "shan",
        "shant",
        "she",
        "shed",
        "shell",
        "shes",
        "should",
        "shouldn",
        "shouldnt",
        "so",
        "some",
        "such",
        "t",
        "than",
        "that",
        "thats",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "theres",
        "these",
        "they",
        "theyd",
        "theyll",
        "theyre",
        "theyve",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "ve",
        "very",
        "was",
        "wasn",
        "wasnt",
        "we",
        "wed",
        "well",
        "were",
        "weren",
        "werent",
        "weve",
        "what",
        "whats",
        "when",
        "whens",
        "where",
        "wheres",
        "which",
        "while",
        "who",
        "whos",
        "whom",
        "why",
        "whys",
        "will",
        "with",
        "won",
        "wont",
        "would",
        "wouldn",
        "wouldnt",
        "y",
        "you",
        "youd",
        "youll",
        "your",
        "youre",
        "yours",
        "yourself",
        "yourselves",
        "youve",
        # Contractions as chat writes them, without the apostrophe.
        "aint",
        "cant",
        "couldve",
        "itll",
        "mightve",
        "mustve",
        "shouldve",
        "thatll",
        "wouldve",
        "yall",
        # Chat fillers: they answer, laugh or hesitate, and say nothing to search for.
        "ah",
        "haha",
        "hahaha",
        "hehe",
        "hm",
        "hmm",
        "kinda",
        "lmao",
        "lol",
        "nope",
        "oh",
        "ok",
        "okay",
        "omg",
        "sorta",
        "uh",
        "um",
        "umm",
        "wow",
        "ya",
        "yea",
        "yeah",
        "yep",
        "yup",
        "gonna",
        "wanna",
        "gotta",
    ]
)

#: Chat shorthand and the words it stands for (looked up after stretched letters
#: are shrunk). Only forms that are not ordinary English words themselves.
SHORTHAND: dict[str, tuple[str, ...]] = {
    "u": ("you",),
    "ur": ("your",),
    "r": ("are",),
    "rn": ("right", "now"),
    "bf": ("boyfriend",),
    "gf": ("girlfriend",),
    "bff": ("best", "friend"),
    "bday": ("birthday",),
    "pic": ("picture",),
    "pics": ("pictures",),
    "fav": ("favorite",),
    "fave": ("favorite",),
    "favs": ("favorites",),
    "bc": ("because",),
    "cuz": ("because",),
    "coz": ("because",),
    "tho": ("though",),
    "thru": ("through",),
    "ppl": ("people",),
    "pls": ("please",),
    "plz": ("please",),
    "thx": ("thanks",),
    "idk": ("know",),
    "tbh": ("honest",),
    "imo": ("opinion",),
    "btw": (),
    "tmrw": ("tomorrow",),
    "tmr": ("tomorrow",),
    "yday": ("yesterday",),
    "tonite": ("tonight",),
    "nite": ("night",),
    "b4": ("before",),
    "gr8": ("great",),
    "msg": ("message",),
    "convo": ("conversation",),
    "hw": ("homework",),
    "hrs": ("hours",),
    "mins": ("minutes",),
}

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_APOSTROPHE = re.compile(r"['’]")
#: A letter written three times or more in a row ("sooo"): no English word has one.
_STRETCHED = re.compile(r"([^\W\d_])\1{2,}")
#: Letters English doubles ("good", "feel", "all"): a stretched run of one of them
#: inside a word shrinks to two, of any other to one ("waaay" is "way").
_DOUBLED = frozenset("bcdefglmnoprstz")

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    stem: str = _stemmer.stemWord(word)
    return stem


def _fold(text: str) -> str:
    # NFKC folds ligatures and full-width forms so they match their plain spellings.
    return unicodedata.normalize("NFKC", text).lower()


def words(text: str) -> list[str]:
    """Lower-cased word tokens with possessives removed, stretched letters shrunk and
    chat shorthand spelt out, before stop words and stemming."""
    # ASCII text is its own NFKC form, and without apostrophes no token needs fixing.
    folded = text.lower() if text.isascii() else _fold(text)
    if "'" not in folded and "’" not in folded:
        found = _TOKEN.findall(folded)
    else:
        found = []
        for token in _TOKEN.findall(folded):
            if "'" in token or "’" in token:  # most tokens have none: no pattern to run
                if token.endswith(("'s", "’s")):
                    token = token[:-2]
                token = token.replace("'", "").replace("’", "")
            found.append(token)
    if SHORTHAND.keys().isdisjoint(found) and not _STRETCHED.search(" ".join(found)):
        return found
    out: list[str] = []
    for token in found:
        out.extend(_informal(token))
    return out


def _shrink(match: re.Match[str]) -> str:
    letter = match.group(1)
    at_end = match.end() == len(match.string)
    return letter * 2 if letter in _DOUBLED and not at_end else letter


def _informal(token: str) -> tuple[str, ...]:
    """The words a chat token stands for: ``sooooo`` -> ``so``, ``rn`` -> ``right now``."""
    if _STRETCHED.search(token):
        token = _STRETCHED.sub(_shrink, token)
    return SHORTHAND.get(token, (token,))


@lru_cache(maxsize=200_000)
def term_of(token: str) -> str | None:
    """The index term of one raw word token (None for a stop word; the first term of
    shorthand that stands for several words)."""
    word = _fold(token)
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    word = _APOSTROPHE.sub("", word)
    for part in _informal(word) if word else ():
        if part not in STOPWORDS:
            return part if part.isdigit() else _stem(part)
    return None


def tokens(text: str) -> list[str]:
    """Raw word tokens of ``text`` as written (case kept), for display purposes."""
    return _TOKEN.findall(text)


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` in order, repeated as often as they occur.

    >>> analyze("Caroline's painting classes were amazing!")
    ['carolin', 'paint', 'class', 'amaz']
    """
    return list(_analyzed(text))


def analyze_message(content: str, speaker: str | None = None) -> list[str]:
    """Index terms of a message as it is indexed, ``speaker: content``.

    The same as ``analyze(f"{speaker}: {content}")`` (the colon and space end any
    word), taken as the speaker's terms then the content's, so the content's own
    analysis, which the topic tree reads too, is computed once and cached.
    """
    if not speaker:
        return analyze(content)
    return [*_analyzed(speaker), *_analyzed(content)]


class _Terms(dict[str, str]):
    """The term of each word that is not a stop word (itself for a number), by word:
    looked up through ``map``, a known word costs less than a cached call."""

    def __missing__(self, word: str) -> str:
        if len(self) >= 200_000:
            self.clear()
        term = self[word] = word if word.isdigit() else _stem(word)
        return term


_TERMS = _Terms()


@lru_cache(maxsize=4096)
def _analyzed(text: str) -> tuple[str, ...]:
    # A message is analysed by several stages of one add (its keys, the topic
    # decision, the topic's digest): the cache makes that one pass.
    return tuple(map(_TERMS.__getitem__, [w for w in words(text) if w not in STOPWORDS]))


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, in first-seen order."""
    return list(dict.fromkeys(analyze(text)))


def pairs(terms: Sequence[str]) -> list[str]:
    """Adjacent term pairs (``support_group``): the phrase key of the index."""
    return [f"{a}_{b}" for a, b in pairwise(terms) if a != b]


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression OR-ing the given terms, each quoted."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    return " OR ".join(quoted)
