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


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _items(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split("|") if s.strip())


# -- vocabulary ---------------------------------------------------------------------------
# Person names avoid ordinary English words (no "Will", "Rose", "May") and city names,
# so that excluding a name from the output is a matter of whole words.

NAMES = _words(
    """Aaliyah Abel Adaeze Aditi Adrian Agnes Ahmed Aiko Alastair Aleksander Alexei Alfie Alice
    Alina Amara Amir Anders Andrea Aniket Annika Anouk Anton Arjun Arthur Astrid Aurelio Ayla
    Babajide Beatriz Benedikt Beth Bianca Birgit Boris Bram Bruno Caleb Callum Camila Carmen
    Cedric Chiara Chidi Chloe Cillian Clara Colm Dagny Dalia Damian Dana Daniel Darius Dev
    Dmitri Dolores Eamon Edgar Efua Eleanor Elif Elias Elodie Emeka Emil Emily Enzo Esme
    Esteban Ethan Farah Fatima Felix Femi Fiona Florian Fraser Freya Gabriel Gareth Greta
    Gustavo Hamza Hana Hannah Hannes Harriet Hassan Heidi Hiroshi Hugo Ibrahim Idris Ilse Imani
    Ines Ingrid Isabel Isla Ivan Jakub Jamal Janek Javier Jens Jessica Joaquin Jonas Josefina
    Jun Kai Kalani Kamal Karin Kasia Keanu Kenji Kiara Kofi Lars Laura Leila Leon Liam Lina
    Lorenzo Luca Lucia Luis Magnus Mahmoud Maja Malik Mara Marcus Margit Mateo Matilda Megan
    Mehmet Mei Milan Mina Mira Mohammed Nadia Naledi Naomi Nathan Nikhil Nils Nina Noor Oksana
    Oliver Olumide Omar Orla Oskar Owen Pablo Paloma Paolo Pavel Petra Pia Priya Quentin Rachel
    Rafael Rahul Ramon Rania Ravi Rhys Rowan Rui Ruth Ryan Sakura Salma Samir Sanjay Sara
    Seamus Selin Sergio Shira Silas Simone Sinead Siobhan Sophie Soren Stellan Sunita Tamar
    Tariq Teodor Thandiwe Theo Tobias Tomas Ugo Ulla Valentina Vera Vikram Wanjiru Wei Wiktor
    Xiomara Yara Yasmin Yusuf Zainab Zara Zeynep Zoltan Zoe Anya Bongani Catalina Dariusz Eun
    Fernanda Giulia Halima Ikaika Jovana Kwame Lucas Mariam Nkechi Olga Pilar Radek Sione
    Takumi Uma Viktor Wendell Ximena Yannick Zuzana Agata Bashir Cormac Deniz Elsa Faisal
    Gaspard Hye Ilya Jorge Katya Lorcan Minh Nour Otto Parisa Quang Renata Stefan Thuy Vusi"""
)

SURNAMES = _words(
    """Abara Achterberg Alvarez Becker Bianchi Brennan Castell Chowdhury Costa Delacroix Diallo
    Eriksen Esposito Fairweather Ferreira Galloway Gonzaga Hartmann Haddad Holm Iwasaki Ivanova
    Jovanovic Kaur Kowalczyk Lindqvist Lozano Mbeki Moreau Novak Nakamura Okafor Oyelaran Petrov
    Pereira Quintero Rasmussen Reyes Santoro Sato Schreiber Tanaka Thorne Underwood Varga Vance
    Whitlock Winter Yilmaz Zielinski Ashdown Blackwood Carrow Dunmore Ellery Fenwick Greaves
    Halloran Ingleby Kerrigan Larkspur Marchetti Northcott Pemberton Rowntree Sallis Tennant"""
)

CITIES = _items(
    """Lisbon|Porto|Seville|Valencia|Marseille|Lyon|Bordeaux|Bruges|Ghent|Utrecht|Rotterdam|
    Hamburg|Leipzig|Munich|Vienna|Salzburg|Prague|Krakow|Gdansk|Budapest|Ljubljana|Zagreb|Split|
    Athens|Thessaloniki|Istanbul|Izmir|Tbilisi|Marrakesh|Cairo|Nairobi|Cape Town|Accra|Lagos|
    Dakar|Mumbai|Jaipur|Kochi|Colombo|Kathmandu|Hanoi|Bangkok|Chiang Mai|Penang|Singapore|Seoul|
    Busan|Osaka|Kyoto|Sapporo|Taipei|Manila|Melbourne|Brisbane|Auckland|Wellington|Vancouver|
    Montreal|Toronto|Halifax|Chicago|Denver|Seattle|Boston|Nashville|New Orleans|San Diego|
    Mexico City|Oaxaca|Bogota|Lima|Cusco|Santiago|Buenos Aires|Montevideo|Havana|Reykjavik|Oslo|
    Bergen|Stockholm|Helsinki|Tallinn|Riga|Copenhagen|Edinburgh|Glasgow|Dublin|Galway|Cardiff|
    Bristol|Manchester|York|Naples|Bologna|Palermo|Turin|Granada|Bilbao|Antwerp|Basel|Geneva"""
)

COUNTRIES = _items(
    """Portugal|Spain|France|Italy|Greece|Croatia|Slovenia|Austria|Germany|the Netherlands|
    Belgium|Denmark|Norway|Sweden|Finland|Iceland|Ireland|Scotland|Wales|Poland|Hungary|Turkey|
    Georgia|Morocco|Egypt|Kenya|Tanzania|Ghana|Senegal|South Africa|India|Sri Lanka|Nepal|
    Vietnam|Thailand|Malaysia|Japan|South Korea|Taiwan|the Philippines|Australia|New Zealand|
    Canada|Mexico|Colombia|Peru|Chile|Argentina|Uruguay|Cuba|Costa Rica"""
)

LANDMARKS = _items(
    """old cathedral|harbour|castle|botanical gardens|night market|royal palace|old town walls|
    cable car|lighthouse|river promenade|city museum|central market|hilltop fortress|opera house|
    street art district|hot springs|famous bridge|waterfront|old library|observatory"""
)

PLACES = _items(
    """park|gym|library|farmers market|beach|lake|swimming pool|shopping centre|bakery|
    cafe on the corner|community centre|hardware store|garden centre|museum|climbing wall|
    bowling alley|cinema|town hall|train station|old mill|sports hall|allotments|river path|
    leisure centre|village hall|bookshop|flea market|canal|rose garden|skate park"""
)

STREETS = _words(
    """Mill Station Church Bridge Orchard Willow Harbour Elm Chapel Kings Queens Market Park
    Hill Meadow Castle Oak Quarry Garden Rope Tanner Cooper Fountain"""
)

DISHES = _items(
    """lasagne|pad thai|shakshuka|mushroom risotto|chicken curry|lentil dal|ramen|fish tacos|
    jollof rice|bibimbap|gnocchi|paella|goulash|pho|falafel wraps|pierogi|moussaka|lamb tagine|
    butter chicken|vegetable stir fry|carbonara|chilli con carne|fish pie|katsu curry|dumplings|
    enchiladas|black bean soup|roast chicken|beef stew|minestrone|tom yum|nasi goreng|kimchi fried rice|
    mac and cheese|stuffed peppers|tortilla|pesto pasta|shepherd's pie|tikka masala|okonomiyaki|
    empanadas|gumbo|spanakopita|laksa|pulled pork|bean chilli|sushi rolls|fried rice|tofu curry|
    clam chowder|ratatouille|cottage pie|bolognese|poke bowls|mapo tofu|arepas|jambalaya"""
)

DESSERTS = _items(
    """lemon tart|chocolate mousse|apple crumble|tiramisu|cheesecake|banana bread|
    sticky toffee pudding|panna cotta|baklava|carrot cake|brownies|rice pudding|churros|
    pavlova|mango sorbet|flan|cinnamon rolls|key lime pie"""
)

INGREDIENTS = _items(
    """courgettes|tomatoes|spinach|aubergines|mushrooms|chickpeas|potatoes|lemons|avocados|
    sweet potatoes|leeks|peppers|cabbage|apples|plums|rhubarb|broccoli|carrots|beetroot|kale"""
)

SPICES = _words("cumin paprika cinnamon nutmeg turmeric sumac cardamom saffron chilli oregano")
DRINKS = _items(
    "lemonade|cider|wine|sparkling water|iced tea|beer|juice|coffee|hot chocolate|kombucha"
)
TAKEOUT = _items("pizza|Thai food|sushi|a curry|burgers|noodles|fish and chips|kebabs|tacos")

RESTAURANT_KINDS = _items(
    """Kitchen|Bistro|Noodle Bar|Taqueria|Grill|Cafe|Pizzeria|Diner|Ramen House|Canteen|
    Brasserie|Tapas Bar|Dumpling House|Smokehouse|Trattoria"""
)

JOBS = _items(
    """nurse|teacher|software developer|accountant|electrician|graphic designer|pharmacist|
    architect|chef|paramedic|data analyst|physiotherapist|journalist|lawyer|vet|plumber|
    librarian|project manager|social worker|dentist|carpenter|translator|mechanic|
    marketing manager|researcher|firefighter|pilot|photographer|barista|bus driver|
    museum curator|lab technician|speech therapist|civil engineer|midwife|sound engineer|
    HR advisor|estate agent|baker|tour guide|florist|radiographer|school counsellor|
    product manager|copy editor|optician|gardener|warehouse supervisor|dietitian"""
)

EMPLOYER_KINDS = _items(
    """Logistics|Labs|Health|Studio|Partners|Bank|Insurance|Foods|Energy|Media|Robotics|Clinic|
    Architects|Consulting|Print|Transport|Analytics|Games|Books|Software"""
)

PROJECTS = _items(
    """the quarterly report|the website redesign|the warehouse audit|the new booking system|
    the budget review|the spring catalogue|the client migration|the safety training|
    the grant application|the office move|the product launch|the annual survey|
    the database upgrade|the rebranding|the staff rota|the year-end accounts|the pilot study|
    the winter campaign|the supplier contract|the new intranet"""
)

HOBBIES = _items(
    """pottery|rock climbing|watercolour painting|baking bread|knitting|woodworking|
    birdwatching|photography|salsa dancing|running|swimming|cycling|chess|gardening|yoga|
    bouldering|sketching|calligraphy|embroidery|sailing|kayaking|playing the guitar|
    learning the piano|journaling|crochet|origami|bonsai|stand-up paddling|archery|fencing|
    tennis|trail running|sourdough baking|film photography|jewellery making|candle making|
    beekeeping|language exchange|karaoke|board games|fishing|pilates|improv theatre|
    sewing|bookbinding|astronomy|geocaching|ceramics|skateboarding|rowing"""
)

CRAFTS = _items(
    """scarf|vase|bookshelf|quilt|birdhouse|mug|painting|jumper|sketchbook|bowl|cutting board|
    pair of socks|photo album|lamp|tote bag|wall hanging|stool|necklace"""
)

OUTDOORS = _items(
    """hiking|wild swimming|camping|kayaking|cycling along the coast|climbing|walking the dog
    along the cliffs|picking blackberries|stargazing|fishing at the lake"""
)

GEAR = _items(
    """wheel|tent|pair of climbing shoes|easel|sewing machine|camera|road bike|kayak|
    set of chisels|telescope|tennis racket|wetsuit|loom|paddleboard|chess set|backpack"""
)

INSTRUMENTS = _items(
    "guitar|piano|violin|cello|drums|ukulele|saxophone|flute|bass|trumpet|accordion|harp"
)

PETS = _items("dog|cat|puppy|kitten|rabbit|parrot|hamster|tortoise|guinea pig|greyhound")
PET_NAMES = _words(
    """Biscuit Pepper Mochi Waffles Noodle Pickle Ziggy Pretzel Bramble Nutmeg Sprout Tofu
    Pumpkin Fudge Crumpet Marble Pebble Socks Muffin Toffee Dumpling Turnip Bean Sherbet Clover
    Juniper Sesame Cinder Paprika Basil Domino Button Squid Waffle Nacho Gizmo Bagel Cobweb
    Falafel Kiwi Mango Olive Poppy Rusty Scout Smudge Sushi Taco Tinsel Wasabi Yeti Zucchini
    Chutney Custard Gnocchi Hobnob Jellybean Kipper Lentil Meringue Nibbles Parsnip Quince"""
)
BREEDS = _items(
    """labrador|spaniel|terrier|collie|beagle|husky|dachshund|poodle|whippet|shepherd|
    Maine Coon|tabby|Siamese|Bengal|ragdoll"""
)
TRICKS = _items(
    "sit on command|shake hands|roll over|fetch the newspaper|ring a bell for dinner|high five"
)
THINGS = _items(
    """headphones|favourite trainers|phone charger|sofa cushion|passport cover|garden hose|
    new rug|glasses case|laptop bag|umbrella|blanket|slippers|board game|kite"""
)

SYMPTOMS = _items(
    """a cold|a sore back|migraines|a sprained ankle|hay fever|a stiff neck|a cough|
    a bad knee|trouble sleeping|an ear infection|a toothache|tennis elbow|a sore throat"""
)

DEVICES = _items(
    """laptop|phone|tablet|router|printer|smartwatch|e-reader|headphones|monitor|keyboard|
    camera|speaker|games console|electric toothbrush"""
)
APPS = _items(
    """budgeting app|language app|meditation app|habit tracker|running app|recipe app|
    note-taking app|sleep tracker|to-do list app|flashcard app|password manager"""
)
NEEDS = _items("budgeting|sleep|learning languages|running|cooking|focus|saving money")
BUSINESSES = _items("bakery|flower shop|bike repair shop|cafe|dog grooming business|yoga studio")

SPORTS = _items(
    """football|basketball|volleyball|netball|hockey|rugby|cricket|badminton|table tennis|
    five-a-side|ultimate frisbee|water polo|handball|padel|squash|softball"""
)
MASCOTS = _words(
    "Rovers Falcons Wolves Harriers Comets Otters Foxes Pilots Stags Herons Mariners Badgers"
)

BOOK_ADJ = _words(
    """Silent Salt Winter Hidden Last Glass Paper Lost Quiet Burning Northern Borrowed
    Golden Hollow Broken Velvet Distant Little Crooked Drowned Painted Sleeping"""
)
BOOK_NOUN = _words(
    """Orchard Harbour Garden Island Letters Lighthouse Summer Archive Mountain Kingdom
    Station Daughters River Clockmaker Atlas Season Tides Kitchen Cartographer Valley Sisters"""
)
SUBJECTS = _items(
    """statistics|art history|marine biology|accounting|first aid|web design|psychology|
    nutrition|Spanish|Japanese|philosophy|bookkeeping|geology|coding|economics|astronomy|
    creative writing|photography|sign language|climate science"""
)
LANGUAGES = _words("Spanish French Portuguese Italian German Japanese Korean Arabic Greek Dutch")

GENRES = _items(
    """jazz|folk|techno|classical|hip hop|indie rock|soul|afrobeat|bossa nova|country|
    ambient|punk|reggae|opera|blues|synth pop"""
)
VENUES = _items("town hall|old theatre|arena|jazz club|festival|park bandstand|student union")
BAND_NOUNS = _words(
    "Owls Satellites Lanterns Foxes Engines Paper Boats Harbours Comets Ravens Strangers Pines"
)

EVENTS = _items(
    """birthday party|housewarming|baby shower|leaving do|engagement party|barbecue|
    quiz night|games night|dinner party|picnic|reunion|charity run|book launch|street party|
    retirement party|graduation party|wedding|christening"""
)

ERRANDS = _items(
    """renew my passport|get the car serviced|return a jacket|pick up a parcel|
    sort out my tax return|get a new bank card|register with a new dentist|fix my bike tyre|
    drop off the recycling|book an eye test|pay the parking fine|collect my prescription|
    get my keys copied|change my address with the bank"""
)
APPLIANCES = _items(
    "washing machine|fridge|boiler|dishwasher|oven|tumble dryer|shower|freezer|kettle|heating"
)
ROOMS = _items("kitchen|living room|bathroom|bedroom|hallway|spare room|office|balcony|shed")
COLOURS = _words("green blue grey yellow pink terracotta sage lilac white teal")
ITEMS = _items(
    """a standing desk|new running shoes|a rice cooker|a winter coat|a secondhand bike|
    a coffee grinder|noise-cancelling headphones|a sofa bed|hiking boots|a cast iron pan|
    a sewing machine|a record player|a tent|a blender|a weighted blanket|an air fryer"""
)
PLANTS = _items(
    """tomatoes|sunflowers|sweet peas|courgettes|strawberries|lavender|dahlias|runner beans|
    chillies|tulips|potatoes|pumpkins|roses|snowdrops"""
)
HERBS = _words("basil mint parsley coriander rosemary thyme sage chives dill")
WEATHER = _items(
    """rainy|freezing|boiling hot|grey and windy|foggy|really humid|snowy|sunny but cold|
    stormy|mild"""
)
TRAIL_ENDS = _items("Ridge|Falls|Coast|Valley|Loop|Gorge|Peaks|Forest|Moor|Crags")
RELATIVES = _items(
    """sister|brother|cousin|aunt|uncle|mum|dad|grandma|grandpa|niece|nephew|in-laws|
    stepdad|godmother|sister-in-law|brother-in-law"""
)

ADJ_GOOD = _items(
    """amazing|so much fun|really relaxing|better than I expected|lovely|great|pretty cool|
    fantastic|a blast|wonderful|really nice|super chill|unforgettable|honestly perfect|
    brilliant|so worth it"""
)
ADJ_BAD = _items(
    """exhausting|a bit of a mess|stressful|kind of disappointing|chaotic|way too long|
    frustrating|rough|annoying|a total nightmare|so tiring|pretty hectic"""
)
FEELINGS = _words(
    """happy tired excited nervous proud stressed relieved grateful motivated overwhelmed
    calm restless hopeful curious"""
)
WEEKDAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = _words(
    "January February March April May June July August September October November December"
)
NUMBER_WORDS = _words("two three four five six seven eight nine ten eleven twelve")
ORDINALS = _words("first second third last")
CLOCK_WORDS = _items("noon|half past six|quarter to eight|midnight|lunchtime")
SPAN_WORDS = _words("Winter Summer Year Week Night Season")
SHOW_WORDS = _words("The Inside Beyond After")
WHEN_PAST = _items(
    """yesterday|last night|this morning|on Saturday|last weekend|a couple of days ago|
    last week|two weeks ago|last month|earlier today|over the holidays|the other day"""
)
WHEN_FUTURE = _items(
    """tomorrow|this weekend|next week|on Friday|next month|in a couple of weeks|tonight|
    after work on Thursday|on Sunday|at the end of the month|next Saturday"""
)

# Syllables for coined proper nouns (restaurants, bands, employers): a long tail of rare
# words, as real chat has, instead of a closed vocabulary.
_ONSETS = _words("b br c d dr f g gr h k l m n p r s sh st t tr v w z bl fl")
_NUCLEI = _words("a e i o u a e o ai ou")
_CODAS = ("", "", "n", "r", "l", "s", "m", "nd", "x", "ck", "th", "ley", "ton", "well")


def _coin(rng: random.Random, banned: Collection[str]) -> str:
    """A made-up, pronounceable proper noun ("Bralo", "Tremiston") that is not banned."""
    while True:
        syllables = 2 if rng.random() < 0.75 else 3
        word = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(syllables))
        word = (word + rng.choice(_CODAS)).capitalize()
        if word.casefold() not in banned:
            return word


# -- templates ----------------------------------------------------------------------------
# A topic is (news, [(question, (answers...)), ...], details). Slots in braces; "my_..."
# and "your_..." read the persona of the speaker and of the other person.


@dataclass(frozen=True)
class _Topic:
    name: str
    news: tuple[str, ...]
    qa: tuple[tuple[str, tuple[str, ...]], ...]
    details: tuple[str, ...]


def _topic(name: str, news: str, qa: str, details: str) -> _Topic:
    """Parse a topic from text: one template per line; a QA line is ``Q || A1 | A2 ...``."""
    pairs = []
    for line in qa.strip().splitlines():
        question, _, answers = line.partition("||")
        pairs.append((question.strip(), _items(answers)))
    return _Topic(
        name,
        tuple(s.strip() for s in news.strip().splitlines()),
        tuple(pairs),
        tuple(s.strip() for s in details.strip().splitlines()),
    )


TOPICS: tuple[_Topic, ...] = (
    _topic(
        "work",
        """
        Work has been {adj} this week, we're trying to finish {project} before {date}.
        I finally presented {project} to the whole team {when_past} and it went {adj_good}.
        My manager asked me to lead {project}, which is exciting but a lot of pressure.
        We had {num} people call in sick {when_past}, so I ended up covering two shifts.
        I've been a {my_job} at {my_employer} for {years} years now and I'm starting to want a change.
        There's a big reorganisation at {my_employer} and nobody knows what happens to our team.
        A client sent me a really kind thank-you note {when_past}, it made my whole week.
        The commute takes me {minutes} minutes now because of the roadworks on {street} Street.
        I applied for a {job} position at {employer} {when_past}, fingers crossed.
        Our team is trying out a four-day week starting on {date}.
        I spent {hours} hours in meetings today and got basically nothing else done.
        {friend} from work is leaving {when_future}, so we're organising a farewell lunch at {restaurant}.
        """,
        """
        How's the new job going? || Busier than I expected, but the people at {my_employer} are really kind. | Honestly it's {adj}, I'm still learning where everything is. | Pretty good! I'm shadowing a senior {my_job} for the first month.
        Do you ever get to work from home? || Two days a week, usually {weekday} and {weekday2}. | Not really, as a {my_job} I have to be on site most days.
        When is the deadline for {project}? || It's due on {date}, so we still have about {num} weeks. | Technically {when_future}, but I think it'll slip again.
        Are you still thinking about quitting? || A bit. If {employer} calls me back I'd seriously consider it. | Not anymore, the raise helped, I get an extra {price} a month now.
        How many people are on your team now? || {count} of us, plus two interns who started {when_past}. | Just {count}, which is tight for a project this size.
        What time do you usually finish? || Around {clock}, unless something breaks. | Officially at five, realistically closer to {clock}.
        """,
        """
        The worst part is the emails, I had {big} unread this morning.
        At least the coffee machine on our floor finally got fixed.
        I'm trying not to check messages after {clock} anymore.
        {friend} says I should ask for a raise, and I think they're right.
        We're hiring two more people, so it should get easier by {month}.
        My desk is next to the printer, so I hear every single page.
        {friend2} covered for me on {weekday} so I could leave at {clock}.
        We had a team lunch at {restaurant} and the {dish} was surprisingly good.
        The new system crashed {num} times on its first day, so that was fun.
        I've got a review with my manager on {date} and I'm a bit {feel} about it.
        """,
    ),
    _topic(
        "hobbies",
        """
        I signed up for a {hobby} class at the {place} and the first session is {when_future}.
        I've been getting really into {hobby} lately, I practise almost every evening.
        I finished my first {craft} {when_past}! It's a bit wonky but I'm proud of it.
        {friend} and I went {outdoor} {when_past} and it was {adj_good}.
        I picked up my {instrument} again after {years} years and my fingers hurt so much.
        I joined a {hobby} group that meets every {weekday} at {clock}.
        I bought a secondhand {gear} for {price}, which felt like a steal.
        """,
        """
        How long have you been doing {my_hobby}? || About {years} years, on and off. | Since {month} last year, a friend dragged me along and I got hooked.
        Is it hard to get started with {hobby}? || Not really, you need a {gear} and some patience. | The first few weeks are frustrating, but it gets fun quickly.
        What are you working on at the moment? || A {craft} for my {relative}'s birthday, it has to be done by {date}. | Nothing big, just practising the basics.
        Want to come along next time? || I'd love to! Just tell me what to bring. | Maybe, if it's not on a {weekday}, that's my busy day.
        """,
        """
        It's the only time in the week when I don't look at my phone.
        The teacher is a retired {job} who is incredibly patient with us.
        I've watched way too many tutorials at two in the morning.
        My {relative} thinks it's a phase, but it's been {num} months.
        There are {count} of us in the group and everyone is really welcoming.
        I've spent about {price} on supplies already, which is more than I'd like to admit.
        {friend} gave me a {gear} for my birthday and I've used it every {weekday} since.
        My goal is to make something good enough to give my {relative} by {month}.
        The {place} has a free session on the first {weekday} of the month.
        """,
    ),
    _topic(
        "travel",
        """
        We just booked flights to {city} for {month}! Only {price} return.
        I'm back from {num} days in {city}, I already miss the food.
        {friend} and I are planning a road trip from {city} to {city2} in {month}.
        My flight to {city} was delayed by {hours} hours, I slept on the airport floor.
        We stayed in a tiny apartment near the {landmark} and walked everywhere.
        I've wanted to visit {country} since I was a kid and it's finally happening {when_future}.
        The train from {city} to {city2} took {hours} hours but the views were {adj_good}.
        """,
        """
        Where are you going this summer? || Probably {country}, we're still comparing prices. | Nowhere far, maybe a long weekend in {city}.
        How was {city}? || {adj_good}! The old town was packed but the food made up for it. | Honestly it was {adj_bad}, it rained the whole time.
        Did you get to see the {landmark}? || Yes, we went early on the {ordinal} day before the crowds. | No, it was closed for repairs, which was a shame.
        How much did the trip cost in the end? || Around {bigprice} for the two of us, flights included. | More than planned, probably {bigprice} all in.
        Who are you travelling with? || My {relative} and {friend}, first time we've gone away together. | Just me this time, I like travelling solo.
        """,
        """
        I still need to renew my passport before {date}.
        We found a little place called {restaurant} and ate there three nights in a row.
        I packed way too many clothes again, half of them never left the suitcase.
        The hotel upgraded us for free because it was our anniversary.
        We got lost for an hour trying to find the bus station.
        The locals were so friendly, one family invited us in for {dish}.
        The best thing we ate was {dish} from a stall near the {landmark}.
        We walked about {steps} steps a day, my feet are still recovering.
        {friend} knows {city} really well and sent me a list of {count} places to try.
        It was {temp} degrees most days, so we did everything early in the morning.
        """,
    ),
    _topic(
        "food",
        """
        I tried making {dish} from scratch {when_past} and it actually turned out {adj_good}.
        There's a new place called {restaurant} near the {place}, their {dish} is unreal.
        I'm doing meal prep on Sundays now, {num} lunches ready for the week.
        We had {friend} over for dinner and I burned the {dish}, so we ordered {takeout} instead.
        I'm trying to eat less meat, so it's mostly {dish} and {dish2} at ours these days.
        My {relative} taught me the family recipe for {dish}, the trick is a pinch of {spice}.
        """,
        """
        What are you cooking tonight? || Probably {dish}, it's quick and I have everything. | Nothing, we're getting {takeout} because I'm too tired.
        Have you been to {restaurant} yet? || Yes! We went {when_past}, the {dish} was great but the service was slow. | Not yet, is it worth the hype?
        Can you send me that {dish} recipe? || Sure, I'll text it to you tonight, it takes about {minutes} minutes. | Of course, just go easy on the {spice}.
        Do you like spicy food? || Love it, the hotter the better. | Only a little, I can't handle much more than mild.
        """,
        """
        The secret is letting it rest for {minutes} minutes before serving.
        I bought way too many {ingredient} at the market, so expect {dish} all week.
        Dessert was {dessert}, which nobody had room for but we ate anyway.
        The bill came to {price} for the three of us, not bad at all.
        {friend} brought {dessert} and a bottle of {drink}, so it turned into a long evening.
        I doubled the {spice} this time and it was so much better.
        The queue outside {restaurant} was about {minutes} minutes long on a {weekday}.
        I'm going to try it with {ingredient} next time instead of meat.
        """,
    ),
    _topic(
        "family",
        """
        My {relative} is visiting {when_future} and staying for {num} nights.
        {my_kid} lost a tooth {when_past} and was so excited about the tooth fairy.
        We had a big lunch for my {relative}'s {age}th birthday, {count} people in one small flat.
        My parents are finally moving closer to us, they found a house near {city}.
        {my_partner} and I celebrated {years} years together {when_past}.
        My {relative} just had a baby, they've called the little one {babyname}.
        {my_kid} started at a new school and is already making friends.
        """,
        """
        How are your parents doing? || Pretty well, my dad just retired and doesn't know what to do with himself. | Okay, my mum had a small operation {when_past} but she's recovering.
        How old is {your_kid} now? || {my_kidage} already, it goes so fast. | Turning {my_kidage} in {month}, and planning the party already.
        Is {your_partner} coming to the party? || Yes, {my_partner} wouldn't miss it. | Probably not, work has been crazy for them.
        Are you seeing your family over the holidays? || Yes, we're all going to my {relative}'s place in {city}. | Not this year, flights were too expensive.
        """,
        """
        It was loud and chaotic and honestly I loved every minute.
        My {relative} still tells the same three stories at every dinner.
        We made them a photo album with pictures going back {years} years.
        {my_kid} insists on helping in the kitchen, so everything takes twice as long.
        My {relative} drove all the way from {city} for it, about {hours} hours each way.
        {my_partner} made {dish} for everyone and there were no leftovers.
        We're planning a trip to {country} with the whole family in {month}.
        {my_kid} wants a {pet} for their birthday, we'll see about that.
        """,
    ),
    _topic(
        "health",
        """
        I've had {symptom} since {when_past}, so I finally booked a doctor's appointment.
        I started going to the gym {times} times a week and I can feel the difference.
        I've been trying to be in bed by {clock} and I feel so much better.
        My physio gave me {num} exercises to do every morning for my back.
        I ran {km} km without stopping {when_past}, a personal best!
        I'm cutting down on coffee, I'm down to {num} cups a day.
        """,
        """
        How are you feeling now? || Much better, thanks. The medicine kicked in after a couple of days. | Still a bit rough, but improving.
        What did the doctor say? || Just rest and drink lots of water, nothing serious. | She wants to run some blood tests on {date} to be sure.
        Do you still go running in the mornings? || Yes, usually around {clock} before it gets hot. | Not since I hurt my knee, I swim instead now.
        How many hours do you sleep? || Maybe {num} on a good night. | Never enough, {num} if I'm lucky.
        """,
        """
        I'm trying to walk at least {steps} steps a day.
        My {relative} keeps sending me articles about vitamins.
        Stretching after work has made a huge difference for my neck.
        I didn't realise how little water I was drinking.
        The appointment is on {date} at {clock}, right in the middle of a work day.
        {friend} got me into {hobby}, which is great for stress.
        I've been off sugar for {num} weeks and I miss {dessert} every single day.
        My watch says I slept {num} hours but it felt like two.
        """,
    ),
    _topic(
        "tech",
        """
        My {device} died {when_past} and of course I hadn't backed anything up.
        I finally got a new {device} and I'm still figuring out the settings.
        I've been using a {app} for {num} weeks and it's actually helping.
        Our internet went down for {hours} hours and the whole house went quiet.
        I spent the whole evening trying to get the printer to connect to the wifi.
        I built a little website for my {relative}'s {business}, it took a weekend.
        """,
        """
        Which {device} did you end up buying? || The mid-range one, it was {price} on sale. | I didn't, I'm waiting for prices to drop in {month}.
        Do you know how to fix a slow {device}? || Try clearing the storage and restarting it, that usually helps. | Honestly, I'd take it to the repair shop near the {place}.
        Do you use any apps for {need}? || Yes, a {app}, it's free and pretty simple. | Just a notes app and a lot of willpower.
        """,
        """
        The battery lasts about {hours} hours, which is plenty for me.
        I had {big} photos on there, so that was a painful lesson.
        {friend} helped me set it all up over a video call.
        I've turned off almost all notifications and it's very peaceful.
        The repair shop quoted {price}, which is almost the price of a new one.
        My {relative} calls me every time their {device} shows a pop-up.
        I found an old {device} in a drawer with photos from {years} years ago.
        """,
    ),
    _topic(
        "pets",
        """
        {my_petname} chewed through my {thing} {when_past}, I can't even be mad.
        We're thinking about adopting a {pet} from the shelter on {street} Road.
        I took {my_petname} to the vet {when_past}, {petage} years old and perfectly healthy.
        {my_petname} learned to {trick} in just {num} days!
        Our neighbour's {pet} keeps sneaking into our garden to steal food.
        """,
        """
        How is {your_petname} doing? || {my_petname} is great, just getting lazy in old age. | Bit of an upset stomach this week, but better now.
        What breed is {your_petname}? || A mix, the shelter guessed half {breed}. | A {breed}, we got her from a breeder near {city}.
        Who looks after {your_petname} when you travel? || My {relative}, who spoils her rotten. | There's a pet sitter down the street who charges {price} a day.
        """,
        """
        She sleeps on my feet every night, which is cute until it's summer.
        The vet bill was {price}, so he'd better appreciate it.
        He barks at every delivery driver like they're a threat to the nation.
        We bought a fancy bed and she still prefers the cardboard box.
        {friend} looked after {my_petname} while we were in {city} and got completely attached.
        We walk to the {place} every morning, about {minutes} minutes each way.
        The food alone costs about {price} a month now.
        """,
    ),
    _topic(
        "sports",
        """
        Did you see the {team} game {when_past}? What a finish!
        I joined a {sport} team at work, we play every {weekday} at {clock}.
        We won our {sport} match {score}, first win of the season!
        I signed up for a {km} km charity run in {month}.
        I got tickets to see the {team} play on {date}.
        """,
        """
        Are you still playing {sport}? || Every week, though my knees are complaining. | I stopped in {month}, too busy with everything.
        Who do you think will win the league this year? || The {team}, if their captain stays fit. | No idea, but not my team, sadly.
        Do you want to come to the match with us? || Yes! How much are tickets? | Can't that day, but save me a seat next time.
        """,
        """
        We lost {score} but played much better than last time.
        The stadium was packed, about {big} people.
        My legs hurt for {num} days afterwards.
        {friend} scored twice and hasn't stopped talking about it.
        Training is on {weekday} evenings at the {place}, if you ever want to join.
        The ticket was {price}, but the view from our seats was worth it.
        """,
    ),
    _topic(
        "books",
        """
        I just finished {book} by {author}, I couldn't put it down.
        My book club picked {book} for {month} and I'm already behind.
        I'm reading about {subject} at the moment, it's fascinating.
        I found an old copy of {book} at a charity shop for {price}.
        I've read {num} books this year, trying to hit {count} by December.
        """,
        """
        What are you reading right now? || {book}, a slow start but it gets good. | Nothing, I'm in a bit of a reading slump.
        Would you recommend {book}? || Definitely, especially if you liked {author}'s other ones. | Only if you have patience, the middle drags.
        Do you prefer ebooks or paper? || Paper, I like to write in the margins. | Ebooks for travelling, paper at home.
        """,
        """
        The ending made me cry on the bus, which was embarrassing.
        I keep buying books faster than I can read them.
        {author} is doing a reading at the library on {date}.
        {friend} lent it to me {when_past} and I finished it in {num} days.
        It's set in {city} in the seventies, which I loved.
        I read it on the train to {city2}, about {hours} hours, and barely looked up.
        """,
    ),
    _topic(
        "music",
        """
        I saw {band} live at the {venue} {when_past}, they were {adj_good}.
        I've had the new album by {band} on repeat all week.
        I'm learning a song on the {instrument} for {friend}'s wedding.
        Tickets for {band} go on sale {when_future}, want to try with me?
        """,
        """
        What kind of music are you into lately? || Mostly {genre}, which surprised me. | A lot of {genre} for working and old {genre2} on weekends.
        Have you heard of {band}? || Yes! {friend} played them for me on a road trip. | No, what do they sound like?
        How long have you played the {instrument}? || Since I was {age}, with a long break in the middle. | Only about a year, I'm still pretty bad.
        """,
        """
        The crowd sang every word, it gave me goosebumps.
        We were stuck right behind the tallest person in the venue.
        I made a playlist for the trip, about {hours} hours of songs.
        The tickets were {price} each, but it was worth every penny.
        {friend} knows the drummer, so we got to say hi after the show.
        They're playing in {city} on {date} if you fancy a trip.
        """,
    ),
    _topic(
        "screen",
        """
        We started watching {show} and finished the whole first season in {num} days.
        I saw {film} at the cinema {when_past}, the ending was wild.
        There's an outdoor film screening at the {place} on {date}.
        """,
        """
        Have you seen {show}? || Only the first few episodes, is it worth continuing? | Yes, I loved it, the second season is even better.
        What should I watch this weekend? || Try {film}, it's funny and not too long. | {show}, if you like slow mysteries.
        """,
        """
        I fell asleep halfway through, so I'll have to watch it again.
        The soundtrack alone is worth it.
        {friend} recommended it {when_past} and I'm now completely hooked.
        We watched it with {count} people crammed on one sofa.
        Apparently the book is even better, {author} wrote it.
        """,
    ),
    _topic(
        "plans",
        """
        We're throwing a {event} for {friend} on {date}, can you make it?
        I'm thinking of having people over {when_future}, nothing fancy, just {dish} and games.
        {friend}'s {event} is on {date} at {restaurant}, starting at {clock}.
        We should finally do that picnic at the {place} before the weather turns.
        """,
        """
        Are you free {when_future}? || I think so, what did you have in mind? | Not in the afternoon, but I'm free after {clock}.
        What time should we meet? || How about {clock} at the {place}? | Let's say {clock}, I'll text you if I'm running late.
        Should I bring anything? || Maybe some {drink}, we have plenty of food. | Just yourself! And maybe a {dessert} if you feel like baking.
        """,
        """
        I'll make a group chat so everyone knows the plan.
        I booked a table for {count} just in case.
        If it rains we'll move everything to my place.
        {friend2} is bringing a {dessert}, so we're sorted for dessert.
        It's {price} each for food, and drinks are on us.
        Parking is a nightmare near the {place}, so take the bus if you can.
        """,
    ),
    _topic(
        "home",
        """
        I spent the whole morning trying to {errand} and the queue was endless.
        Our {appliance} broke {when_past}, the repair person can't come until {date}.
        We finally painted the {room}, it's a light {colour} now.
        I need to {errand} before {weekday} or I'll get a fine.
        The landlord is raising the rent by {price} a month from {month}.
        """,
        """
        Did you manage to {errand}? || Yes, finally, it only took {num} attempts. | No, the office closes at {clock} and I got there at {clock2}.
        How's the move going? || Slowly, there are boxes everywhere. | Almost done, we just need to sort out the {room}.
        """,
        """
        I made a list of {num} things to do and crossed off one.
        The hardware store on {street} Street has everything, by the way.
        It cost {price} in the end, more than I wanted to pay.
        My {relative} came over to help and we finished the {room} in {hours} hours.
        The neighbours have been drilling every {weekday} morning since {month}.
        We still haven't unpacked the last {num} boxes from the move.
        """,
    ),
    _topic(
        "money",
        """
        I bought {item} {when_past}, it was {price} down from {price2}.
        I'm trying to save {bigprice} by {month} for a new car.
        I cancelled {num} subscriptions I forgot I had, saving {price} a month.
        """,
        """
        Was it expensive? || About {price}, which is okay for what it is. | Way more than I planned, don't tell {my_partner}.
        Where did you get {item}? || At a market in {city}, the stall owner was lovely. | Online, it arrived in {num} days.
        """,
        """
        I've started writing down everything I spend, it's a bit scary.
        {my_partner} and I have a shared spreadsheet now, very romantic.
        Groceries alone were {price} this week, it's getting ridiculous.
        {friend} told me about a savings account with a better rate, so I switched.
        """,
    ),
    _topic(
        "learning",
        """
        I started an evening course in {subject} at the community college.
        My exam in {subject} is on {date} and I haven't started revising.
        I've been practising {language} every day for {num} weeks using a {app}.
        """,
        """
        How's the course going? || Tough but rewarding, the teacher used to be a {job}. | I'm behind on the homework, but I'll catch up.
        Why did you pick {subject}? || It might help me move into a {job} role. | Just curiosity, I always wanted to understand it better.
        """,
        """
        There are {count} of us in the class, mostly people changing careers.
        I study on the train, it's the only quiet hour I get.
        The course costs {bigprice} for the year, but work is paying half.
        We have a test every {weekday} and I've passed {num} in a row.
        {friend} is doing the same course in {city}, so we quiz each other.
        """,
    ),
    _topic(
        "outdoors",
        """
        The {plant} I planted in {month} finally came up!
        It's been {weather} here all week, I've barely left the house.
        We hiked the {trail} trail {when_past}, {km} km and a lot of uphill.
        """,
        """
        What's the weather like there? || {weather}, as usual for {month}. | Surprisingly nice, about {temp} degrees.
        What are you growing this year? || {plant}, some {herb} and way too many courgettes. | Just herbs on the balcony, no space for more.
        """,
        """
        The slugs ate half of my lettuce, I'm at war with them.
        We saw a deer right at the edge of the path.
        It took us {hours} hours and we stopped for {dish} at a pub near the {place}.
        My {relative} gave me some {plant} seedlings and they're doing really well.
        It's supposed to be {weather} again on {weekday}, so that's our plans ruined.
        """,
    ),
)

GREETINGS = _items(
    """Hey {you}!|Hi {you}, how's it going?|Morning!|Hey, long time no talk!|
    Hi! Hope your week is going okay.|Hey {you}, got a minute?|Hey there!|
    Good to hear from you, {you}.|Hiya!|Evening {you}!|Hi {you}, how have you been?"""
)
REACTIONS = _items(
    """Oh nice!|That's awesome.|No way!|Haha, classic.|Oh no, that sounds rough.|
    Wow, good for you.|Ugh, I feel that.|That's so cool, {you}.|Honestly, same.|Oh I love that.|
    Fair enough.|Wait, really?|Oh wow.|That makes sense.|Sounds {adj_good}!|Aw, that's sweet.|
    Ha, I can imagine.|Yikes.|Totally.|Good call.|I'm so happy for you!|Oh, interesting.|
    Lol, of course.|That's a lot, {you}.|Respect.|Oh, I didn't know that."""
)
SWITCHES = _items(
    """Oh, totally different subject.|Random thing, but guess what.|Anyway, other news!|
    Oh, that reminds me.|Speaking of which...|Okay, changing the topic for a second.|
    Before I forget!"""
)
FOLLOW_UPS = _items(
    """What about you?|How about you, {you}?|Any plans for {when_future}?|
    How's everything on your end?|Have you ever tried that?|What do you think?|
    Does that sound crazy?"""
)
CLOSERS = _items(
    """Anyway, I should get going. Talk soon, {you}!|Okay, gotta run, {you}. Catch you later!|
    Let's pick this up {when_future}, {you}.|Alright, dinner's ready, speak soon!|
    Thanks for the chat, {you}, this was nice.|Night, {you}! Sleep well.|
    I'll text you {when_future} then.|Right, back to work for me. Bye, {you}!|
    Say hi to {your_partner} from me!|Give {your_petname} a pat from me!"""
)
ASIDES = _items(
    """I'm writing this from the {place} in {my_city}, by the way.|{friend} says hi, by the way!|
    Sorry for the slow reply, {you}, today has been {adj}.|
    I'm on the bus to {city2}, so excuse the typos.|
    My {relative} is visiting until {weekday}, so I'm a bit distracted.|
    It's {weather} in {my_city} again today.|
    I've had {num} coffees today and it's not even {clock}.|
    I just got back from the {place} with {friend}.|
    Still recovering from {friend}'s {event} on {weekday}.|
    The kids are finally asleep, so I have {minutes} minutes before {my_partner} gets home.|
    Sorry, {my_petname} just walked across the keyboard.|
    I'm stuck in a queue at the {place}, {num} people ahead of me.|
    I'm meeting {friend} at {clock}, so I'll be quick.|We're off to {city2} on {weekday}, by the way.|
    I'm so {feel} today, {you}, no idea why.|Did you get my message about {friend}'s {event}?|
    My {relative} says hi, {you}!|Remind me to tell you about {friend} and the {thing} later.|
    Oh, and {friend} got the {job} job!|I'm eating {dish} at my desk as we speak.|
    {friend} and {friend2} are coming over at {clock}, so I can't be long.|
    Also, happy {weekday}, {you}!|I can't believe {friend}'s {event} is already on {date}."""
)
SHORT = _items(
    """Haha yes, exactly what I was thinking.|Same here, honestly.|Ha, that's so true.|
    I know, right? It's ridiculous.|Okay, that made me laugh.|Oh no, poor you.|
    Yes! Finally some good news.|Hmm, I'm not so sure about that."""
)

#: Slots that keep their value for a whole topic segment (the things being talked about).
_STICKY = frozenset(
    _words(
        """friend friend2 relative restaurant dish dish2 city city2 country landmark hobby craft
        instrument pet breed team book author band show film event project item subject plant
        trail sport device app employer job gear outdoor errand appliance room business venue
        babyname genre genre2 language need trick thing street"""
    )
)


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
