"""The generator of ``bench updates``: conversations in which attributes change.

Two friends talk over a year, in sessions three to six weeks apart; each has
three to five attributes (home, employer, job, diet, phone, email, partner,
pets, allergies, a meeting's time) and a third person they talk about has one
or two. Each attribute is first stated, then changes zero to three times, in
many phrasings (first person, third person, pronouns, relative dates), among
chatter and distractors (other people's facts, plans that did not happen,
denials, "used to"). For each person and attribute: a question about the
current value and one about the value in a past month. Everything comes from
the vocabulary below; nothing is downloaded.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from arbormem.bench.synth import CITIES, NAMES
from arbormem.records.model import value_key

__all__ = ["Conversation", "Message", "Question", "generate"]


@dataclass(frozen=True)
class Message:
    id: str
    speaker: str
    text: str
    timestamp: datetime
    role: str = "user"


@dataclass(frozen=True)
class Question:
    """A question with the value that answers it.

    ``expect`` is the value the first record must hold; ``None`` means the
    attribute no longer holds and the first record must say so (a denial of
    ``denied``). ``as_of`` questions are asked of what held at that moment.
    """

    text: str
    subject: str
    attribute: str
    expect: str | None
    as_of: datetime | None = None
    denied: str | None = None
    asker: str | None = None


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, ...]
    messages: list[Message] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


# --------------------------------------------------------------------------- vocabulary

_EMPLOYERS = [
    "Acme Corp",
    "Northwind",
    "Globex",
    "Initech",
    "Brightline Health",
    "Kestrel Labs",
    "Bluefin Analytics",
    "Harbor Bank",
    "Greenleaf Foods",
    "Orbital Media",
    "Copperleaf",
    "Fablehouse Games",
    "Lumen Energy",
    "Redwood Logistics",
    "Tidewater Insurance",
    "Quarry Studio",
    "Meridian Hotels",
    "Pinecrest Clinic",
    "Solstice Software",
    "Ironbark Engineering",
]
_TITLES = [
    "nurse",
    "data analyst",
    "product designer",
    "teacher",
    "software engineer",
    "project manager",
    "barista",
    "paramedic",
    "accountant",
    "graphic designer",
    "pharmacist",
    "sous chef",
    "physiotherapist",
    "librarian",
]
_DIETS = ("vegan", "vegetarian", "pescatarian", "keto", "gluten-free")
_ALLERGENS = ("peanuts", "shellfish", "penicillin", "cats", "pollen", "strawberries", "latex")
_PET_KINDS = ("dog", "cat", "rabbit", "parrot", "puppy", "kitten", "tortoise")
_PET_NAMES = [
    "Rex",
    "Miso",
    "Biscuit",
    "Pepper",
    "Luna",
    "Olive",
    "Ziggy",
    "Mochi",
    "Nutmeg",
    "Juniper",
    "Waffles",
    "Pickle",
]
_EVENTS = [
    "weekly sync",
    "book club",
    "yoga class",
    "team standup",
    "piano lesson",
    "pottery class",
    "running club",
    "design review",
    "Spanish class",
    "climbing session",
]
_SLOTS = [
    "Mondays at 9am",
    "Tuesdays at 6pm",
    "Wednesday mornings",
    "Thursdays at 3pm",
    "Fridays at noon",
    "Saturday mornings",
    "Sundays at 5pm",
    "Tuesdays at 7:30pm",
    "Thursday evenings",
    "Mondays at 4pm",
]
_RELATIONS = ("sister", "brother", "cousin", "friend", "neighbour", "colleague")

_CHATTER = [
    "The weather has been so grey this week.",
    "Did you watch the match on Saturday?",
    "I made a huge pot of soup, it lasted three days.",
    "My phone battery dies by lunchtime these days.",
    "Traffic this morning was unreal.",
    "Have you read anything good lately?",
    "I finally fixed the squeaky door, it only took a year.",
    "Haha, that reminds me of the time we got lost hiking.",
    "Not much new here, just busy.",
    "I'm so tired, I slept badly again.",
    "We should get coffee sometime soon.",
    "That documentary about octopuses was wild.",
    "I burned the toast again this morning.",
    "Work has been hectic but fine.",
    "Sounds good to me!",
    "Ha, classic.",
    "How was your weekend?",
    "I'm thinking of repainting the kitchen.",
    "The new season of that show is out.",
    "Honestly I could use a holiday.",
    "My neighbour's dog barked all night.",
    "I tried that new ramen place, it was fine.",
    "Oh nice, tell me more.",
    "That sounds stressful, hope it gets better.",
    "I've been getting into crosswords.",
    "It rained the whole weekend so we stayed in.",
]


def _t(*templates: str) -> tuple[str, ...]:
    return templates


# Each attribute: how it is stated by the person (I), about them by someone else
# ({p} is their name), how it changes, and how it is asked about.
_SAY: dict[str, dict[str, tuple[str, ...]]] = {
    "home": {
        "state": _t(
            "I live in {v}.",
            "I've been living in {v} for a few years now.",
            "I live in {v}, near the river, and life is pretty good.",
            "I'm based in {v} at the moment.",
            "We live in {v}, in a small flat near the station.",
        ),
        "change": _t(
            "I moved to {v} {when}!",
            "Big news: we finally relocated to {v} {when}.",
            "I packed up and moved to {v} {when}.",
            "We moved from {old} to {v} {when}.",
            "I'm living in {v} now, the move was {when}.",
            "Just so you know, I moved to {v} {when}, new flat and everything.",
            "We bought a house in {v} and moved in {when}.",
        ),
        "third": _t(
            "My {rel} {p} lives in {v}.",
            "{p} lives in {v}, by the way.",
            "{p} is based in {v} these days.",
        ),
        "third_change": _t(
            "My {rel} {p} moved to {v} {when}.",
            "Did you hear? {p} relocated to {v} {when}.",
            "{p} called me. She moved to {v} {when}.",
            "Remember my {rel} {p}? {p} lives in {v} now.",
        ),
        "ask": _t(
            "Where does {p} live now?",
            "Which city is {p} living in these days?",
            "What city does {p} live in?",
        ),
        "ask_then": _t(
            "Where did {p} live in {month}?", "Which city was {p} living in in {month}?"
        ),
    },
    "employer": {
        "state": _t(
            "I work at {v}.",
            "I've been working for {v} for two years.",
            "I work for {v}, mostly on the boring stuff.",
        ),
        "change": _t(
            "I started at {v} {when}!",
            "I got a job at {v}, I started {when}.",
            "I left {old} and joined {v} {when}.",
            "I accepted an offer from {v}, first day was {when}.",
            "New job! I'm working at {v} now.",
            "I quit {old} and started at {v} {when}.",
        ),
        "third": _t("My {rel} {p} works at {v}.", "{p} works for {v}."),
        "third_change": _t(
            "{p} just started at {v}.",
            "My {rel} {p} got a job at {v} {when}.",
            "{p} left {old}, she works at {v} now.",
        ),
        "ask": _t(
            "Where does {p} work now?", "Who is {p}'s employer?", "Which company does {p} work for?"
        ),
        "ask_then": _t(
            "Where did {p} work in {month}?", "Which company was {p} working for in {month}?"
        ),
    },
    "job_title": {
        "state": _t("I work as a {v}.", "I'm a {v}.", "My job title is {v}."),
        "change": _t(
            "I got promoted to {v} {when}!",
            "I started working as a {v} {when}.",
            "I'm a {v} now, I switched careers {when}.",
            "My new role is {v}.",
        ),
        "ask": _t("What does {p} do for a living now?", "What is {p}'s job title?"),
        "ask_then": _t("What was {p}'s job title in {month}?", "What did {p} work as in {month}?"),
    },
    "diet": {
        "state": _t(
            "I'm {v}, so no meat for me.",
            "I've been {v} for years.",
            "I'm {v}, I hope that's ok for dinner.",
        ),
        "change": _t(
            "I went {v} {when}.",
            "I've switched to a {v} diet.",
            "I'm {v} now, I changed my diet {when}.",
            "Since {when} I've been {v}.",
        ),
        "ask": _t("What diet does {p} follow now?", "What does {p} eat these days, diet-wise?"),
        "ask_then": _t("What diet was {p} on in {month}?", "What was {p}'s diet in {month}?"),
    },
    "phone": {
        "state": _t("My number is {v}.", "You can reach me at {v}.", "My phone number is {v}."),
        "change": _t(
            "My new number is {v}.",
            "I changed my number, it's {v} now.",
            "New phone number: {v}",
            "I got a new number, it's {v}.",
            "Text me on {v} from now on, I changed numbers.",
        ),
        "ask": _t("What is {p}'s phone number?", "What number can I call {p} on?"),
        "ask_then": _t("What was {p}'s phone number in {month}?"),
    },
    "email": {
        "state": _t("My email is {v}.", "Email me at {v}."),
        "change": _t("My new email address is {v}.", "I changed my email to {v}."),
        "ask": _t("What is {p}'s email address?"),
        "ask_then": _t("What was {p}'s email address in {month}?"),
    },
    "partner": {
        "state": _t(
            "My girlfriend {v} says hi.", "I'm dating {v}.", "My partner {v} is a great cook."
        ),
        "change": _t(
            "I've started dating {v}.",
            "{v} and I are together now!",
            "I'm seeing someone new, {v} and I have been dating since {when}.",
        ),
        "end": _t(
            "{old} and I broke up {when}.", "I split up with {old}.", "We broke up, {old} and I."
        ),
        "ask": _t("Who is {p} dating now?", "Who is {p}'s partner?"),
        "ask_then": _t("Who was {p} dating in {month}?"),
    },
    "pets": {
        "state": _t("I have a {kind} named {v}.", "My {kind} {v} loves the beach."),
        "change": _t(
            "We adopted a {kind} named {v} {when}!",
            "I got a {kind} {when}, her name is {v}. We named the {kind} {v}.",
            "Meet {v}, my new {kind}! I adopted a {kind} called {v} {when}.",
        ),
        "lose": _t("{old} passed away {when}, I'm still sad.", "Sadly {old} died {when}."),
        "ask": _t("What pet does {p} have now?", "What is the name of {p}'s pet?"),
        "ask_then": _t("What pet did {p} have in {month}?"),
    },
    "allergy": {
        "state": _t("I'm allergic to {v}.", "I'm really allergic to {v}, so careful."),
        "end": _t(
            "Turns out I'm not allergic to {old} anymore!",
            "I outgrew my {old} allergy, the doctor confirmed it {when}.",
            "Good news, I'm no longer allergic to {old}.",
        ),
        "ask": _t("Is {p} allergic to anything now?", "What is {p} allergic to?"),
        "ask_then": _t("What was {p} allergic to in {month}?"),
    },
    "schedule": {
        "state": _t("Our {ev} is on {v}.", "The {ev} is every week on {v}."),
        "change": _t(
            "Heads up: the {ev} has been moved to {v}.",
            "They rescheduled the {ev} to {v}.",
            "The {ev} is now on {v}.",
            "We moved the {ev} to {v} starting next week.",
        ),
        "ask": _t("When is the {ev} now?", "What day is the {ev} on these days?"),
        "ask_then": _t("When was the {ev} in {month}?"),
    },
}
_DISTRACTORS = _t(
    "My cousin {d} lives in {city}.",
    "{d} works at {company}, she loves it.",
    "I thought about moving to {city} but I'm staying put.",
    "I'm not moving to {city} after all.",
    "If I ever go vegan I'll let you know.",
    "{d} might move to {city} next year.",
    "My old number was {phone}, so ignore that one.",
    "I used to live in {city} when I was a kid.",
    "{d} is allergic to {allergen}, poor thing.",
    "My friend {d} just adopted a {kind} named {pet}.",
    "I'd love to work at {company} someday.",
    "Should I move to {city}? I keep wondering.",
)
_WHEN = ("yesterday", "last week", "a few days ago", "two weeks ago", "last month", "on Monday", "")


# --------------------------------------------------------------------------- generator


@dataclass
class _Story:
    """One person's attribute: values over time, (start, value); the first starts at None."""

    person: str
    attribute: str
    values: list[tuple[datetime | None, str | None]]
    third: bool = False
    rel: str = ""
    kind: str = ""


def _phone(rng: random.Random) -> str:
    a, b = rng.randint(100, 999), rng.randint(1000, 9999)
    return rng.choice([f"555-{a}-{b}", f"(555) {a}-{b}", f"555 {a} {b}", f"+1 555 {a} {b}"])


def _when_date(phrase: str, said: datetime) -> datetime:
    """The day the extractor will read ``phrase`` as, said at ``said``."""
    day = said.replace(hour=0, minute=0, second=0, microsecond=0)
    if phrase == "yesterday":
        return day - timedelta(days=1)
    if phrase == "last week":
        return day - timedelta(days=day.weekday() + 7)
    if phrase == "a few days ago":
        return day - timedelta(days=3)
    if phrase == "two weeks ago":
        return day - timedelta(days=14)
    if phrase == "last month":
        first = day.replace(day=1) - timedelta(days=1)
        return first.replace(day=1)
    if phrase == "on Monday":
        return day - timedelta(days=day.weekday() or 7)
    return said


def _values(attribute: str, rng: random.Random, n: int, taken: set[str]) -> list[str]:
    pools = {
        "home": list(CITIES),
        "employer": _EMPLOYERS,
        "job_title": _TITLES,
        "diet": list(_DIETS),
        "email": [],
        "phone": [],
        "partner": list(NAMES),
        "pets": _PET_NAMES,
        "allergy": list(_ALLERGENS),
        "schedule": _SLOTS,
    }
    # small pools (diets, slots) may repeat across people, never within one history
    shared = attribute in ("diet", "job_title", "allergy", "schedule")
    out: list[str] = []
    while len(out) < n:
        if attribute == "phone":
            value = _phone(rng)
        elif attribute == "email":
            host = rng.choice(["mail.example", "example.org", "inbox.example"])
            value = f"{rng.choice(NAMES).lower()}.{rng.randint(10, 99)}@{host}"
        else:
            fresh = [
                v
                for v in pools[attribute]
                if value_key(v) not in {value_key(o) for o in out}
                and (shared or value_key(v) not in taken)
            ]
            value = rng.choice(fresh)
        if shared or value_key(value) not in taken:
            taken.add(value_key(value))
            out.append(value)
    return out


def _month_inside(
    start: datetime | None, end: datetime | None, first: datetime, last: datetime
) -> datetime | None:
    """A whole calendar month lying inside [start, end) (with a margin), within the
    conversation's span; its middle, or None."""
    lo = (start or first - timedelta(days=60)) + timedelta(days=3)
    hi = (end or last) - timedelta(days=3)
    month = datetime(lo.year, lo.month, 1, tzinfo=timezone.utc)
    if month < lo:
        month = (month + timedelta(days=32)).replace(day=1)
    options = []
    while True:
        nxt = (month + timedelta(days=32)).replace(day=1)
        if nxt > hi:
            break
        options.append(month)
        month = nxt
    return options[len(options) // 2] if options else None


def generate(conversations: int = 60, *, seed: int = 0) -> list[Conversation]:
    """``conversations`` seeded conversations with their questions."""
    return [_conversation(seed * 100_003 + i, f"gen-{seed}-{i}") for i in range(conversations)]


def _conversation(seed: int, cid: str) -> Conversation:
    rng = random.Random(seed)
    names = rng.sample(NAMES, 4)
    a, b, c, d = names
    taken: set[str] = {value_key(n) for n in names}
    start = datetime(2023, 1, 9, 18, tzinfo=timezone.utc) + timedelta(days=rng.randint(0, 200))
    sessions = rng.randint(8, 11)
    dates = [start]
    for _ in range(sessions - 1):
        dates.append(dates[-1] + timedelta(days=rng.randint(20, 45), hours=rng.randint(-3, 3)))
    stories: list[_Story] = []
    for person in (a, b):
        for attribute in rng.sample(list(_SAY), rng.randint(3, 5)):
            if attribute == "schedule" and person == b:
                continue
            stories.append(_Story(person, attribute, []))
    rel = rng.choice(_RELATIONS)
    for attribute in rng.sample(["home", "employer"], rng.randint(1, 2)):
        stories.append(_Story(c, attribute, [], third=True, rel=rel))

    # plan: a first statement in session 0 or 1, then 0-3 changes in later sessions
    plan: dict[int, list[tuple[_Story, str]]] = {i: [] for i in range(sessions)}
    for story in stories:
        changes = rng.choice([0, 1, 1, 2, 2, 3])
        if story.attribute == "allergy":
            changes = rng.choice([0, 1])  # the allergy ends, or not
        if story.attribute == "pets":
            story.kind = rng.choice(_PET_KINDS)
        story_values = _values(story.attribute, rng, changes + 1, taken)
        first = rng.choice([0, 1])
        later = sorted(rng.sample(range(first + 1, sessions), min(changes, sessions - first - 1)))
        plan[first].append((story, story_values[0]))
        for n, session in enumerate(later):
            value = story_values[n + 1]
            if story.attribute == "allergy" or (
                story.attribute == "partner" and rng.random() < 0.3
            ):
                plan[session].append((story, "<end>"))
            else:
                plan[session].append((story, value))
        if story.attribute == "schedule":
            story.rel = rng.choice([e for e in _EVENTS if value_key(e) not in taken])
            taken.add(value_key(story.rel))

    conv = Conversation(cid, (a, b))
    n_msg = 0

    def say(speaker: str, text: str, when: datetime) -> None:
        nonlocal n_msg
        n_msg += 1
        role = "user" if speaker == a else "assistant"
        conv.messages.append(Message(f"{cid}-m{n_msg}", speaker, text, when, role))

    for i, date in enumerate(dates):
        when = date
        items = list(plan[i])
        rng.shuffle(items)
        chatter = rng.randint(3, 8)
        slots: list[tuple[str, str | None, tuple[_Story, str] | None]] = []
        for _ in range(chatter):
            slots.append(("chat", rng.choice(_CHATTER), None))
        for item in items:
            slots.insert(rng.randint(0, len(slots)), ("fact", None, item))
        if rng.random() < 0.7:
            slots.insert(rng.randint(0, len(slots)), ("distractor", None, None))
        speaker = rng.choice((a, b))
        for kind, text, slot in slots:
            when += timedelta(minutes=rng.randint(1, 6))
            if kind == "chat":
                say(speaker, text or "", when)
                speaker = b if speaker == a else a
                continue
            if kind == "distractor":
                say(speaker, _distractor(rng, d, taken), when)
                speaker = b if speaker == a else a
                continue
            assert slot is not None
            story, value = slot
            talker = b if story.third else story.person
            say(talker, _statement(rng, story, value, when), when)
            speaker = b if talker == a else a
    _questions(conv, stories, dates, rng)
    return conv


def _distractor(rng: random.Random, d: str, taken: set[str]) -> str:
    template = rng.choice(_DISTRACTORS)
    return template.format(
        d=d,
        city=rng.choice(CITIES),
        company=rng.choice(_EMPLOYERS),
        phone=_phone(rng),
        allergen=rng.choice(_ALLERGENS),
        kind=rng.choice(_PET_KINDS),
        pet=rng.choice([n for n in _PET_NAMES if value_key(n) not in taken]),
    )


def _statement(rng: random.Random, story: _Story, value: str, said: datetime) -> str:
    say = _SAY[story.attribute]
    old = story.values[-1][1] if story.values else None
    first = not story.values
    phrase = rng.choice(_WHEN)
    if value == "<end>":
        template = rng.choice(say["end"])
        if "{when}" not in template:
            phrase = ""
        story.values.append((_when_date(phrase, said), None))
        return _fill(template, story, old or "", old, phrase)
    if story.attribute == "pets" and not first and old:
        lose = rng.choice(say["lose"])
        gone = _fill(lose, story, old, old, phrase)
        template = rng.choice(say["change"])
        story.values.append((_when_date(phrase, said), value))
        return f"{gone} {_fill(template, story, value, old, phrase)}"
    if story.third:
        pool = say["third"] if first else say["third_change"]
    elif first:
        pool = say["state"]
    else:
        pool = say["change"]
    template = rng.choice([t for t in pool if "{old}" not in t or old] or pool)
    if "{when}" not in template:
        phrase = ""
    elif "since {when}" in template.lower() or "was {when}" in template:
        phrase = rng.choice(("last week", "last month", "yesterday"))  # "since last week"
    start = None if first and "{when}" not in template else _when_date(phrase, said)
    before = story.values[-1][0] if story.values else None
    if start is not None and before is not None and start <= before + timedelta(days=2):
        # "last month" must not date this change before the one it replaces
        template = rng.choice([t for t in pool if "{when}" not in t] or [template])
        phrase, start = "", said
    story.values.append((start, value))
    return _fill(template, story, value, old, phrase)


def _fill(template: str, story: _Story, value: str, old: str | None, phrase: str) -> str:
    text = template.format(
        v=value,
        old=old or "",
        when=phrase,
        p=story.person,
        rel=story.rel,
        kind=story.kind,
        ev=story.rel,
    )
    text = re.sub(r"\ba ([aeiou])", r"an \1", text)  # "an accountant"
    return " ".join(text.replace(" ,", ",").replace(" .", ".").replace(" !", "!").split())


def _questions(
    conv: Conversation, stories: Sequence[_Story], dates: Sequence[datetime], rng: random.Random
) -> None:
    first, last = dates[0], dates[-1] + timedelta(days=1)
    for story in stories:
        if not story.values:
            continue
        say = _SAY[story.attribute]
        subject = story.rel if story.attribute == "schedule" else story.person
        current = story.values[-1][1]
        denied = story.values[-2][1] if current is None and len(story.values) > 1 else None
        ask = rng.choice(say["ask"]).format(p=story.person, ev=story.rel)
        conv.questions.append(Question(ask, subject, story.attribute, current, denied=denied))
        # as of: a month inside one of the earlier values (or the only one)
        spans = []
        for n, (start, value) in enumerate(story.values):
            end = story.values[n + 1][0] if n + 1 < len(story.values) else None
            if value is not None and (end is not None or len(story.values) == 1):
                spans.append((start, end, value))
        rng.shuffle(spans)
        for start, end, value in spans:
            month = _month_inside(start, end, first, last)
            if month is None or (start is None and month < first - timedelta(days=40)):
                continue
            words = f"{month:%B} {month.year}"
            text = rng.choice(say["ask_then"]).format(p=story.person, ev=story.rel, month=words)
            conv.questions.append(
                Question(text, subject, story.attribute, value, as_of=month + timedelta(days=14))
            )
            break
