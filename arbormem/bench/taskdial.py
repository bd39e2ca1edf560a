"""Task dialogues of changing domains put end to end: a seeded stand-in for DialSeg711.

DialSeg711 (Xu et al., 2021) joins task-oriented dialogues from MultiWOZ and
Stanford KVRET, each source dialogue one gold segment. None of it is in the
development data, so this module writes dialogues of the same shape from its
own templates and vocabulary (nothing is downloaded or copied): a user and an
assistant book restaurants, hotels, trains and taxis, look up attractions,
ask about their calendar and the weather, and find places to drive to. Each
gold segment is one such task, with slot filling, offers, bookings with
reference numbers, questions about the offer, changes of mind, and (some of
the time) thanks, "anything else?" and goodbyes; three to six of them, of
different domains, make one dialogue.

Segments start and end in several ways, as pieces of longer dialogues do: a
fresh request ("Hi, I'm looking for..."), a request that follows on ("Yes, I
also need a train"), a bare command ("find me a gas station"); a full
goodbye, a bare "thanks", an open "anything else?", or nothing at all. The
file has no ``roles``, so a reader alternates them from the first utterance,
as it must for DialSeg711's own files.

This is a stand-in written by the same team as the segmenter it measures, so
its figures are optimistic: it shows whether the decision splits at changes of
domain and keeps slot filling together, not what a published corpus scores.

``python -m arbormem.bench.taskdial --dialogues 300 --seed 1 -o tasks.json`` writes a
file; ``arbormem bench segment --tasks 300 --seed 1`` scores the same dialogues.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DOMAINS", "generate", "segment_of"]

Turns = list[str]


def _items(text: str, sep: str = "|") -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(sep) if item.strip())


# -- vocabulary ---------------------------------------------------------------------------

AREAS = ("north", "south", "east", "west", "centre")
PRICES = ("cheap", "moderate", "expensive")
FOODS = _items(
    "italian chinese indian thai french mexican japanese lebanese british korean spanish "
    "turkish vietnamese greek portuguese ethiopian persian malaysian",
    " ",
)
DAYS = _items("monday tuesday wednesday thursday friday saturday sunday", " ")
RESTAURANTS = _items(
    "Golden Lantern|Casa Verde|Saffron Court|The Olive Branch|Lotus Garden|Blue Harbour|"
    "Little Seoul|Maison Rouge|The Spice Route|Bella Notte|Red Pepper Grill|Tandoor House|"
    "The Green Fig|Sakura Table|El Patio|The Hungry Heron|Pho Corner|Athena Taverna"
)
HOTELS = _items(
    "Riverside Lodge|Oakwood Guest House|The Grand Regent|Hillview Hotel|Willow Bed and "
    "Breakfast|Kingsgate Hotel|Meadow House|The Station Inn|Cedar Court Hotel|Abbey Guest House|"
    "Parkside Suites|Lark Rise Lodge"
)
ATTRACTIONS = (
    ("Riverbank Gallery", "museum"),
    ("Old Mill Museum", "museum"),
    ("St Aidan's College", "college"),
    ("Fen Meadow Park", "park"),
    ("The Playhouse", "theatre"),
    ("Corn Exchange Hall", "concert hall"),
    ("Parkside Pool", "swimming pool"),
    ("Punt Station Tours", "boat"),
    ("Holy Trinity Church", "architecture"),
    ("The Velvet Room", "nightclub"),
    ("Vue Picturehouse", "cinema"),
    ("Botanic Glasshouses", "park"),
)
STATIONS = _items(
    "cambridge|london kings cross|london liverpool street|norwich|ely|peterborough|stevenage|"
    "bishops stortford|leicester|birmingham new street|kings lynn|stansted airport|broxbourne"
)
CARS = _items("red toyota|white skoda|black audi|blue honda|grey ford|yellow lexus|silver volvo")
STREETS = _items(
    "Mill Road|Regent Street|Hills Road|King's Parade|Trumpington Street|Newmarket Road|"
    "Chesterton Lane|Castle Hill|Bridge Street|Station Road|Arcadia Place|Alester Avenue|"
    "Elm Drive|Harbor Way|Maple Court|Sunset Boulevard"
)
EVENTS = _items(
    "dentist appointment|tennis lesson|meeting with the HR team|yoga class|doctor appointment|"
    "football practice|dinner with my parents|conference call|optometrist appointment|"
    "lab appointment|swimming activity|board meeting|piano recital|team lunch"
)
PARTIES = _items("my sister|my boss|Tom|Ana|the management team|my father|Jeff|the sales team")
CITIES = _items(
    "boston|seattle|fresno|denver|miami|san jose|alhambra|carson|new york|atherton|"
    "corona|durham|exeter|inglewood|grand rapids|mountain view"
)
WEATHER = _items(
    "rain|snow|sunshine|clear skies|cloudy skies|fog|wind|drizzle|hail|humidity|overcast skies"
)
WHEN = ("today", "tomorrow", "this weekend", "on monday", "on friday", "next week", "on saturday")
PLACES = (
    ("gas station", "Valero|Chevron|Shell Station|Speedway"),
    ("coffee shop", "Coupa|Bean There|Morning Cup|Palo Brew"),
    ("grocery store", "Safeway|Green Basket|Whole Foods|Corner Market"),
    ("parking garage", "Dish Parking|Civic Garage|Town Square Parking"),
    ("hospital", "Stanford Express Care|Mercy Clinic|Valley Hospital"),
    ("rest stop", "Travelers Rest|Hilltop Rest Area"),
    ("pizza restaurant", "Pizza Chicago|Mario's Slice|Round Table"),
    ("shopping center", "Midtown Mall|Ravenswood Shopping Center"),
)
TRAFFIC = (
    "no traffic",
    "moderate traffic",
    "heavy traffic",
    "a car collision",
    "a road block nearby",
)


class _Seg:
    """One segment being written: utterances alternate user, assistant from the user."""

    def __init__(self, r: random.Random, kvret: bool) -> None:
        self.r = r
        self.kvret = kvret
        self.turns: Turns = []

    def pick(self, items: Sequence[str]) -> str:
        return self.r.choice(items)

    def say(self, *options: str) -> None:
        text = self.pick(options)
        if len(self.turns) % 2 == 0 and self.kvret and self.r.random() < 0.5:
            text = text.lower().rstrip(".?!")  # drivers type in lower case, unpunctuated
        self.turns.append(text)

    def pair(self, *options: tuple[str, str]) -> None:
        """Two turns that belong together (a question and its answer), chosen as one."""
        first, second = options[self.r.randrange(len(options))]
        self.say(first)
        self.say(second)


# -- slot values --------------------------------------------------------------------------


def _ref(r: random.Random) -> str:
    return "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(8))


def _phone(r: random.Random) -> str:
    return f"01223 {r.randint(200000, 899999)}"


def _postcode(r: random.Random) -> str:
    return f"cb{r.randint(1, 5)} {r.randint(1, 9)}{r.choice('abdefhjlnpqrstuwxyz')}{r.choice('abdehnpqrtx')}"


def _address(r: random.Random) -> str:
    return f"{r.randint(2, 990)} {r.choice(STREETS)}"


def _time(r: random.Random) -> str:
    return f"{r.randint(9, 20)}:{r.choice(('00', '15', '30', '45'))}"


def _people(r: random.Random) -> str:
    return str(r.randint(2, 8))


# -- domains ------------------------------------------------------------------------------
# Each writes the body of a task: the opening request (its first utterance, a user's)
# through the last piece of information the assistant gives.


def _restaurant(s: _Seg) -> None:
    r = s.r
    food, area, price, name = s.pick(FOODS), s.pick(AREAS), s.pick(PRICES), s.pick(RESTAURANTS)
    s.say(
        f"I'm looking for a {price} restaurant in the {area}.",
        f"I want to find a place to eat that serves {food} food.",
        f"Is there a {food} restaurant in the {area} part of town?",
        f"I need a {price} place to dine that serves {food}.",
        f"Can you recommend a restaurant? Something {price}, please.",
        f"I'd like to eat {food} food tonight, any ideas?",
        f"Are there any {food} restaurants around the {area}?",
        f"I'd like a table at {name}, please.",
    )
    if r.random() < 0.6:
        s.pair(
            ("What type of food would you like?", f"{food.capitalize()} please."),
            ("Which part of town do you prefer?", f"The {area}, please."),
            ("Do you have a price range in mind?", f"Something {price}, if possible."),
            (
                f"There are {r.randint(3, 22)} of those in town. Any preference on area or price?",
                f"Something {price} in the {area} would be best.",
            ),
            ("Do you have a price range in mind?", "I don't care about the price."),
        )
    s.say(
        f"{name} serves {food} food in the {area} and is {price}. Would you like a table?",
        f"I recommend {name}, a {price} {food} place at {_address(r)}.",
        f"How about {name}? It is {price} and located in the {area}.",
    )
    if r.random() < 0.5:
        s.pair(
            ("What is the address?", f"It's at {_address(r)}, postcode {_postcode(r)}."),
            (
                "Can I get the phone number and postcode?",
                f"The phone number is {_phone(r)} and the postcode is {_postcode(r)}.",
            ),
            ("Is it in the city centre?", f"It is in the {area}. Their number is {_phone(r)}."),
            (
                "Do they have vegetarian options?",
                "Yes, they have several vegetarian dishes on the menu.",
            ),
        )
    if r.random() < 0.7:
        people, time, day = _people(r), _time(r), s.pick(DAYS)
        s.say(
            f"Yes, please book it for {people} people at {time} on {day}.",
            f"Please reserve a table for {people} on {day} at {time}.",
            f"That sounds good. Book a table for {people} at {time} on {day}.",
        )
        if r.random() < 0.25:
            later = _time(r)
            s.say(f"I'm sorry, {time} is fully booked. Would {later} work instead?")
            s.say(f"Yes, {later} is fine.", f"Okay, try {later} then.")
        s.say(
            f"Booking was successful. The table will be held for 15 minutes. "
            f"Your reference number is {_ref(r)}.",
            f"You're all set for {people} on {day}. The reference number is {_ref(r)}.",
            f"I've booked your table at {name}. Reference: {_ref(r)}.",
        )


def _hotel(s: _Seg) -> None:
    r = s.r
    area, price, name = s.pick(AREAS), s.pick(PRICES), s.pick(HOTELS)
    kind, stars = s.pick(("hotel", "guest house")), r.randint(2, 5)
    s.say(
        f"I'm looking for a place to stay in the {area}.",
        f"I need a {price} {kind} with free parking.",
        f"Can you help me find a {stars} star hotel?",
        f"I want a {kind} that includes free wifi, somewhere {price}.",
        f"I'm looking for a hotel called {name}.",
        f"I need lodging in the {area} for a few nights.",
    )
    if r.random() < 0.6:
        s.pair(
            ("Do you have a price range in mind?", f"Something {price}, please."),
            ("What area would you like to stay in?", f"The {area} would be ideal."),
            (
                f"I found {r.randint(2, 14)} places. Do you need parking or internet?",
                "Free parking is a must, wifi doesn't matter.",
            ),
            ("Would you prefer a hotel or a guest house?", f"A {kind} is fine."),
        )
    s.say(
        f"{name} is a {price} {kind} in the {area} with free wifi. Shall I book a room?",
        f"I'd suggest {name}, a {stars} star {kind} with free parking.",
        f"{name} matches your needs. It's in the {area}. Would you like to reserve it?",
    )
    if r.random() < 0.4:
        s.pair(
            ("Does it have free parking?", "Yes, parking is free for guests."),
            ("What's the star rating?", f"It has {stars} stars."),
            ("Can I have the postcode?", f"The postcode is {_postcode(r)}."),
            ("Is it close to the train station?", "It's about ten minutes' walk from the station."),
        )
    if r.random() < 0.75:
        people, nights, day = _people(r), r.randint(2, 5), s.pick(DAYS)
        s.say(
            f"Yes, book it for {people} people for {nights} nights starting {day}.",
            f"Please book a room for {nights} nights from {day}, {people} guests.",
            f"I'd like to book {nights} nights starting on {day} for {people} people.",
        )
        if r.random() < 0.2:
            s.say(f"I'm afraid there are no rooms on {day}. Would a shorter stay work?")
            s.say(f"Try {nights - 1} nights then.", "Okay, one night less please.")
        s.say(
            f"Your room is booked. The reference number is {_ref(r)}.",
            f"Booking was successful, reference number {_ref(r)}.",
            f"Done! You have {nights} nights at {name}. Reference: {_ref(r)}.",
        )


def _train(s: _Seg) -> None:
    r = s.r
    depart, arrive = r.sample(STATIONS, 2)
    day, leave, train_id = s.pick(DAYS), _time(r), f"TR{r.randint(1000, 9999)}"
    s.say(
        f"I need a train from {depart} to {arrive}.",
        f"I'm looking for a train leaving on {day} to {arrive}.",
        f"Can you find me a train to {arrive} that leaves after {leave}?",
        f"I need to get to {arrive} by train on {day}.",
        f"Are there any trains from {depart} on {day} morning?",
    )
    if r.random() < 0.7:
        s.pair(
            ("Where will you be departing from?", f"I'll be leaving from {depart}."),
            ("What day would you like to travel?", f"On {day}, please."),
            ("What time do you want to leave?", f"I want to leave after {leave}."),
            (
                f"There are {r.randint(5, 40)} trains that day. When would you like to arrive?",
                f"I need to arrive by {_time(r)}.",
            ),
        )
    minutes, price = r.choice((17, 28, 39, 50, 79, 88, 105, 163)), r.randint(4, 38)
    s.say(
        f"{train_id} leaves {depart} at {leave} and arrives in {arrive} {minutes} minutes later.",
        f"The {leave} train, {train_id}, gets to {arrive} after {minutes} minutes. "
        "Shall I book it?",
        f"I have {train_id} departing at {leave}. Would you like tickets?",
    )
    if r.random() < 0.4:
        s.pair(
            ("What is the price?", f"Tickets are {price}.10 pounds each."),
            ("How long is the journey?", f"The trip takes {minutes} minutes."),
            ("What time does it arrive?", f"It arrives at {_time(r)}."),
        )
    if r.random() < 0.75:
        people = _people(r)
        s.say(
            f"Yes, please book {people} tickets.",
            f"Book it for {people} people, please.",
            "Just one ticket, please.",
        )
        s.say(
            f"Booked! The total fee is {price * int(people)}.20 GBP, payable at the station. "
            f"Reference number: {_ref(r)}.",
            f"Your seats are reserved. Reference number is {_ref(r)}.",
        )


def _taxi(s: _Seg) -> None:
    r = s.r
    origin, destination = r.sample((*RESTAURANTS, *HOTELS, *(a for a, _ in ATTRACTIONS)), 2)
    s.say(
        f"I need a taxi to pick me up at {origin}.",
        "Can you book a taxi for me?",
        f"I'd like a cab from {origin} to {destination}.",
        f"Please get me a taxi to {destination} by {_time(r)}.",
    )
    if r.random() < 0.8:
        s.pair(
            ("Where will you be going?", f"I'm going to {destination}."),
            ("What time would you like to leave?", f"I want to leave at {_time(r)}."),
            ("Sure, where should the driver pick you up?", f"Pick me up at {origin}, please."),
            ("What time do you need to arrive?", f"I have to be there by {_time(r)}."),
        )
    car, phone = s.pick(CARS), f"07{r.randint(100000000, 999999999)}"
    s.say(
        f"Your taxi is booked. Look for a {car}. The contact number is {phone}.",
        f"I've booked a {car} for you; the driver's number is {phone}.",
        f"Booking completed! A {car} will pick you up. Contact number: {phone}.",
    )
    if r.random() < 0.3:
        s.pair(
            ("What kind of car was it again?", f"It's a {car}."),
            ("Can you repeat the phone number?", f"The number is {phone}."),
        )


def _attraction(s: _Seg) -> None:
    r = s.r
    name, kind = r.choice(ATTRACTIONS)
    area = s.pick(AREAS)
    s.say(
        f"Is there a {kind} in the {area} of town?",
        f"I'm looking for something fun to do in the {area}.",
        f"Can you tell me about {name}?",
        f"I want to visit a {kind}. What do you suggest?",
        "What attractions are there in town?",
    )
    if r.random() < 0.5:
        s.pair(
            ("What type of attraction are you interested in?", f"A {kind}, please."),
            ("Is there a particular area you'd like?", f"Somewhere in the {area}."),
            (
                f"There are {r.randint(3, 30)} attractions. Do you have a type in mind?",
                "Surprise me, anything is fine.",
            ),
        )
    fee = s.pick(("free", f"{r.randint(2, 9)} pounds", "not listed"))
    s.say(
        f"{name} is a {kind} in the {area}. The entrance fee is {fee}.",
        f"I recommend {name}. It's a lovely {kind} and admission is {fee}.",
        f"You might enjoy {name}, a {kind} in the {area}.",
    )
    if r.random() < 0.7:
        s.pair(
            ("What is the address?", f"It's at {_address(r)}."),
            ("Can I get the phone number?", f"Their phone number is {_phone(r)}."),
            ("What's the entrance fee?", f"Entry is {fee}."),
            ("And the postcode?", f"The postcode is {_postcode(r)}."),
        )


def _calendar(s: _Seg) -> None:
    r = s.r
    event, day, time, party = s.pick(EVENTS), s.pick(DAYS), _time(r), s.pick(PARTIES)
    yours = party.replace("my ", "your ")
    if r.random() < 0.6:
        s.pair(
            (f"When is my {event}?", f"Your {event} is on {day} at {time}."),
            (f"What time is my {event}?", f"You have a {event} on {day} at {time} with {yours}."),
            (f"Who is coming to my {event}?", f"Your {event} is with {yours} on {day}."),
            (f"Do I have a {event} this week?", f"Yes, your {event} is on {day} at {time}."),
        )
        if r.random() < 0.6:
            s.pair(
                ("Who will be there?", f"{yours[0].upper()}{yours[1:]} will attend."),
                ("What time is that?", f"It starts at {time}."),
                ("And where is it?", f"It's at {_address(r)}."),
            )
    else:
        s.say(
            f"Schedule a {event} on {day} at {time}.",
            f"Set a reminder for my {event} with {party}.",
            f"Please add a {event} to my calendar for {day}.",
        )
        if r.random() < 0.6:
            s.pair(
                ("What time should I set it for?", f"{time} please."),
                ("Which day is that?", f"It's on {day}."),
                ("Who is attending?", f"{party[0].upper()}{party[1:]} is."),
            )
        s.say(
            f"Okay, your {event} is set for {day} at {time}.",
            f"I've scheduled your {event} with {yours} on {day}.",
        )


def _weather(s: _Seg) -> None:
    r = s.r
    city, when, sky = s.pick(CITIES), s.pick(WHEN), s.pick(WEATHER)
    low, high = r.randint(20, 60), r.randint(61, 100)
    s.say(
        f"What's the weather going to be like in {city} {when}?",
        f"Will it rain in {city} {when}?",
        f"check the weather for the next {r.randint(2, 7)} days",
        f"Is it going to be cold {when}?",
        f"What is the forecast {when}?",
    )
    if r.random() < 0.5:
        s.pair(
            ("Which city are you asking about?", f"{city.title()}, please."),
            ("For what city?", f"In {city}."),
            ("What location, please?", f"I'm asking about {city}."),
        )
    s.say(
        f"Expect {sky} in {city} {when}, with a low of {low}F and a high of {high}F.",
        f"It will not rain in {city} {when}; expect {sky}.",
        f"The forecast for {city} {when} shows {sky}, {low}-{high}F.",
    )
    if r.random() < 0.6:
        other = s.pick(CITIES)
        s.pair(
            (
                f"What about {other}?",
                f"In {other} expect {s.pick(WEATHER)} and a high of {r.randint(50, 99)}F.",
            ),
            ("Will it be warmer on the weekend?", f"The weekend looks warmer, up to {high + 5}F."),
            ("Should I bring a jacket then?", "Yes, a light jacket would be a good idea."),
        )


def _navigation(s: _Seg) -> None:
    r = s.r
    kind, names = r.choice(PLACES)
    name, miles, traffic = s.pick(names.split("|")), r.randint(1, 7), s.pick(TRAFFIC)
    s.say(
        f"Find me the nearest {kind}.",
        f"Where is the closest {kind}?",
        f"I need directions to {name}.",
        f"Give me the address of a {kind} near me.",
        f"I need to find a {kind} with the least traffic.",
    )
    s.say(
        f"The nearest {kind} is {name}, {miles} miles away at {_address(r)}.",
        f"{name} is {miles} miles from you. There is {traffic} on the way.",
        f"There's a {kind} called {name} at {_address(r)}. Should I set the route?",
    )
    if r.random() < 0.7:
        s.pair(
            ("Is there any traffic on the way?", f"There is {traffic} on the way right now."),
            (
                "Please set the route, avoiding heavy traffic.",
                "Setting the route with the least traffic now.",
            ),
            ("What's the address?", f"It's at {_address(r)}."),
            ("How far is it?", f"It is {miles} miles away."),
        )
    if r.random() < 0.4:
        s.pair(
            ("Great, take me there.", "Route set. Drive safely!"),
            ("Yes, set the navigation.", "Navigation started."),
            ("Send it to my screen.", "Directions are on the way."),
        )


DOMAINS: dict[str, Callable[[_Seg], None]] = {
    "restaurant": _restaurant,
    "hotel": _hotel,
    "train": _train,
    "taxi": _taxi,
    "attraction": _attraction,
    "calendar": _calendar,
    "weather": _weather,
    "navigation": _navigation,
}
KVRET = frozenset({"calendar", "weather", "navigation"})

#: How a task follows on from an earlier one in the same source dialogue.
_FOLLOW_ON = ("Yes, ", "Yes, I also need help. ", "I also need something else. ", "Also, ")
_GREETING = ("Hi, ", "Hello, ", "Hi there. ", "Good morning. ")


def _continued(text: str) -> str:
    """A sentence's start lowered to follow a greeting ("I" stays a capital)."""
    return text if text[:2] in ("I ", "I'") else text[0].lower() + text[1:]


def segment_of(domain: str, r: random.Random, cues: float = 1.0) -> Turns:
    """One gold segment: a task of ``domain`` with an opening and a closing drawn at
    random. ``cues`` scales how often it opens with a greeting or a follow-on ("Yes, I
    also need...") and closes with thanks, a goodbye or "anything else?" (0: never)."""
    s = _Seg(r, domain in KVRET)
    DOMAINS[domain](s)
    turns = s.turns
    opening, closing = r.random() / cues if cues else 1.0, r.random() / cues if cues else 1.0
    if opening < 0.25:
        turns[0] = r.choice(_GREETING) + _continued(turns[0])
    elif opening < 0.5 and domain not in KVRET:
        turns[0] = r.choice(_FOLLOW_ON) + _continued(turns[0])
    if closing < 0.2:
        turns[-1] += r.choice(
            (" Is there anything else I can help you with?", " Anything else today?")
        )
    elif closing < 0.45:
        turns += [
            r.choice(("Thanks.", "Thank you!", "Great, thank you.", "thanks", "Perfect, thanks.")),
            r.choice(("You're welcome.", "You're welcome! Have a good day.", "Happy to help.")),
        ]
    elif closing < 0.65:
        turns += [
            r.choice(
                (
                    "No, that's all. Thank you, goodbye!",
                    "That's all I need, thanks for your help.",
                    "No, that will be it. Bye.",
                    "Thank you so much, that's everything.",
                )
            ),
            r.choice(
                (
                    "You're welcome. Have a great day!",
                    "Thank you for using our service. Goodbye.",
                    "Enjoy your trip! Goodbye.",
                )
            ),
        ]
    elif closing < 0.75:
        turns.append(r.choice(("Thanks!", "Okay, thank you.", "thank you")))
    return turns


def generate(
    dialogues: int, seed: int = 0, segments: tuple[int, int] = (3, 6), cues: float = 1.0
) -> list[dict[str, Any]]:
    """``dialogues`` dialogues in the common segmentation layout (no ``roles``), each
    ``segments`` tasks (inclusive bounds) of different domains put end to end; ``cues``
    as in :func:`segment_of`.

    >>> dialogue = generate(1, seed=3)[0]
    >>> sum(dialogue["segments"]) == len(dialogue["utterances"])
    True
    """
    r = random.Random(seed)
    out = []
    for i in range(dialogues):
        chosen: list[str] = []
        for _ in range(r.randint(*segments)):
            chosen.append(r.choice([d for d in DOMAINS if not chosen or d != chosen[-1]]))
        parts = [segment_of(domain, r, cues) for domain in chosen]
        out.append(
            {
                "dial_id": f"task-{seed}-{i}",
                "utterances": [u for part in parts for u in part],
                "segments": [len(part) for part in parts],
                "domains": chosen,
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", "-n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cues", type=float, default=1.0, help="scale of greetings, thanks and goodbyes (0: none)"
    )
    parser.add_argument("--output", "-o", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(generate(args.dialogues, args.seed, cues=args.cues), f, indent=1)


if __name__ == "__main__":
    main()
