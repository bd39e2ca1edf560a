"""The names people call each other by, learnt from how they address each other.

A speaker's tag is often a handle ("Emi", "elise") while the conversation, and
the questions asked about it later, use the person's name ("Kate", "Emily"):
"Hi Kate!", "What do you think, Kate?" are said *to* Emi. :class:`Aliases` reads
a thread's messages in order and counts, for each capitalised word in a
vocative position (after a greeting, after "you" or a comma at the end of a
sentence, or opening one before a comma), the speaker being addressed: the one
who spoke last before the message, among the others.

A word becomes an alias of a speaker when it addresses that speaker at least
:data:`MIN_VOCATIVES` times and twice as often as anyone else, that speaker
rarely writes it (people seldom name themselves), it is almost never written in
lower case and mostly inside sentences (which leaves out "Wow", "Oh", "Plus").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

#: Vocatives needed before a word is taken for a speaker's name.
MIN_VOCATIVES = 3
#: At most this share of a name's capitalised uses may come from its owner.
OWN_SHARE = 0.25
#: At most this share of a word's uses may be in lower case for it to be a name.
LOWER_SHARE = 0.1
#: At least this share of a name's capitalised uses must be inside a sentence, not
#: opening it: "Oh," and "Plus," open sentences; names are mostly said further on.
INSIDE_SHARE = 0.5

_GREETING = (
    r"(?:hi|hey|hello|heya|hiya|yo|morning|good morning|good evening|good night|goodnight|"
    r"thanks|thank you|congrats|congratulations|bye|sorry|welcome|dear|miss you|love you|"
    r"happy birthday)"
)
_NAME = r"([A-Z][a-z]+)"
_VOCATIVE = [
    re.compile(rf"(?:^|[.!?,]\s*){_GREETING}[,!\s]+{_NAME}\b", re.IGNORECASE),
    re.compile(rf"\byou,?\s+{_NAME}\s*(?:[!?.,]|$)"),
    re.compile(rf",\s*{_NAME}\s*(?:[!?.]|$)"),
    re.compile(rf"(?:^|[.!?]\s+){_NAME},\s"),
]
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
#: A capitalised word that does not open its sentence.
_INSIDE = re.compile(r"(?<![.!?:\n])\s+\b([A-Z][a-z]+)\b")
_WORD = re.compile(r"\b[a-z]+\b")


def vocatives(text: str) -> set[str]:
    """Capitalised words ``text`` addresses someone by ("Hey Kate!" -> {"Kate"})."""
    found: set[str] = set()
    for pattern in _VOCATIVE:
        for m in pattern.finditer(text):
            name = m.group(1)
            if name[0].isupper():  # the greeting pattern ignores case, names do not
                found.add(name)
    return found


class Aliases:
    """Counts over a thread's messages, read in order, and the aliases they show."""

    def __init__(self) -> None:
        #: (addressed speaker, word) -> messages addressing them by it.
        self.addressed: Counter[tuple[str, str]] = Counter()
        #: (speaker, word) -> messages of the speaker writing the word capitalised.
        self.written: Counter[tuple[str, str]] = Counter()
        #: word -> messages writing it capitalised, by anyone.
        self.uses: Counter[str] = Counter()
        #: word -> messages writing it capitalised inside a sentence.
        self.inside: Counter[str] = Counter()
        #: word -> messages writing it in lower case.
        self.lower: Counter[str] = Counter()
        self.speakers: set[str] = set()
        self._last: list[str] = []  # the latest speakers, most recent last

    def read(self, messages: Iterable[tuple[str | None, str]]) -> None:
        """Count ``(speaker, content)`` pairs, in the thread's order."""
        for speaker, content in messages:
            if not speaker:
                continue
            self.speakers.add(speaker)
            for word in set(_CAPITALISED.findall(content)):
                self.written[(speaker, word)] += 1
                self.uses[word] += 1
            self.inside.update(set(_INSIDE.findall(content)))
            self.lower.update(set(_WORD.findall(content)))
            addressee = next((s for s in reversed(self._last) if s != speaker), None)
            if addressee is None and len(self.speakers) == 2:
                addressee = next(s for s in self.speakers if s != speaker)
            if addressee is not None:
                for name in vocatives(content):
                    self.addressed[(addressee, name)] += 1
            if not self._last or self._last[-1] != speaker:
                self._last = [*self._last[-3:], speaker]

    def names(self) -> dict[str, str]:
        """Lower-cased alias -> the speaker it names."""
        taken = {w.lower() for s in self.speakers for w in s.split()}
        best: dict[str, tuple[int, int, str]] = {}  # word -> (count, runner-up, speaker)
        for (speaker, word), count in self.addressed.items():
            top, second, who = best.get(word, (0, 0, ""))
            if count > top:
                best[word] = (count, top, speaker)
            else:
                best[word] = (top, max(second, count), who)
        out: dict[str, str] = {}
        for word, (count, second, speaker) in best.items():
            if count < MIN_VOCATIVES or count < 2 * second or word.lower() in taken:
                continue
            uses = self.uses[word]
            if self.written[(speaker, word)] > OWN_SHARE * uses:
                continue
            if self.lower[word.lower()] > LOWER_SHARE * uses:
                continue
            if self.inside[word] < INSIDE_SHARE * uses:
                continue
            out[word.lower()] = speaker
        return out


def replace_aliases(text: str, aliases: Mapping[str, str]) -> str:
    """``text`` with each alias replaced by the name of the speaker it stands for
    ("What are Kate's hobbies?" -> "What are Emi's hobbies?")."""
    if not aliases:
        return text
    return re.sub(
        r"\b[A-Za-z]+\b",
        lambda m: aliases.get(m.group(0).lower(), m.group(0)),
        text,
    )


# -- a question in the speakers' own words ------------------------------------------------

#: Verbs that come before their subject in a question ("does Kate ...") and what
#: they become before "I".
_FIRST_PERSON_VERBS = {
    "does": "do",
    "is": "am",
    "has": "have",
    "was": "was",
    "did": "did",
    "can": "can",
    "could": "could",
    "will": "will",
    "would": "would",
    "should": "should",
}
_THIRD_PERSON = [
    (re.compile(r"\b(?:her|his)\b", re.IGNORECASE), "my"),
    (re.compile(r"\b(?:she|he)\b", re.IGNORECASE), "I"),
    (re.compile(r"\b(?:him|herself|himself)\b", re.IGNORECASE), "me"),
]


def in_own_words(question: str, named: Sequence[str]) -> str:
    """The question as the text it should be compared with by meaning: asked about
    one speaker, put in that speaker's first person, as their own messages are
    written ("What are Kate's hobbies?" for speaker Kate: "What are my hobbies?");
    asked about several, without their names, which otherwise draw the messages
    that greet them rather than those that answer.

    ``named`` are the speakers the question names, as written in it."""
    if not named:
        return question
    names = "|".join(re.escape(n) for n in sorted(named, key=len, reverse=True))
    if len(named) > 1:
        group = rf"\b(?:{names})(?:'s|’s)?\b"
        text = re.sub(rf"{group}(?:\s*(?:,|and|&)\s*{group})*", " ", question, flags=re.IGNORECASE)
        return " ".join(text.split())
    text = re.sub(rf"\b(?:{names})(?:'s|’s)", "my", question, flags=re.IGNORECASE)
    verbs = "|".join(_FIRST_PERSON_VERBS)
    text = re.sub(
        rf"\b({verbs})\s+(?:{names})\b",
        lambda m: f"{_FIRST_PERSON_VERBS[m.group(1).lower()]} I",
        text,
        flags=re.IGNORECASE,
    )
    text = re.sub(rf"\b(?:{names})\b", "I", text, flags=re.IGNORECASE)
    for pattern, replacement in _THIRD_PERSON:
        text = pattern.sub(replacement, text)
    return text
