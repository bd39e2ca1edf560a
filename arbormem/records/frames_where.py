"""Frames for where people live and what they do: home, address, employer, job, school.

See :mod:`arbormem.records.patterns` for the pieces (``<S>``, ``<PLACE>``...)
and what a frame's mode means.
"""

from __future__ import annotations

from arbormem.records.patterns import OCCUPATIONS, Frame, frame

__all__ = ["FRAMES"]

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

FRAMES: tuple[Frame, ...] = (
    # ---------------------------------------------------------------- home
    frame(
        "home",
        "moved relocated moving relocating move relocate moves transferred emigrated",
        rf"<S><ADV>{_MOVE}(?:\s+(?:back|over|out|away|down|up|all the way|permanently|house))?"
        rf"(?:\s+from\s+(?P<w>(?-i:[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){{0,2}})))?"
        rf"\s+(?:to|into)\s+(?:(?:a|an|the|my|our|his|her|their)\s+(?:[\w-]+\s+){{0,3}}?"
        rf"(?:in|at|near|outside|over in|just outside)\s+)?<PLACE>",
        "change",
        value="place",
    ),
    frame(
        "home",
        "live lives living reside resides residing based settled settling located",
        rf"<S><ADV>(?:now\s+)?{_LIVE}\s+(?:in|near|outside|over in|out in|down in|up in|just outside)"
        rf"\s+(?:(?:a|an|the|my|our|his|her|their)\s+(?:[\w-]+\s+){{0,3}}?(?:in|near)\s+)?<PLACE>",
        value="place",
    ),
    frame(
        "home",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?=[^.!?]*\bnow\b)(?:now\s+)?(?:living\s+|based\s+|settled\s+)?"
        r"in\s+<PLACE>",
        "change",
        value="place",
    ),
    frame(
        "home",
        "lived living based been",
        r"<S>\s+(?:have|has)\s+(?:\w+\s+)?(?:lived|been living|been based|been)\s+in\s+<PLACE>"
        # "been in Valencia" is a home only when it has lasted: "since 2019", "for years"
        r"(?:(?=\s+(?:since|for)\b)|(?<=lived in)|(?<=living in)|(?<=based in))",
        value="place",
    ),
    frame(
        "home",
        "call calls",
        r"<S><ADV>(?:now\s+)?(?:call|calls)\s+<PLACE>\s+home\b",
        value="place",
    ),
    frame(
        "home",
        "home place flat apartment house",
        rf"<P>\s+(?:new\s+)?(?:home|place|home base|{_HOUSING})\s+is\s+(?:now\s+)?(?:in|over in|out in)\s+<PLACE>",
        value="place",
    ),
    frame(
        "home",
        "bought rented found got renting buying",
        rf"<S><ADV>(?:bought|rented|found|got|renting|buying|closed on)\s+(?:a|an|our|my|the)\s+"
        rf"(?:[\w-]+\s+){{0,2}}?{_HOUSING}\s+in\s+<PLACE>",
        "change",
        value="place",
    ),
    frame(
        "home",
        "lived used",
        r"<S>\s+(?:used to live|once lived|lived|grew up)\s+in\s+<PLACE>",
        "past",
        value="place",
    ),
    frame(
        "home",
        "live lives living",
        r"<S><ADV>(?:not|no longer)\s+(?:live|lives|living)\s+in\s+<PLACE>",
        "negated",
        value="place",
    ),
    frame(
        "home",
        "left",
        r"<S><ADV>(?:left|moved away from|moved out of)\s+<PLACE>\s+(?:for good|behind)\b",
        "negated",
        needs_match=True,
        value="place",
    ),
    # ---------------------------------------------------------------- address
    frame(
        "address",
        "address",
        r"(?:<P>\s+)?(?:new\s+|current\s+|home\s+)*address\s*(?:is|:|has changed to|changed to|"
        r"is now|'s)?\s*(?:(?:now|from\s+[\w\s]{2,20}?)\s*:?\s*)?"
        r"(?P<v>\d+[\w\s.,'#-]{3,60}?)(?=\s*(?:[.;!?]|$)|,\s+(?:and|but|so|please|if)\b|"
        r"\s+(?:and|but|now|if|from)\b)",
        value="phrase",
    ),
    frame(
        "address",
        "live lives living moved moving",
        r"<S><ADV>(?:now\s+)?(?:live|lives|living|moved|moving)\s+(?:at|to)\s+"
        r"(?P<v>\d+\s+(?-i:[A-Z][\w'.-]*)(?:\s+(?-i:[A-Z][\w'.-]*)){0,3})",
        value="phrase",
    ),
    # ---------------------------------------------------------------- employer
    frame(
        "employer",
        "joined joining join started start starting begun began got hired took accepted landed "
        "signed moved switched interning intern",
        rf"<S><ADV>{_STARTED}\s+<ORG>",
        "change",
        value="org",
    ),
    frame(
        "employer",
        "worked",
        r"<S>\s+(?:have|has)\s+(?:\w+\s+)?worked\s+(?:at|for)\s+<ORG>",
        value="org",
    ),
    frame(
        "employer",
        "joined joining join signed",
        r"<S><ADV>(?:joined|joining|join|signed with|signing with)\s+<PROPER_ORG>",
        "change",
        value="org",
    ),
    frame(
        "employer",
        "work works working employed",
        rf"<S><ADV>{_WORKS}\s+<ORG>",
        value="org",
    ),
    frame(
        "employer",
        "be",
        r"<S><ADV>(?:be|am|is|are)\s+(?:at|with|joining)\s+<ORG>\s+as\s+(?:a\s+|an\s+|the\s+)?"
        r"(?P<n>[\w-]+(?:\s+[\w-]+){0,3})",
        "change",
        value="org",
    ),
    frame(
        "employer",
        "first",
        r"<P>\s+first\s+(?:day|week|shift|morning)\s+(?:at|with|in)\s+<ORG>",
        "change",
        value="org",
    ),
    frame(
        "employer",
        "job role position employer company workplace",
        r"<P>\s+(?:new\s+|current\s+)?(?:job|role|position|employer|company|workplace)\s+is\s+"
        r"(?:now\s+)?(?:at|with)?\s*<ORG>",
        value="org",
    ),
    frame(
        "employer",
        "quit left leaving leave quitting resigned laid fired retired walked",
        rf"<S><ADV>{_LEFT}\s+(?:(?:my|his|her|their|the)\s+(?:job|position|role|gig)\s+(?:at|with)\s+)?<ORG>",
        "negated",
        needs_match=True,
        value="org",
    ),
    frame(
        "employer",
        "quit left leaving quitting",
        r"<S><ADV>(?:quit|left|leaving|quitting)\s+<ORG>\s+(?:for|to join|to go to|and joined)\s+"
        r"(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3}))",
        "negated",
        needs_match=True,
        value="org",
    ),
    frame(
        "employer",
        "work works working",
        r"<S><ADV>(?:not|no longer)\s+(?:work|works|working)\s+(?:at|for)\s+<ORG>",
        "negated",
        value="org",
    ),
    frame(
        "employer",
        "worked used",
        r"<S>\s+(?:used to work|once worked|worked)\s+(?:at|for)\s+<ORG>",
        "past",
        value="org",
    ),
    frame(
        "employer",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?:now|currently)\s+(?:working\s+)?at\s+<ORG>",
        "change",
        value="org",
    ),
    frame(
        "employer",
        "now",
        r"<S>\s+(?:am|is|are)\s+(?:working\s+)?at\s+<ORG>\s+now\b",
        "change",
        value="org",
    ),
    # ---------------------------------------------------------------- job title
    frame(
        "job_title",
        "work works working employed",
        r"<S><ADV>(?:work|works|working|employed)\s+(?:\w+\s+)?as\s+(?:a|an|the)\s+<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3})))?",
        value="title",
    ),
    frame(
        "job_title",
        "started starting start hired took got landed joined join joining begun began",
        r"<S><ADV>(?:started|starting|start|hired|took a job|took a position|got a job|got a new job|"
        r"landed a job|joined|join|joining|begun|began)\s+(?:\w+\s+)?as\s+(?:a|an|the)\s+<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?: [A-Z0-9][\w'&.-]*){0,3})))?",
        "change",
        value="title",
    ),
    frame(
        "job_title",
        "made appointed named promoted",
        r"\b(?:made|appointed|named|promoted)\s+(?P<o>me|him|her|them|<NAMEW>)\s+(?:to\s+)?(?:the\s+|a\s+|an\s+)?"
        r"(?:new\s+)?<TITLE>",
        "change",
        value="occupation",
    ),
    frame(
        "job_title",
        "promoted",
        r"<S><ADV>(?:got |was |been |being )?promoted\s+to\s+(?:(?:a|an|the)\s+)?<TITLE>",
        "change",
        value="title",
    ),
    frame(
        "job_title",
        "title role position job occupation profession",
        r"<P>\s+(?:new\s+|current\s+|official\s+)?(?:job title|title|role|position|job|occupation|"
        r"profession)\s+is\s+(?:now\s+)?(?:(?:a|an|the)\s+)?<TITLE>",
        value="occupation",
    ),
    frame(
        "job_title",
        " ".join(sorted(OCCUPATIONS | {f"{w}s" for w in OCCUPATIONS})),
        r"<S><ADV>(?:am|is|are|became|become|becoming|now)\s+(?:now\s+)?(?:a|an)\s+"
        r"(?:(?:new|full-time|part-time|freelance)\s+)*<TITLE>"
        r"(?:\s+(?:at|for|with)\s+(?P<e>(?-i:[A-Z0-9][\w'&.-]*(?:(?: (?:of|and|&))? [A-Z0-9&][\w'&.-]*){0,3})))?",
        value="occupation",
    ),
    # ---------------------------------------------------------------- school
    frame(
        "school",
        "study studies studying enrolled student transferred",
        r"<S><ADV>(?:study|studies|studying|enrolled|a student|transferred)\s+(?:at|to|in)\s+<ORG>",
        value="org",
    ),
)
