"""The building blocks of the statement patterns, and what a pattern is.

Each :class:`Frame` is one way of stating an attribute (``"I moved to Lyon"``,
``"her new number is ..."``, ``"Tom and I split up"``), with what the statement
does to the attribute: states it, changes it, says it no longer holds, or says
it held once. Frames run on sentences already passed through
:func:`arbormem.records.rewrite.normalise` (no contractions, straight quotes).

The frames themselves are in :mod:`arbormem.records.frames_where` (home,
address, employer, job, school) and :mod:`arbormem.records.frames_life` (diet,
phone, email, partner, pets, allergies, schedules, likes);
:mod:`arbormem.records.matching` runs them. Speed matters (every turn of every
conversation goes through here), so each frame carries trigger words and runs
only on sentences that contain one of them; most small talk matches none.

Group names in the patterns: ``s`` the subject, ``p`` a possessor ("my",
"Ana's"), ``o`` an object ("reach *me* at"), ``v`` the value, ``w`` a former
value ("moved *from Paris* to Lyon"), ``e`` an employer beside a job title,
``n`` the noun used ("girlfriend", "favourite *colour*"), ``k`` a pet's kind,
``g`` a food given up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arbormem.context.trackers.common import words as word_set

__all__ = ["DIET_TRIGGERS", "EVENT_TRIGGERS", "MODES", "OCCUPATIONS", "Frame", "Match", "frame"]

#: What a frame's statement does: state a value, change to it, deny it, or place it in the past.
MODES = ("state", "change", "negated", "past")

_REL = (
    r"(?:best friend|friend|sister|brother|mom|mum|mother|dad|father|wife|husband|partner|"
    r"girlfriend|boyfriend|cousin|aunt|uncle|son|daughter|boss|manager|colleague|coworker|"
    r"co-worker|roommate|flatmate|neighbou?r|grandma|grandmother|grandpa|grandfather|niece|"
    r"nephew|fianc[eé]e?|stepmom|stepdad|sibling|kid|teammate|classmate|mentor)"
)
_NAMEW = r"(?-i:[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?)"
_OWNER = rf"(?:my|our|your|his|her|their|{_NAMEW}'s)"
_SUBJ = (
    rf"(?:(?P<s>\b(?:I|we|you|he|she|they)\b|{_OWNER} {_REL}(?: {_NAMEW})?|{_NAMEW}(?: {_NAMEW})?)"
    # "I left Acme and joined Globex": the second verb shares the first one's subject
    r"|(?P<and>\band(?:\s+then)?)(?=\s))"
)
_POSS = rf"(?P<p>\b(?:my|our|your|his|her|their)\b|{_NAMEW}'s|{_OWNER} {_REL}(?: {_NAMEW})?'s)"
_ADV = (
    r"(?:\s+(?:have|has|had|am|is|are|was|were|will|be|been|do|does|did|just|recently|finally|"
    r"officially|now|also|actually|already|still|currently|really|eventually|even|both|all|"
    r"totally|happily|proudly|basically|mostly|fully|completely|since|then|kind of|sort of|"
    r"newly|only|apparently|technically|somehow|gonna|going to|about to|set to|getting|get|got)){0,6}\s+"
)
_END = (
    r"(?=\s*(?:[,;:.!?()\"]|\s-\s|$)|\s+(?:and|but|because|since|so|which|who|where|when|though|"
    r"although|after|before|until|while|now|anymore|any more|again|too|either|these days|"
    r"nowadays|at the moment|for now|as of|from now on|instead|last|next|this|on|in|at|for|"
    r"with|from|to|by|as|yesterday|today|tonight|tomorrow|ago|about|if|or|starting|effective|"
    r"full-time|part-time|recently|lately|right now|currently|officially|permanently|soon|"
    r"then|earlier|over|back|already|a few|a couple|a while|a week|a month|a year|a day|two|"
    r"three|four|five|several|last)\b)"
)
_PLACE = (
    r"(?P<v>(?-i:(?:St\. |Saint |San |Santa |Los |Las |New |Le |La |El )?[A-Z][\w'.-]*"
    r"(?: [A-Z][\w'.-]*){0,3}(?:, [A-Z][\w.-]*(?: [A-Z][\w.-]*)?)?))"
)
_ORG_WORDS = (
    r"(?:bakery|hospital|school|startup|start-up|bank|cafe|café|restaurant|company|firm|agency|"
    r"clinic|shop|store|university|library|museum|hotel|gym|studio|lab|factory|warehouse|"
    r"nonprofit|non-profit|charity|newspaper|magazine|office|supermarket|pharmacy|daycare|"
    r"nursery|garage|salon|bar|pub|bookstore|bookshop|farm|winery|brewery|council|ministry|"
    r"department|practice|consultancy|publisher|airline|hospice|shelter|center|centre|"
    r"college|theater|theatre|zoo|kitchen|newsroom|service|fire service|army|navy|air force|police|"
    r"government|civil service|team|orchestra|church|network|station|plant|mill|mine|port|railway|"
    r"post office|court|nhs|non-profit|foundation|institute|charity shop|call centre|call center)"
)
_ORG = (
    r"(?P<v>(?-i:[A-Z0-9][\w'&.-]*(?:(?: (?:of|and|for|the|de|&))? [A-Z0-9][\w'&.-]*){0,4})"
    rf"|(?:a|an|the) (?:[\w-]+ ){{0,2}}?{_ORG_WORDS}(?![\w-])(?: (?-i:[A-Z][\w'&.-]*))?)"
)
# Joining a club, a church or a team is membership; only a name makes it an employer.
_PROPER_ORG = (
    r"(?P<v>(?-i:[A-Z0-9][\w'&.-]*(?:(?: (?:of|and|for|the|de|&))? [A-Z0-9][\w'&.-]*){0,4})"
    r"|the (?:fire service|army|navy|air force|police|civil service|nhs|government|marines|"
    r"coast guard|ambulance service|diplomatic service)(?![\w-]))"
)
_NAME = rf"(?P<v>{_NAMEW}(?: {_NAMEW})?)"
_PHONE = r"(?P<v>\+?\(?\d[\d\s().-]{5,18}\d)"
_EMAIL = r"(?P<v>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
_DIET = (
    r"(?P<v>raw vegan|lacto-vegetarian|vegan|vegetarian|veggie|pescatarian|pescetarian|keto|"
    r"ketogenic|paleo|gluten[- ]free|dairy[- ]free|lactose[- ]free|plant[- ]based|flexitarian|"
    r"carnivore|omnivore|low[- ]carb|mediterranean|halal|kosher)"
)
DIET_TRIGGERS = (
    "vegan vegetarian veggie pescatarian pescetarian keto ketogenic paleo gluten dairy lactose "
    "plant flexitarian carnivore omnivore low mediterranean halal kosher gluten-free dairy-free "
    "plant-based low-carb lactose-free raw"
)
_NP = rf"(?P<v>(?:[\w'-]+ ){{0,4}}?[\w'-]+){_END}"
_NPLIST = (
    r"(?P<v>(?:[\w'-]+ ){0,3}?[\w'-]+(?:(?:,\s*|,?\s+and\s+|,?\s+or\s+)(?:[\w'-]+ ){0,3}?[\w'-]+)*)"
    + _END
)
_TITLE = rf"(?P<v>(?:[\w'-]+ ){{0,3}}?[\w'-]+){_END}"
_EVENT_NOUN = (
    r"(?:sync|standup|stand-up|meeting|1:1|one-on-one|check-in|catch-up|call|class|classes|"
    r"lesson|lessons|practice|appointment|session|rehearsal|club|review|retro|retrospective|"
    r"training|shift|interview|therapy|tutoring|book club|game night|dinner|lunch)"
)
EVENT_TRIGGERS = (
    "sync standup stand-up meeting 1:1 one-on-one check-in catch-up call class classes lesson "
    "lessons practice appointment session rehearsal club review retro retrospective training "
    "shift interview therapy tutoring night dinner lunch"
)
_EVENT = (
    rf"(?P<s>(?:(?:{_OWNER}|the|our|this|that|weekly|monthly|daily|regular|usual)\s+){{0,3}}"
    rf"(?:[\w:-]+\s+){{0,2}}?{_EVENT_NOUN})"
)
_WHEN = (
    r"(?P<v>(?:(?:every|each|next|this|on|at|from)\s+)?(?:other\s+)?[\w:.]+(?:\s+[\w:.]+){0,5}?)"
    r"(?=\s*(?:[,;.!?()\"]|\s-\s|$)|\s+(?:and|but|because|since|so|which|instead|now|from now on|"
    r"starting|going forward|for now|this time|though)\b)"
)
_PET = (
    r"(?P<k>guinea pigs?|dogs?|pupp(?:y|ies)|pups?|cats?|kittens?|rabbits?|bunn(?:y|ies)|"
    r"parrots?|budgies?|hamsters?|tortoises?|turtles?|lizards?|geckos?|snakes?|horses?|ferrets?|"
    r"goldfish|fish|birds?|chinchillas?|ponies|pony|rats?|iguanas?|hedgehogs?|cockatiels?|"
    r"kitty|kitties|greyhounds?|labradors?|spaniels?|terriers?|beagles?|collies?|poodles?|"
    r"whippets?|dachshunds?|huskies|husky|retrievers?|pugs?|corgis?|lurchers?)"
)

#: Head nouns that make "she is a ..." a job title.
OCCUPATIONS = word_set("""engineer developer programmer designer architect nurse doctor physician surgeon dentist
    teacher professor lecturer tutor lawyer attorney paralegal accountant analyst consultant
    manager director chef cook baker barista waiter waitress bartender cashier clerk pharmacist
    therapist counselor counsellor psychologist psychiatrist scientist researcher writer editor
    journalist reporter photographer artist musician painter actor actress mechanic electrician
    plumber carpenter driver pilot firefighter paramedic vet veterinarian librarian student
    intern receptionist salesperson realtor recruiter administrator technician coordinator
    specialist ceo cto cfo coo founder co-founder freelancer contractor tester economist banker
    trader broker chemist biologist physicist mathematician statistician entrepreneur coach
    trainer instructor caregiver nanny worker secretary supervisor executive representative
    associate principal farmer gardener florist tailor hairdresser stylist barber translator
    interpreter marketer strategist planner dispatcher guard soldier officer judge midwife
    optometrist radiologist surveyor animator illustrator producer director sommelier dietitian
    nutritionist physiotherapist pediatrician paediatrician housekeeper janitor cleaner courier
    ux lead head owner president partner""")


@dataclass(frozen=True)
class Frame:
    """One way of stating an attribute."""

    attribute: str
    pattern: re.Pattern[str]
    #: Lower-case words one of which the sentence must contain for the frame to run.
    triggers: frozenset[str]
    mode: str = "state"
    #: A denial that counts only if it closes a known value ("left Acme" says nothing
    #: about a city called Acme).
    needs_match: bool = False
    #: Kind of value, for cleaning: place, org, name, phrase, phone, email, when, diet,
    #: title, occupation, pet, given_up, fixed.
    value: str = "phrase"
    #: The value when the frame implies it ("eats meat again": omnivore).
    fixed: str | None = None


@dataclass(frozen=True)
class Match:
    """A frame's match in one sentence, before subjects are resolved."""

    frame: Frame
    groups: dict[str, str]
    #: Where each group was found in the sentence.
    spans: dict[str, tuple[int, int]]
    start: int
    end: int

    @property
    def attribute(self) -> str:
        return self.frame.attribute

    @property
    def mode(self) -> str:
        return self.frame.mode


_PIECES = {
    "<S>": _SUBJ,
    "<P>": _POSS,
    "<ADV>": _ADV,
    "<PLACE>": _PLACE,
    "<ORG>": _ORG,
    "<PROPER_ORG>": _PROPER_ORG,
    "<NAME>": _NAME,
    "<PHONE>": _PHONE,
    "<EMAIL>": _EMAIL,
    "<DIET>": _DIET,
    "<NP>": _NP,
    "<NPLIST>": _NPLIST,
    "<TITLE>": _TITLE,
    "<EVENT>": _EVENT,
    "<WHEN>": _WHEN,
    "<PET>": _PET,
    "<END>": _END,
    "<NAMEW>": _NAMEW,
    "<OWNER>": _OWNER,
}


_ELIDED = (
    r"(?P<i>^)(?:(?:just|finally|recently|officially|also|now|have|been|am|still|currently|"
    r"totally|really)\s+){0,4}"
)


def _compile(source: str) -> re.Pattern[str]:
    # "<S><ADV>" also matches a sentence that opens with the verb ("Moved to Lyon"):
    # chat drops the "I".
    source = source.replace("<S><ADV>", f"(?:<S><ADV>|{_ELIDED})")
    for key, piece in _PIECES.items():
        source = source.replace(key, piece)
    return re.compile(source, re.I)


def frame(
    attribute: str, triggers: str, source: str, mode: str = "state", **options: object
) -> Frame:
    return Frame(attribute, _compile(source), frozenset(triggers.split()), mode, **options)  # type: ignore[arg-type]
