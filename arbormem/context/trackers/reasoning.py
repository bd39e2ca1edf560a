"""The reasoning mode's tracker: goals, decisions, rejected options, constraints, assumptions."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from arbormem.context.trackers.base import Said, Tracker, clip
from arbormem.context.trackers.common import (
    AMOUNT,
    MONTH,
    NEGATED,
    asserted,
    bullets,
    json_list,
    json_object,
    json_string,
    json_strings,
    norm,
    prose,
    remember,
    saved_mappings,
    saved_texts,
    sentences,
    tidy,
)


@dataclass(frozen=True)
class Decision:
    """A decision taken, numbered in the order decisions were first made."""

    number: int
    text: str
    rationale: str | None = None
    alternatives: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"#{self.number} {self.text}"
        if self.rationale:
            text += f", because {self.rationale}"
        if self.alternatives:
            text += f" (instead of {', '.join(self.alternatives)})"
        return text


@dataclass(frozen=True)
class Rejected:
    """An option that was ruled out, with the reason when one was given."""

    option: str
    reason: str | None = None

    def describe(self) -> str:
        return f"{self.option}: {self.reason}" if self.reason else self.option


@dataclass(frozen=True)
class Constraint:
    """A limit the plan must respect; one constraint of each ``kind`` is kept."""

    text: str
    #: "budget", "deadline", "timeline", "team" (or a label from the LLM); "" for others.
    kind: str = ""

    def describe(self) -> str:
        return f"{self.kind.capitalize()}: {self.text}" if self.kind else self.text


# Where a captured option or clause ends.
_STOP = (
    r"(?=\s*(?:[,;:()]|\s[-–—]\s|$)|\s+(?:because|since|as it|as they|given|instead of|"
    r"rather than|so that|so we|but|unless|which|while|and then)\b|\s+over\s+(?-i:[A-Z]))"
)
_OPTION = rf"(?P<x>[^,;:()]+?){_STOP}"
_CHOICE_VERB = (
    r"go with|go for|use|pick|choose|adopt|stick with|switch to|move to|settle on|opt for|"
    r"standardi[sz]e on|build on|start with"
)
# Each pattern with the verb its decision is written with when it captures none.
_DECISION_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(?:let'?s|let’s|let us)\s+(?P<v>{_CHOICE_VERB})\s+{_OPTION}", re.I), ""),
    (
        re.compile(
            r"\b(?:we|I)(?:'ve|’ve| have)?\s+(?:(?:finally|just|now|already|also)\s+)*"
            r"(?:decided|agreed)\s+(?:to\s+(?P<v>\w+(?:\s+(?:with|on|for|to))?)|on)\s+" + _OPTION,
            re.I,
        ),
        "go with",
    ),
    (
        re.compile(
            r"\b(?:we|I)(?:'re|’re| are|'m|’m| am|'ll|’ll| will)\s+(?:(?:definitely|now|just)\s+)?"
            rf"(?:going|go)\s+with\s+{_OPTION}",
            re.I,
        ),
        "go with",
    ),
    (
        re.compile(
            r"\b(?:we|I)\s+(?:(?:finally|just|have|'ve|’ve)\s+)*"
            rf"(?:chose|picked|selected|settled on|opted for|went with|landed on)\s+(?!up\b){_OPTION}",
            re.I,
        ),
        "go with",
    ),
    (
        re.compile(
            rf"(?:\b(?:the|our|my)\s+(?:final\s+)?decision\s+(?:is|was)\s+(?:to\s+)?|^decision\s*:\s*){_OPTION}",
            re.I,
        ),
        "",
    ),
]
_VAGUE_OPTION = re.compile(
    r"^(?:this|that|it|these|those|them|something|some|one of|an example|the following|a look|"
    r"a break|my gut|the flow)\b",
    re.I,
)
_LEADING_VERB = re.compile(rf"^(?:{_CHOICE_VERB})\s+", re.I)
_RATIONALE = re.compile(
    r"\b(?:because|since|as it|as they|given(?: that)?|so that)\s+(?:of\s+)?"
    r"(?P<r>.+?)(?=\s*(?:[;()]|\s[-–—]\s|$)|,?\s+(?:instead of|rather than|but)\b)",
    re.I,
)
_ALTERNATIVE = re.compile(
    r"\b(?:instead of|rather than|over(?=\s+(?-i:[A-Z])))\s+(?P<z>.+?)"
    r"(?=\s*(?:[,;:()]|\s[-–—]\s|$)|\s+(?:because|since|as it|given|so that|but|let'?s|we)\b)",
    re.I,
)
_REJECTION_PATTERNS = [
    re.compile(
        r"\b(?:we|I)(?:'ve|’ve| have)?\s+(?:(?:already|also|just|now|finally)\s+)*"
        rf"(?:ruled out|rejected|dropped|discarded|eliminated|abandoned|scrapped|decided against)\s+{_OPTION}",
        re.I,
    ),
    re.compile(
        r"\b(?:let'?s|let’s|let us)\s+(?:not\s+(?:use|go with|pick|choose|adopt|do)|rule out|drop|avoid)\s+"
        + _OPTION,
        re.I,
    ),
    re.compile(
        rf"\bdecided\s+not\s+to\s+(?:use|go with|adopt|pick|choose|do|build)\s+{_OPTION}", re.I
    ),
    re.compile(
        r"^(?:[^,]*,\s*)?(?P<x>[^,]{1,50}?)\s+(?:is|are)\s+(?:(?:definitely|probably|now)\s+)?"
        r"(?:ruled out|out of the question|off the table|not an option)\b",
        re.I,
    ),
]
_REASON = re.compile(
    r"(?:\b(?:because|since|as it|as they|as we|given(?: that)?)|\s[-–—:])\s+(?:of\s+)?"
    r"(?P<r>[^;()]+)",
    re.I,
)

_OBJECTIVE = [
    re.compile(
        r"\b(?:our|my|the)\s+(?:(?:main|primary|overall|ultimate|end|real|big|key)\s+)?"
        r"(?:goal|objective|aim|mission)\s+(?:here\s+|for\s+[^,]{1,30}?\s+)?"
        r"(?:is|will be|should be)\s+(?:to\s+)?(?P<g>.+)",
        re.I,
    ),
    re.compile(r"^(?:goal|objective|aim)\s*:\s*(?P<g>.+)", re.I),
]
_VAGUE_NEED = (
    r"be|think|talk|know|see|wait|go|get|have|do|look|remember|discuss|chat|sync|hurry|"
    r"keep in mind|move on"
)
_SUBGOAL = [
    re.compile(
        r"\b(?:a|another|one|the next|the first|our next|our first)\s+"
        r"(?:sub-?goal|step|milestone|priority)\s+(?:is|will be|should be)\s+(?:to\s+)?(?P<g>.+)",
        re.I,
    ),
    re.compile(r"^(?:sub-?goal|next step|step \d+)\s*:\s*(?P<g>.+)", re.I),
    re.compile(
        r"\bwe\s+(?:(?:still|also|first|really|then)\s+)*(?:need to|have to|'ve got to|’ve got to|must)\s+"
        rf"(?:(?:also|first|then)\s+)?(?P<g>(?!(?:{_VAGUE_NEED})\b)\w.+)",
        re.I,
    ),
]
_GOAL_END = re.compile(
    r"\s*(?:;|,\s*(?:so|but|because|since|and then)\b|\s(?:because|since)\s).*$", re.I
)

_NUMBER_WORD = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_DURATION = (
    rf"(?:{_NUMBER_WORD}|a|a couple of|a few)\s+(?:days?|weeks?|months?|years?|sprints?|quarters?)"
)
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_WHEN = (
    r"(?:(?:the\s+)?(?:end|start|beginning|middle)\s+of\s+(?:the\s+)?(?:next\s+|this\s+)?"
    rf"(?:week|month|quarter|year|sprint|Q[1-4]|{MONTH})(?:\s+\d{{4}})?"
    rf"|Q[1-4](?:\s+\d{{4}})?|next\s+(?:week|month|quarter|year|sprint|{_WEEKDAY})|{_WEEKDAY}"
    rf"|{MONTH}(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?" + MONTH + r"(?:\s+\d{4})?"
    r"|\d{4}-\d{2}-\d{2}|\d{4}|EO[DWMQY]|tomorrow|tonight)"
)
_BUDGET = [
    re.compile(
        r"\bbudget\b(?:\s+(?:for|of)\s+[\w ]{1,30}?)?\s*(?:is|of|at|:|=|was|will be)\s+"
        r"(?:(?:now|still|currently|only|about|around|roughly|approximately|capped at|limited to|"
        r"under|max(?:imum)?)\s+)*"
        rf"(?P<a>{AMOUNT.pattern})",
        re.I,
    ),
    re.compile(rf"(?P<a>{AMOUNT.pattern})\s+budget\b", re.I),
    re.compile(
        r"\bcan\s+(?:only\s+)?spend\s+(?:(?:up to|at most|no more than|about|around)\s+)?"
        rf"(?P<a>{AMOUNT.pattern})",
        re.I,
    ),
]
_DEADLINE = [
    re.compile(
        r"\b(?P<d>(?i:must|need to|needs to|have to|has to|got to)\s+(?:\w+\s+){1,4}?"
        rf"(?:by|before|no later than)\s+{_WHEN})\b"
    ),
    re.compile(rf"\b(?:the\s+)?deadline\s+(?:is|:)\s+(?P<d>{_WHEN})\b", re.I),
    re.compile(rf"\bdue\s+(?:by|on|before)\s+(?P<d>{_WHEN})\b", re.I),
]
_TIMELINE = [
    re.compile(
        r"\b(?:timeline|timeframe|time frame|runway)\s+(?:is|of)\s+"
        rf"(?:(?:about|roughly|around|only|just)\s+)?(?P<t>{_DURATION})\b",
        re.I,
    ),
    re.compile(
        r"\bwe(?:'ve|’ve|\s+(?:(?:only|just)\s+)?have)\s+(?:(?:only|just)\s+)?(?:got\s+)?"
        rf"(?P<t>{_DURATION})"
        r"(?=\s+(?:to|left|until|before|for (?:this|the))\b)",
        re.I,
    ),
]
_TEAM = re.compile(
    r"\b(?:team\s+(?:is|of|has)\s+(?:(?:only|just)\s+)?|we\s+(?:(?:only|just)\s+)?have\s+"
    rf"(?:(?:only|just)\s+)?|only\s+)(?P<n>{_NUMBER_WORD}\s+(?:\w+\s+)?"
    r"(?:developers?|devs?|engineers?|people|designers?|testers?|staff|contractors?|members?))\b",
    re.I,
)
_LIMIT = re.compile(
    r"\b(?:(?P<hard>no more than|not more than|at most|a maximum of|maximum of|no fewer than|"
    r"a minimum of)|at least|under|below|less than|fewer than|within|up to)\s+(?:[$€£¥]|\d)",
    re.I,
)
_OBLIGATION = re.compile(
    r"\b(?:must|need to|needs to|have to|has to|should|can'?t|can’t|cannot|required|requirement|"
    r"limit(?:ed)?|cap(?:ped)?|allowed|max)\b",
    re.I,
)
_VAGUE_FORBIDDEN = (
    r"remember|believe|wait|see|tell|imagine|think|say|stop|help|understand|decide|recall|find|"
    r"hear|stand|figure|guarantee|promise|get|go|do|really|just|even|be sure"
)
_FORBIDDEN = re.compile(
    r"\b(?:can'?t|can’t|cannot|can not|must not|mustn'?t|mustn’t|may not|(?:is|are|am)\s+not\s+"
    r"(?:allowed|permitted)\s+to|(?:isn|aren)['’]t\s+(?:allowed|permitted)\s+to|not\s+allowed\s+to|"
    rf"are\s+forbidden\s+to)\s+(?!(?:{_VAGUE_FORBIDDEN})\b)\w",
    re.I,
)
_REQUIRED = re.compile(
    r"\b(?:(?:must|has to|have to)\s+(?:(?:also|still|always)\s+)?(?!be (?:careful|sure|honest)\b)be"
    r"|(?:must|has to|have to|needs to|need to)\s+(?:(?:also|still|always)\s+)?"
    r"(?:run|support|work|stay|remain|comply|handle|integrate|fit|scale|serve|cost|meet|pass))\b",
    re.I,
)
_CLAUSE_SPLIT = re.compile(
    r";|,\s+(?:but|so|and|because|since|which)\b|\s+(?:because|since)\s+", re.I
)
_CLAUSE_LEAD = re.compile(
    r"^(?:(?:also|and|but|so|oh|remember|note|keep in mind|don't forget|okay|ok|well)(?: that)?[,:]?\s+)+",
    re.I,
)
_ASSUMPTION = re.compile(
    r"(?:^|\b)(?P<lead>assuming|(?:we|I)(?:'re|’re| are|'m|’m| am)\s+assuming|"
    r"(?:we|I)\s+(?:(?:can|will|'ll|’ll)\s+)?assume|let'?s\s+assume|let’s\s+assume|"
    r"(?:our|the)\s+(?:main\s+)?assumption\s+is|we(?:'re|’re| are)\s+betting\s+(?:on|that))\s+"
    r"(?:that\s+)?(?P<a>.+)",
    re.I,
)


def _choice_key(text: str) -> str:
    return norm(_LEADING_VERB.sub("", text))


def _names_option(decision: str, option: str) -> bool:
    """Whether a decision's text is about ``option`` ("migrate to Kubernetes" and
    "Postgres after all" name Kubernetes and Postgres)."""
    key, name = _choice_key(decision), norm(option)
    if key == name:
        return True
    return len(name) >= 3 and re.search(rf"(?:^|\s){re.escape(name)}(?:\s|$)", key) is not None


def _split_options(text: str) -> list[str]:
    """Up to three options from "X", "X or Y", "X, Y and Z"."""
    text = re.sub(r"(?i)\s+(?:as well|too|either|entirely|completely|for now)\W*$", "", text)
    parts = re.split(r"\s+(?:or|and|nor)\s+|,\s*", text)
    return [tidy(p, 60) for p in parts if p.strip()][:3]


def _decision(sentence: str) -> Decision | None:
    for pattern, default_verb in _DECISION_PATTERNS:
        m = pattern.search(sentence)
        if not m or NEGATED.search(sentence[: m.start("x")]):
            continue
        option = tidy(m.group("x"), 80)
        if not option or _VAGUE_OPTION.match(option):
            return None
        verb = (m.groupdict().get("v") or default_verb).lower()
        rest = sentence[m.end("x") :]
        because = _RATIONALE.search(rest)
        if verb == "start with" and not because:
            return None  # "let's start with the budget" orders a discussion, decides nothing
        alternatives = [z for a in _ALTERNATIVE.finditer(sentence) for z in _split_options(a["z"])]
        rationale = tidy(because["r"], 100) if because else None
        text = f"{verb} {option}" if verb else option
        return Decision(0, text, rationale or None, tuple(alternatives[:3]))
    return None


def _rejections(sentence: str) -> list[Rejected]:
    for pattern in _REJECTION_PATTERNS:
        m = pattern.search(sentence)
        if not m or (NEGATED.search(sentence[: m.start("x")]) and "not" not in pattern.pattern):
            continue
        reason = _REASON.search(sentence[m.end("x") :])
        why = tidy(reason["r"], 80) if reason else None
        return [Rejected(option, why or None) for option in _split_options(m.group("x"))]
    return []


def _clauses(sentence: str) -> list[tuple[int, int]]:
    """The (start, end) spans of the clauses of ``sentence``."""
    spans, start = [], 0
    for m in _CLAUSE_SPLIT.finditer(sentence):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(sentence)))
    return spans


def _constraints(sentence: str) -> list[Constraint]:
    """Budget, deadline, timeline and team size, then one other limit per clause."""
    found, taken = [], []
    for kind, patterns, group, size in (
        ("budget", _BUDGET, "a", 40),
        ("deadline", _DEADLINE, "d", 80),
        ("timeline", _TIMELINE, "t", 40),
        ("team", [_TEAM], "n", 40),
    ):
        m = next((m for p in patterns if (m := p.search(sentence))), None)
        if m:
            found.append(Constraint(tidy(m[group], size), kind))
            taken.append(m.start())
    for start, end in _clauses(sentence):
        clause = sentence[start:end]
        if any(start <= at < end for at in taken):
            continue
        limit = _LIMIT.search(clause)
        if (limit and (limit["hard"] or _OBLIGATION.search(clause))) or any(
            p.search(clause) for p in (_FORBIDDEN, _REQUIRED)
        ):
            text = tidy(_CLAUSE_LEAD.sub("", clause.strip()), 100)
            found.append(Constraint(text[:1].upper() + text[1:]))
    return found


def _goal(patterns: Sequence[re.Pattern[str]], sentence: str) -> str | None:
    for pattern in patterns:
        m = pattern.search(sentence)
        if m and not NEGATED.search(sentence[: m.start("g")]):
            return tidy(_GOAL_END.sub("", m["g"]), 100) or None
    return None


def _assumption(sentence: str) -> str | None:
    m = _ASSUMPTION.search(sentence)
    if not m or NEGATED.search(sentence[: m.start("a")]):
        return None
    text = m["a"]
    if m["lead"].lower() == "assuming" and m.start() == 0:
        text = text.split(",", 1)[0]  # "Assuming X, we ..." assumes X
    return tidy(re.split(r";|,?\s+so\s+", text, maxsplit=1)[0], 100) or None


@dataclass
class _ReasoningFound:
    objective: str | None = None
    subgoals: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)


class ReasoningTracker(Tracker):
    """Objective and sub-goals, decisions, rejected alternatives, constraints, assumptions.

    A section left unchanged for ``spec.stale_turns`` turns is kept but not rendered.
    """

    mode = "reasoning"
    sections = ("goals", "constraints", "decisions", "alternatives", "assumptions")
    hides_stale = True
    max_subgoals = 10
    max_constraints = 12
    max_assumptions = 10

    def __init__(self, spec: Any = None) -> None:
        super().__init__(spec)
        self.objective: str | None = None
        self.subgoals: list[str] = []
        self.decisions: list[Decision] = []
        self.rejected: list[Rejected] = []
        self.constraints: list[Constraint] = []
        self.assumptions: list[str] = []
        #: The number the next new decision gets.
        self.next_number = 1

    def _extract(self, said: Sequence[Said]) -> _ReasoningFound:
        found = _ReasoningFound()
        for s in said:
            if s.role not in ("user", "assistant"):
                continue
            for sentence in sentences(prose(s.text)):
                if not asserted(sentence):
                    continue
                constraints = _constraints(sentence)
                found.constraints[:0] = reversed(constraints)
                found.objective = _goal(_OBJECTIVE, sentence) or found.objective
                subgoal = None if constraints else _goal(_SUBGOAL, sentence)
                decision = _decision(sentence)
                if subgoal and not decision:
                    found.subgoals.insert(0, subgoal)
                if decision:
                    found.decisions.insert(0, decision)
                else:
                    found.rejected[:0] = reversed(_rejections(sentence))
                assumption = _assumption(sentence)
                if assumption:
                    found.assumptions.insert(0, assumption)
        return found

    def _llm_prompt(self) -> str:
        return (
            "You keep the decision log of a planning discussion. From the new messages only, "
            'extract what is stated explicitly: "objective": the overall goal, or null if not '
            'stated; "subgoals": steps towards it; "decisions": choices actually made (not '
            'options merely considered), each {"decision": "...", "rationale": "..." or null, '
            '"alternatives": [options passed over for it]}; "rejected": options ruled out, '
            'each {"option": "...", "reason": "..." or null}; "constraints": limits such as '
            'budget, deadline, team size or tools that cannot be used, written "Label: value" '
            'like "Budget: $50k"; "assumptions": what is being assumed. Short phrases, null '
            'and empty lists when there is nothing. Shape: {"objective": null, "subgoals": [], '
            '"decisions": [], "rejected": [], "constraints": [], "assumptions": []}'
        )

    def _validate(self, value: Any) -> _ReasoningFound:
        keys = ("objective", "subgoals", "decisions", "rejected", "constraints", "assumptions")
        obj = json_object(value, keys)
        found = _ReasoningFound(
            objective=json_string(obj.get("objective"), "objective", 200, optional=True),
            subgoals=json_strings(obj, "subgoals", 200),
            assumptions=json_strings(obj, "assumptions", 200),
        )
        for i, item in enumerate(json_list(obj, "decisions", 10)):
            if not isinstance(item, Mapping):
                raise ValueError(f"decisions[{i}] must be an object")
            text = json_string(item.get("decision"), f"decisions[{i}].decision", 200)
            why = json_string(
                item.get("rationale"), f"decisions[{i}].rationale", 200, optional=True
            )
            alternatives = json_strings(item, "alternatives", 120)[:3]
            found.decisions.append(Decision(0, text or "", why, tuple(alternatives)))
        for i, item in enumerate(json_list(obj, "rejected", 10)):
            if isinstance(item, str):
                item = {"option": item}
            if not isinstance(item, Mapping):
                raise ValueError(f"rejected[{i}] must be an object")
            option = json_string(item.get("option"), f"rejected[{i}].option", 120)
            reason = json_string(item.get("reason"), f"rejected[{i}].reason", 200, optional=True)
            found.rejected.append(Rejected(option or "", reason))
        for text in json_strings(obj, "constraints", 200):
            label, sep, rest = text.partition(":")
            if sep and rest.strip() and len(label.split()) <= 3:
                found.constraints.append(Constraint(rest.strip(), label.strip().lower()))
            else:
                found.constraints.append(Constraint(text))
        return found

    def _merge(self, found: _ReasoningFound) -> set[str]:
        touched = set()
        if found.objective or found.subgoals:
            self.objective = found.objective or self.objective
            self.subgoals = remember(self.subgoals, found.subgoals, self.max_subgoals, norm)
            touched.add("goals")
        if found.constraints:
            self.constraints = remember(
                self.constraints,
                found.constraints,
                self.max_constraints,
                lambda c: c.kind or norm(c.text),
            )
            touched.add("constraints")
        if found.decisions:
            self._merge_decisions(found.decisions)
            touched.add("decisions")
        rejected = [
            *found.rejected,
            *(Rejected(a) for d in found.decisions for a in d.alternatives),
        ]
        if rejected:
            known = {norm(r.option): r for r in self.rejected}
            rejected = [
                r if r.reason or norm(r.option) not in known else known[norm(r.option)]
                for r in rejected
            ]
            self.rejected = remember(
                self.rejected, rejected, self.spec.max_alternatives, lambda r: norm(r.option)
            )
            touched.add("alternatives")
        if rejected:  # a decision whose option is ruled out now is no longer a decision
            now = {_choice_key(d.text) for d in found.decisions}
            self.decisions = [
                d
                for d in self.decisions
                if _choice_key(d.text) in now
                or not any(_names_option(d.text, r.option) for r in rejected)
            ]
        if found.decisions:  # an option chosen now is no longer ruled out
            self.rejected = [
                r
                for r in self.rejected
                if not any(_names_option(d.text, r.option) for d in found.decisions)
            ]
        if found.assumptions:
            self.assumptions = remember(
                self.assumptions, found.assumptions, self.max_assumptions, norm
            )
            touched.add("assumptions")
        return touched

    def _merge_decisions(self, new: Sequence[Decision]) -> None:
        decisions = list(self.decisions)
        for decision in reversed(new):
            key = _choice_key(decision.text)
            old = next((d for d in decisions if _choice_key(d.text) == key), None)
            if old is not None:  # the same decision again: keep its number, add what is new
                decisions.remove(old)
                alternatives = tuple(dict.fromkeys(old.alternatives + decision.alternatives))
                decision = replace(
                    decision,
                    number=old.number,
                    rationale=decision.rationale or old.rationale,
                    alternatives=alternatives[:3],
                )
            else:
                decision = replace(decision, number=self.next_number)
                self.next_number += 1
            decisions.insert(0, decision)
        self.decisions = decisions[: self.spec.max_decisions]

    def _section_lines(self, section: str) -> list[str]:
        if section == "goals":
            lines = [f"Objective: {clip(self.objective)}"] if self.objective else []
            return lines + bullets("Sub-goals:", self.subgoals, 6)
        if section == "constraints":
            return bullets("Constraints:", (c.describe() for c in self.constraints), 8)
        if section == "decisions":
            return bullets("Decisions:", (d.describe() for d in self.decisions), 8)
        if section == "alternatives":
            inline = set()
            if not self.is_stale("decisions"):
                inline = {norm(a) for d in self.decisions[:8] for a in d.alternatives}
            shown = [r.describe() for r in self.rejected if norm(r.option) not in inline]
            return bullets("Ruled out:", shown, 5)
        return bullets("Assumptions:", self.assumptions, 5)

    def _state(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "subgoals": list(self.subgoals),
            "decisions": [
                {**asdict(d), "alternatives": list(d.alternatives)} for d in self.decisions
            ],
            "rejected": [asdict(r) for r in self.rejected],
            "constraints": [asdict(c) for c in self.constraints],
            "assumptions": list(self.assumptions),
            "next_number": self.next_number,
        }

    def _load(self, data: Mapping[str, Any]) -> None:
        objective = data.get("objective")
        self.objective = clip(objective, 300) if isinstance(objective, str) and objective else None
        self.subgoals = saved_texts(data.get("subgoals"), self.max_subgoals)
        self.assumptions = saved_texts(data.get("assumptions"), self.max_assumptions)
        self.decisions = []
        for item in saved_mappings(data.get("decisions"), "text"):
            number = item.get("number")
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                number = 0
            rationale = item.get("rationale")
            self.decisions.append(
                Decision(
                    number,
                    clip(item["text"], 300),
                    clip(rationale, 300) if isinstance(rationale, str) and rationale else None,
                    tuple(saved_texts(item.get("alternatives"), 3)),
                )
            )
        self.decisions = self.decisions[: self.spec.max_decisions]
        self.rejected = [
            Rejected(
                clip(r["option"], 200), r["reason"] if isinstance(r.get("reason"), str) else None
            )
            for r in saved_mappings(data.get("rejected"), "option")
        ][: self.spec.max_alternatives]
        self.constraints = [
            Constraint(clip(c["text"], 300), c["kind"] if isinstance(c.get("kind"), str) else "")
            for c in saved_mappings(data.get("constraints"), "text")
        ][: self.max_constraints]
        highest = max((d.number for d in self.decisions), default=0)
        saved = data.get("next_number")
        self.next_number = max(highest + 1, saved if isinstance(saved, int) else 1)
        # decisions saved without a number get fresh ones, oldest first
        for i in reversed(range(len(self.decisions))):
            if self.decisions[i].number == 0:
                self.decisions[i] = replace(self.decisions[i], number=self.next_number)
                self.next_number += 1
