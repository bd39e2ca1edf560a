"""The vocabulary of the synthetic conversations (:mod:`arbormem.bench.synth`):
names, places, dishes, jobs, hobbies and the other slot fillers, and a coiner of
proper nouns. Written for this project; nothing is downloaded or copied."""

from __future__ import annotations

import random
from collections.abc import Collection


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
