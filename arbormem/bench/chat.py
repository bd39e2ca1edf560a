"""``arbormem bench chat``: how much smaller a prompt with memory is than the whole history.

A scripted conversation of N user turns runs through :class:`~arbormem.chat.ChatSession`
on a fresh temporary store, exactly as ``arbormem chat`` runs it, against
:class:`ScriptedChatLLM`, a deterministic in-process model. The answers are
scripted: the benchmark measures the prompt (its size, and the time
:meth:`Memory.context` takes to build it), not the quality of any answer.

The user's side reads like one long chat with an assistant: a dozen everyday
subjects (a kitchen renovation, a trip, marathon training, a job change...),
each with details that stay fixed for the run, taken up a few turns at a time,
dropped, and come back to later ("going back to the kitchen: what did the
contractor quote?"). Everything comes from the templates in this module,
seeded, so two runs with the same seed send the same text.

Reported: total prompt tokens sent, total tokens the same turns would have cost
carrying the full stored history, their ratio (the target is under 15% at 500
turns), per-turn p50/p95 latency of ``Memory.context``, and the token counter.
"""

from __future__ import annotations

import os
import random
import re
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from arbormem.llm import ChatRequest, Chunk, LLMClient

__all__ = ["ScriptedChatLLM", "UserTurn", "run", "user_turns"]

DEFAULT_TURNS = 500
TARGET_RATIO = 0.15
START = datetime(2025, 3, 3, 8, 30, tzinfo=timezone.utc)
NOTE = (
    "Answers are scripted by a deterministic in-process model: this measures prompt size "
    "and context latency, not answer quality."
)


# -- the user's side ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Topic:
    key: str
    #: How the user names the subject when coming back to it.
    label: str
    #: Slot name -> choices; one choice per slot is fixed for the whole run.
    slots: dict[str, tuple[str, ...]]
    openers: tuple[str, ...]
    facts: tuple[str, ...]
    asks: tuple[str, ...]
    #: Questions about details given earlier, asked when the chat comes back.
    recalls: tuple[str, ...]


def _t(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.strip().split("\n") if s.strip())


TOPICS: tuple[_Topic, ...] = (
    _Topic(
        "kitchen",
        "the kitchen renovation",
        {
            "contractor": ("Halvorsen Builds", "Okafor & Sons", "Brightline Interiors"),
            "quote": ("14,800", "18,200", "11,500"),
            "counter": ("oak butcher block", "white quartz", "terrazzo"),
            "weeks": ("six", "eight", "five"),
        },
        _t("""
            We're finally redoing the kitchen. The cabinets are from the eighties and two drawers don't close anymore.
            I want to plan the kitchen renovation properly this time instead of rushing it like the bathroom.
        """),
        _t("""
            The contractor we liked is {contractor}; they quoted {quote} euros for cabinets, counters and labour.
            We picked {counter} for the counters, mostly because my partner fell in love with a sample.
            They say the work takes about {weeks} weeks, and we'd have no kitchen for most of that.
            The electrician said the wiring behind the stove is older than the house's fuse box, so that has to be redone too.
            My partner wants an island, but the room is only three metres wide and I think it will feel cramped.
            The old tiles might contain asbestos, so we're getting them tested before anyone starts tearing things out.
            We decided to keep the old fridge for now and replace it next year when the budget recovers.
        """),
        _t("""
            How do we survive {weeks} weeks without a kitchen? We have two kids who eat constantly.
            Is {counter} a bad idea if we cook a lot and are not careful people?
            Should I ask for a fixed-price contract or is time and materials normal for this kind of job?
            What should be in the contract so the schedule doesn't slip by months?
            Is it worth paying extra for soft-close drawers or is that a gimmick?
            What's a sensible contingency to keep aside on top of the quote?
        """),
        _t("""
            what did I say {contractor} quoted us again, and did that include the counters?
            remind me which counter material we chose and why I had doubts about it?
            how long did the contractor say the work would take?
        """),
    ),
    _Topic(
        "japan",
        "the Japan trip",
        {
            "month": ("April", "October", "November"),
            "city": ("Kanazawa", "Matsumoto", "Takayama"),
            "budget": ("4,000", "5,500", "3,200"),
            "friend": ("Keiko", "Haruto", "Yumi"),
        },
        _t("""
            I'm planning two weeks in Japan with my sister, our first time there.
            Can you help me think through a Japan trip? I have no idea where to start.
        """),
        _t("""
            We're going in {month}, flying into Tokyo and out of Osaka.
            Our budget is about {budget} euros each, flights included.
            My old colleague {friend} lives in Osaka and offered to show us around for a couple of days.
            I really want to see {city}, but it seems a bit out of the way.
            My sister doesn't eat raw fish, which I suspect makes some meals complicated.
            We booked the first three nights in Shinjuku already, a small hotel near the station.
        """),
        _t("""
            Is the rail pass still worth it after the price increase, given our route?
            How many days would you give Kyoto, honestly?
            Is {month} a crowded month, or are we lucky?
            What's the easiest way to get to {city} from Tokyo?
            Should we carry cash or do cards work everywhere now?
            Any tips for jet lag? We land at six in the morning.
        """),
        _t("""
            what budget did I say we had for Japan, per person?
            which month are we going to Japan, and does that change your advice about crowds?
            who was the friend in Osaka I mentioned?
        """),
    ),
    _Topic(
        "marathon",
        "my marathon training",
        {
            "race": ("the Rotterdam marathon", "the Berlin marathon", "the Lisbon half"),
            "goal": ("3:45", "4:10", "3:59"),
            "km": ("35", "42", "28"),
            "injury": ("my left knee", "my right Achilles", "a tight hamstring"),
        },
        _t("""
            I signed up for {race}, which is either brave or stupid at my age.
            I need a training plan; I signed up for {race} in a moment of optimism.
        """),
        _t("""
            My goal time is {goal}, though I'd honestly be happy to just finish.
            Right now I run about {km} kilometres a week, in four runs.
            {injury} has been bothering me after long runs lately.
            I tried running with gels last Sunday and my stomach was not happy.
            I bought new shoes with a lot more cushioning and my calves feel it.
            My long run is up to 24 kilometres and the last five were miserable.
        """),
        _t("""
            How much should I increase the weekly distance without getting hurt?
            Should I see a physio about {injury} or rest it for a week first?
            What should I eat the night before a long run?
            Is it normal that easy runs feel hard right now?
            How long should the taper be before the race?
            Do I need speed work at all for a {goal} goal?
        """),
        _t("""
            what was my goal time for the marathon again?
            how many kilometres a week did I say I was running when we started the plan?
            which injury was I worried about?
        """),
    ),
    _Topic(
        "rust",
        "learning Rust",
        {
            "project": (
                "a command-line tool for my photo library",
                "a small chess engine",
                "a log parser for work",
            ),
            "crate": ("clap", "serde", "tokio"),
            "hours": ("five", "three", "eight"),
        },
        _t("""
            I've decided to learn Rust properly. I've been writing Python for ten years.
            Let's talk about learning Rust; I keep starting and giving up after the borrow checker chapter.
        """),
        _t("""
            My practice project is {project}.
            I have about {hours} hours a week for this, mostly evenings.
            I keep fighting the borrow checker when I store references in structs.
            I tried {crate} yesterday and the documentation was better than I expected.
            My code compiles now but it's full of clone() calls and I suspect that's wrong.
            Error handling with Result feels verbose compared to exceptions.
        """),
        _t("""
            When should I use Box, Rc or Arc? I always pick the wrong one.
            Is it fine to use unwrap in a small personal project?
            How do lifetimes work when a function returns a reference?
            What's the idiomatic way to read a large file line by line?
            Should I learn async now or leave it for later?
            How do I structure a project into modules without fighting the compiler?
        """),
        _t("""
            remind me what my Rust practice project was?
            how many hours a week did I say I had for Rust?
            which crate did I try that had good documentation?
        """),
    ),
    _Topic(
        "sourdough",
        "the sourdough",
        {
            "starter": ("Bubbles", "Gerald", "Doughwayne"),
            "flour": ("a stoneground spelt", "a strong Canadian white", "a local rye blend"),
            "hydration": ("75", "70", "80"),
        },
        _t("""
            I started baking sourdough a month ago and I'm already obsessed.
            Sourdough question. I've been baking every weekend and the loaves are hit and miss.
        """),
        _t("""
            My starter is called {starter}; it doubles in about six hours at room temperature.
            I'm using {flour} and the dough feels sticky compared to the videos.
            The recipe is {hydration} percent hydration, which might be too much for a beginner.
            The last loaf spread flat on the tray instead of rising up.
            My kitchen is cold in the morning, maybe 18 degrees.
            The crust came out pale even though I baked it for forty minutes.
        """),
        _t("""
            How do I know when the bulk fermentation is done?
            Should I lower the hydration while I learn shaping?
            Is a Dutch oven really necessary or can I use a tray with steam?
            Can I keep {starter} in the fridge while I'm away for two weeks?
            Why is the crumb so dense near the bottom?
            How long should the loaf cool before I cut it?
        """),
        _t("""
            what did I call my starter, and how fast did it rise?
            which flour was I using for the sourdough?
            what hydration was my recipe at?
        """),
    ),
    _Topic(
        "job",
        "the job offer",
        {
            "company": ("Nordvik Analytics", "Pelican Health", "Quarry Systems"),
            "salary": ("72,000", "86,000", "64,500"),
            "manager": ("Ingrid", "Tomasz", "Priya"),
            "commute": ("fifty minutes", "an hour and ten", "forty minutes"),
        },
        _t("""
            I got a job offer and I can't decide whether to take it.
            Big decision time: a company offered me a senior role and I have to answer by Friday.
        """),
        _t("""
            The company is {company}; they offered {salary} a year, about fifteen percent more than now.
            My future manager would be {manager}, who seemed sharp but a bit intense in the interview.
            The commute would be {commute} each way, three days a week in the office.
            My current team is great, but I've been doing the same work for four years.
            They have a pension scheme that's worse than the one I have now.
            The role includes managing two junior people, which I've never done.
        """),
        _t("""
            Is it reasonable to negotiate the salary after they've made an offer?
            How do I weigh a longer commute against more money?
            What should I ask {manager} before I decide?
            How do I tell my current boss without burning bridges?
            Is managing people something you can learn on the job?
            Should I ask for a fourth remote day instead of more money?
        """),
        _t("""
            what salary did {company} offer me, again?
            what was the name of the manager at the new job?
            how long did I say the commute would be?
        """),
    ),
    _Topic(
        "garden",
        "the vegetable garden",
        {
            "plot": (
                "a four by two metre raised bed",
                "two allotment strips",
                "a sunny balcony with six pots",
            ),
            "pest": ("slugs", "aphids", "pigeons"),
            "crop": ("tomatoes", "courgettes", "runner beans"),
        },
        _t("""
            I'm starting a vegetable garden this spring, first time ever.
            Can we talk about my vegetable garden? It's not going as planned.
        """),
        _t("""
            I have {plot}, facing south-west.
            {pest} ate half my seedlings in one night.
            The {crop} are growing fast but no flowers yet.
            I water every evening with a can, which takes forever.
            The soil is heavy clay and cracks when it dries.
            My neighbour gave me a bag of horse manure, is that good to use straight away?
        """),
        _t("""
            What's the kindest way to keep {pest} away?
            Should I pinch out the side shoots on the {crop}?
            What can I still sow in late June?
            How often should I really water in a heat wave?
            Is a drip system worth setting up for a space this size?
            Which herbs grow well next to {crop}?
        """),
        _t("""
            what did I say was eating my seedlings?
            how big was my plot, do you remember?
            which crop was growing fast without flowering?
        """),
    ),
    _Topic(
        "dog",
        "the dog",
        {
            "dog": ("Miso", "Biscuit", "Pepper"),
            "breed": ("a two-year-old greyhound", "a border collie puppy", "a rescue terrier mix"),
            "vet": ("Dr. Lindqvist", "Dr. Amadi", "Dr. Rossi"),
        },
        _t("""
            We adopted a dog last week and the household is in chaos.
            Dog question again, sorry, we're still learning.
        """),
        _t("""
            His name is {dog}, {breed} from the shelter.
            {dog} cries when we leave the flat, even for ten minutes.
            The vet, {vet}, said he's healthy but a bit underweight.
            He pulls so hard on the lead that my shoulder hurts.
            He growls at the cat from downstairs, but only on the stairs.
            He's eating the corner of the sofa when he's bored.
        """),
        _t("""
            How do I teach {dog} to be alone for a few hours?
            How much should a dog like him eat to gain weight safely?
            Is a harness better than a collar for a dog that pulls?
            How long are walks supposed to be at his age?
            Should we try a crate, or is that cruel?
            When can I let him off the lead in the park?
        """),
        _t("""
            what was the name of our dog, and what breed did I say he is?
            what did the vet say about him?
            which vet did we see?
        """),
    ),
    _Topic(
        "network",
        "the home network",
        {
            "router": (
                "the ISP's combo box",
                "an old Netgear router",
                "a mesh kit from a supermarket",
            ),
            "speed": ("500", "250", "1000"),
            "room": ("the attic office", "the back bedroom", "the garden shed"),
        },
        _t("""
            My home wifi is driving me mad and I work from home.
            I need help with the home network again, it dropped three calls today.
        """),
        _t("""
            We have {router} in the hallway, on the ground floor.
            The contract says {speed} megabits but I get a tenth of that in {room}.
            There's an ethernet port in {room} but I don't know where the cable goes.
            Video calls freeze every afternoon around four.
            My kids' consoles are on the same network and I suspect they eat all the bandwidth.
            I tried moving the router onto a shelf and it helped a little.
        """),
        _t("""
            Would a mesh system fix the signal in {room}?
            How do I find out what's using the bandwidth?
            Is powerline networking any good in an old house?
            Should I change the wifi channel, and how do I pick one?
            Can I give my work laptop priority over the consoles?
            Is it worth buying my own router instead of the ISP's?
        """),
        _t("""
            which room had the bad wifi, again?
            what speed is my internet contract supposed to be?
            what router do we have at the moment?
        """),
    ),
    _Topic(
        "wedding",
        "my sister's wedding",
        {
            "sister": ("Clara", "Noor", "Sofie"),
            "venue": (
                "a barn near Utrecht",
                "a vineyard in the Douro valley",
                "a lake hotel in Bavaria",
            ),
            "guests": ("120", "80", "150"),
            "date": ("the 14th of September", "the 7th of June", "the 30th of August"),
        },
        _t("""
            My sister is getting married and I'm somehow organising half of it.
            Wedding stuff again. My sister asked me to give the speech and plan the hen weekend.
        """),
        _t("""
            My sister {sister} is getting married on {date}.
            The venue is {venue}, which is beautiful but two hours from the nearest airport.
            They expect about {guests} guests, and a third are flying in.
            I'm the maid of honour, so the speech is mine.
            Our uncle wants to bring his new girlfriend, which will upset my aunt.
            The caterer needs final numbers six weeks before.
        """),
        _t("""
            How long should a maid of honour speech be?
            How do I organise transport for {guests} guests from the airport?
            Any ideas for a hen weekend that isn't embarrassing?
            How do I politely chase people who haven't replied?
            Should we book a block of hotel rooms near the venue?
            What do I do if it rains on the day?
        """),
        _t("""
            when is {sister}'s wedding again?
            where did I say the venue was?
            how many guests are they expecting?
        """),
    ),
    _Topic(
        "taxes",
        "my tax return",
        {
            "freelance": ("about 9,000", "around 14,000", "roughly 6,500"),
            "deadline": ("the first of May", "the end of April", "the fifteenth of May"),
            "accountant": ("Mr. Verbeek", "Ms. Haddad", "Mr. Castellano"),
        },
        _t("""
            Tax season. I've been putting off my return and it's getting urgent.
            Can you help me think through my taxes? This year is messier than usual.
        """),
        _t("""
            I earned {freelance} euros freelancing on top of my salary this year.
            The deadline is {deadline}, and I haven't opened a single envelope.
            An accountant, {accountant}, offered to do it for 350 euros.
            I bought a new laptop mostly for freelance work.
            I work from home two days a week and I don't know if that's deductible.
            I also sold some shares at a small loss in November.
        """),
        _t("""
            Which expenses can a freelancer usually deduct?
            Is it worth paying {accountant} or can I do it myself?
            How do I handle the laptop if I also use it privately?
            What happens if I miss {deadline}?
            Should I set aside money for next year's tax now?
            Do I need separate bookkeeping software for freelance income?
        """),
        _t("""
            how much did I say I made freelancing this year?
            what was the deadline for my tax return?
            who was the accountant who offered to help?
        """),
    ),
    _Topic(
        "books",
        "the book club",
        {
            "book": ("The Glass Orchard", "A Map of Small Hours", "North of the Salt Roads"),
            "host": ("Marguerite", "Ollie", "Beatriz"),
            "night": ("the first Thursday", "every other Tuesday", "the last Sunday"),
        },
        _t("""
            I joined a book club and I'm already behind on the reading.
            Book club question, since you helped last time.
        """),
        _t("""
            This month's book is {book}, and I'm only on chapter four.
            We meet {night} of the month at {host}'s flat.
            I found the narrator of {book} really unlikeable, which might be the point.
            Someone always brings wine and the discussion drifts after an hour.
            I'm supposed to pick the next book and I'm nervous about it.
            Half the group reads on e-readers and the others hate them.
        """),
        _t("""
            How do I pick a book that a mixed group will actually discuss?
            Any tricks to read faster without skimming?
            What questions keep a book club discussion going?
            Is it rude to come if I haven't finished the book?
            Can you suggest a short novel that leads to good arguments?
            How do I say I disliked a book that the host loved?
        """),
        _t("""
            what was the book club reading this month?
            whose flat do we meet at, and when?
            what did I think of the narrator?
        """),
    ),
)

_SHIFTS = ("", "", "Different subject: ", "Changing topic, ", "Something else. ", "By the way, ")
_RETURNS = (
    "Going back to {label} for a moment: ",
    "Back to {label}. ",
    "Quick one about {label} again: ",
    "Remember {label}? ",
    "About {label} again, ",
)
_LEADS = ("", "", "", "", "Also, ", "One more thing: ", "Another question: ", "So, ", "Honestly, ")
_ACKS = _t("""
    Thanks, that's helpful.
    OK, that makes sense.
    Hmm, I'm not sure I agree, but fine.
    Good point, I hadn't thought of that.
    Right. Let me think about it.
    That's reassuring, thank you.
""")


@dataclass(frozen=True)
class UserTurn:
    """One scripted user message and what it is about."""

    text: str
    topic: str
    #: ``new``: a topic's first turn; ``return``: back to a topic left earlier.
    kind: str


def user_turns(n: int, seed: int = 0) -> Iterator[UserTurn]:
    """``n`` user messages of one long chat that changes subjects and comes back to them.

    A block of 3 to 9 turns stays on one subject; the next block opens a new
    subject or, more and more often as subjects accumulate, returns to one
    left earlier, asking about details given then.

    >>> [t.kind for t in user_turns(3)][0]
    'new'
    """
    rng = random.Random(seed)
    slots = {
        t.key: {name: rng.choice(choices) for name, choices in t.slots.items()} for t in TOPICS
    }
    order = list(TOPICS)
    rng.shuffle(order)
    unvisited, visited = order[:], list[_Topic]()
    produced = 0
    previous: _Topic | None = None
    while produced < n:
        returning = bool(visited) and (
            not unvisited or rng.random() < 0.25 + 0.5 * len(visited) / len(TOPICS)
        )
        if returning:
            topic = rng.choice([t for t in visited if t is not previous] or visited)
        else:
            topic = unvisited.pop(0)
            visited.append(topic)
        previous = topic
        fill = slots[topic.key]
        facts, asks = list(topic.facts), list(topic.asks)
        rng.shuffle(facts)
        rng.shuffle(asks)
        block = rng.randint(3, 9)
        for i in range(block):
            if produced >= n:
                return
            if i == 0 and returning:
                text = rng.choice(_RETURNS).format(label=topic.label) + rng.choice(topic.recalls)
                kind = "return"
            elif i == 0:
                text = (rng.choice(_SHIFTS) if produced else "") + rng.choice(topic.openers)
                kind = "new"
            else:
                roll = rng.random()
                if roll < 0.45 and facts:
                    text = facts.pop()
                    if asks and rng.random() < 0.5:
                        text += " " + asks.pop()
                elif roll < 0.9 and asks:
                    lead, ask = rng.choice(_LEADS), asks.pop()
                    text = lead + (ask[0].lower() + ask[1:] if lead and ask[:2] != "I " else ask)
                else:
                    text = (
                        rng.choice(_ACKS)
                        + " "
                        + (asks.pop() if asks else rng.choice(facts or topic.facts))
                    )
                kind = "continue"
            text = text.format(**fill)
            yield UserTurn(text[0].upper() + text[1:], topic.key, kind)
            produced += 1


# -- the assistant's side ----------------------------------------------------------------

_OPENINGS = _t("""
    Good question.
    That makes sense, and it's a common situation.
    Happy to help you think this through.
    Thanks for the detail, it helps.
    Let's break that down.
    Fair enough.
    That's a tricky one, but there are a few things that usually help.
""")
_BODY = _t("""
    The most useful first step is to write down what you already know and what you still need to find out, because that usually shows where the real uncertainty is.
    Whatever you decide, give yourself a margin: plans of this kind almost always take longer and cost a little more than the first estimate.
    It helps to separate what is urgent from what only feels urgent; the second group can usually wait a week without any harm.
    If two options look equally good, pick the one that is easier to undo later.
    A small test before committing fully is worth a lot, because it turns guesses into something you have actually seen.
    People in the same situation often underestimate the small recurring costs and overestimate the one-off ones.
    Asking someone who has done it recently is often better than reading general advice, because the details change over time.
    Keep notes as you go, with dates; in a few weeks you will not remember which change made the difference.
    There is no single right answer here, but there is usually a sensible default, and it is fine to start with it and adjust.
    Try to change one thing at a time, so you can tell what actually helped.
    If something hurts, costs much more than expected, or keeps failing in the same way, that is the signal to stop and get a second opinion.
    A realistic weekly routine beats an ambitious plan that lasts ten days.
    Write the decision and the reason for it in one sentence; if you cannot, it may not be ready yet.
    Consider what the worst plausible outcome would be and whether you could live with it; that often settles the question.
    Check the fine print for deadlines and cancellation terms before you pay anything.
    Comfort and consistency matter more than squeezing out the last bit of performance or savings.
    It is worth asking directly; the answer is often more flexible than the official line suggests.
    Rest and recovery, or simply time away from the problem, are part of the process rather than a break from it.
    Budget for the things you would forget: transport, tools, small fees, and the time it takes to organise it all.
    Most people find the second attempt much easier, because the first one teaches what the instructions leave out.
""")
_STEPS = _t("""
    decide what a good outcome looks like
    list the two or three options you are really choosing between
    put rough numbers on time and money for each
    ask one person who has done it before
    try the cheapest reversible option first
    set a date to review how it went
    keep a short written log
    agree on who does what
""")
_CLOSINGS = _t("""
    Does that match what you had in mind?
    Want me to go into more detail on any of these?
    Let me know how it goes.
    If you tell me more about your constraints, I can be more specific.
    What would make the decision easier for you?
""")
_STOP = frozenset(
    """about again after also always because been before being could does doesn't don't
    every first from have here into just know like make many more most much need never other
    really right should since some still than that their them then there these they thing
    think this those through what when where which while will with would your you're
    anymore honestly remind mentioned""".replace("\n", " ").split(" ")
) - {""}
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")


def scripted_reply(user_text: str) -> str:
    """A plausible assistant reply to ``user_text`` (60 to 220 words), the same every time."""
    rng = random.Random(zlib.crc32(user_text.encode()))
    words: list[str] = []
    for w in _WORD.findall(user_text):
        if w.lower() not in _STOP and w.lower() not in (x.lower() for x in words):
            words.append(w)
    first = [rng.choice(_OPENINGS)]
    if len(words) >= 2:
        a, b = rng.sample(words[:6], 2)
        first.append(f"On {a} and {b}, a few thoughts.")
    body = rng.sample(_BODY, rng.randint(2, 5))
    paragraphs = [" ".join(first + body[:2])]
    if rng.random() < 0.45:
        steps = rng.sample(_STEPS, rng.randint(3, 5))
        numbered = [f"{i}. {s[0].upper()}{s[1:]}." for i, s in enumerate(steps, 1)]
        paragraphs.append("\n".join(["A simple order to do it in:", *numbered]))
    last = body[2:] + ([rng.choice(_CLOSINGS)] if rng.random() < 0.6 else [])
    if last:
        paragraphs.append(" ".join(last))
    return "\n\n".join(paragraphs)


class ScriptedChatLLM(LLMClient):
    """A deterministic in-process chat model: :func:`scripted_reply` to the last user message.

    Streams a word at a time; token usage is the base class's local estimate.
    """

    endpoint = "in-process (scripted)"

    def __init__(self, model: str = "scripted-chat", context_window: int = 8192) -> None:
        super().__init__(model, context_window=context_window)

    def _complete(self, request: ChatRequest) -> Iterator[Chunk]:
        last = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
        text = scripted_reply(str(last))
        if not request.stream:
            yield Chunk(text, "stop")
            return
        for i, word in enumerate(text.split(" ")):
            yield Chunk(word if i == 0 else " " + word)
        yield Chunk("", "stop")


# -- the benchmark ----------------------------------------------------------------------


class _Clock:
    """Simulated wall time: a reply follows its question, the next question comes later."""

    def __init__(self, seed: int) -> None:
        self.now = START
        self.rng = random.Random(seed + 1)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=self.rng.randint(15, 150))
        return self.now


def _pct(values: list[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(values, q)), 2) if values else 0.0


def _mean(values: list[float] | list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


def run(
    turns: int = DEFAULT_TURNS,
    *,
    budget: int | None = None,
    embedder: str | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the scripted chat on a fresh temporary store; the figures as a JSON-ready dict."""
    from arbormem.chat import ChatSession
    from arbormem.config import UNSET
    from arbormem.memory import Memory

    script = list(user_turns(turns, seed))
    llm = ScriptedChatLLM()
    started = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="arbormem-bench-chat-")
    # The memory itself runs without an LLM (its offline default); only the chat has one.
    with (
        tmp,
        Memory(
            Path(tmp.name) / "chat.db",
            user="bench",
            agent="chat",
            embedder=embedder if embedder else UNSET,
            llm=None,
            reranker=None,
        ) as mem,
    ):
        chat = ChatSession(mem, llm, session="chat", budget=budget, clock=_Clock(seed))
        rows = []
        for i, user in enumerate(script, 1):
            turn = chat.turn(user.text)
            # Upkeep (tracker, summary) runs in the background; waiting for it after
            # each turn keeps runs reproducible. It is not part of the context latency.
            mem.wait()
            rows.append(turn)
            if progress is not None and (i % 25 == 0 or i == len(script)):
                progress(f"turn {i}/{len(script)}")
        stats = chat.stats()
        embedder_id = mem.embedder.model_id
        stored = len(mem.messages())
    elapsed = time.perf_counter() - started
    context_ms = [t.context_ms for t in rows]
    store_ms = [t.store_ms for t in rows]
    prompt = [t.prompt_tokens for t in rows]
    checkpoints = []
    sent = full = 0
    marks = {m for m in (10, 50, 100, 200, 300, 400, 500, 750, 1000) if m <= turns} | {turns}
    for i, t in enumerate(rows, 1):
        sent += t.prompt_tokens
        full += t.full_history_tokens
        if i in marks:
            checkpoints.append(
                {
                    "turn": i,
                    "prompt_tokens": t.prompt_tokens,
                    "full_history_tokens": t.full_history_tokens,
                    "ratio_so_far": round(sent / full, 4) if full else 0.0,
                }
            )
    return {
        "benchmark": "chat",
        "answers": "scripted",
        "note": NOTE,
        "turns": len(rows),
        "messages_stored": stored,
        "budget": rows[-1].budget if rows else budget,
        "embedder": embedder_id,
        "token_counter": stats["token_counter"],
        "prompt_tokens": stats["prompt_tokens"],
        "full_history_tokens": stats["full_history_tokens"],
        "ratio": round(stats["ratio"], 4),
        "saving_percent": stats["saving_percent"],
        "target_ratio": TARGET_RATIO,
        "meets_target": stats["ratio"] < TARGET_RATIO,
        "prompt_tokens_mean": _mean(prompt),
        "prompt_tokens_max": max(prompt, default=0),
        "context_ms_p50": _pct(context_ms, 50),
        "context_ms_p95": _pct(context_ms, 95),
        "context_ms_max": round(max(context_ms, default=0.0), 2),
        "store_ms_p50": _pct(store_ms, 50),
        "store_ms_p95": _pct(store_ms, 95),
        "checkpoints": checkpoints,
        "script": {
            "seed": seed,
            "topics": len({u.topic for u in script}),
            "topic_changes": sum(u.kind != "continue" for u in script) - 1 if script else 0,
            "returns": sum(u.kind == "return" for u in script),
            "user_words_mean": _mean([len(u.text.split()) for u in script]),
            "reply_words_mean": _mean([len(t.reply.split()) for t in rows]),
        },
        "elapsed_s": round(elapsed, 1),
        "cpu_count": os.cpu_count(),
    }


# -- the command ---------------------------------------------------------------------------


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"arbormem bench chat: {result['turns']} scripted turns, {result['embedder']}, "
        f"budget {result['budget']} tokens, tokens: {result['token_counter']}",
        caption=result["note"],
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    last = result["checkpoints"][-1] if result["checkpoints"] else None
    rows = [
        ("prompt tokens sent", f"{result['prompt_tokens']:,}"),
        ("with the full history", f"{result['full_history_tokens']:,}"),
        (
            "ratio",
            f"{100 * result['ratio']:.1f}% (target: under "
            f"{100 * result['target_ratio']:.0f}% at {DEFAULT_TURNS} turns)",
        ),
        (
            "last turn: sent / full history",
            f"{last['prompt_tokens']:,} / {last['full_history_tokens']:,}" if last else "-",
        ),
        (
            "prompt tokens per turn, mean / max",
            f"{result['prompt_tokens_mean']:,.0f} / {result['prompt_tokens_max']:,}",
        ),
        (
            "Memory.context p50 / p95",
            f"{result['context_ms_p50']:.1f} / {result['context_ms_p95']:.1f} ms",
        ),
        ("add_many p50 / p95", f"{result['store_ms_p50']:.1f} / {result['store_ms_p95']:.1f} ms"),
        (
            "topic changes / returns",
            f"{result['script']['topic_changes']} / {result['script']['returns']}",
        ),
        ("wall time", f"{result['elapsed_s']:.1f} s"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    Console().print(table)


def click_command() -> Any:
    """``arbormem bench chat``, made on demand (registered by :mod:`arbormem.cli.bench`)."""
    import click

    from arbormem.cli.common import StoreOptions, handle_errors

    @click.command("chat")
    @click.option(
        "--turns",
        "-n",
        default=DEFAULT_TURNS,
        show_default=True,
        type=click.IntRange(min=1),
        help="User turns in the scripted conversation.",
    )
    @click.option(
        "--budget",
        "-b",
        type=click.IntRange(min=32),
        help="Token budget of each prompt [default: 4000, or ARBORMEM_CONTEXT_BUDGET].",
    )
    @click.option("--seed", default=0, show_default=True, help="Seed of the scripted chat.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_obj
    @handle_errors
    def chat(opts: StoreOptions, turns: int, budget: int | None, seed: int, as_json: bool) -> None:
        """Prompt tokens with memory against the whole history, over a scripted chat.

        Runs --turns scripted user messages through the same ChatSession as
        `arbormem chat`, on a fresh temporary store (the global --embedder, else
        the default one), against a deterministic in-process model: the answers
        are scripted, so this measures prompt size and Memory.context latency,
        not answer quality. Reports tokens sent, tokens the full history would
        have cost, their ratio (target: under 15% at 500 turns), context p50/p95
        latency and the token counter.

        \b
        Examples:
          arbormem bench chat
          arbormem bench chat --turns 1000 --budget 2000
          arbormem --embedder hash bench chat --turns 50 --json
        """
        import json
        import sys

        def progress(msg: str) -> None:
            if sys.stderr.isatty():
                sys.stderr.write(f"\r\x1b[2K  {msg}")
                sys.stderr.flush()

        result = run(turns, budget=budget, embedder=opts.embedder, seed=seed, progress=progress)
        if sys.stderr.isatty():
            sys.stderr.write("\r\x1b[2K")
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            _print(result)

    return chat
