"""Running the frames over a sentence, fast: trigger words first, then the patterns."""

from __future__ import annotations

import re
from collections.abc import Iterator

from arbormem.records import frames_life, frames_where
from arbormem.records.patterns import Frame, Match

__all__ = ["FRAMES", "TRIGGERS", "candidate_frames", "match_sentence"]

#: Every frame, in the order they are tried.
FRAMES: tuple[Frame, ...] = frames_where.FRAMES + frames_life.FRAMES
_NEGATED_PARTS = re.compile(r"\b(?:not|never|no|nobody|neither|nor)\b", re.I)

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
