"""Frames for the rest of a life: diet, phone, email, partner, pets, allergies,
schedules, likes and favourites, and open "my X is now Y" attributes.

See :mod:`arbormem.records.patterns` for the pieces and what a frame's mode means.
"""

from __future__ import annotations

from arbormem.records.patterns import DIET_TRIGGERS, EVENT_TRIGGERS, Frame, frame

__all__ = ["FRAMES"]

_PARTNER = r"(?P<n>girlfriend|boyfriend|wife|husband|partner|fianc[eé]e?|spouse|significant other)"
_SPLIT = (
    r"(?:broke up|broken up|breaking up|split up|separated|separating|divorced|divorcing|"
    r"called it quits|ended things|ended it|split(?=\s+(?:up|with|from)\b|\s*[,.;!]|\s*$))"
)

FRAMES: tuple[Frame, ...] = (
    # ---------------------------------------------------------------- diet
    frame(
        "diet",
        DIET_TRIGGERS,
        r"<S><ADV>(?:went|gone|go|going|turned|became|become|becoming|switched to being|switched to)"
        r"\s+(?:(?:fully|strictly|completely|totally|mostly|full|100%|officially|a)\s+)*<DIET>"
        r"(?!\s+(?:food|restaurant|recipe|place|option|cafe|burger|dish|meal|cheese|friend|bakery))",
        "change",
        value="diet",
    ),
    frame(
        "diet",
        DIET_TRIGGERS,
        r"<S><ADV>(?:am|is|are|been)\s+(?:now\s+)?(?:(?:fully|strictly|completely|totally|mostly|a)\s+)*"
        r"<DIET>(?!\s+(?:food|restaurant|recipe|place|option|cafe|burger|dish|meal|cheese|friend|bakery))",
        value="diet",
    ),
    frame(
        "diet",
        "diet",
        r"<S><ADV>(?:on|started|starting|start|doing|follow|follows|following|switched to|trying|"
        r"tried|went on|gone on|going on|began|begun|eating)\s+(?:(?:a|an|the)\s+)?"
        r"(?:(?:strict|new|proper)\s+)?<DIET>\s+diet",
        "change",
        value="diet",
    ),
    frame(
        "diet",
        "put placed",
        r"\b(?:put|placed|started)\s+(?P<o>me|him|her|them|<NAMEW>)\s+on\s+(?:a|an|the)\s+(?:strict\s+)?<DIET>\s+diet",
        "change",
        value="diet",
    ),
    frame(
        "diet",
        "anything everything",
        r"<S><ADV>(?:eat|eats)\s+(?:pretty much\s+|just about\s+|basically\s+)?(?:anything|everything)\b",
        value="fixed",
        fixed="omnivore",
    ),
    frame(
        "diet",
        "diet",
        r"<P>\s+diet\s+is\s+(?:now\s+)?(?:(?:mostly|strictly|fully|completely)\s+)?<DIET>",
        value="diet",
    ),
    frame(
        "diet",
        "stopped quit gave give giving cut cutting off eating eat eats",
        r"<S><ADV>(?:stopped|quit|gave up|give up|giving up|cut out|cutting out|off|not eating|"
        r"no longer eat|no longer eating|do not eat|does not eat|never eat|never eats)\s+(?:eating\s+)?"
        r"(?:any\s+)?(?P<g>red meat|meat|animal products|dairy|gluten|carbs)\b",
        "change",
        value="given_up",
    ),
    frame(
        "diet",
        DIET_TRIGGERS,
        r"<S><ADV>(?:not|no longer)\s+(?:(?:doing|on|following|eating|going|being|really|strictly)\s+)?"
        r"(?:a\s+|an\s+|the\s+)?<DIET>(?:\s+diet)?",
        "negated",
        value="diet",
    ),
    frame(
        "diet",
        "being quit stopped gave dropped ditched abandoned done off finished fell",
        r"<S><ADV>(?:quit|stopped|gave up(?: on)?|dropped|ditched|abandoned|done with|off|finished with|"
        r"fell off)\s+(?:doing\s+|being\s+|the\s+|my\s+)?(?:a\s+)?<DIET>(?:\s+diet)?",
        "negated",
        value="diet",
    ),
    frame(
        "diet",
        "meat",
        r"<S><ADV>(?:(?:eat|eats|eating|started eating|back to eating|went back to eating)\s+meat\s+again|"
        r"back on meat|eating meat again|eat everything(?:\s+again)?)\b",
        "change",
        value="fixed",
        fixed="omnivore",
    ),
    # ---------------------------------------------------------------- phone
    frame(
        "phone",
        "number phone cell mobile",
        r"<P>\s+(?:(?:new|current|cell|mobile|work|home|personal|phone|telephone|cellphone|private)\s+)*"
        r"(?:number|phone|cell|mobile)(?:\s+number)?(?:'s|\s*(?:is now|is|has changed to|changed to|"
        r"became|:|=|-))\s*(?:now\s+)?<PHONE>",
        value="phone",
    ),
    frame(
        "phone",
        "number",
        r"<S><ADV>(?:changed|switched|updated)\s+(?:(?:my|his|her|their|the)\s+)?(?:phone\s+|cell\s+)?"
        r"number\s+to\s+<PHONE>",
        "change",
        value="phone",
    ),
    frame(
        "phone",
        "changed switched updated",
        r"<S><ADV>(?:changed|switched|updated)\s+(?:(?:my|his|her|their|the)\s+)?(?:phone\s+|cell\s+)?"
        r"numbers?\s*[,;:-]?\s*(?:and\s+)?(?:it is|the new one is|new one is|it is now)\s+(?:now\s+)?<PHONE>",
        "change",
        value="phone",
    ),
    frame(
        "phone",
        "number mobile phone cell",
        r"<P>\s+(?:(?:new|current|old|own)\s+)?(?:number|mobile|phone|cell)\b(?P<n>[^.!?@]{0,40}?)<PHONE>",
        value="phone",
    ),
    frame(
        "phone",
        "use try call ring text",
        r"\b(?:use|try|call|ring|text|whatsapp)\s+(?:me\s+(?:on|at)\s+)?<PHONE>",
        value="phone",
    ),
    frame(
        "phone",
        "reach call text contact ring",
        r"\b(?:reach|call|text|contact|ring|whatsapp)\s+(?P<o>me|him|her|them|us|<NAMEW>)\s+(?:on|at)\s+<PHONE>",
        value="phone",
    ),
    frame(
        "phone",
        "number",
        r"<S><ADV>(?:got|have|has|gotten|getting)\s+(?:a\s+)?new\s+(?:phone\s+|cell\s+|mobile\s+)?(?:number|mobile|phone|cell)"
        r"\s*[:,-]?\s*(?:(?:it is|which is|and it is)\s+)?<PHONE>",
        "change",
        value="phone",
    ),
    frame(
        "phone",
        "number",
        r"\bnew\s+(?:phone\s+|cell\s+|mobile\s+)?(?:number|mobile|phone|cell)\b[^.!?\d@]{0,40}?<PHONE>",
        "change",
        value="phone",
    ),
    # ---------------------------------------------------------------- email
    frame(
        "email",
        "email e-mail mail",
        r"<P>\s+(?:(?:new|current|work|personal|private)\s+)*(?:email|e-mail|mail)(?:\s+address)?"
        r"(?:'s|\s*(?:is now|is|has changed to|changed to|:|=|-))\s*(?:now\s+)?<EMAIL>",
        value="email",
    ),
    frame(
        "email",
        "email e-mail mail write reach contact",
        r"\b(?:email|e-mail|mail|write to|reach|contact)\s+(?P<o>me|him|her|them|us|<NAMEW>)\s+(?:at|on)\s+<EMAIL>",
        value="email",
    ),
    frame(
        "email",
        "email e-mail",
        r"<S><ADV>(?:changed|switched|updated|got|have|has)\s+(?:(?:my|his|her|their|the|a)\s+)?"
        r"(?:new\s+)?(?:email|e-mail)(?:\s+address)?\s+(?:to\s+|[:,-]\s*)?<EMAIL>",
        "change",
        value="email",
    ),
    frame(
        "email",
        "email e-mail mail address inbox",
        r"<P>\s+(?:(?:new|current|old|own|work|personal)\s+)?(?:email|e-mail|mail|inbox)(?:\s+address)?\b"
        r"(?P<n>[^.!?@]{0,60}?)<EMAIL>",
        value="email",
    ),
    frame(
        "email",
        "use try instead",
        r"\b(?:use|try|write to|email|mail)\s+(?:me\s+at\s+)?<EMAIL>\s+(?:from now on|instead|now|going forward)\b",
        "change",
        value="email",
    ),
    # ---------------------------------------------------------------- partner
    frame(
        "partner",
        "girlfriend boyfriend wife husband partner fiance fiancee fiancé fiancée spouse significant",
        rf"<P>\s+(?:new\s+|lovely\s+|wonderful\s+)?{_PARTNER}(?:\s*,\s*|\s+is\s+(?:named\s+|called\s+)?|"
        rf"\s+(?:named|called)\s+|\s+)<NAME>",
        value="name",
    ),
    frame(
        "partner",
        "dating seeing going engaged married marrying relationship moved",
        r"<S><ADV>(?:dating|been seeing|started seeing|going out with|engaged to|married to|marrying|"
        r"married|in a relationship with|started dating|moved in with|getting married to)\s+<NAME>",
        value="name",
    ),
    frame(
        "partner",
        "dating engaged married together couple item",
        r"(?P<v><NAMEW>)\s+and\s+(?P<s>I|me)\s+(?:(?:are|have|just|finally|recently|officially|got|"
        r"been|now)\s+)*(?:dating|engaged|married|together|a couple|an item|started dating|"
        r"moved in together)\b",
        "change",
        value="name",
    ),
    frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing quits ended",
        rf"<S><ADV>{_SPLIT}(?:\s+(?:with|from)\s+<NAME>)?"
        # "we broke up", "we split up last month", not "we split the bill"
        r"(?=\s*(?:[,.;!?]|$)|\s+(?:last|in|on|a|two|three|after|recently|yesterday|this|for|"
        r"over|because|and|but|so|when|earlier|months|weeks)\b)",
        "negated",
        value="name",
    ),
    frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing",
        rf"(?P<v><NAMEW>)\s+and\s+(?P<s>I|me)<ADV>{_SPLIT}",
        "negated",
        value="name",
    ),
    frame(
        "partner",
        "broke broken breaking split separated separating divorced divorcing quits ended",
        rf"<P>\s+{_PARTNER}\s+and\s+(?:I|me)<ADV>{_SPLIT}",
        "negated",
        value="name",
    ),
    frame(
        "partner",
        "dumped left",
        r"(?P<v><NAMEW>)\s+(?:dumped|left|walked out on)\s+(?P<s>me)\b",
        "negated",
        needs_match=True,
        value="name",
    ),
    frame(
        "partner",
        "dumped left",
        r"<S><ADV>(?:dumped|left)\s+<NAME>",
        "negated",
        needs_match=True,
        value="name",
    ),
    frame(
        "partner",
        "ex ex-girlfriend ex-boyfriend ex-wife ex-husband ex-partner",
        r"<P>\s+(?:ex|ex-girlfriend|ex-boyfriend|ex-wife|ex-husband|ex-partner|former partner)\s*,?\s+<NAME>",
        "past",
        value="name",
    ),
    # ---------------------------------------------------------------- pets
    frame(
        "pets",
        "adopted got bought rescued brought took adopt getting gotten adopting welcomed picked collected",
        r"<S><ADV>(?:adopted|got|bought|rescued|brought home|took in|adopt|adopting|"
        r"getting|gotten|welcomed|picked up|collected|took home)\s+(?:a|an|two|three|another|our|my|new|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b(?:\s*,?\s*(?:named|called)\s+<NAME>)?",
        "change",
        value="pet",
    ),
    frame(
        "pets",
        "have has own owns",
        r"<S><ADV>(?:have|has|own|owns)\s+(?:a|an|two|three|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b(?:\s*,?\s*(?:named|called)\s+<NAME>)?",
        value="pet",
    ),
    frame(
        "pets",
        "dog dogs puppy pup cat cats kitten rabbit bunny parrot budgie hamster tortoise turtle "
        "lizard gecko snake horse ferret goldfish fish bird chinchilla pony rat iguana hedgehog "
        "cockatiel guinea",
        r"<P>\s+(?:new\s+|little\s+|old\s+|sweet\s+|rescue\s+|senior\s+)?<PET>(?:'s name is|,| is named|"
        r" is called| named| called|)\s+<NAME>",
        value="pet",
    ),
    frame(
        "pets",
        "name named called",
        r"<S><ADV>(?:adopted|got|have|has|bought|rescued|brought home|took in|adopt|adopting|"
        r"getting|gotten|welcomed)\s+(?:a|an|two|three|another|our|my|new|one)\s+"
        r"(?:[\w-]+\s+){0,2}?<PET>\b[^.!?]{0,40}?\b(?:(?:her|his|its|their) name is|"
        r"(?:she|he|it) is called|named (?:her|him|it)|called (?:her|him|it))\s+<NAME>",
        "change",
        value="pet",
    ),
    frame(
        "pets",
        "named called",
        r"<S><ADV>(?:named|called)\s+(?:(?:the|our|my|his|her|their)\s+(?:new\s+)?<PET>|him|her|it)\s+<NAME>",
        "change",
        value="pet",
    ),
    frame(
        "pets",
        "meet",
        r"\bmeet\s+<NAME>\s*,?\s+(?P<p>my|our)\s+(?:new\s+)?(?:little\s+)?<PET>",
        "change",
        value="pet",
    ),
    frame(
        "pets",
        "passed died away put",
        r"(?:<P>\s+(?:\w+\s+)?<PET>\s*,?\s*)?(?P<v><NAMEW>)?\s*(?:passed away|died|ran away|"
        r"was put down|had to be put down|was put to sleep)\b",
        "negated",
        needs_match=True,
        value="pet",
    ),
    frame(
        "pets",
        "rehomed rehome gave lost",
        r"<S><ADV>(?:rehomed|had to rehome|gave away|lost|had to give up|had to put down)\s+"
        r"(?:my|our|his|her|their)\s+(?:(?:old|sweet|little|lovely|beloved)\s+)?<PET>\b(?:\s*,?\s*<NAME>)?",
        "negated",
        needs_match=True,
        value="pet",
    ),
    frame(
        "pets",
        "rehomed rehome gave lost",
        r"<S><ADV>(?:rehomed|had to rehome|gave away|lost|had to give up|had to put down)\s+<NAME>",
        "negated",
        needs_match=True,
        value="pet",
    ),
    # ---------------------------------------------------------------- allergy
    frame(
        "allergy",
        "allergic",
        r"<S><ADV>(?:(?:severely|very|mildly|deathly|super|really|quite|slightly|badly|extremely|"
        r"seriously)\s+)?allergic\s+to\s+<NPLIST>",
        value="phrase",
    ),
    frame(
        "allergy",
        "allergy",
        r"<S><ADV>(?:have|has|developed|got|suffer from)\s+(?:a|an|this)\s+(?:(?:bad|severe|mild|new)\s+)?"
        r"(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allergy",
        "change",
        value="phrase",
    ),
    frame(
        "allergy",
        "allergic",
        r"<S><ADV>(?:not|no longer|not even)\s+(?:really\s+)?allergic\s+to\s+<NPLIST>",
        "negated",
        value="phrase",
    ),
    frame(
        "allergy",
        "outgrew outgrown grew got cured",
        r"<S><ADV>(?:outgrew|outgrown|grew out of|got over|cured)\s+(?:(?:my|his|her|their|the)\s+)?"
        r"(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allerg(?:y|ies)",
        "negated",
        value="phrase",
    ),
    frame(
        "allergy",
        "gone away cleared over disappeared",
        r"(?:<P>|\bthe)\s+(?P<v>[\w-]+(?:\s+[\w-]+)?)\s+allerg(?:y|ies)\s+(?:is|are|has|have)?\s*(?:gone|went away|"
        r"cleared up|over|disappeared|vanished)\b",
        "negated",
        value="phrase",
    ),
    frame(
        "allergy",
        "again",
        r"<S><ADV>(?:can|could)\s+(?:eat|have|drink|touch)\s+<NP>\s+again\b",
        "negated",
        needs_match=True,
        value="phrase",
    ),
    # ---------------------------------------------------------------- schedule
    frame(
        "schedule",
        "moved moving rescheduled pushed bumped shifted changed switched",
        r"<EVENT>\s+(?:(?:is|was|has been|has|have|had|got|will be|is being|are|have been)\s+)?"
        r"(?:(?:now|just|officially|finally|been)\s+)*(?:moved|moving|moves|rescheduled|pushed|bumped|"
        r"shifted|changed|switched|changes|shifts)\s+(?:(?:back|forward|up|over|out)\s+)?to\s+<WHEN>",
        "change",
        value="when",
    ),
    frame(
        "schedule",
        "moved moving rescheduled pushed bumped shifted changed switched move reschedule",
        r"\b(?:moved|rescheduled|pushed|bumped|shifted|changed|switched|move|moving|reschedule|"
        r"rescheduling)\s+<EVENT>\s+(?:(?:back|forward|up|over)\s+)?to\s+<WHEN>",
        "change",
        value="when",
    ),
    frame(
        "schedule",
        EVENT_TRIGGERS,
        r"<EVENT>\s+(?:is|are|happens|takes place|meets|runs|starts)\s+(?:(?:now|still|usually|always|"
        r"normally|going to be)\s+)?(?:(?:every|each)\s+(?:week|month|fortnight)\s+|weekly\s+)?"
        r"(?:on|at|every|each)\s+<WHEN>",
        value="when",
    ),
    # ---------------------------------------------------------------- likes
    frame(
        "likes",
        "love loves like likes enjoy enjoys adore adores prefer prefers into obsessed fan crazy "
        "passionate keen",
        r"<S><ADV>(?:(?:really|absolutely|totally|truly|genuinely|so)\s+)*(?:love|loves|like|likes|"
        r"enjoy|enjoys|adore|adores|prefer|prefers|am into|is into|are into|am obsessed with|"
        r"is obsessed with|am a (?:big |huge )?fan of|is a (?:big |huge )?fan of|am crazy about|"
        r"am passionate about|is passionate about|am keen on|is keen on|are keen on)\s+<NP>",
        value="like",
    ),
    frame(
        "likes",
        "hate hates dislike dislikes detest stand like enjoy fan into",
        r"<S><ADV>(?:hate|hates|dislike|dislikes|detest|detests|can not stand|cannot stand|"
        r"do not like|does not like|do not really like|do not enjoy|does not enjoy|am not a fan of|"
        r"is not a fan of|am not into|is not into|not like|not enjoy)\s+<NP>",
        "negated",
        value="like",
    ),
    frame(
        "favourite",
        "favourite favorite",
        r"<P>\s+(?:new\s+|all-time\s+|current\s+|absolute\s+)?favou?rite\s+(?P<n>[\w-]+(?:\s+[\w-]+)?)"
        r"\s+(?:is|are|has to be|would be|is now|has become|became)\s+(?:now\s+|still\s+|probably\s+)?"
        r"(?P<v>(?:[\w'&-]+ ){0,5}?[\w'&-]+)(?=\s*(?:[,;:.!?()\"]|\s-\s|$)|\s+(?:and|but|because|since|so|"
        r"which|now|these days|though|by far)\b)",
        value="phrase",
    ),
    # ---------------------------------------------------------------- open "my X is now Y"
    frame(
        "open",
        "now new changed",
        r"<P>\s+(?:new\s+)?(?P<n>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+(?:is now|has changed to|changed to|"
        r"is changing to)\s+(?P<v>(?:[\w'@.&-]+ ){0,3}?[\w'@.&-]+)<END>",
        "change",
        value="phrase",
    ),
)
