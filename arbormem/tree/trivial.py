"""Which exchanges are small talk that ``reorganize(prune_trivial_leaves=True)`` may archive.

An exchange is trivial when it has a user message and an assistant reply, each
of its messages is under :data:`TRIVIAL_WORDS` words, and none of them states
a fact. Short is not enough: "my postcode is BS1 4QA" and "she's a
three-year-old beagle" are short, and are what a memory is for. A message
states a fact (see :func:`fact_in`) when it carries

* a number: a digit anywhere, or a number word ("three", "dozen");
* a date: anything :func:`arbormem.timeexpr.find_ranges` reads ("3 May",
  "last week", "yesterday"), a weekday or a month name;
* a name: a capitalised word that is not a stop word; at the start of a
  sentence, where any word is capitalised, only one that is not a common
  opener ("Thanks", "Great") and not written in lower case elsewhere in the
  exchange;
* or, said by a person rather than the assistant, a statement (a sentence
  that is not a question) in the first person ("I", "my", "we", "our"...) or
  about someone ("he", "she", "her"...): "she is allergic to nuts".

The rule errs towards keeping: a missed fact is lost from recall until
``restore_archived()``, a kept "thanks!" costs a few bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from arbormem.models import Message
from arbormem.text import STOPWORDS, words
from arbormem.timeexpr import find_ranges

#: A trivial exchange's messages are all shorter than this many words.
TRIVIAL_WORDS = 20


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NUMBER_WORDS = _words(
    """
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
eighty ninety hundred thousand million billion dozen third fourth fifth sixth seventh
eighth ninth tenth eleventh twelfth twentieth hundredth
    """
)
# "may" and "march" are verbs as often as months: find_ranges reads them in dates.
_DATE_WORDS = _words(
    """
monday tuesday wednesday thursday friday saturday sunday january february april june july
august september october november december
    """
)
# Capitalised at the start of a sentence, these are chat, not names.
_OPENERS = _words(
    """
ok okay yes yeah yep yup ya yea nope nah sure thanks thank thx ty cheers great good nice
cool awesome perfect excellent wonderful lovely fantastic brilliant amazing fine alright
right exactly absolutely definitely certainly indeed agreed true totally hi hello hey hiya
howdy yo bye goodbye goodnight night morning evening afternoon welcome glad happy sorry oops
whoops ah aha ahh oh ooh wow whoa ha haha hah hehe lol hmm hm um uh er well anyway also
sounds sound got gotcha noted understood anytime np please let enjoy take see feel go come
look tell ask make keep try check congrats congratulations bravo hooray yay phew done sweet
neat interesting fair love
    """
)
# Capitalised mid-sentence, these are still not names.
_NOT_NAMES = _words("i ok okay lol omg btw fyi asap imo imho tbh afaik ps np ty thx")
_PERSONAL = re.compile(
    r"\b(?:i|me|my|mine|myself|we|us|our|ours|ourselves|he|him|his|himself|she|her|hers|"
    r"herself)\b",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def fact_in(text: str, role: str, when: datetime | None, lower: frozenset[str]) -> str | None:
    """What makes ``text`` state a fact ("number", "date", "name", "personal"),
    or None. ``when`` is the message's time (for "yesterday"); ``lower`` holds the
    words of the exchange written in lower case somewhere."""
    if any(c.isdigit() for c in text):
        return "number"
    said = set(words(text))
    if said & _NUMBER_WORDS:
        return "number"
    if said & _DATE_WORDS or find_ranges(text, when):
        return "date"
    for sentence in _SENTENCE.split(text):
        for n, m in enumerate(_WORD.finditer(sentence)):
            word = m.group()
            if not word[0].isupper():
                continue
            head = re.split(r"['’]", word.lower())[0]
            if head in STOPWORDS or head in _NOT_NAMES:
                continue
            if n == 0 and (head in _OPENERS or word.lower() in lower):
                continue
            return "name"
        if (
            role != "assistant"
            and not sentence.rstrip().endswith("?")
            and _PERSONAL.search(sentence)
        ):
            return "personal"
    return None


def is_trivial(messages: Sequence[Message]) -> bool:
    """Whether an exchange is small talk that may be archived (see the module)."""
    roles = {m.role for m in messages}
    if "user" not in roles or "assistant" not in roles:
        return False
    if any(len(m.content.split()) >= TRIVIAL_WORDS for m in messages):
        return False
    lower = frozenset(
        w.lower() for m in messages for w in _WORD.findall(m.content) if not w[0].isupper()
    )
    return not any(fact_in(m.content, m.role, m.timestamp, lower) for m in messages)
