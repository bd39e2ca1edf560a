"""Synthetic conversations: a seeded, deterministic generator of everyday chat.

Used to fill a memory with realistic noise (``bench scale``, ``bench locomo
--distractors``). Everything comes from the vocabulary and templates in this
module: nothing is downloaded and no data set is copied.

The text is built in three layers, so that a million turns are not a handful
of repeated strings:

* **personas**: every speaker name gets a stable job, employer, home city,
  hobby, partner, child and pet (derived from the seed and the name), so facts
  about a person recur across their sessions, as in a real history;
* **topics**: a session between two speakers runs through a few of
  seventeen everyday topics (work, hobbies, travel, food, family, health,
  tech, pets, sports, books, music, screen, plans, home, money, learning,
  outdoors), each with its own news, question-and-answer pairs and details;
* **slots**: places, dishes, dates, prices, counts, names and coined proper
  nouns (restaurants, bands, book titles) fill the templates; entities stay
  fixed within a topic segment, numbers and moods are drawn afresh each time.

Turns are 5 to 60 words, about 20 on average, alternating between the two
speakers of a session (the first one has role ``user``, the other
``assistant``).

>>> from datetime import datetime, timezone
>>> start = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> turns = list(generate_turns(3, seed=1, start=start, end=start))
>>> [t.role for t in turns]
['user', 'assistant', 'user']
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from arbormem.bench.synth_topics import (
    _STICKY,
    ASIDES,
    CLOSERS,
    FOLLOW_UPS,
    GREETINGS,
    REACTIONS,
    SHORT,
    SWITCHES,
    TOPICS,
    _Topic,
)
from arbormem.bench.synth_words import (
    ADJ_BAD,
    ADJ_GOOD,
    APPLIANCES,
    APPS,
    BAND_NOUNS,
    BOOK_ADJ,
    BOOK_NOUN,
    BREEDS,
    BUSINESSES,
    CITIES,
    CLOCK_WORDS,
    COLOURS,
    COUNTRIES,
    CRAFTS,
    DESSERTS,
    DEVICES,
    DISHES,
    DRINKS,
    EMPLOYER_KINDS,
    ERRANDS,
    EVENTS,
    FEELINGS,
    GEAR,
    GENRES,
    HERBS,
    HOBBIES,
    INGREDIENTS,
    INSTRUMENTS,
    ITEMS,
    JOBS,
    LANDMARKS,
    LANGUAGES,
    MASCOTS,
    MONTHS,
    NAMES,
    NEEDS,
    NUMBER_WORDS,
    ORDINALS,
    OUTDOORS,
    PET_NAMES,
    PETS,
    PLACES,
    PLANTS,
    PROJECTS,
    RELATIVES,
    RESTAURANT_KINDS,
    ROOMS,
    SHOW_WORDS,
    SPAN_WORDS,
    SPICES,
    SPORTS,
    STREETS,
    SUBJECTS,
    SURNAMES,
    SYMPTOMS,
    TAKEOUT,
    THINGS,
    TRAIL_ENDS,
    TRICKS,
    VENUES,
    WEATHER,
    WEEKDAYS,
    WHEN_FUTURE,
    WHEN_PAST,
    _coin,
    _items,
)

__all__ = ["NAMES", "TOPICS", "SynthTurn", "generate_queries", "generate_turns"]

MIN_WORDS = 5
MAX_WORDS = 60
#: Turns per session, inclusive bounds (the last session may be shorter).
SESSION_TURNS = (20, 40)

DEFAULT_START = datetime(2024, 1, 1, tzinfo=timezone.utc)
DEFAULT_END = datetime(2025, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SynthTurn:
    """One generated message."""

    speaker: str
    role: str
    content: str
    timestamp: datetime
    #: Key of the session (one conversation between two speakers).
    session: str
    topic: str


# -- the generator --------------------------------------------------------------------------


class _Fill(dict[str, str]):
    """Slot values of one sentence group, drawn on first use."""

    def __init__(self, gen: _Generator, me: str, you: str) -> None:
        super().__init__(gen.segment)
        self.gen = gen
        self["me"] = me
        self["you"] = you

    def __missing__(self, key: str) -> str:
        gen = self.gen
        if key.startswith("my_"):
            value = gen.persona(self["me"])[key[3:]]
        elif key.startswith("your_"):
            value = gen.persona(self["you"])[key[5:]]
        else:
            value = gen.makers[key]()
            if key in _STICKY:
                gen.segment[key] = value
        self[key] = value
        return value


_WORD = re.compile(r"[^\W\d_]+")


def _norm(name: str) -> str:
    return name.strip().casefold()


class _Generator:
    def __init__(self, seed: int, speakers: Sequence[str] | None, exclude: Collection[str]) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.banned = banned = frozenset(_norm(n) for n in exclude if _norm(n))
        self.names = self.keep(NAMES)
        if len(self.names) < 2:
            raise ValueError("exclude_names leaves fewer than two names to speak")
        if speakers is not None:
            chosen = tuple(dict.fromkeys(s for s in speakers if _norm(s) not in banned))
            if len(chosen) < 2:
                raise ValueError("need at least two speakers (after exclude_names)")
            self.speakers = chosen
        else:
            self.speakers = self.names
        keep = self.keep
        self.topics = TOPICS if not banned else tuple(self._keep_topic(t) for t in TOPICS)
        self.greetings, self.reactions, self.switches = (
            keep(GREETINGS),
            keep(REACTIONS),
            keep(SWITCHES),
        )
        self.follow_ups, self.closers, self.short = keep(FOLLOW_UPS), keep(CLOSERS), keep(SHORT)
        self.asides = keep(ASIDES)
        self.segment: dict[str, str] = {}
        self._personas: dict[str, dict[str, str]] = {}
        self._persona_pools = {
            "job": keep(JOBS),
            "employer": keep(EMPLOYER_KINDS),
            "city": keep(CITIES),
            "hobby": keep(HOBBIES),
            "pet": keep(PETS),
            "petname": keep(PET_NAMES),
        }
        self.makers = self._makers()

    def allowed(self, text: str) -> bool:
        """False when the text contains a banned name as a word."""
        return not self.banned or not any(_norm(w) in self.banned for w in _WORD.findall(text))

    def keep(self, pool: Sequence[str]) -> tuple[str, ...]:
        """The entries of the pool that contain no banned name."""
        kept = tuple(filter(self.allowed, pool))
        if not kept:
            raise ValueError(f"exclude_names removes every entry of {list(pool)[:3]}...")
        return kept

    def _keep_topic(self, topic: _Topic) -> _Topic:
        qa = tuple(
            (question, answers)
            for question, all_answers in topic.qa
            if self.allowed(question) and (answers := tuple(filter(self.allowed, all_answers)))
        )
        if not qa:
            raise ValueError(f"exclude_names removes every question of topic {topic.name!r}")
        return _Topic(topic.name, self.keep(topic.news), qa, self.keep(topic.details))

    # slot makers ----------------------------------------------------------------------

    def _makers(self) -> dict[str, Callable[[], str]]:
        rng = self.rng
        choice = rng.choice
        randint = rng.randint
        keep = self.keep

        def pick(pool: Sequence[str]) -> Callable[[], str]:
            items = keep(pool)
            return lambda: choice(items)

        names = self.names
        surnames, cities, months = keep(SURNAMES), keep(CITIES), keep(MONTHS)
        book_adj, book_noun, kinds, mascots = (
            keep(BOOK_ADJ),
            keep(BOOK_NOUN),
            keep(RESTAURANT_KINDS),
            keep(MASCOTS),
        )
        employer_kinds, band_nouns, trail_ends = (
            keep(EMPLOYER_KINDS),
            keep(BAND_NOUNS),
            keep(TRAIL_ENDS),
        )
        good, bad, number_words = keep(ADJ_GOOD), keep(ADJ_BAD), keep(NUMBER_WORDS)
        clock_words = keep(CLOCK_WORDS)
        spans, show_words = keep(SPAN_WORDS), keep(SHOW_WORDS)

        def price() -> str:
            return f"${randint(4, 90) if rng.random() < 0.6 else randint(90, 600)}"

        def clock() -> str:
            if rng.random() < 0.2:
                return choice(clock_words)
            return f"{randint(1, 12)}:{choice(('00', '15', '30', '45'))}"

        def date() -> str:
            day = randint(1, 28)
            suffix = "th" if 10 <= day <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
            if rng.random() < 0.5:
                return f"{choice(months)} {day}{suffix}"
            return f"the {day}{suffix}"

        def book() -> str:
            r = rng.random()
            if r < 0.45:
                return f"The {choice(book_adj)} {choice(book_noun)}"
            if r < 0.75:
                return f"{choice(book_noun)} of {self.coined()}"
            return f"A {choice(spans)} in {choice(cities)}"

        def band() -> str:
            if rng.random() < 0.5:
                return f"The {self.coined()} {choice(band_nouns)}"
            return self.coined()

        def author() -> str:
            return f"{choice(names)} {choice(surnames) if rng.random() < 0.6 else self.coined()}"

        return {
            "adj": lambda: choice(good if rng.random() < 0.6 else bad),
            "adj_good": lambda: choice(good),
            "adj_bad": lambda: choice(bad),
            "feel": pick(FEELINGS),
            "when_past": pick(WHEN_PAST),
            "when_future": pick(WHEN_FUTURE),
            "date": date,
            "month": lambda: choice(months),
            "weekday": pick(WEEKDAYS),
            "weekday2": pick(WEEKDAYS),
            "clock": clock,
            "clock2": clock,
            "num": lambda: choice(number_words) if rng.random() < 0.5 else str(randint(2, 12)),
            "count": lambda: str(randint(3, 40)),
            "big": lambda: f"{randint(2, 95) * 100:,}",
            "years": lambda: str(randint(2, 25)),
            "hours": lambda: str(randint(2, 14)),
            "minutes": lambda: str(randint(2, 18) * 5),
            "km": lambda: str(choice((5, 8, 10, 12, 15, 21, 25, 30, 42))),
            "price": price,
            "price2": price,
            "bigprice": lambda: f"${randint(8, 90) * 50:,}",
            "age": lambda: str(randint(6, 95)),
            "petage": lambda: str(randint(1, 15)),
            "steps": lambda: f"{randint(5, 15) * 1000:,}",
            "times": lambda: choice(number_words[:4]),
            "score": lambda: f"{randint(0, 6)}-{randint(0, 6)}",
            "temp": lambda: str(randint(-5, 34)),
            "ordinal": pick(ORDINALS),
            "friend": lambda: choice(names),
            "friend2": lambda: choice(names),
            "babyname": lambda: choice(names),
            "relative": pick(RELATIVES),
            "restaurant": lambda: f"{self.coined()} {choice(kinds)}",
            "employer": lambda: f"{self.coined()} {choice(employer_kinds)}",
            "dish": pick(DISHES),
            "dish2": pick(DISHES),
            "dessert": pick(DESSERTS),
            "ingredient": pick(INGREDIENTS),
            "spice": pick(SPICES),
            "drink": pick(DRINKS),
            "takeout": pick(TAKEOUT),
            "city": lambda: choice(cities),
            "city2": lambda: choice(cities),
            "country": pick(COUNTRIES),
            "landmark": pick(LANDMARKS),
            "place": pick(PLACES),
            "street": pick(STREETS),
            "job": pick(JOBS),
            "project": pick(PROJECTS),
            "hobby": pick(HOBBIES),
            "craft": pick(CRAFTS),
            "outdoor": pick(OUTDOORS),
            "gear": pick(GEAR),
            "instrument": pick(INSTRUMENTS),
            "pet": pick(PETS),
            "breed": pick(BREEDS),
            "trick": pick(TRICKS),
            "thing": pick(THINGS),
            "symptom": pick(SYMPTOMS),
            "device": pick(DEVICES),
            "app": pick(APPS),
            "need": pick(NEEDS),
            "business": pick(BUSINESSES),
            "sport": pick(SPORTS),
            "team": lambda: f"{choice(cities)} {choice(mascots)}",
            "book": book,
            "author": author,
            "subject": pick(SUBJECTS),
            "language": pick(LANGUAGES),
            "band": band,
            "venue": pick(VENUES),
            "genre": pick(GENRES),
            "genre2": pick(GENRES),
            "show": lambda: f"{choice(show_words)} {choice(book_noun)}",
            "film": lambda: f"{choice(book_adj)} {choice(book_noun)}",
            "event": pick(EVENTS),
            "errand": pick(ERRANDS),
            "appliance": pick(APPLIANCES),
            "room": pick(ROOMS),
            "colour": pick(COLOURS),
            "item": pick(ITEMS),
            "plant": pick(PLANTS),
            "herb": pick(HERBS),
            "weather": pick(WEATHER),
            "trail": lambda: f"{self.coined()} {choice(trail_ends)}",
        }

    def coined(self) -> str:
        """A made-up proper noun of two or three syllables."""
        return _coin(self.rng, self.banned)

    def persona(self, name: str) -> dict[str, str]:
        """Stable facts about a speaker, the same in every session they appear in."""
        found = self._personas.get(name)
        if found is None:
            rng = random.Random(zlib.crc32(f"{self.seed}:{name}".encode()))
            pools = self._persona_pools
            found = {key: rng.choice(pool) for key, pool in pools.items()}
            found["employer"] = f"{_coin(rng, self.banned)} {found['employer']}"
            others = [n for n in self.names if n != name]
            found["partner"] = rng.choice(others)
            found["kid"] = rng.choice(others)
            found["kidage"] = str(rng.randint(2, 16))
            self._personas[name] = found
        return found

    # text --------------------------------------------------------------------------------

    def turns(self, n: int, start: datetime, end: datetime, prefix: str) -> Iterator[SynthTurn]:
        rng = self.rng
        span_us = (end - start) // timedelta(microseconds=1)
        produced = 0
        number = 0
        while produced < n:
            number += 1
            length = min(n - produced, rng.randint(*SESSION_TURNS))
            first = start + timedelta(microseconds=span_us * produced // n)
            # Turns a few seconds to a few minutes apart, never past the next session's start.
            step = min(rng.randint(15_000_000, 180_000_000), span_us // n)
            a, b = rng.sample(self.speakers, 2)
            key = f"{prefix}{number}"
            for i, (topic, content) in enumerate(self._session(length, a, b)):
                yield SynthTurn(
                    speaker=a if i % 2 == 0 else b,
                    role="user" if i % 2 == 0 else "assistant",
                    content=content,
                    timestamp=first + timedelta(microseconds=i * step),
                    session=key,
                    topic=topic,
                )
            produced += length

    def _session(self, length: int, a: str, b: str) -> Iterator[tuple[str, str]]:
        rng = self.rng
        random_ = rng.random
        choice = rng.choice
        used: set[str] = set()  # templates already said in this session

        def fresh(pool: Sequence[str], parts: list[str]) -> None:
            """Append a template of the pool not said yet in the session, if one comes up."""
            for _ in range(4):
                template = choice(pool)
                if template not in used:
                    used.add(template)
                    parts.append(template)
                    return

        def ask(parts: list[str]) -> tuple[str, ...] | None:
            for _ in range(4):
                question, answers = choice(topic.qa)
                if question not in used:
                    used.add(question)
                    parts.append(question)
                    return answers
            return None

        topic = choice(self.topics)
        self.segment = {}
        pending: tuple[str, ...] | None = None  # answers to the question just asked
        in_topic = 0
        for i in range(length):
            me, you = (a, b) if i % 2 == 0 else (b, a)
            parts: list[str] = []
            asked: tuple[str, ...] | None = None
            if i == 0:
                parts.append(choice(self.greetings))
                if random_() < 0.2:
                    parts.append(choice(self.asides))
                fresh(topic.news, parts)
                if random_() < 0.7:
                    fresh(topic.details, parts)
                if random_() < 0.35:
                    asked = ask(parts)
            elif i == length - 1 and length > 2:
                parts.append(choice(pending) if pending is not None else choice(self.reactions))
                if random_() < 0.5:
                    fresh(topic.details, parts)
                parts.append(choice(self.closers))
            elif pending is not None:
                parts.append(choice(pending))
                if random_() < 0.75:
                    fresh(topic.details, parts)
                if random_() < 0.2:
                    fresh(topic.news, parts)
                if random_() < 0.3:
                    parts.append(choice(self.follow_ups))
            elif in_topic >= 4 and random_() < 0.2:
                topic = choice([t for t in self.topics if t is not topic])
                self.segment = {}
                in_topic = 0
                parts.append(choice(self.switches))
                fresh(topic.news, parts)
                if random_() < 0.6:
                    fresh(topic.details, parts)
            elif random_() < 0.06:
                parts.append(choice(self.short))
                if random_() < 0.5:
                    parts.append(choice(self.asides))
            else:
                parts.append(choice(self.reactions))
                if random_() < 0.1:
                    parts.append(choice(self.asides))
                r = random_()
                if r < 0.45:
                    if random_() < 0.5:
                        fresh(topic.details, parts)
                    asked = ask(parts)
                elif r < 0.8:
                    fresh(topic.news, parts)
                    if random_() < 0.5:
                        fresh(topic.details, parts)
                else:
                    fresh(topic.details, parts)
                    fresh(topic.details, parts)
                    if random_() < 0.3:
                        parts.append(choice(self.follow_ups))
            in_topic += 1
            pending = asked
            yield topic.name, self._render(parts, me, you)

    def _render(self, parts: list[str], me: str, you: str) -> str:
        if len(parts) < 2 or "{" not in "".join(parts):
            # Every turn carries at least one filled slot: no stock phrase stands alone.
            parts.append(self.rng.choice(self.asides))
        fill = _Fill(self, me, you)
        texts = []
        for template in parts:
            text = template.format_map(fill)
            texts.append(text if text[:1].isupper() else text[:1].upper() + text[1:])
        content = " ".join(texts)
        while content.count(" ") + 1 > MAX_WORDS and len(texts) > 1:
            texts.pop()
            content = " ".join(texts)
        while content.count(" ") + 1 < MIN_WORDS:
            content += " " + self.rng.choice(self.asides).format_map(fill)
        return content


def generate_turns(
    n: int,
    *,
    seed: int = 0,
    start: datetime = DEFAULT_START,
    end: datetime = DEFAULT_END,
    speakers: Sequence[str] | None = None,
    exclude_names: Collection[str] = (),
    session_prefix: str = "synth-",
) -> Iterator[SynthTurn]:
    """``n`` turns of everyday conversation, the same ones for the same arguments.

    Sessions of 20 to 40 turns between two speakers (from ``speakers``, else
    a built-in pool of names) follow one another, their starts spread evenly
    over ``[start, end]``; every timestamp lies within it and they never
    decrease. Names in ``exclude_names`` (case-insensitive) are never a
    speaker and never appear in the text. Sessions are keyed
    ``<session_prefix>1``, ``<session_prefix>2``...
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if end < start:
        raise ValueError("end must not be before start")
    gen = _Generator(seed, speakers, exclude_names)
    return gen.turns(n, start, end, session_prefix)


_QUERY_TEMPLATES = _items(
    """What is the name of {name}'s {pet}?|When did {name} go to {city}?|
    What does {name} do for a living?|Where does {name} work?|What did {name} cook for {friend}?|
    Which book did {name} recommend?|How much did {name} pay for {item}?|
    When is {friend}'s {event}?|What did the doctor tell {name} about {symptom}?|
    What instrument is {name} learning?|Who is {name} travelling to {country} with?|
    How long has {name} been doing {hobby}?|What happened to {name}'s {device}?|
    Which team does {name} support?|Where did {name} and {friend} have dinner?|
    What course is {name} taking?|What is {name} growing in the garden?|
    Why was {name}'s flight to {city} delayed?|What did {name} think of {film}?|
    When did {name} adopt a {pet}?|What is the name of {name}'s partner?|
    How old is {name}'s kid?|What did {name} make at the {hobby} class?|
    Where is {name} going in {month}?|What did {name} and {friend} do last weekend?|
    How did {name} feel about {project}?|What did {name} buy on sale?|
    Which restaurant did {name} like near the {place}?|What is {name} saving money for?|
    When is {name}'s exam in {subject}?|What broke in {name}'s flat?|
    How far did {name} run?|Which band did {name} see live?|What is {name} reading?|
    Does {name} prefer ebooks or paper?|What trick did {name}'s {pet} learn?|
    {dish} recipe|{city} trip in {month}|{band} concert tickets|vet appointment|
    {hobby} class|{errand}|{subject} course|{sport} match score"""
)


def generate_queries(
    n: int,
    *,
    seed: int = 0,
    names: Sequence[str] | None = None,
    exclude_names: Collection[str] = (),
) -> list[str]:
    """``n`` different recall queries in the style of the generated chat, for
    latency runs.

    Mostly questions about a person (drawn from ``names``, else the built-in
    pool), some keyword searches; deterministic for a seed. No query repeats: a
    repeated one would time the caches it warmed, not a search. Raises
    ``ValueError`` when the templates cannot make ``n`` different queries.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    gen = _Generator(seed + 7_919, names if names and len(names) > 1 else None, exclude_names)
    people = gen.speakers
    templates = gen.keep(_QUERY_TEMPLATES)
    out: dict[str, None] = {}
    misses = 0  # draws in a row that made nothing new
    while len(out) < n:
        if misses > 5_000:
            raise ValueError(
                f"only {len(out):,} different queries could be made, {n:,} were asked for:"
                " ask for fewer, or give more names"
            )
        fill: dict[str, Any] = _Fill(gen, gen.rng.choice(people), gen.rng.choice(people))
        fill["name"] = fill["me"]
        gen.segment = {}
        query = gen.rng.choice(templates).format_map(fill)
        misses = misses + 1 if query in out else 0
        out[query] = None
    return list(out)
