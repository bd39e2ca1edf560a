"""Cleaning the values frames capture: a place, an employer, a number, a diet..."""

from __future__ import annotations

import re

from arbormem.context.trackers.common import words as word_set
from arbormem.records.patterns import OCCUPATIONS, Match
from arbormem.records.people import NOT_NAMES, People
from arbormem.records.vocab import GIVEN_UP, canonical_diet
from arbormem.text import STOPWORDS

__all__ = ["WEEKLY", "clean_value"]

_LIKE_BAD_START = word_set("""it that this these those them you your yours him her his their our us me how what when
    where why who the a an all every each some any hearing seeing talking chatting having getting
    being knowing so too there here doing seeing to my its one ones everything anything something
    nothing everyone people when whatever reading about everywhere anywhere nowhere somewhere
    theme""")
_CLAUSE_OPENERS = word_set("so but which who although though because since really")
_VERBISH = word_set(
    """makes brings does gets seems sure takes gives keeps helps feels looks sounds means goes
    comes is was has had be being"""
)
_OBJECT_PRONOUN = re.compile(r"\b(?:them|it|him|her|this|that|these|those)\b", re.I)
_VAGUE_LIKES = word_set("going playing making doing watching trying having getting taking seeing")
_VAGUE_LIKES |= {"spending time", "hanging out", "being there", "it all", "all of it"}
_ADJECTIVE_ENDS = word_set("safe good great nice new big small little old such own")
_VAGUE_INFINITIVE = word_set("see hear know help chat talk have get be do go say tell hang")
_PHRASE_BAD = word_set("it that this them these those something anything everything")
_DETERMINER = re.compile(r"^(?:a|an|the|some|any|my|our|his|her|their|your)\s+", re.I)
WEEKLY = re.compile(
    r"\bthe\s+\d{1,2}(?:st|nd|rd|th)\b|\b(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?s?\b|\b\d{1,2}(?::\d{2})?\s*"
    r"(?:am|pm|a\.m\.|p\.m\.|o'clock)|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b|\b(?:mornings?|"
    r"afternoons?|evenings?|nights?)\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d",
    re.I,
)


def clean_value(m: Match, kind: str, people: People) -> list[str]:
    """The value(s) a match states, cleaned, or [] if it is not a usable value."""
    raw = m.groups.get("v", "")
    value = raw.strip().strip("\"'").rstrip(".,;:!?)")
    if kind == "fixed":
        return [m.frame.fixed] if m.frame.fixed else []
    if kind == "diet":
        diet = canonical_diet(value)
        return [diet] if diet else []
    if kind == "given_up":
        diet = GIVEN_UP.get(m.groups.get("g", "").lower())
        return [diet] if diet else []
    if kind == "pet":
        if value and value.lower() not in NOT_NAMES:
            return [value]
        species = m.groups.get("k", "").lower()
        if not species:
            return []
        species = (
            re.sub(r"(?:ies)$", "y", species) if species.endswith("ies") else species.rstrip("s")
        )
        return [f"a {species}"]
    if not value:
        return []
    if kind in ("place", "org", "name"):
        words = value.split()
        while words and words[-1].lower() in NOT_NAMES and words[-1][:1].isupper():
            words = words[:-1]
        if not words or words[0].lower() in NOT_NAMES - {"the", "a", "an"}:
            return []
        value = " ".join(words)
        if kind != "name" and value in people.known():
            return []  # "joined Ana for lunch": a person, not an employer
        return [value]
    if kind == "phone":
        digits = re.sub(r"\D", "", value)
        return [value] if 7 <= len(digits) <= 15 else []
    if kind == "email":
        return [value.lower()]
    if kind == "when":
        value = re.sub(r"^(?:on|at)\s+", "", value, flags=re.I)
        return [value] if WEEKLY.search(value) else []
    if kind in ("title", "occupation"):
        value = _DETERMINER.sub("", value)
        words = value.lower().split()
        if not words or len(words) > 4 or words[0] in STOPWORDS:
            return []
        head = words[-1].rstrip("s") if words[-1] not in OCCUPATIONS else words[-1]
        if kind == "occupation" and head not in OCCUPATIONS and words[-1] not in OCCUPATIONS:
            return []
        return [value]
    if kind == "like":
        words = value.split()
        first = words[0].lower()
        if first == "to":
            second = words[1].lower() if len(words) > 1 else ""
            ok = second not in _VAGUE_INFINITIVE and second not in STOPWORDS and 1 < len(words) <= 5
            return [value] if ok else []
        if first in _LIKE_BAD_START or first in STOPWORDS or first in _VERBISH or len(words) > 6:
            return []
        if value.lower() in _VAGUE_LIKES or _OBJECT_PRONOUN.search(value):
            return []  # "watching them play": about something said before
        if words[-1].lower() in STOPWORDS or words[-1].lower() in _ADJECTIVE_ENDS:
            return []  # cut short: "creating a safe (and inviting place)"
        return [value]
    # a phrase: allergens and open values, several joined by "and"
    value = _DETERMINER.sub("", value)
    parts: list[str] = []
    for part in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", value):
        part = part.strip()
        if part and (
            part.split()[0].lower() in STOPWORDS | _CLAUSE_OPENERS
            or (parts and part[:1].isupper())
            or len(part.split()) > 3
        ):
            break  # "penicillin, so careful": the list ended, a new clause began
        if part:
            parts.append(_DETERMINER.sub("", part))
    parts = [p for p in parts if p.lower() not in _PHRASE_BAD and len(p.split()) <= 4]
    if m.attribute not in ("allergy",):
        return [value] if parts else []
    return parts
