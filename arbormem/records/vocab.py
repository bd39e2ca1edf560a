"""The canonical attribute vocabulary: what can change about a person or a thing.

People name the same attribute in many ways ("my number", "my cell", "reach me
on"; "where she lives", "her place in", "moved to"). Extraction maps those
surface forms onto a small set of canonical attributes, so that a later
statement in other words still supersedes the earlier one; anything else that
is stated as "my X is Y" becomes an open attribute named after X.

Each :class:`Attribute` says whether a subject holds one value at a time (a home
city) or several (pets, allergies), which record kind its statements are, how to
write a self-contained sentence for it, and which words in a question ask about
it (:func:`query_attributes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ATTRIBUTES",
    "DIETS",
    "Attribute",
    "attribute_for_noun",
    "canonical_diet",
    "query_attributes",
    "render",
    "with_article",
]


@dataclass(frozen=True)
class Attribute:
    """One canonical attribute and how its statements read."""

    name: str
    #: Several values at once (pets, allergies, likes): a new value is added, not swapped.
    multi: bool
    kind: str
    #: ``{s}`` subject, ``{v}`` value, ``{a}`` the value with an article, ``{n}`` a noun
    #: the speaker used ("girlfriend"), ``{p}`` the value with its preposition.
    says: str
    says_not: str
    said_once: str
    #: Words of a question that ask about it (lower case, whole words).
    cues: frozenset[str]
    #: Weaker cues: count only beside the subject's name or another cue.
    weak_cues: frozenset[str] = frozenset()


def _cues(text: str) -> frozenset[str]:
    return frozenset(text.split())


ATTRIBUTES: dict[str, Attribute] = {
    a.name: a
    for a in (
        Attribute(
            "home",
            False,
            "fact",
            "{s} lives in {v}.",
            "{s} no longer lives in {v}.",
            "{s} used to live in {v}.",
            _cues("live lives living lived city town move moved moving relocate relocated based"),
            _cues("home where reside resides"),
        ),
        Attribute(
            "address",
            False,
            "fact",
            "{s}'s address is {v}.",
            "{s}'s address is no longer {v}.",
            "{s}'s address used to be {v}.",
            _cues("address street"),
        ),
        Attribute(
            "employer",
            False,
            "fact",
            "{s} works at {v}.",
            "{s} no longer works at {v}.",
            "{s} used to work at {v}.",
            _cues("employer company firm employed"),
            _cues("work works working job"),
        ),
        Attribute(
            "job_title",
            False,
            "fact",
            "{s} works as {a}.",
            "{s} no longer works as {a}.",
            "{s} used to work as {a}.",
            _cues("title role position profession occupation"),
            _cues("job work do living"),
        ),
        Attribute(
            "school",
            False,
            "fact",
            "{s} studies at {v}.",
            "{s} no longer studies at {v}.",
            "{s} used to study at {v}.",
            _cues("school university college study studies studying student"),
        ),
        Attribute(
            "diet",
            False,
            "fact",
            "{s} follows {a} diet.",
            "{s} no longer follows {a} diet.",
            "{s} used to follow {a} diet.",
            _cues("diet vegan vegetarian pescatarian keto meat"),
            _cues("eat eats eating food"),
        ),
        Attribute(
            "phone",
            False,
            "fact",
            "{s}'s phone number is {v}.",
            "{s}'s phone number is no longer {v}.",
            "{s}'s phone number used to be {v}.",
            _cues("phone number cell mobile call text"),
            _cues("reach"),
        ),
        Attribute(
            "email",
            False,
            "fact",
            "{s}'s email address is {v}.",
            "{s}'s email address is no longer {v}.",
            "{s}'s email address used to be {v}.",
            _cues("email e-mail mail inbox"),
            _cues("address reach"),
        ),
        Attribute(
            "partner",
            False,
            "fact",
            "{s}'s {n} is {v}.",
            "{s} is no longer with {v}.",
            "{s} used to be with {v}.",
            _cues(
                "partner girlfriend boyfriend wife husband spouse fiance fiancee fiancé fiancée "
                "dating married seeing relationship together"
            ),
        ),
        Attribute(
            "pets",
            True,
            "fact",
            "{s} has {v}.",
            "{s} no longer has {v}.",
            "{s} used to have {v}.",
            _cues(
                "pet pets dog dogs cat cats puppy kitten rabbit parrot hamster bird fish "
                "tortoise turtle lizard snake horse"
            ),
        ),
        Attribute(
            "allergy",
            True,
            "constraint",
            "{s} is allergic to {v}.",
            "{s} is no longer allergic to {v}.",
            "{s} used to be allergic to {v}.",
            _cues("allergic allergy allergies"),
        ),
        Attribute(
            "schedule",
            False,
            "fact",
            "{s} is {p}.",
            "{s} is no longer {p}.",
            "{s} used to be {p}.",
            _cues("when time day schedule scheduled rescheduled"),
            _cues("meeting meet sync standup class appointment call moved"),
        ),
        Attribute(
            "likes",
            True,
            "preference",
            "{s} likes {v}.",
            "{s} does not like {v}.",
            "{s} used to like {v}.",
            _cues("like likes enjoy enjoys love loves prefer prefers fan into"),
        ),
    )
}

#: Surface nouns of "my X is Y" mapped to canonical attributes; others stay open.
_NOUNS: dict[str, str] = {
    "address": "address",
    "home address": "address",
    "new address": "address",
    "number": "phone",
    "phone": "phone",
    "phone number": "phone",
    "cell": "phone",
    "cell number": "phone",
    "cellphone": "phone",
    "cell phone": "phone",
    "mobile": "phone",
    "mobile number": "phone",
    "mobile phone": "phone",
    "telephone": "phone",
    "telephone number": "phone",
    "email": "email",
    "e-mail": "email",
    "email address": "email",
    "e-mail address": "email",
    "employer": "employer",
    "company": "employer",
    "workplace": "employer",
    "job title": "job_title",
    "title": "job_title",
    "role": "job_title",
    "position": "job_title",
    "occupation": "job_title",
    "profession": "job_title",
    "diet": "diet",
    "partner": "partner",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "wife": "partner",
    "husband": "partner",
    "spouse": "partner",
    "fiance": "partner",
    "fiancee": "partner",
    "fiancé": "partner",
    "fiancée": "partner",
    "hometown": "home",
    "home town": "home",
    "home city": "home",
    "city": "home",
    "school": "school",
    "university": "school",
    "college": "school",
}

#: Diets by the words people use, onto one canonical name each.
DIETS: dict[str, str] = {
    "vegan": "vegan",
    "plant-based": "vegan",
    "plant based": "vegan",
    "vegetarian": "vegetarian",
    "veggie": "vegetarian",
    "pescatarian": "pescatarian",
    "pescetarian": "pescatarian",
    "keto": "keto",
    "ketogenic": "keto",
    "low-carb": "low-carb",
    "low carb": "low-carb",
    "paleo": "paleo",
    "gluten-free": "gluten-free",
    "gluten free": "gluten-free",
    "dairy-free": "dairy-free",
    "dairy free": "dairy-free",
    "lactose-free": "dairy-free",
    "carnivore": "carnivore",
    "mediterranean": "Mediterranean",
    "halal": "halal",
    "kosher": "kosher",
    "omnivore": "omnivore",
    "omnivorous": "omnivore",
    "flexitarian": "flexitarian",
    "raw": "raw food",
    "raw food": "raw food",
    "intermittent fasting": "intermittent fasting",
}
#: What giving up a food means for a diet ("stopped eating meat").
GIVEN_UP: dict[str, str] = {
    "meat": "vegetarian",
    "red meat": "pescatarian",
    "animal products": "vegan",
    "dairy": "dairy-free",
    "gluten": "gluten-free",
    "carbs": "low-carb",
    "sugar": "sugar-free",
}


def canonical_diet(word: str) -> str | None:
    """The canonical diet a word names ("plant-based" is vegan), or None."""
    return DIETS.get(word.casefold().strip())


def attribute_for_noun(noun: str) -> str:
    """The canonical attribute a noun of "my X is Y" names, else the noun itself (open).

    >>> attribute_for_noun("cell number"), attribute_for_noun("favorite color")
    ('phone', 'favourite color')
    """
    key = " ".join(noun.casefold().split())
    key = re.sub(r"^(?:new|current|old|latest|present)\s+", "", key)
    if key in _NOUNS:
        return _NOUNS[key]
    return re.sub(r"^favou?rite\b", "favourite", key)


def with_article(value: str) -> str:
    """``value`` with "a" or "an" in front, unless it already has a determiner."""
    first = value.split(" ", 1)[0].casefold()
    if first in ("a", "an", "the", "my", "his", "her", "their", "our") or value[:1].isupper():
        return value
    return ("an " if first[:1] in "aeiou" else "a ") + value


_TIME_START = re.compile(r"^(?:\d|noon|midnight|half|quarter)", re.I)
_DAY_START = re.compile(
    r"^(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|"
    r"the\s+\d|weekday|weekend)",
    re.I,
)


def _with_preposition(value: str) -> str:
    if re.match(r"^(?:on|at|in|every|each|from|between|twice|once|daily|weekly)\b", value, re.I):
        return value
    if _TIME_START.match(value):
        return f"at {value}"
    if _DAY_START.match(value):
        return f"on {value}"
    return value


def render(
    attribute: str,
    subject: str,
    value: str,
    *,
    negated: bool = False,
    past: bool = False,
    noun: str | None = None,
) -> str:
    """The self-contained sentence stating ``subject``'s ``attribute`` is ``value``.

    >>> render("home", "Sam", "Lyon")
    'Sam lives in Lyon.'
    >>> render("partner", "Ana", "Tom", noun="boyfriend")
    "Ana's boyfriend is Tom."
    """
    if subject[:1].islower() and not subject.startswith(("the ", "a ", "an ")):
        subject = f"the {subject}"  # "the weekly sync", not "weekly sync"
    spec = ATTRIBUTES.get(attribute)
    if spec is None:  # an open attribute: "Sam's favourite colour is green."
        if negated:
            return f"{subject}'s {attribute} is no longer {value}."
        if past:
            return f"{subject}'s {attribute} used to be {value}."
        return f"{subject}'s {attribute} is {value}."
    pattern = spec.says_not if negated else spec.said_once if past else spec.says
    text = pattern.format(
        s=subject,
        v=value,
        a=with_article(value),
        n=noun or "partner",
        p=_with_preposition(value),
    )
    return text[:1].upper() + text[1:]


_QUERY_WORD = re.compile(r"[a-z][a-z'-]*")


def query_attributes(query: str) -> dict[str, float]:
    """The attributes a question asks about, each with a weight in (0, 1].

    A strong cue counts 1; a weak cue ("where", "work") 0.5, only when no strong
    cue of another attribute is present.

    >>> query_attributes("Which city does Sam live in now?")
    {'home': 1.0}
    """
    lowered = query.casefold()
    living = "for a living" in lowered  # a job, not a home
    said = set(_QUERY_WORD.findall(lowered.replace("for a living", " ")))
    found: dict[str, float] = {}
    for spec in ATTRIBUTES.values():
        if said & spec.cues:
            found[spec.name] = 1.0
    for spec in ATTRIBUTES.values():
        if spec.name not in found and said & spec.weak_cues:
            found[spec.name] = 0.5 if not found else 0.25
    work = said & {"work", "works", "working", "worked", "job"}
    if work and said & {"where", "company", "employer", "whom"}:
        found["employer"] = 1.0
        found.pop("job_title", None)
    elif living or (work and said & {"as", "title", "role", "position"}):
        found["job_title"] = 1.0
        found.pop("employer", None)
    if "favourite" in said or "favorite" in said:
        found.pop("likes", None)
        words = query.casefold().split()
        for i, w in enumerate(words):
            if w.startswith(("favourite", "favorite")) and i + 1 < len(words):
                thing = re.sub(r"[^\w -]", "", words[i + 1])
                if thing:
                    found[f"favourite {thing}"] = 1.0
    return found
