"""Records from an exchange, with no LLM.

:func:`extract` reads a few consecutive messages (an *exchange*) and returns
candidate records: attribute statements from the frames of
:mod:`arbormem.records.patterns` ("I moved to Lyon", "her new number is ...",
"Tom and I split up"), dated events ("we went camping last weekend"),
preferences, constraints and decisions (the reasoning tracker's patterns), and
numbered steps as procedures. Each record's text stands on its own: names for
"I", "you", "she", absolute dates for "last week".

Written for precision: questions, conditions and wishes ("if I move to
Berlin", "I might switch jobs") give nothing, and a denial that names no known
value ("I left Acme" when Acme is nobody's employer) is dropped by the resolver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from arbormem.context.trackers.common import words as word_set
from arbormem.records.matching import match_sentence
from arbormem.records.model import Record, record_id
from arbormem.records.patterns import Match
from arbormem.records.people import NOT_NAMES, PRONOUNS, People
from arbormem.records.reading import WORD, statements
from arbormem.records.rewrite import Who, normalise, self_contained, utc, when
from arbormem.records.values import clean_value
from arbormem.records.vocab import (
    ATTRIBUTES,
    attribute_for_noun,
    render,
)
from arbormem.text import STOPWORDS

__all__ = ["MAX_CHARS", "Candidate", "Context", "Turn", "extract"]

#: Characters of a message read: statements about people are in what people write,
#: not in the long documents they paste, and the bound keeps the patterns' work small.
MAX_CHARS = 20_000


@dataclass(frozen=True)
class Turn:
    """One message as extraction reads it."""

    id: str
    text: str
    timestamp: datetime
    speaker: str | None = None
    role: str = "user"


@dataclass(frozen=True)
class Context:
    """What extraction knows around an exchange."""

    #: The thread's known speakers (two of them make "you" the other one).
    speakers: tuple[str, ...] = ()
    #: Messages just before the exchange, oldest first (for "she" and "it").
    recent: tuple[Turn, ...] = ()
    scope: str = "default/default"
    #: Who "I" is in a user message with no speaker name, and in an assistant's.
    user_name: str = "the user"
    assistant_name: str = "the assistant"


@dataclass(frozen=True)
class Candidate:
    """A record as extraction proposes it, before the resolver places it."""

    record: Record
    #: A denial that counts only if it closes a known value.
    needs_match: bool = False
    #: A statement about the past ("used to live in Rome"): it closes nothing.
    past: bool = False
    #: The former value a change names ("moved from Paris"), if any.
    former: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- words

_ELIDABLE = word_set(
    "been just finally recently also now still currently totally really officially"
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|whether|would|could|might|may|maybe|perhaps|wish|hope|hoping|hopefully|"
    r"thinking about|thinking of|considering|consider|planning|plan to|plans to|want to|wants to|"
    r"wanted to|trying to decide|not sure|unless|supposed to|should|dream|dreaming|imagine|"
    r"pretend|rumou?r|suppose|in case|what if|instead of)\b",
    re.I,
)
_CLAUSE_BREAK = re.compile(
    r"[,;:]\s+|\s+-\s+|\s+(?:but|and then|so|although|though|while)\s+", re.I
)
# Words that make a statement of a value a change of it ("my number is *now* ..."):
# before such a record, the value was something else.
_CHANGE_CUES = re.compile(
    r"\b(?:now|new|newly|anymore|any more|instead|switched|changed|since|as of|from now on|"
    r"latest|no longer)\b",
    re.I,
)
# "for a few years now": the value has held a long time, "now" announces no change
_LONG_STANDING = re.compile(
    r"\bfor (?:a few|a couple of|many|several|some|two|three|four|five|ten|\d+) "
    r"(?:years|months|decades)\b|\bfor (?:years|ages|a long time|a while|decades)\b|\balways\b",
    re.I,
)
_TIME_WORDS = word_set("""yesterday today tonight last ago week weekend month year monday tuesday wednesday thursday
    friday saturday sunday january february march april may june july august september october
    november december""")
_EVENT = re.compile(
    r"(?:^|[,;]\s+|\b(?:and|but|so|then|because|when)\s+)"
    r"(?P<s>I|we|he|she|they|(?-i:[A-Z][a-z]+))\s+(?:(?:just|finally|recently|also|actually|"
    r"officially|even|all|both|already|first|once)\s+)*"
    r"(?P<verb>went|visited|ran|attended|started|finished|completed|adopted|bought|painted|took|"
    r"made|celebrated|graduated|married|signed up|volunteered|hosted|won|traveled|travelled|flew|"
    r"hiked|camped|met|gave|organized|organised|performed|played|competed|climbed|baked|cooked|"
    r"planted|learned|learnt|wrote|published|launched|built|passed|received|sold|opened|created|"
    r"began|raised|donated|spoke|presented|taught|returned|came back|drove|walked|swam|surfed|"
    r"skied|danced|sang|recorded|released|fixed|renovated|decorated|joined|got (?:married|engaged|"
    r"divorced|promoted|a (?:new )?(?:job|car|house|tattoo|degree|certificate)))\b",
    re.I,
)
_MILESTONES = re.compile(
    r"\b(?:graduated|got married|got engaged|got divorced|got promoted|adopted|retired|gave birth|"
    r"had a baby|passed away)\b",
    re.I,
)
_DECISION_WORDS = word_set(
    "decided decide let going chose picked settled opted went decision agreed"
)
_CONSTRAINT_WORDS = word_set(
    "budget deadline due must cannot can allowed limit most maximum timeline have need avoid"
)
_STEP = re.compile(r"^\s*(?:(\d{1,2})[.)]|step\s+(\d{1,2})\s*[:.)-])\s+(.+)$", re.I)
_INTENT = re.compile(
    r"\b(?:how to|how do (?:I|you|we)|steps? to|in order to|to)\s+(?P<i>[^:.?!\n]{4,80})", re.I
)
# --------------------------------------------------------------------------- people


# --------------------------------------------------------------------------- values


# --------------------------------------------------------------------------- extraction


@dataclass
class _Said:
    """One sentence of one turn, as extraction works on it."""

    turn: Turn
    people: People
    text: str
    now: datetime


def _clause_lead(sentence: str, start: int) -> str:
    """The part of the clause before position ``start``."""
    lead = sentence[:start]
    breaks = list(_CLAUSE_BREAK.finditer(lead))
    return lead[breaks[-1].end() :] if breaks else lead


def _clause_around(sentence: str, start: int, end: int) -> tuple[int, int]:
    """The span of the clause holding ``sentence[start:end]``."""
    lead_breaks = list(_CLAUSE_BREAK.finditer(sentence, 0, start))
    begin = lead_breaks[-1].end() if lead_breaks else 0
    tail = _CLAUSE_BREAK.search(sentence, end)
    return begin, tail.start() if tail else len(sentence)


def _attribute_records(said: _Said, context: Context) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int, str]] = []
    sentence = said.text
    for m in match_sentence(sentence):
        frame = m.frame
        if any(a < m.end and m.start < b and attr == m.attribute for a, b, attr in taken):
            continue  # a longer match of the same attribute got here first
        if _HYPOTHETICAL.search(_clause_lead(sentence, m.start)) or _HYPOTHETICAL.search(
            sentence, m.start, m.spans.get("v", (m.end, m.end))[0]
        ):
            continue
        if "i" in m.groups and (
            _HYPOTHETICAL.search(sentence)
            or (
                sentence.split(" ", 1)[0].lower().endswith("ing")
                and _FINITE.search(sentence, m.end)
            )
        ):
            continue  # "Moving to Berlin would be nice", "Joining a church can be encouraging"
        if frame.attribute in ("likes", "favourite") and (
            "and" in m.groups or _COMPARISON.search(sentence, m.start, m.end)
        ):
            continue  # "love theme", "they are like family": a noun, a comparison
        if _disagrees(m, sentence):
            continue  # "Sounds like fun", "Life love family": not a person's statement
        subject = _subject_of(m, said)
        if not subject:
            continue
        values = clean_value(m, frame.value, said.people)
        if not values:
            if frame.mode != "negated" or frame.attribute != "partner":
                continue
            values = [""]  # "we broke up": closes whoever is current
        begin, finish = _clause_around(sentence, m.start, m.end)
        clause = sentence[begin:finish]
        mode = frame.mode
        if mode == "state" and _CHANGE_CUES.search(clause) and not _LONG_STANDING.search(clause):
            mode = "change"
        if mode in ("state", "change") and re.search(r"\bused to\b", clause, re.I):
            mode = "past"
        attribute = frame.attribute
        noun = m.groups.get("n")
        if attribute in ("phone", "email") and "n" in m.groups:
            between = sentence[m.start : m.spans["n"][1]].lower()
            if re.search(r"\b(?:old|previous|former|used to)\b", between) and not re.search(
                r"\b(?:new|now|changed|switched)\b", between
            ):
                mode = "past"  # "my old number was ...": not the one to use
            noun = None
        if attribute == "favourite":
            attribute = attribute_for_noun(f"favourite {noun}") if noun else ""
            if not noun or noun.lower() in (
                "part",
                "thing",
                "things",
                "bit",
                "moment",
                "way",
                "memory",
            ):
                continue
        elif attribute == "open":
            if not noun or noun.lower() in STOPWORDS:
                continue
            attribute = attribute_for_noun(noun)
        taken.append((m.start, m.end, frame.attribute))
        stated = when(clause, said.now)
        if stated is None and mode == "change":
            stated, begin = when(sentence, said.now), 0  # "I got a job at X, I started last week"
        value_span = m.spans.get("v")
        since = said.now
        if stated is not None:
            rng, a, b = stated
            a, b = a + begin, b + begin
            inside_value = value_span is not None and a < value_span[1] and value_span[0] < b
            if not inside_value:
                since = rng.start
        if frame.attribute == "likes":
            owner = f"{said.people.speaker}'s"
            values = [re.sub(r"\b(?:my|our)\b", owner, v) for v in values]
        for value in values:
            out.append(
                _attribute_candidate(said, context, m, subject, attribute, value, mode, since, noun)
            )
        employer = m.groups.get("e")
        if employer:  # "a nurse at St. Mary's"; "left Acme for Globex": Globex is the change
            mode = "change" if mode == "negated" else mode
            out.append(
                _attribute_candidate(
                    said, context, m, subject, "employer", employer, mode, since, None
                )
            )
    return out


def _disagrees(m: Match, sentence: str) -> bool:
    """Whether a third-person subject meets a verb in the base form ("Sounds like fun"):
    the capitalised word was not a person after all."""
    raw = m.groups.get("s")
    if not raw or raw.split()[0].lower() in ("i", "we", "you", "they") or "s" not in m.spans:
        return False
    words = sentence[m.spans["s"][1] :].split()
    for word in words[:6]:
        low = word.lower()
        if low in _AUXILIARIES:
            return False
        if low not in _ADVERBS_AFTER_SUBJECT:
            return low in _BASE_VERBS
    return False


def _subject_of(m: Match, said: _Said) -> str | None:
    people = said.people
    g = m.groups
    if m.attribute == "schedule":
        event = g.get("s", "")
        words = event.split()
        while words and (
            words[0].lower() in ("the", "our", "my", "your", "this", "that", "their", "his", "her")
            or words[0].endswith("'s")
        ):
            words = words[1:]
        return " ".join(words) or None
    if "s" in g:
        who = people.named(g["s"], said.text, m.spans["s"][0])
        first = g["s"].split()[0].lower()
        if who is not None or m.spans["s"][0] != 0 or first not in _ELIDABLE:
            return who
        # "Been on keto since January": a sentence that opens without its "I"
    if "s" in g or "i" in g:  # "Moved to Lyon last week": the speaker, unless the verb says "she"
        first = said.text.split(" ", 1)[0].lower()
        if first.endswith("s") and not first.endswith("ss") and first != "was":
            return None
        return people.speaker
    if "and" in g:  # the subject of the clause the "and" continues
        for lead in _LEAD_SUBJECT.finditer(said.text, 0, m.start):
            if lead.group(0).lower() not in NOT_NAMES - PRONOUNS:  # "Anyway, Femi left..."
                return people.named(lead.group(0), said.text, lead.start())
        return None
    if "p" in g:
        raw = g["p"]
        if raw.endswith("'s") and " " in raw:  # "my sister's": a relation's
            return people.named(raw[:-2], said.text, m.spans["p"][0])
        return people.owner(raw, said.text, m.spans["p"][0])
    if "o" in g:
        return people.named(g["o"], said.text, m.spans["o"][0])
    return people.speaker


def _attribute_candidate(
    said: _Said,
    context: Context,
    m: Match,
    subject: str,
    attribute: str,
    value: str,
    mode: str,
    since: datetime,
    noun: str | None,
) -> Candidate:
    spec = ATTRIBUTES.get(attribute)
    negated, past = mode == "negated", mode == "past"
    shown = value or ("their partner" if attribute == "partner" else "a pet")
    text = render(attribute, subject, shown, negated=negated, past=past, noun=_partner_noun(noun))
    if attribute == "pets" and value and value[:1].isupper():
        kind = m.groups.get("k", "").lower().rstrip("s") or "pet"
        text = render("pets", subject, f"a {kind} named {value}", negated=negated)
    kind = spec.kind if spec else "preference" if attribute.startswith("favourite") else "fact"
    tags = [attribute]
    if mode == "change":
        tags.append("change")
    if past:
        tags.append("past")
    if m.groups.get("k"):
        tags.append(m.groups["k"].lower().rstrip("s"))
    entities = [subject] if subject[:1].isupper() and "'s " not in subject else []
    if value and value[:1].isupper() and m.frame.value in ("place", "org", "name", "pet"):
        entities.append(value)
    confidence = (
        0.5 if said.turn.role == "assistant" else 0.75 if subject == said.people.speaker else 0.6
    )
    record = Record(
        id=record_id(context.scope, text),
        kind=kind,
        text=text,
        subject=subject,
        attribute=attribute,
        value=value or None,
        negated=negated,
        tags=tuple(tags),
        entities=tuple(dict.fromkeys(entities)),
        sources=(said.turn.id,),
        valid_from=None if past else since,
        valid_to=said.now if past else None,
        confidence=confidence,
        importance=0.7 if kind != "preference" else 0.5,
        created_at=said.now,
        updated_at=said.now,
        scope=context.scope,
    )
    former = m.groups.get("w") if mode == "change" else None
    return Candidate(
        record, needs_match=m.frame.needs_match or (negated and not value), past=past, former=former
    )


def _partner_noun(noun: str | None) -> str | None:
    if not noun:
        return None
    low = noun.lower()
    return None if low in ("significant other",) else low


def _event_records(said: _Said, context: Context, words: set[str]) -> list[Candidate]:
    sentence = said.text
    timed = bool(words & _TIME_WORDS) or bool(re.search(r"\b(?:19|20)\d\d\b", sentence))
    if not timed and not _MILESTONES.search(sentence):
        return []
    m = _EVENT.search(sentence)
    if m is None:
        return []
    start = m.start("s")
    if _HYPOTHETICAL.search(_clause_lead(sentence, start)) or re.search(
        r"\b(?:not|never)\b", sentence[start : m.end()], re.I
    ):
        return []
    subject = said.people.named(m.group("s"), sentence, start)
    if not subject or (m.group("s")[:1].isupper() and m.group("s").lower() in NOT_NAMES - PRONOUNS):
        return []
    after = sentence[m.end() : m.end() + 12].split()
    if after and after[0].lower() in ("it", "that", "this", "them", "one", "those", "these"):
        return []  # "I made it yesterday": about something said before
    tail = re.split(r"\s+-\s+|;|\s+(?:but|because|although|though)\s+", sentence[start:])[0]
    if m.group("s").lower() == "we":
        tail = f"{said.people.speaker} and others" + tail[2:]
    stated = when(tail, said.now)
    if stated is None and not _MILESTONES.search(tail):
        return []
    text = self_contained(tail, _who(said, sentence, start), said.now).rstrip(".!,") + "."
    if len(text) > 220:
        text = text[:217].rsplit(" ", 1)[0] + "..."
    since = stated[0].start if stated else said.now
    record = Record(
        id=record_id(context.scope, text),
        kind="event",
        text=text,
        subject=subject,
        tags=("event",),
        entities=(subject,) if subject[:1].isupper() and "'s " not in subject else (),
        sources=(said.turn.id,),
        valid_from=since,
        confidence=0.6,
        importance=0.5,
        created_at=said.now,
        updated_at=said.now,
        scope=context.scope,
    )
    return [Candidate(record)]


def _who(said: _Said, sentence: str, at: int) -> Who:
    return Who(said.people.speaker, said.people.addressee, said.people.third(sentence, at))


def _reasoning_records(said: _Said, context: Context, words: set[str]) -> list[Candidate]:
    """Decisions (the reasoning tracker's patterns) and limits the speaker must keep to:
    budgets and deadlines from the tracker, personal bans ("I can't eat dairy") here."""
    from arbormem.context.trackers.reasoning import _constraints, _decision

    out: list[Candidate] = []
    sentence = said.text
    # Who "he" or "she" is, read only for a sentence that gives a record: reading it
    # for every sentence was a sixth of extraction, and nearly all give none.
    found: list[Who] = []

    def whom() -> Who:
        if not found:
            found.append(_who(said, sentence, len(sentence)))
        return found[0]

    if words & _DECISION_WORDS and not _HYPOTHETICAL.search(sentence):
        decision = _decision(sentence)
        if decision is not None:
            who = whom()
            cue = _DECIDED.search(sentence)
            if cue is not None:  # "I decided to ...": the speaker's own words, made self-contained
                _, end = _clause_around(sentence, cue.start(), cue.end())
                clause = _WE.sub(f"{said.people.speaker} and others", sentence[cue.start() : end])
                text = self_contained(clause, who, said.now)
            else:
                text = self_contained(
                    f"{said.people.speaker} chose to {decision.text}", who, said.now
                )
            if decision.rationale and "because" not in text:
                text += f", because {decision.rationale}"
            out.append(_plain(said, context, "fact", text.rstrip(".") + ".", ("decision",), 0.6))
    if words & _CONSTRAINT_WORDS:
        for constraint in _constraints(sentence):
            if constraint.kind:  # budget, deadline, timeline, team size
                body = constraint.describe()
            elif (m := _PERSONAL_BAN.search(sentence)) and not _VAGUE_BAN.search(sentence):
                body = sentence[m.start() :]
            else:
                continue  # "it must be scary", "I can't imagine": talk, not a limit
            text = self_contained(body, whom(), said.now).rstrip(".") + "."
            tags = ("constraint", constraint.kind or "limit")
            out.append(_plain(said, context, "constraint", text, tags, 0.6))
            break
    return out


def _plain(
    said: _Said, context: Context, kind: str, text: str, tags: tuple[str, ...], importance: float
) -> Candidate:
    speaker = said.people.speaker
    return Candidate(
        Record(
            id=record_id(context.scope, text),
            kind=kind,
            text=text,
            subject=speaker,
            tags=tuple(t for t in tags if t),
            entities=(speaker,) if speaker[:1].isupper() else (),
            sources=(said.turn.id,),
            valid_from=said.now,
            confidence=0.55,
            importance=importance,
            created_at=said.now,
            updated_at=said.now,
            scope=context.scope,
        )
    )


def _procedure(
    turn: Turn, exchange: Sequence[Turn], context: Context, now: datetime
) -> list[Candidate]:
    """Numbered steps in one message as a procedure record (intent + Markdown body)."""
    lines = turn.text.splitlines()
    steps: list[str] = []
    first = None
    for i, line in enumerate(lines):
        m = _STEP.match(line)
        if m:
            if first is None:
                first = i
            steps.append(m.group(3).strip())
        elif steps and line.strip() and not line.startswith((" ", "\t")):
            break
    if len(steps) < 2 or first is None:
        return []
    lead = " ".join(lines[:first]).strip()
    asked = [t.text for t in exchange if t.role == "user" and t is not turn]
    intent = None
    for source in (lead, *reversed(asked)):
        m = _INTENT.search(source)
        if m:
            intent = m.group("i").strip().rstrip(",;")
            break
    if intent is None:
        intent = (lead or (asked[-1] if asked else "")).strip().rstrip(":.?!")[:80]
    if not intent:
        return []
    people = People(turn, context, ())
    intent = self_contained(normalise(intent), Who(people.speaker, people.addressee), None)
    intent = intent[:1].lower() + intent[1:]
    body = "\n".join(f"{n}. {step}" for n, step in enumerate(steps, 1))
    text = f"How to {intent}: {len(steps)} steps."
    record = Record(
        id=record_id(context.scope, f"{text}\n{body}"),
        kind="procedure",
        text=text,
        tags=("procedure",),
        sources=(turn.id,),
        valid_from=now,
        confidence=0.6,
        importance=0.6,
        created_at=now,
        updated_at=now,
        intent=intent,
        body=body,
        scope=context.scope,
    )
    return [Candidate(record)]


_FINITE = re.compile(
    r"\b(?:can|could|is|was|would|will|has|makes|made|feels|must|might|helps)\b", re.I
)
_LEAD_SUBJECT = re.compile(r"\b(?:I|we|you|he|she|they)\b|(?-i:\b[A-Z][a-z]+\b)(?!'s)", re.I)
_DECIDED = re.compile(
    r"\b(?:I|we|[A-Z][a-z]+)\s+(?:have\s+|had\s+|just\s+|finally\s+)*(?:decided|chose|picked|settled on|"
    r"opted for|went with|agreed)\b"
)
_WE = re.compile(r"^[Ww]e\b")
_PERSONAL_BAN = re.compile(
    r"\b(?:I|we|you)\s+(?:really\s+|just\s+|still\s+)?(?:can not|cannot|must not|should not|am not allowed to|"
    r"are not allowed to|have to avoid|need to avoid|must avoid|should avoid|can only)\s+"
    r"(?:eat|drink|have|use|take|consume|touch|lift|drive|fly|travel|run|work|spend|go)\b",
    re.I,
)
_VAGUE_BAN = re.compile(r"\b(?:imagine|guess|picture|believe|wait|right now|help it)\b", re.I)
_COMPARISON = re.compile(
    r"\b(?:am|is|are|was|were|be|been|feels?|looks?|seems?)\s+(?:\w+\s+)?like\b", re.I
)
_BASE_VERBS = word_set(
    """like love enjoy adore prefer hate dislike live work move relocate study join start quit
    leave have eat go get become date"""
)
_AUXILIARIES = word_set(
    "will would can could does did do should might may must to am is are was were"
)
_ADVERBS_AFTER_SUBJECT = word_set(
    "just really also still now finally recently totally actually absolutely truly genuinely so"
)


def extract(exchange: Sequence[Turn], context: Context | None = None) -> list[Candidate]:
    """Candidate records from ``exchange`` (consecutive messages, oldest first).

    Never raises on odd text; returns [] when there is nothing to remember.
    Candidates with the same id (said twice in the exchange) are merged.
    """
    context = context or Context()
    found: dict[str, Candidate] = {}
    for n, turn in enumerate(exchange):
        if turn.role not in ("user", "assistant") or not turn.text.strip():
            continue
        now = utc(turn.timestamp)
        people = People(turn, context, exchange[:n])
        candidates: list[Candidate] = []
        if "\n" in turn.text:
            candidates.extend(_procedure(turn, exchange, context, now))
        for text in statements(turn.text[:MAX_CHARS]):
            said = _Said(turn, people, text, now)
            words = set(WORD.findall(text.lower()))
            attributes = _attribute_records(said, context)
            candidates.extend(attributes)
            if not attributes:
                candidates.extend(_event_records(said, context, words))
            candidates.extend(_reasoning_records(said, context, words))
        for c in candidates:
            old = found.get(c.record.id)
            if old is None:
                found[c.record.id] = c
            else:
                merged = old.record.with_sources(c.record.sources)
                found[c.record.id] = replace(
                    old, record=replace(merged, mentions=old.record.mentions + 1)
                )
    return list(found.values())
