"""The statement patterns: how people say where they live, who they work for...

Each :class:`Frame` is one way of stating an attribute (``"I moved to Lyon"``,
``"her new number is ..."``, ``"Tom and I split up"``), with what the statement
does to the attribute: states it, changes it, says it no longer holds, or says
it held once. Frames run on sentences already passed through
:func:`arbormem.records.rewrite.normalise` (no contractions, straight quotes).

Speed matters (every turn of every conversation goes through here), so each
frame carries trigger words and runs only on sentences that contain one of
them; most sentences of small talk match no trigger at all.

Group names in the patterns: ``s`` the subject, ``p`` a possessor ("my",
"Ana's"), ``o`` an object ("reach *me* at"), ``v`` the value, ``w`` a former
value ("moved *from Paris* to Lyon"), ``e`` an employer beside a job title,
``n`` the noun used ("girlfriend", "favourite *colour*"), ``k`` a pet's kind,
``g`` a food given up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from arbormem.trackers.common import words as word_set

__all__ = ["FRAMES", "OCCUPATIONS", "TRIGGERS", "Frame", "Match", "match_sentence"]

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
    r"newly|only|apparently|technically|somehow|gonna|going to|about to|set to|getting|get|got))*\s+"
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
_DIET_TRIGGERS = (
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
_EVENT_TRIGGERS = (
    "sync standup stand-up meeting 1:1 one-on-one check-in catch-up call class classes lesson "
    "lessons practice appointment session rehearsal club review retro retrospective training "
    "shift interview therapy tutoring night dinner lunch"
)
_EVENT = (
    rf"(?P<s>(?:(?:{_OWNER}|the|our|this|that|weekly|monthly|daily|regular|usual)\s+)*"
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
_NEGATED_PARTS = re.compile(r"\b(?:not|never|no|nobody|neither|nor)\b", re.I)

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
    r"totally|really)\s+)*"
)


def _compile(source: str) -> re.Pattern[str]:
    # "<S><ADV>" also matches a sentence that opens with the verb ("Moved to Lyon"):
    # chat drops the "I".
    source = source.replace("<S><ADV>", f"(?:<S><ADV>|{_ELIDED})")
    for key, piece in _PIECES.items():
        source = source.replace(key, piece)
    return re.compile(source, re.I)


def _frame(
    attribute: str, triggers: str, source: str, mode: str = "state", **options: object
) -> Frame:
    return Frame(attribute, _compile(source), frozenset(triggers.split()), mode, **options)  # type: ignore[arg-type]


_MOVE = r"(?:moved|relocated|moving|relocating|move|relocate|moves|transferred|emigrated)"
_LIVE = r"(?:live|lives|living|reside|resides|residing|based|settled|settling|located)"
_HOUSING = r"(?:house|flat|apartment|place|condo|home|studio|bungalow|cottage|loft)"
_STARTED = (
    r"(?:started at|start at|starting at|started working at|started working for|"
    r"start working at|starting work at|begun at|began at|started a new job at|started a job at|"
    r"got a job at|got a job with|got a new job at|got a new job with|got hired at|got hired by|"
    r"was hired by|hired at|hired by|took a job at|took a job with|took a new job at|"
    r"took a position at|accepted a job at|accepted an offer from|accepted a job offer from|"
    r"accepted the offer from|landed a job at|landed a job with|moved over to|"
    r"switched jobs to|switched to a job at|interning at|an intern at)"
)
_WORKS = r"(?:work at|works at|working at|work for|works for|working for|employed at|employed by)"
_LEFT = (
    r"(?:quit|left|leaving|leave|quitting|resigned from|got laid off from|was laid off from|"
    r"handed in (?:my|his|her|their) notice (?:at|to)|gave (?:my|his|her|their) notice (?:at|to)|"
    r"laid off from|got fired from|was fired from|fired from|retired from|walked away from)"
)
_PARTNER = r"(?P<n>girlfriend|boyfriend|wife|husband|partner|fianc[eé]e?|spouse|significant other)"
_SPLIT = (
    r"(?:broke up|broken up|breaking up|split up|separated|separating|divorced|divorcing|"
    r"called it quits|ended things|ended it|split(?=\s+(?:up|with|from)\b|\s*[,.;!]|\s*$))"
)

FRAMES: tuple[Frame, ...] = (
    # ---------------------------------------------------------------- home
    _frame(
        "home",
        "moved relocated moving relocating move relocate moves transferred emigrated",
        rf"<S><ADV>{_MOVE}(?:\s+(?:back|over|out|away|down|up|all the way|permanently|house))?"
        rf"(?:\s+from\s+(?P<w>(?-i:[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){{0,2}})))?"
        rf"\s+(?:to|into)\s+(?:(?:a|an|the|my|our|his|her|their)\s+(?:[\w-]+\s+){{0,3}}?"
        rf"(?:in|at|near|outside|over in|just outside)\s+)?<PLACE>",
        "change",
        value="place",
    ),
    _frame(
        "home",
        "live lives living reside resides residing based settled settling located",
        rf"<S><ADV>(?:now\s+)?{_LIVE}\s+(?:in|near|outside|over in|out in|down in|up in|just outside)"
        rf"\s+(?:(?:a|an|the|my|our|his|her|their)\s+(?:[\w-]+\s+){{0,3}}?(?:in|near)\s+)?<PLACE>",
        value="place",
    ),
    _frame(
        "home",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?=[^.!?]*\bnow\b)(?:now\s+)?(?:living\s+|based\s+|settled\s+)?"
        r"in\s+<PLACE>",
        "change",
        value="place",
    ),
    _frame(
        "home",
        "lived living based been",
        r"<S>\s+(?:have|has)\s+(?:\w+\s+)?(?:lived|been living|been based|been)\s+in\s+<PLACE>"
        # "been in Valencia" is a home only when it has lasted: "since 2019", "for years"
        r"(?:(?=\s+(?:since|for)\b)|(?<=lived in)|(?<=living in)|(?<=based in))",
        value="place",
    ),
    _frame(
        "home",
        "call calls",
        r"<S><ADV>(?:now\s+)?(?:call|calls)\s+<PLACE>\s+home\b",
        value="place",
    ),
    _frame(
        "home",
        "home place flat apartment house",
        rf"<P>\s+(?:new\s+)?(?:home|place|home base|{_HOUSING})\s+is\s+(?:now\s+)?(?:in|over in|out in)\s+<PLACE>",
        value="place",
    ),
    _frame(
        "home",
        "bought rented found got renting buying",
        rf"<S><ADV>(?:bought|rented|found|got|renting|buying|closed on)\s+(?:a|an|our|my|the)\s+"
        rf"(?:[\w-]+\s+){{0,2}}?{_HOUSING}\s+in\s+<PLACE>",
        "change",
        value="place",
    ),
    _frame(
        "home",
        "lived used",
        r"<S>\s+(?:used to live|once lived|lived|grew up)\s+in\s+<PLACE>",
        "past",
        value="place",
    ),
    _frame(
        "home",
        "live lives living",
        r"<S><ADV>(?:not|no longer)\s+(?:live|lives|living)\s+in\s+<PLACE>",
        "negated",
        value="place",
    ),
    _frame(
        "home",
        "left",
        r"<S><ADV>(?:left|moved away from|moved out of)\s+<PLACE>\s+(?:for good|behind)\b",
        "negated",
        needs_match=True,
        value="place",
    ),
    # ---------------------------------------------------------------- address
    _frame(
        "address",
        "address",
        r"(?:<P>\s+)?(?:new\s+|current\s+|home\s+)*address\s*(?:is|:|has changed to|changed to|"
        r"is now|'s)?\s*(?:(?:now|from\s+[\w\s]{2,20}?)\s*:?\s*)?"
        r"(?P<v>\d+[\w\s.,'#-]{3,60}?)(?=\s*(?:[.;!?]|$)|,\s+(?:and|but|so|please|if)\b|"
        r"\s+(?:and|but|now|if|from)\b)",
        value="phrase",
    ),
    _frame(
        "address",
        "live lives living moved moving",
        r"<S><ADV>(?:now\s+)?(?:live|lives|living|moved|moving)\s+(?:at|to)\s+"
        r"(?P<v>\d+\s+(?-i:[A-Z][\w'.-]*)(?:\s+(?-i:[A-Z][\w'.-]*)){0,3})",
        value="phrase",
    ),
    # ---------------------------------------------------------------- employer
    _frame(
        "employer",
        "joined joining join started start starting begun began got hired took accepted landed "
        "signed moved switched interning intern",
        rf"<S><ADV>{_STARTED}\s+<ORG>",
        "change",
        value="org",
    ),
    _frame(
        "employer",
        "worked",
        r"<S>\s+(?:have|has)\s+(?:\w+\s+)?worked\s+(?:at|for)\s+<ORG>",
        value="org",
    ),
    _frame(
        "employer",
        "joined joining join signed",
        r"<S><ADV>(?:joined|joining|join|signed with|signing with)\s+<PROPER_ORG>",
        "change",
        value="org",
    ),
    _frame(
        "employer",
        "work works working employed",
        rf"<S><ADV>{_WORKS}\s+<ORG>",
        value="org",
    ),
    _frame(
        "employer",
        "be",
        r"<S><ADV>(?:be|am|is|are)\s+(?:at|with|joining)\s+<ORG>\s+as\s+(?:a\s+|an\s+|the\s+)?"
        r"(?P<n>[\w-]+(?:\s+[\w-]+){0,3})",
        "change",
        value="org",
    ),
    _frame(
        "employer",
        "first",
        r"<P>\s+first\s+(?:day|week|shift|morning)\s+(?:at|with|in)\s+<ORG>",
        "change",
        value="org",
    ),
    _frame(
        "employer",
        "job role position employer company workplace",
        r"<P>\s+(?:new\s+|current\s+)?(?:job|role|position|employer|company|workplace)\s+is\s+"
        r"(?:now\s+)?(?:at|with)?\s*<ORG>",
        value="org",
    ),
    _frame(
        "employer",
        "quit left leaving leave quitting resigned laid fired retired walked",
        rf"<S><ADV>{_LEFT}\s+(?:(?:my|his|her|their|the)\s+(?:job|position|role|gig)\s+(?:at|with)\s+)?<ORG>",
        "negated",
        needs_match=True,
        value="org",
    ),
    _frame(
        "employer",
        "quit left leaving quitting",
        r"<S><ADV>(?:quit|left|leaving|quitting)\s+<ORG>\s+(?:for|to join|to go to|and joined)\s+"
        r"(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3}))",
        "negated",
        needs_match=True,
        value="org",
    ),
    _frame(
        "employer",
        "work works working",
        r"<S><ADV>(?:not|no longer)\s+(?:work|works|working)\s+(?:at|for)\s+<ORG>",
        "negated",
        value="org",
    ),
    _frame(
        "employer",
        "worked used",
        r"<S>\s+(?:used to work|once worked|worked)\s+(?:at|for)\s+<ORG>",
        "past",
        value="org",
    ),
    _frame(
        "employer",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?:now|currently)\s+(?:working\s+)?at\s+<ORG>",
        "change",
        value="org",
    ),
    _frame(
        "employer",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?:working\s+)?at\s+<ORG>\s+now\b",
        "change",
        value="org",
    ),
    # ---------------------------------------------------------------- job title
    _frame(
        "job_title",
        "work works working employed",
        r"<S><ADV>(?:work|works|working|employed)\s+(?:\w+\s+)?as\s+(?:a|an|the)\s+<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3})))?",
        value="title",
    ),
    _frame(
        "job_title",
        "started starting start hired took got landed joined join joining begun began",
        r"<S><ADV>(?:started|starting|start|hired|took a job|took a position|got a job|got a new job|"
        r"landed a job|joined|join|joining|begun|began)\s+(?:\w+\s+)?as\s+(?:a|an|the)\s+<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3})))?",
        "change",
        value="title",
    ),
    _frame(
        "job_title",
        "made appointed named promoted",
        r"\b(?:made|appointed|named|promoted)\s+(?P<o>me|him|her|them|<NAMEW>)\s+(?:to\s+)?(?:the\s+|a\s+|an\s+)?"
        r"(?:new\s+)?<TITLE>",
        "change",
        value="occupation",
    ),
    _frame(
        "job_title",
        "promoted",
        r"<S><ADV>(?:got |was |been |being )?promoted\s+to\s+(?:(?:a|an|the)\s+)?<TITLE>",
        "change",
        value="title",
    ),
    _frame(
        "job_title",
        "title role position job occupation profession",
        r"<P>\s+(?:new\s+|current\s+|official\s+)?(?:job title|title|role|position|job|occupation|"
        r"profession)\s+is\s+(?:now\s+)?(?:(?:a|an|the)\s+)?<TITLE>",
        value="occupation",
    ),
    _frame(
        "job_title",
        " ".join(sorted(OCCUPATIONS | {f"{w}s" for w in OCCUPATIONS})),
        r"<S><ADV>(?:am|is|are|became|become|becoming|now)\s+(?:now\s+)?(?:a|an)\s+"
        r"(?:(?:new|full-time|part-time|freelance)\s+)*<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?:(?: (?:of|and|&))? [A-Z0-9&][\w'&.-]*){0,3})))?",
        value="occupation",
    ),
    # ---------------------------------------------------------------- school
    _frame(
        "school",
        "study studies studying enrolled student transferred",
        r"<S><ADV>(?:study|studies|studying|enrolled|a student|transferred)\s+(?:at|to|in)\s+<ORG>",
        value="org",
    ),
    # ---------------------------------------------------------------- diet
    _frame(
        "diet",
        _DIET_TRIGGERS,
        r"<S><ADV>(?:went|gone|go|going|turned|became|become|becoming|switched to being|switched to)"
        r"\s+(?:(?:fully|strictly|completely|totally|mostly|full|100%|officially|a)\s+)*<DIET>"
        r"(?!\s+(?:food|restaurant|recipe|place|option|cafe|burger|dish|meal|cheese|friend|bakery))",
        "change",
        value="diet",
    ),
    _frame(
        "diet",
        _DIET_TRIGGERS,
        r"<S><ADV>(?:am|is|are|been)\s+(?:now\s+)?(?:(?:fully|strictly|completely|totally|mostly|a)\s+)*"
        r"<DIET>(?!\s+(?:food|restaurant|recipe|place|option|cafe|burger|dish|meal|cheese|friend|bakery))",
        value="diet",
    ),
    _frame(
        "diet",
        "diet",
        r"<S><ADV>(?:on|started|starting|start|doing|follow|follows|following|switched to|trying|"
        r"tried|went on|gone on|going on|began|begun|eating)\s+(?:(?:a|an|the)\s+)?"
        r"(?:(?:strict|new|proper)\s+)?<DIET>\s+diet",
        "change",
        value="diet",
    ),
    _frame(
        "diet",
        "put placed",
        r"\b(?:put|placed|started)\s+(?P<o>me|him|her|them|<NAMEW>)\s+on\s+(?:a|an|the)\s+(?:strict\s+)?<DIET>\s+diet",
        "change",
        value="diet",
    ),
    _frame(
        "diet",
        "anything everything",
        r"<S><ADV>(?:eat|eats)\s+(?:pretty much\s+|just about\s+|basically\s+)?(?:anything|everything)\b",
        value="fixed",
        fixed="omnivore",
    ),
    _frame(
        "diet",
        "diet",
        r"<P>\s+diet\s+is\s+(?:now\s+)?(?:(?:mostly|strictly|fully|completely)\s+)?<DIET>",
        value="diet",
    ),
    _frame(
        "diet",
        "stopped quit gave give giving cut cutting off eating eat eats",
        r"<S><ADV>(?:stopped|quit|gave up|give up|giving up|cut out|cutting out|off|not eating|"
        r"no longer eat|no longer eating|do not eat|does not eat|never eat|never eats)\s+(?:eating\s+)?"
        r"(?:any\s+)?(?P<g>red meat|meat|animal products|dairy|gluten|carbs)\b",
        "change",
        value="given_up",
    ),
    _frame(
        "diet",
        _DIET_TRIGGERS,
        r"<S><ADV>(?:not|no longer)\s+(?:(?:doing|on|following|eating|going|being|really|strictly)\s+)?"
        r"(?:a\s+|an\s+|the\s+)?<DIET>(?:\s+diet)?",
        "negated",
        value="diet",
    ),
    _frame(
        "diet",
        "being quit stopped gave dropped ditched abandoned done off finished fell",
        r"<S><ADV>(?:quit|stopped|gave up(?: on)?|dropped|ditched|abandoned|done with|off|finished with|"
        r"fell off)\s+(?:doing\s+|being\s+|the\s+|my\s+)?(?:a\s+)?<DIET>(?:\s+diet)?",
        "negated",
        value="diet",
    ),
    _frame(
        "diet",
        "meat",
        r"<S><ADV>(?:(?:eat|eats|eating|started eating|back to eating|went back to eating)\s+meat\s+again|"
        r"back on meat|eating meat again|eat everything(?:\s+again)?)\b",
        "change",
        value="fixed",
        fixed="omnivore",
    ),
    # ---------------------------------------------------------------- phone
    _frame(
        "phone",
        "number phone cell mobile",
        r"<P>\s+(?:(?:new|current|cell|mobile|work|home|personal|phone|telephone|cellphone|private)\s+)*"
        r"(?:number|phone|cell|mobile)(?:\s+number)?(?:'s|\s*(?:is now|is|has changed to|changed to|"
        r"became|:|=|-))\s*(?:now\s+)?<PHONE>",
        value="phone",
    ),
    _frame(
        "phone",
        "number",
        r"<S><ADV>(?:changed|switched|updated)\s+(?:(?:my|his|her|their|the)\s+)?(?:phone\s+|cell\s+)?"
        r"number\s+to\s+<PHONE>",
        "change",
        value="phone",
    ),
    _frame(
        "phone",
        "changed switched updated",
        r"<S><ADV>(?:changed|switched|updated)\s+(?:(?:my|his|her|their|the)\s+)?(?:phone\s+|cell\s+)?"
        r"numbers?\s*[,;:-]?\s*(?:and\s+)?(?:it is|the new one is|new one is|it is now)\s+(?:now\s+)?<PHONE>",
        "change",
        value="phone",
    ),
    _frame(
        "phone",
        "number mobile phone cell",
        r"<P>\s+(?:(?:new|current|old|own)\s+)?(?:number|mobile|phone|cell)\b(?P<n>[^.!?@]{0,40}?)<PHONE>",
        value="phone",
    ),
    _frame(
        "phone",
        "use try call ring text",
        r"\b(?:use|try|call|ring|text|whatsapp)\s+(?:me\s+(?:on|at)\s+)?<PHONE>",
        value="phone",
    ),
    _frame(
        "phone",
        "reach call text contact ring",
        r"\b(?:reach|call|text|contact|ring|whatsapp)\s+(?P<o>me|him|her|them|us|<NAMEW>)\s+(?:on|at)\s+<PHONE>",
        value="phone",
    ),
    _frame(
        "phone",
        "number",
        r"<S><ADV>(?:got|have|has|gotten|getting)\s+(?:a\s+)?new\s+(?:phone\s+|cell\s+|mobile\s+)?(?:number|mobile|phone|cell)"
        r"\s*[:,-]?\s*(?:(?:it is|which is|and it is)\s+)?<PHONE>",
        "change",
        value="phone",
    ),
    _frame(
        "phone",
        "number",
        r"\bnew\s+(?:phone\s+|cell\s+|mobile\s+)?(?:number|mobile|phone|cell)\b[^.!?\d@]{0,40}?<PHONE>",
        "change",
        value="phone",
    ),
    # ---------------------------------------------------------------- email
    _frame(
        "email",
        "email e-mail mail",
        r"<P>\s+(?:(?:new|current|work|personal|private)\s+)*(?:email|e-mail|mail)(?:\s+address)?"
        r"(?:'s|\s*(?:is now|is|has changed to|changed to|:|=|-))\s*(?:now\s+)?<EMAIL>",
        value="email",
    ),
    _frame(
        "email",
        "email e-mail mail write reach contact",
        r"\b(?:email|e-mail|mail|write to|reach|contact)\s+(?P<o>me|him|her|them|us|<NAMEW>)\s+(?:at|on)\s+<EMAIL>",
        value="email",
    ),
    _frame(
        "email",
        "email e-mail",
        r"<S><ADV>(?:changed|switched|updated|got|have|has)\s+(?:(?:my|his|her|their|the|a)\s+)?"
        r"(?:new\s+)?(?:email|e-mail)(?:\s+address)?\s+(?:to\s+|[:,-]\s*)?<EMAIL>",
        "change",
        value="email",
    ),
    _frame(
        "email",
        "email e-mail mail address inbox",
        r"<P>\s+(?:(?:new|current|old|own|work|personal)\s+)?(?:email|e-mail|mail|inbox)(?:\s+address)?\b"
        r"(?P<n>[^.!?@]{0,60}?)<EMAIL>",
        value="email",
    ),
    _frame(
        "email",
        "use try instead",
        r"\b(?:use|try|write to|email|mail)\s+(?:me\s+at\s+)?<EMAIL>\s+(?:from now on|instead|now|going forward)\b",
        "change",
        value="email",
    ),
    # ---------------------------------------------------------------- partner
    _frame(
        "partner",
        "girlfriend boyfriend wife husband partner fiance fiancee fiancé fiancée spouse significant",
        rf"<P>\s+(?:new\s+|lovely\s+|wonderful\s+)?{_PARTNER}(?:\s*,\s*|\s+is\s+(?:named\s+|called\s+)?|"
        rf"\s+(?:named|called)\s+|\s+)<NAME>",
        value="name",
    ),
    _frame(
        "partner",
        "dating seeing going engaged married marrying relationship moved",
        r"<S><ADV>(?:dating|been seeing|started seeing|going out with|engaged to|married to|marrying|"
        r"married|in a relationship with|started dating|moved in with|getting married to)\s+<NAME>",
        value="name",
    ),
    _frame(
        "partner",
        "dating engaged married together couple item",
        r"(?P<v><NAMEW>)\s+and\s+(?P<s>I|me)\s+(?:(?:are|have|just|finally|recently|officially|got|"
        r"been|now)\s+)*(?:dating|engaged|married|together|a couple|an item|started dating|"
        r"moved in together)\b",
        "change",
        value="name",
    ),
    _frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing quits ended",
        rf"<S><ADV>{_SPLIT}(?:\s+(?:with|from)\s+<NAME>)?"
        # "we broke up", "we split up last month", not "we split the bill"
        r"(?=\s*(?:[,.;!?]|$)|\s+(?:last|in|on|a|two|three|after|recently|yesterday|this|for|"
        r"over|because|and|but|so|when|earlier|months|weeks)\b)",
        "negated",
        value="name",
    ),
    _frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing",
        rf"(?P<v><NAMEW>)\s+and\s+(?P<s>I|me)<ADV>{_SPLIT}",
        "negated",
        value="name",
    ),
    _frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing quits ended",
        rf"<P>\s+{_PARTNER}\s+and\s+(?:I|me)<ADV>{_SPLIT}",
        "negated",
        value="name",
    ),
    _frame(
        "partner",
        "dumped left",
        r"(?P<v><NAMEW>)\s+(?:dumped|left|walked out on)\s+(?P<s>me)\b",
        "negated",
        needs_match=True,
        value="name",
    ),
    _frame(
        "partner",
        "dumped left",
        r"<S><ADV>(?:dumped|left)\s+<NAME>",
        "negated",
        needs_match=True,
        value="name",
    ),
    _frame(
        "partner",
        "ex ex-girlfriend ex-boyfriend ex-wife ex-husband ex-partner",
        r"<P>\s+(?:ex|ex-girlfriend|ex-boyfriend|ex-wife|ex-husband|ex-partner|former partner)\s*,?\s+<NAME>",
        "past",
        value="name",
    ),
    # ---------------------------------------------------------------- pets
    _frame(
        "pets",
        "adopted got bought rescued brought took adopt getting gotten adopting welcomed picked collected",
        r"<S><ADV>(?:adopted|got|bought|rescued|brought home|took in|adopt|adopting|"
        r"getting|gotten|welcomed|picked up|collected|took home)\s+(?:a|an|two|three|another|our|my|new|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b(?:\s*,?\s*(?:named|called)\s+<NAME>)?",
        "change",
        value="pet",
    ),
    _frame(
        "pets",
        "have has own owns",
        r"<S><ADV>(?:have|has|own|owns)\s+(?:a|an|two|three|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b(?:\s*,?\s*(?:named|called)\s+<NAME>)?",
        value="pet",
    ),
    _frame(
        "pets",
        "dog dogs puppy pup cat cats kitten rabbit bunny parrot budgie hamster tortoise turtle "
        "lizard gecko snake horse ferret goldfish fish bird chinchilla pony rat iguana hedgehog "
        "cockatiel guinea",
        r"<P>\s+(?:new\s+|little\s+|old\s+|sweet\s+|rescue\s+|senior\s+)?<PET>(?:'s name is|,| is named|"
        r" is called| named| called|)\s+<NAME>",
        value="pet",
    ),
    _frame(
        "pets",
        "name named called",
        r"<S><ADV>(?:adopted|got|have|has|bought|rescued|brought home|took in|adopt|adopting|"
        r"getting|gotten|welcomed)\s+(?:a|an|two|three|another|our|my|new|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b[^.!?]{0,40}?\b(?:(?:her|his|its|their) name is|"
        r"(?:she|he|it) is called|named (?:her|him|it)|called (?:her|him|it))\s+<NAME>",
        "change",
        value="pet",
    ),
    _frame(
        "pets",
        "named called",
        r"<S><ADV>(?:named|called)\s+(?:(?:the|our|my|his|her|their)\s+(?:new\s+)?<PET>|him|her|it)\s+<NAME>",
        "change",
        value="pet",
    ),
    _frame(
        "pets",
        "meet",
        r"\bmeet\s+<NAME>\s*,?\s+(?P<p>my|our)\s+(?:new\s+)?(?:little\s+)?<PET>",
        "change",
        value="pet",
    ),
    _frame(
        "pets",
        "passed died away put",
        r"(?:<P>\s+(?:\w+\s+)?<PET>\s*,?\s*)?(?P<v><NAMEW>)?\s*(?:passed away|died|ran away|"
        r"was put down|had to be put down|was put to sleep)\b",
        "negated",
        needs_match=True,
        value="pet",
    ),
    _frame(
        "pets",
        "rehomed rehome gave lost",
        r"<S><ADV>(?:rehomed|had to rehome|gave away|lost|had to give up|had to put down)\s+"
        r"(?:my|our|his|her|their)\s+(?:(?:old|sweet|little|lovely|beloved)\s+)?<PET>\b(?:\s*,?\s*<NAME>)?",
        "negated",
        needs_match=True,
        value="pet",
    ),
    _frame(
        "pets",
        "rehomed rehome gave lost",
        r"<S><ADV>(?:rehomed|had to rehome|gave away|lost|had to give up|had to put down)\s+<NAME>",
        "negated",
        needs_match=True,
        value="pet",
    ),
    # ---------------------------------------------------------------- allergy
    _frame(
        "allergy",
        "allergic",
        r"<S><ADV>(?:(?:severely|very|mildly|deathly|super|really|quite|slightly|badly|extremely|"
        r"seriously)\s+)?allergic\s+to\s+<NPLIST>",
        value="phrase",
    ),
    _frame(
        "allergy",
        "allergy",
        r"<S><ADV>(?:have|has|developed|got|suffer from)\s+(?:a|an|this)\s+(?:(?:bad|severe|mild|new)\s+)?"
        r"(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allergy",
        "change",
        value="phrase",
    ),
    _frame(
        "allergy",
        "allergic",
        r"<S><ADV>(?:not|no longer|not even)\s+(?:really\s+)?allergic\s+to\s+<NPLIST>",
        "negated",
        value="phrase",
    ),
    _frame(
        "allergy",
        "outgrew outgrown grew got cured",
        r"<S><ADV>(?:outgrew|outgrown|grew out of|got over|cured)\s+(?:(?:my|his|her|their|the)\s+)?"
        r"(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allerg(?:y|ies)",
        "negated",
        value="phrase",
    ),
    _frame(
        "allergy",
        "gone away cleared over disappeared",
        r"(?:<P>|\bthe)\s+(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allerg(?:y|ies)\s+(?:is|are|has|have)?\s*(?:gone|went away|"
        r"cleared up|over|disappeared|vanished)\b",
        "negated",
        value="phrase",
    ),
    _frame(
        "allergy",
        "again",
        r"<S><ADV>(?:can|could)\s+(?:eat|have|drink|touch)\s+<NP>\s+again\b",
        "negated",
        needs_match=True,
        value="phrase",
    ),
    # ---------------------------------------------------------------- schedule
    _frame(
        "schedule",
        "moved moving rescheduled pushed bumped shifted changed switched",
        r"<EVENT>\s+(?:(?:is|was|has been|has|have|had|got|will be|is being|are|have been)\s+)?"
        r"(?:(?:now|just|officially|finally|been)\s+)*(?:moved|moving|moves|rescheduled|pushed|bumped|"
        r"shifted|changed|switched|changes|shifts)\s+(?:(?:back|forward|up|over|out)\s+)?to\s+<WHEN>",
        "change",
        value="when",
    ),
    _frame(
        "schedule",
        "moved moving rescheduled pushed bumped shifted changed switched move reschedule",
        r"\b(?:moved|rescheduled|pushed|bumped|shifted|changed|switched|move|moving|reschedule|"
        r"rescheduling)\s+<EVENT>\s+(?:(?:back|forward|up|over)\s+)?to\s+<WHEN>",
        "change",
        value="when",
    ),
    _frame(
        "schedule",
        _EVENT_TRIGGERS,
        r"<EVENT>\s+(?:is|are|happens|takes place|meets|runs|starts)\s+(?:(?:now|still|usually|always|"
        r"normally|going to be)\s+)?(?:(?:every|each)\s+(?:week|month|fortnight)\s+|weekly\s+)?"
        r"(?:on|at|every|each)\s+<WHEN>",
        value="when",
    ),
    # ---------------------------------------------------------------- likes
    _frame(
        "likes",
        "love loves like likes enjoy enjoys adore adores prefer prefers into obsessed fan crazy "
        "passionate keen",
        r"<S><ADV>(?:(?:really|absolutely|totally|truly|genuinely|so)\s+)*(?:love|loves|like|likes|"
        r"enjoy|enjoys|adore|adores|prefer|prefers|am into|is into|are into|am obsessed with|"
        r"is obsessed with|am a (?:big |huge )?fan of|is a (?:big |huge )?fan of|am crazy about|"
        r"am passionate about|is passionate about|am keen on|is keen on|are keen on)\s+<NP>",
        value="like",
    ),
    _frame(
        "likes",
        "hate hates dislike dislikes detest stand like enjoy fan into",
        r"<S><ADV>(?:hate|hates|dislike|dislikes|detest|detests|can not stand|cannot stand|"
        r"do not like|does not like|do not really like|do not enjoy|does not enjoy|am not a fan of|"
        r"is not a fan of|am not into|is not into|not like|not enjoy)\s+<NP>",
        "negated",
        value="like",
    ),
    _frame(
        "favourite",
        "favourite favorite",
        r"<P>\s+(?:new\s+|all-time\s+|current\s+|absolute\s+)?favou?rite\s+(?P<n>[\w-]+(?:\s+[\w-]+)?)"
        r"\s+(?:is|are|has to be|would be|is now|has become|became)\s+(?:now\s+|still\s+|probably\s+)?"
        r"(?P<v>(?:[\w'&-]+ ){0,5}?[\w'&-]+)(?=\s*(?:[,;:.!?()\"]|\s-\s|$)|\s+(?:and|but|because|since|so|"
        r"which|now|these days|though|by far)\b)",
        value="phrase",
    ),
    # ---------------------------------------------------------------- open "my X is now Y"
    _frame(
        "open",
        "now new changed",
        r"<P>\s+(?:new\s+)?(?P<n>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+(?:is now|has changed to|changed to|"
        r"is changing to)\s+(?P<v>(?:[\w'@.&-]+ ){0,3}?[\w'@.&-]+)<END>",
        "change",
        value="phrase",
    ),
)

_ALL_TRIGGERS = frozenset(t for f in FRAMES for t in f.triggers)
#: Every trigger word of every frame (lower case).
TRIGGERS = _ALL_TRIGGERS
_WORD = re.compile(r"[a-z][a-z-]*|\d+")


_BY_TRIGGER: dict[str, list[int]] = {}
for _n, _f in enumerate(FRAMES):
    for _t in _f.triggers:
        _BY_TRIGGER.setdefault(_t, []).append(_n)


def candidate_frames(words: set[str]) -> list[Frame]:
    """The frames whose trigger words ``words`` contains, in frame order."""
    hit = words & _ALL_TRIGGERS
    if not hit:
        return []
    return [FRAMES[n] for n in sorted({n for w in hit for n in _BY_TRIGGER[w]})]


def match_sentence(sentence: str) -> Iterator[Match]:
    """Every frame match in one normalised sentence, in frame order.

    A positive frame whose match says "not" or "never" before its value is
    dropped ("I did not move to Berlin"): denials have frames of their own.
    """
    words = set(_WORD.findall(sentence.lower()))
    found: list[Match] = []
    for frame in candidate_frames(words):
        for m in frame.pattern.finditer(sentence):
            groups = {k: v for k, v in m.groupdict().items() if v}
            if m.groupdict().get("i") is not None:
                groups["i"] = "I"
            if frame.mode != "negated":
                lead_end = m.start("v") if groups.get("v") else m.end()
                if _NEGATED_PARTS.search(sentence, m.start(), lead_end):
                    continue
            spans = {k: m.span(k) for k in groups if k != "i"}
            if "i" in groups:
                spans["i"] = (0, 0)
            found.append(Match(frame, groups, spans, m.start(), m.end()))
    # the fuller reading of the same words first: "Tom and I broke up" over "I broke up"
    found.sort(key=lambda m: (-len(m.groups), m.start - m.end))
    yield from found
