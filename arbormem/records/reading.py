"""Reading a message into the statements extraction works on.

Sentences are split (not after "St." or "Dr."), captions of shared pictures
dropped, contractions expanded; a question is left out unless it opens with a
statement ("She is vegan, any recipe ideas?") or is rhetorical ("Did you hear?
..."); an all-lower-case message gets its likely names capitalised.
"""

from __future__ import annotations

import re

from arbormem.context.trackers.common import prose, sentences
from arbormem.context.trackers.common import words as word_set
from arbormem.records.matching import TRIGGERS
from arbormem.records.rewrite import normalise
from arbormem.text import STOPWORDS

__all__ = ["WORD", "statements"]

WORD = re.compile(r"[a-z][a-z-]*|\d+")
_RHETORICAL = re.compile(
    r"^(?:did you (?:hear|know)|have you heard|guess what|you know what)\b", re.I
)
_INTERROGATIVE = re.compile(
    r"^(?:who|whom|whose|what|which|where|when|why|how|do|does|did|is|are|was|were|can|could|"
    r"would|will|have|has|had|should|shall|may|might|am|any|anyone)\b",
    re.I,
)
_TAG_QUESTION = re.compile(
    r"^(?:right|yes|yeah|no|correct|ok|okay|huh|eh|innit|really|true|"
    r"(?:is|are|was|were|do|does|did|have|has|will|would|can|could)(?:n't| not)? \w+)\W*$",
    re.I,
)
_LOWERCASE_CHAT = re.compile(r"[^A-Z]*")
_KEEP_LOWER = STOPWORDS | word_set(
    "i im ive id ill lol ok okay yeah yes no hey hi hello thanks pls please just really"
)


def _mentions_trigger(text: str) -> bool:
    return not TRIGGERS.isdisjoint(WORD.findall(text))


def _capitalised(text: str) -> str:
    """An all-lower-case message with the words that could be names capitalised, so
    "i just moved to denver" reads like "i just moved to Denver". Verbs and
    function words stay as they are."""

    def cap(m: re.Match[str]) -> str:
        word = m.group(0)
        if (
            len(word) < 3
            or word in _KEEP_LOWER
            or word in TRIGGERS
            or word.endswith(("ing", "ed", "ly"))
        ):
            return word
        return word[:1].upper() + word[1:]

    # whole tokens only: an e-mail address or a web address keeps its case
    return " ".join(
        token
        if re.search(r"[@/\d.]", token.rstrip(".,!?;:"))
        else re.sub(r"[a-z][a-z'-]*", cap, token)
        for token in text.split(" ")
    )


_ABBREVIATION = re.compile(
    r"\b(St|Dr|Mr|Mrs|Ms|Jr|Sr|Mt|Ave|Rd|Prof|Inc|Co|Ltd|No|vs|etc|e\.g|i\.e)\.$"
)


_CAPTION = re.compile(r"\s*\[(?:shares|shared|image|photo|picture)[^\]]*\]", re.I)


def _sentences(text: str) -> list[str]:
    """The sentences of a message; "St. Mary" and "Dr. Lee" do not end one. Captions of
    shared pictures ("[shares a photo of ...]") describe an image, not the speaker."""
    if "[" in text:
        text = _CAPTION.sub("", text)
    out: list[str] = []
    for part in sentences(prose(text)):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def statements(text: str) -> list[str]:
    """The statements of a message, normalised, in order."""
    out = []
    for raw in _sentences(text):
        line = normalise(raw)
        if line.endswith("?") and not _RHETORICAL.match(line):
            # "She is vegan, any recipe ideas?": a statement, then the question
            head, comma, tail = line.rpartition(", ")
            if not comma or _INTERROGATIVE.match(line) or _TAG_QUESTION.match(tail):
                continue  # "You are in Leeds now, right?" asks about the head
            line = head
        if _LOWERCASE_CHAT.fullmatch(line) and _mentions_trigger(line):
            line = _capitalised(line)
        out.append(line.rstrip("?"))
    return out
