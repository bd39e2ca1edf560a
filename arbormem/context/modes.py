"""Memory modes: how much recent conversation a prompt keeps, and what state it tracks.

A *mode* fits the prompt :meth:`Memory.context` builds to the work at hand:

* ``conversation`` (the default): 25 recent messages; tracks topics and entities
  (names, places, organisations, amounts, dates).
* ``code``: 30 recent messages; tracks the current task and its progress, the
  files touched and the most recent errors with their file and line.
* ``reasoning``: 30 recent messages; tracks the objective and sub-goals,
  decisions with their rationale, rejected alternatives, constraints and
  assumptions, and leaves out of the prompt a section that has not changed
  for a few turns.

:func:`get_mode` gives a mode's :class:`ModeSpec`, :func:`resolve_mode` picks
the mode from the argument, ``ARBORMEM_MEMORY_MODE``, the config file's
``memory_mode`` or the default, and :func:`arbormem.context.trackers.new_tracker`
makes the tracker that keeps a mode's state across turns::

    tracker = new_tracker("code")
    tracker.update(new_messages)          # after every turn; llm=... to use an LLM
    prompt_section = tracker.render()     # "" while there is nothing to show
    saved = tracker.to_dict()             # JSON-ready; tracker_from_dict(saved) restores it

The trackers themselves (pattern extraction, LLM prompts) are in
:mod:`arbormem.context.trackers`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arbormem.config import UNSET, resolve
from arbormem.errors import ConfigError

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "ModeSpec",
    "get_mode",
    "mode_name",
    "resolve_mode",
]

log = logging.getLogger("arbormem.context.modes")

MODES: tuple[str, ...] = ("conversation", "code", "reasoning")
DEFAULT_MODE = "conversation"

#: The ``feature`` name LLM calls of the trackers are counted under.
LLM_FEATURE = "trackers"
#: Enough for the largest answer the prompts ask for.
LLM_MAX_TOKENS = 700
#: The new messages shown to the LLM are cut to about this many characters.
LLM_INPUT_CHARS = 8000
#: Bumped when the saved layout changes incompatibly; older states still load.
STATE_VERSION = 1
#: A rendered item longer than this is shortened with an ellipsis.
ITEM_CHARS = 150


@dataclass(frozen=True)
class ModeSpec:
    """What a mode keeps in the prompt and how much state its tracker holds.

    ``window`` is the number of recent messages the prompt carries verbatim;
    ``system_addition`` is appended to the system prompt. The ``max_*`` bounds
    apply to the code (files, errors) and reasoning (decisions, alternatives)
    trackers; ``stale_turns`` is how many turns a reasoning section may stay
    unchanged before :meth:`Tracker.render` leaves it out.
    """

    name: str
    window: int
    system_addition: str
    max_files: int = 20
    max_errors: int = 5
    max_decisions: int = 20
    max_alternatives: int = 10
    stale_turns: int = 3

    def __post_init__(self) -> None:
        for field in (
            "window",
            "max_files",
            "max_errors",
            "max_decisions",
            "max_alternatives",
            "stale_turns",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"memory mode {self.name!r}: {field} must be a whole number of at least 1 "
                    f"(got {value!r})"
                )


_SPECS: dict[str, ModeSpec] = {
    "conversation": ModeSpec(
        "conversation",
        window=25,
        system_addition=(
            "Stay consistent with the names and facts the user has shared, and bring "
            "earlier details back when they matter."
        ),
    ),
    "code": ModeSpec(
        "code",
        window=30,
        system_addition=(
            "You are working on software with the user. Keep the current task, the files "
            "involved and the latest errors in view, cite files and line numbers exactly, "
            "and do not propose again a change that was already made or already failed."
        ),
    ),
    "reasoning": ModeSpec(
        "reasoning",
        window=30,
        system_addition=(
            "You are helping to plan and decide. Work towards the stated objective within "
            "the constraints, build on decisions already taken instead of reopening them "
            "without a new reason, state assumptions openly, and point out when new "
            "information conflicts with an earlier decision."
        ),
    ),
}


def mode_name(value: Any) -> str:
    """The canonical name of a mode (case and surrounding space ignored), else ValueError."""
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in _SPECS:
        raise ValueError(f"unknown memory mode {value!r}: use one of {', '.join(MODES)}")
    return name


def get_mode(name: str) -> ModeSpec:
    """The :class:`ModeSpec` of ``name``; an unknown name is a :class:`ConfigError`.

    >>> get_mode("code").window
    30
    """
    try:
        return _SPECS[mode_name(name)]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def resolve_mode(explicit: Any = UNSET) -> str:
    """The memory mode to use: the argument, else ``ARBORMEM_MEMORY_MODE``, else the
    config file's ``memory_mode``, else ``"conversation"``.

    ``None`` counts as not given. An unknown name, wherever it comes from, is a
    :class:`ConfigError` that says where it was found and lists the modes.
    """
    if explicit is not UNSET and explicit is not None:
        return get_mode(explicit).name
    return resolve(UNSET, "ARBORMEM_MEMORY_MODE", "memory_mode", DEFAULT_MODE, mode_name)
