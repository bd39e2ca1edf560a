"""The state trackers of the memory modes: what each mode keeps across turns.

Each tracker reads the new messages of a turn and merges what it finds into a
bounded state, most recent first. Without an LLM it uses patterns written for
precision: a wrong decision or task in the prompt misleads the model more than
a missed one, so anything hypothetical, negated, conditional or asked as a
question is left out. With an LLM (see :class:`arbormem.context.trackers.base.Tracker`) one
JSON call per update extracts the same structure, checked strictly.

* :class:`ConversationTracker`: topics (keyphrases) and entities (names,
  places, organisations, amounts, dates).
* :class:`CodeTracker`: the current task, its progress, files touched, recent
  errors with file and line (Python tracebacks, pytest, compilers, JS/Java stacks).
* :class:`ReasoningTracker`: objective and sub-goals, decisions with rationale,
  rejected alternatives, constraints, assumptions.

Make them with :func:`new_tracker`, or restore a saved one with
:func:`tracker_from_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arbormem.context.modes import MODES, ModeSpec, get_mode
from arbormem.context.trackers.base import Tracker
from arbormem.context.trackers.code import CodeError, CodeTracker
from arbormem.context.trackers.conversation import ConversationTracker
from arbormem.context.trackers.reasoning import Constraint, Decision, ReasoningTracker, Rejected
from arbormem.errors import InputError

__all__ = [
    "CodeError",
    "CodeTracker",
    "Constraint",
    "ConversationTracker",
    "Decision",
    "ReasoningTracker",
    "Rejected",
    "Tracker",
    "new_tracker",
    "tracker_from_dict",
]


def _tracker_classes() -> dict[str, type[Tracker]]:
    return {cls.mode: cls for cls in (ConversationTracker, CodeTracker, ReasoningTracker)}


def new_tracker(mode: str, *, spec: ModeSpec | None = None) -> Tracker:
    """An empty tracker for ``mode`` (bounds from ``spec``, else the mode's defaults)."""
    return _tracker_classes()[get_mode(mode).name](spec)


def tracker_from_dict(data: Mapping[str, Any], *, spec: ModeSpec | None = None) -> Tracker:
    """Restore any tracker from :meth:`Tracker.to_dict` output, by its ``mode`` key."""
    if not isinstance(data, Mapping):
        raise InputError("a saved tracker state must be a JSON object")
    mode = data.get("mode")
    if not isinstance(mode, str):
        raise InputError(
            f"a saved tracker state needs a 'mode' (one of {', '.join(MODES)})", field="mode"
        )
    return _tracker_classes()[get_mode(mode).name].from_dict(data, spec=spec)
