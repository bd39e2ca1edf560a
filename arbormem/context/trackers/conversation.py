"""The conversation mode's tracker: topics and entities."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arbormem.context.trackers.base import Said, Tracker
from arbormem.context.trackers.common import (
    AMOUNT,
    MONTH,
    bullets,
    json_object,
    json_strings,
    norm,
    prose,
    remember,
    saved_texts,
    sentences,
    words,
)
from arbormem.text import STOPWORDS, term_of

# Words that make poor topics: chat filler, vague nouns, common verbs.
_FILLER_WORDS = words(
    """
yeah yes yep nope okay ok hey hi hello thanks thank please sorry sure well oh wow lol haha
really actually basically probably definitely totally honestly literally maybe perhaps also
just still even always never pretty quite much many lot lots bit little kind sort stuff
thing things something anything everything nothing someone anyone everyone way time times
day days today tomorrow yesterday week weeks month months year years morning evening night
tonight weekend moment minute minutes hour hours ago lately recently soon later last next
first new good great nice cool awesome amazing wonderful fine bad right wrong sounds sound
glad happy think thought know knew want wanted need needed like liked love loved feel felt
guess mean meant see saw look looked looking seem seems make made get got getting go going
gone went come came take took give gave tell told say said ask asked let lets try tried use
used keep kept put help wonder wondering hope hoped remember forgot find found show told
gonna wanna able idea question questions answer point example fact part case lot reason
interested curious sure recommend suggest explain understand mind able different same other
another near around via across along within without toward towards upon onto maybe etc
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
    """
)
_FILLER = frozenset(_FILLER_WORDS) | frozenset(t for w in _FILLER_WORDS if (t := term_of(w)))
_PHRASE_BREAK = re.compile(r"[^\w\s'’-]+|\s[-–—]+\s|\n")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")

_DATE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}\.?(?:,?\s+\d{{4}})?"
    rf"|{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|{MONTH}\s+\d{{4}}"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})\b"
)
_UPPER, _LOWER = "A-ZÀ-ÖØ-Þ", "a-zß-öø-ÿ"
_CAP = (
    rf"(?:[{_UPPER}][{_LOWER}]+(?:['’]s)?(?:-[{_UPPER}]?[{_LOWER}]+)*"
    rf"|[{_UPPER}][{_LOWER}]*[{_UPPER}][{_UPPER}{_LOWER}]*|[{_UPPER}]{{2,6}}s?)"
)
_CONNECTORS = words("of de da do dos das di del della van von der den du la le &")
_NAME = re.compile(
    rf"(?<![\w'’.@/\\-]){_CAP}"
    rf"(?:(?:[ \t]+(?:{'|'.join(sorted(_CONNECTORS))})[ \t]+|[ \t]+){_CAP})*"
    r"(?![\w@/\\]|\.\w)"
)
# Words that open sentences often and names rarely: at the start of a sentence a
# capitalised word is dropped from a name unless it also appears mid-sentence.
_STARTERS = words(
    """
visit try check consider book call read watch meet avoid enjoy bring pack head stay grab
skip plan buy order pick note thanks hi hello hey dear yes no sure okay ok well so oh also
maybe perhaps sounds great good nice cool wow honestly actually anyway happy welcome
    """
)
# At the start of a sentence these place-name prefixes stay part of the name.
_NAME_PREFIXES = words("new san santa los las saint st north south east west mount lake port fort")
_NOT_NAMES = STOPWORDS | words(
    """
ok okay lol omg btw fyi asap imo imho tbh afaik ps am pm eta faq diy tl dr i
    """
)


def _keyphrases(texts: Sequence[str], limit: int = 3) -> list[str]:
    """The best ``limit`` 1-3 word phrases of ``texts``, best first.

    Phrases are runs of content words between stop words, filler and
    punctuation. A phrase scores its length plus the repeats of its words, and
    needs 2 to count: a lone word must come up twice to be a topic. A phrase
    whose words include or are included in a better one's is left out.
    """
    runs: list[list[str]] = []
    for text in texts:
        for chunk in _PHRASE_BREAK.split(text):
            run: list[str] = []
            for word in [*_WORD.findall(chunk), ""]:
                term = term_of(word) if len(word) >= 3 and not word.isdigit() else None
                if term and word.lower() not in _FILLER and term not in _FILLER:
                    run.append(word)
                    continue
                if 1 <= len(run) <= 3:
                    runs.append(run)
                run = []
    counts = Counter(term_of(w) for run in runs for w in run)
    said_as_is = Counter(frozenset(term_of(w) for w in run) for run in runs)
    best: dict[frozenset[str | None], tuple[int, int, str]] = {}
    for order, run in enumerate(runs):
        key = frozenset(term_of(w) for w in run)
        # a phrase said as it is more than once beats a longer one around it
        score = len(run) + sum(counts[t] - 1 for t in key) + 2 * (said_as_is[key] - 1)
        if key not in best or score > best[key][0]:
            best[key] = (score, -order, " ".join(run))
    chosen: list[tuple[frozenset[str | None], str]] = []
    for key, (score, _order, phrase) in sorted(best.items(), key=lambda kv: kv[1], reverse=True):
        if score >= 2 and not any(key <= other or other <= key for other, _p in chosen):
            chosen.append((key, phrase))
    return [phrase for _, phrase in chosen[:limit]]


def topic_key(phrase: str) -> frozenset[str]:
    """The terms of a topic: "seafood restaurants" and "Seafood restaurant" share them."""
    return frozenset(t for w in _WORD.findall(phrase) if (t := term_of(w)))


def _entities(texts: Sequence[str], known: set[str]) -> list[str]:
    """Names, places, organisations, amounts and dates in ``texts``, last mention first."""
    found: list[tuple[int, int, str]] = []
    masked: list[str] = []
    for text in texts:
        for sentence in sentences(prose(text)):
            n = len(masked)
            for regex in (_DATE, AMOUNT):
                for m in regex.finditer(sentence):
                    found.append((n, m.start(), m.group().strip()))
                sentence = regex.sub(lambda m: "," + " " * (len(m.group()) - 1), sentence)
            masked.append(sentence)
    mid = set(known)  # capitalised words seen mid-sentence are names wherever they appear
    for sentence in masked:
        start = _first_word(sentence)
        for m in _NAME.finditer(sentence):
            parts = m.group().split()
            mid.update(w.lower() for w in (parts[1:] if m.start() <= start else parts))
    for n, sentence in enumerate(masked):
        start = _first_word(sentence)
        for m in _NAME.finditer(sentence):
            parts = m.group().split()
            first = parts[0].lower()
            if m.start() <= start and first not in mid | _NAME_PREFIXES:
                ordinary = first in STOPWORDS or first in _STARTERS or first in _FILLER
                if len(parts) == 1 or ordinary:
                    parts = parts[1:]
            while parts and parts[0].lower() in _CONNECTORS:
                parts = parts[1:]
            name = re.sub(r"['’]s$", "", " ".join(parts))
            if name and not all(w.lower() in _NOT_NAMES for w in name.split()):
                found.append((n, m.start(), name))
    found.sort()
    return [name for _, _, name in reversed(found)]


def _merge_topics(topics: Sequence[str], new: Sequence[str], limit: int) -> list[str]:
    """``new`` in front of ``topics``; a topic within or around a newer one is dropped."""
    out: list[str] = []
    keys: list[frozenset[str]] = []
    for topic in [*new, *topics]:
        key = topic_key(topic)
        if key and not any(key <= k or k <= key for k in keys):
            out.append(topic)
            keys.append(key)
    return out[:limit]


def _first_word(sentence: str) -> int:
    m = re.search(r"\w", sentence)
    return m.start() if m else 0


@dataclass
class _ConversationFound:
    topics: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)


class ConversationTracker(Tracker):
    """Topics and entities of the conversation, most recent first (10 of each)."""

    mode = "conversation"
    sections = ("topics", "entities")
    max_topics = 10
    max_entities = 10

    def __init__(self, spec: Any = None) -> None:
        super().__init__(spec)
        self.topics: list[str] = []
        self.entities: list[str] = []

    def _extract(self, said: Sequence[Said]) -> _ConversationFound:
        texts = [s.text for s in said if s.role in ("user", "assistant")]
        known = {w.lower() for e in self.entities for w in e.split()}
        return _ConversationFound(_keyphrases([prose(t) for t in texts]), _entities(texts, known))

    def _llm_prompt(self) -> str:
        return (
            "You keep running notes on a conversation for an assistant's memory. From the new "
            "messages only, list the topics under discussion as short noun phrases (1 to 4 "
            "words, most important first) and the named entities mentioned: people, places, "
            "organisations, products, amounts of money and dates, written as in the messages, "
            "most recent first. Leave out anything the messages do not mention. Use empty "
            'lists when there is nothing. Shape: {"topics": ["..."], "entities": ["..."]}'
        )

    def _validate(self, value: Any) -> _ConversationFound:
        obj = json_object(value, ("topics", "entities"))
        return _ConversationFound(
            json_strings(obj, "topics", 80), json_strings(obj, "entities", 80)
        )

    def _merge(self, found: _ConversationFound) -> set[str]:
        touched = set()
        if found.topics:
            self.topics = _merge_topics(self.topics, found.topics, self.max_topics)
            touched.add("topics")
        if found.entities:
            self.entities = remember(self.entities, found.entities, self.max_entities, norm)
            touched.add("entities")
        return touched

    def _section_lines(self, section: str) -> list[str]:
        if section == "topics":
            return bullets("Topics:", self.topics, self.max_topics)
        return bullets("Entities:", self.entities, self.max_entities)

    def _state(self) -> dict[str, Any]:
        return {"topics": list(self.topics), "entities": list(self.entities)}

    def _load(self, data: Mapping[str, Any]) -> None:
        self.topics = saved_texts(data.get("topics"), self.max_topics)
        self.entities = saved_texts(data.get("entities"), self.max_entities)
