"""Making a sentence self-contained: names for pronouns, absolute dates for relative ones.

"I moved here last week" said by Sam on 14 May 2024 becomes "Sam moved here
in the week of 6 May 2024": the record must read right without the
conversation around it. :func:`normalise` first expands contractions, so the
patterns of :mod:`arbormem.records.patterns` see one spelling of each word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from arbormem.context.trackers.common import words as word_set
from arbormem.timeexpr import DateRange, find_spans, in_year

__all__ = ["Who", "absolute_dates", "conjugate", "normalise", "self_contained", "when"]

_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": " - "})
_CONTRACTION = re.compile(
    r"\b(?:([Cc]a|[Ww]o|[Ss]ha)n't|(\w+)n't|(I)'m|(\w+)'(ve|re|ll)|"
    r"(I|[Yy]ou|[Ww]e|[Tt]hey|[Hh]e|[Ss]he)'d|([Hh]e|[Ss]he|[Ii]t|[Tt]hat|[Tt]here|[Ww]hat|[Ww]ho)'s|"
    r"([Gg])(onna|otta)|([Ww])anna)\b"
)
_SHORT_NOT = {"ca": "can", "wo": "will", "sha": "shall"}
_SHORT = {"ve": "have", "re": "are", "ll": "will"}


def _expand(m: re.Match[str]) -> str:
    g = m.groups()
    if g[0]:  # can't, won't, shan't
        word = _SHORT_NOT[g[0].lower()]
        return (word.capitalize() if g[0][0].isupper() else word) + " not"
    if g[1]:
        return f"{g[1]} not"
    if g[2]:
        return "I am"
    if g[3]:
        return f"{g[3]} {_SHORT[g[4]]}"
    if g[5]:
        return f"{g[5]} would"
    if g[6]:
        return f"{g[6]} is"
    if g[7]:
        return f"{g[7]}{'oing to' if g[8] == 'onna' else 'ot to'}"
    return f"{g[9]}ant to"


# "Dad's got a new number", "Sam's moved": a name's "'s" before a verb is "has" or "is".
_NAME_HAS = re.compile(
    r"\b([A-Z][a-z]+)'s(?=\s+(?:got|been|gone|moved|started|left|quit|taken|had|finally|just|"
    r"also|now|recently|\w+ing|engaged|married|allergic|vegan|vegetarian|pescatarian|back|off|"
    r"not|no longer|still|a|an)\b)"
)


def _name_has(m: re.Match[str]) -> str:
    rest = m.string[m.end() : m.end() + 12].split(" ", 2)
    nxt = rest[1].lower() if len(rest) > 1 else ""
    verb = (
        "has"
        if nxt in ("got", "been", "gone", "moved", "started", "left", "quit", "taken", "had")
        else "is"
    )
    return f"{m.group(1)} {verb}"


def normalise(text: str) -> str:
    """``text`` with straight quotes and contractions expanded ("I'm" is "I am").

    >>> normalise("I’ve moved, she's happy and I don't mind")
    'I have moved, she is happy and I do not mind'
    """
    text = text.translate(_QUOTES)
    if "'" not in text and "nna" not in text and "otta" not in text:
        return text
    text = _CONTRACTION.sub(_expand, text)
    return _NAME_HAS.sub(_name_has, text) if "'s " in text else text


# --------------------------------------------------------------------------- dates


def _day(d: datetime) -> str:
    return f"{d.day} {d:%B} {d.year}"


def _pick_year(rng: DateRange, now: datetime, future: bool) -> DateRange:
    """A range written with no year ("in May") placed in the year nearest ``now``:
    the last one not after it, or for future tense the next one not before it."""
    if rng.year_known:
        return rng
    year = now.year
    start, end = in_year(rng.start, year), in_year(rng.end, year + rng.end.year - rng.start.year)
    if future and end < now - timedelta(days=1):
        start, end = in_year(start, year + 1), in_year(end, end.year + 1)
    elif not future and start > now + timedelta(days=1):
        start, end = in_year(start, year - 1), in_year(end, end.year - 1)
    return DateRange(start, end)


def describe(rng: DateRange) -> str:
    """A date range in words: "on 7 May 2023", "in May 2023", "in 2022"."""
    start, end = rng.start, rng.end
    days = (end - start).days
    if days == 0:
        return f"on {_day(start)}"
    if start.day == 1 and start.month == 1 and end.month == 12 and end.day == 31:
        return (
            f"in {start.year}" if start.year == end.year else f"between {start.year} and {end.year}"
        )
    if (
        start.day == 1
        and (end + timedelta(days=1)).day == 1
        and (start.year, start.month)
        == (
            end.year,
            end.month,
        )
    ):
        return f"in {start:%B} {start.year}"
    if days == 6 and start.weekday() == 0:
        return f"in the week of {_day(start)}"
    if days == 1 and start.weekday() == 5:
        return f"on the weekend of {_day(start)}"
    mid = start + (end - start) / 2
    if days > 200:
        return f"around {mid.year}"
    if days > 20:
        return f"around {mid:%B} {mid.year}"
    return f"around {_day(mid)}"


_PREPOSITION_BEFORE = re.compile(
    r"\b(?:on|in|at|during|since|by|until|from|before|after)\s*$", re.I
)
_HEDGE_BEFORE = re.compile(
    r"\b(?:about|around|roughly|nearly|almost|approximately|some|a)\s+$", re.I
)
_FUTURE = re.compile(
    r"\b(?:will|going to|next|tomorrow|soon|plan|planning|moving|starting)\b", re.I
)
_RELATIVE_WORDS = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last|this|next|past|ago)\b", re.I
)


def when(clause: str, now: datetime) -> tuple[DateRange, int, int] | None:
    """The first date range a clause states, with its span, years filled in."""
    spans = find_spans(clause, now)
    if not spans:
        return None
    start, end, rng = spans[0]
    rng = _pick_year(rng, now, bool(_FUTURE.search(clause)))
    if clause[start:end].lower().endswith("ago"):  # "two weeks ago": that day, give or take
        mid = rng.start + (rng.end - rng.start) / 2
        rng = DateRange(mid, mid)
    return rng, start, end


def absolute_dates(clause: str, now: datetime) -> str:
    """``clause`` with every relative or yearless date made absolute.

    >>> from datetime import datetime, timezone
    >>> absolute_dates("I went yesterday", datetime(2023, 5, 8, tzinfo=timezone.utc))
    'I went on 7 May 2023'
    """
    spans = find_spans(clause, now)
    if not spans:
        return clause
    future = bool(_FUTURE.search(clause))
    out, last = [], 0
    for start, end, rng in spans:
        if start < last:
            continue
        said = clause[start:end]
        if rng.year_known and not _RELATIVE_WORDS.search(said):
            continue  # already absolute: "3 May 2023" stays as written
        words = describe(_pick_year(rng, now, future))
        lead = clause[last:start]
        if words.startswith("around"):
            lead = _HEDGE_BEFORE.sub("", lead)  # "about five years ago": "around 2018"
        elif said.split(" ", 1)[0].lower() in ("few", "couple"):
            lead = re.sub(r"\ba\s+$", "", lead)
        if _PREPOSITION_BEFORE.search(lead) and said.split(" ", 1)[0].lower() not in (
            "since",
            "before",
            "after",
            "until",
            "by",
        ):
            words = words.split(" ", 1)[1] if " " in words else words
        out.append(lead)
        out.append(words)
        last = end
    out.append(clause[last:])
    return "".join(out)


# --------------------------------------------------------------------------- people


@dataclass(frozen=True)
class Who:
    """Who the pronouns of one message stand for."""

    #: The speaker ("I", "me", "my").
    speaker: str
    #: The person spoken to ("you", "your"), when there is exactly one.
    addressee: str | None = None
    #: The person "he", "she", "they" most likely refer to, if any.
    third: str | None = None


_PAST_OR_MODAL = word_set("""can could will would shall should may might must was were did had got went
    ran made took saw came gave found felt left kept told said thought knew bought brought
    began began drank ate wrote read met paid sold sent spent taught won lost built became
    grew held led let put set shut slept spoke stood swam threw understood woke wore not
    need ought used chose forgot drove rode sang fell caught fought sought heard""")
_ADVERBS = (
    r"just|really|also|still|usually|always|never|finally|recently|actually|totally|now|often|"
    r"sometimes|even|only|mostly|already|truly|absolutely|officially|definitely|honestly|"
    r"basically|currently|generally|normally|rarely|seriously|simply|kind of|sort of"
)
_SUBJECT_VERB = re.compile(
    rf"(^|[,;:.!?]\s+|\b(?:and|but|so|that|because|when|if|since|as|though|now)\s+|(?=I\b))"
    rf"(I|[Yy]ou)\b((?:\s+(?:{_ADVERBS}))*)\s+([a-z]+)\b"
)
_IRREGULAR = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "go": "goes"}


def conjugate(verb: str) -> str:
    """The third person singular of a verb as said after "I" or "you".

    >>> [conjugate(v) for v in ("am", "love", "watch", "study", "went", "can")]
    ['is', 'loves', 'watches', 'studies', 'went', 'can']
    """
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb in _PAST_OR_MODAL or verb.endswith("ed"):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_PRONOUN = re.compile(
    r"\b(?:I|me|my|mine|myself|you|your|yours|yourself|he|she|him|his|hers|her|himself|herself)\b",
    re.I,
)
# After "her", these words mean it is an object ("told her that"), not a possessive.
_AFTER_OBJECT = word_set("""to and at in on for with about from that a an the this . , ! ? ; : so but or if when
    because since last yesterday today tomorrow again too as up out back off down over""")


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _replacer(who: Who, text: str) -> Callable[[re.Match[str]], str]:
    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        low = word.lower()
        if word == "I" or low in ("me", "myself"):
            return who.speaker
        if low in ("my", "mine"):
            return _possessive(who.speaker)
        if low in ("you", "yourself"):
            return who.addressee or word
        if low in ("your", "yours"):
            return _possessive(who.addressee) if who.addressee else word
        if who.third is None:
            return word
        if low in ("he", "she", "him", "himself", "herself"):
            return who.third
        if low in ("his", "hers"):
            return _possessive(who.third)
        nxt = re.match(r"\s*([\w.,!?;:]+)", text[m.end() :])
        if nxt is None or nxt.group(1).lower() in _AFTER_OBJECT:
            return who.third  # "her" as an object
        return _possessive(who.third)

    return swap


def self_contained(clause: str, who: Who, now: datetime | None) -> str:
    """``clause`` with names for pronouns and absolute dates, starting with a capital.

    >>> from datetime import datetime, timezone
    >>> self_contained("I love my new job", Who("Sam"), None)
    "Sam loves Sam's new job"
    """
    text = absolute_dates(clause, now) if now is not None else clause

    def agree(m: re.Match[str]) -> str:
        name = who.speaker if m.group(2) == "I" else who.addressee
        if name is None:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{m.group(3)} {conjugate(m.group(4))}"

    text = _SUBJECT_VERB.sub(agree, text)
    text = _PRONOUN.sub(_replacer(who, text), text)
    text = " ".join(text.split()).strip(" ,;:-")
    return text[:1].upper() + text[1:]


def utc(value: datetime) -> datetime:
    """``value`` in UTC (naive values are taken as UTC)."""
    return (
        value.replace(tzinfo=timezone.utc)
        if value.tzinfo is None
        else value.astimezone(timezone.utc)
    )
