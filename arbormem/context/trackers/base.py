"""The base of every tracker: what a tracker reads of a message, and the
:class:`Tracker` interface with its shared update, render and save logic."""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from arbormem.context.modes import (
    ITEM_CHARS,
    LLM_FEATURE,
    LLM_INPUT_CHARS,
    LLM_MAX_TOKENS,
    STATE_VERSION,
    ModeSpec,
    get_mode,
)
from arbormem.errors import ConfigError, InputError, LLMError
from arbormem.models import ROLE_ALIASES, ROLES, Message

if TYPE_CHECKING:
    from arbormem.llm import LLMClient

log = logging.getLogger("arbormem.context.modes")


class Said(NamedTuple):
    """One new message as the trackers read it: its role and its text."""

    role: str
    text: str


#: Text scanned per message: enough for any real message, and a bound on regex work.
_SCAN_CHARS = 40_000


def _said(message: Message | Mapping[str, Any]) -> Said:
    if isinstance(message, Mapping):
        role, content = message.get("role"), message.get("content")
    else:
        role, content = getattr(message, "role", None), getattr(message, "content", None)
    role = str(role or "user").strip().lower()
    role = ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        role = "user"
    text = content if isinstance(content, str) else ""
    if len(text) > _SCAN_CHARS:  # keep both ends: a traceback's last line is at the end
        half = _SCAN_CHARS // 2
        text = f"{text[:half]}\n{text[-half:]}"
    return Said(role, text)


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    """``text`` on one line, shortened to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _excerpt(text: str, limit: int = 1500) -> str:
    if len(text) <= limit:
        return text
    head = limit // 3  # the start says what it is, the end holds the error line
    return f"{text[:head]}\n[...]\n{text[-(limit - head) :]}"


class Tracker(abc.ABC):
    """Tracks the state a mode keeps across turns.

    Call :meth:`update` with the new messages after every turn and put
    :meth:`render` into the prompt. With an LLM, :meth:`update` asks it for the
    mode's structure as JSON; without one, or when the call fails, it extracts
    it with patterns. It never raises.

    Every section remembers the turn it last changed (``changed``): a section
    changes when an update finds something for it, new or said again. Modes
    with ``hides_stale`` leave a section out of :meth:`render` once it has gone
    ``spec.stale_turns`` turns without changing; its state is kept.

    Subclasses implement the hooks: ``_extract`` (patterns), ``_llm_prompt`` and
    ``_validate`` (LLM), ``_merge``, ``_section_lines``, ``_state`` and ``_load``.
    """

    mode: ClassVar[str]
    #: Section names, in the order they are rendered.
    sections: ClassVar[tuple[str, ...]]
    #: Whether render() leaves out sections unchanged for ``spec.stale_turns`` turns.
    hides_stale: ClassVar[bool] = False

    def __init__(self, spec: ModeSpec | None = None) -> None:
        self.spec = spec if spec is not None else get_mode(self.mode)
        if self.spec.name != self.mode:
            raise ConfigError(
                f"a {self.mode} tracker needs the {self.mode!r} mode spec, not {self.spec.name!r}"
            )
        #: Turns seen: calls to update() with at least one message.
        self.turn = 0
        #: Section name -> the turn it last changed.
        self.changed: dict[str, int] = {}

    # ----------------------------------------------------------------- public API

    def update(
        self, messages: Sequence[Message | Mapping[str, Any]], llm: LLMClient | None = None
    ) -> None:
        """Take in the messages added since the last update, in order. Never raises.

        ``messages`` are :class:`~arbormem.models.Message` objects or mappings
        with ``role`` and ``content``. With ``llm``, one ``complete_json`` call
        (feature ``"trackers"``) extracts the state; if it fails, the patterns do.
        """
        if not messages:
            return
        self.turn += 1
        try:
            said = [_said(m) for m in messages]
            found = self._ask_llm(said, llm) if llm is not None else None
            if found is None:
                found = self._extract(said)
            touched = self._merge(found)
        except Exception:  # a tracker must never break the prompt it decorates
            log.warning("%s tracker: update failed, state left as it was", self.mode, exc_info=True)
            return
        for section in touched:
            self.changed[section] = self.turn

    def render(self) -> str:
        """The tracked state as compact text for the prompt ("" when there is nothing).

        One header per section that has content (and is not stale), one line per
        item, each section capped.
        """
        blocks = []
        for section in self.sections:
            if self.is_stale(section):
                continue
            lines = self._section_lines(section)
            if lines:
                blocks.append("\n".join(lines))
        return "\n".join(blocks)

    def is_stale(self, section: str) -> bool:
        """Whether ``section`` is left out of :meth:`render` for not changing lately."""
        if not self.hides_stale:
            return False
        return self.turn - self.changed.get(section, self.turn) >= self.spec.stale_turns

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready data; :func:`tracker_from_dict` restores it."""
        return {
            "mode": self.mode,
            "version": STATE_VERSION,
            "turn": self.turn,
            "changed": dict(self.changed),
            **self._state(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, spec: ModeSpec | None = None) -> Tracker:
        """A tracker restored from :meth:`to_dict` output.

        Missing keys (states saved by older versions) and unusable entries are
        left out rather than refused; a state of another mode is an
        :class:`~arbormem.errors.InputError`.
        """
        if not isinstance(data, Mapping):
            raise InputError("a saved tracker state must be a JSON object")
        mode = data.get("mode", cls.mode)
        if mode != cls.mode:
            raise InputError(
                f"this state belongs to the {mode!r} mode, not {cls.mode!r}",
                field="mode",
                hint="load it with tracker_from_dict()",
            )
        tracker = cls(spec)
        tracker.turn = _count(data.get("turn"))
        changed = data.get("changed")
        if isinstance(changed, Mapping):
            tracker.changed = {
                name: min(_count(turn), tracker.turn)
                for name, turn in changed.items()
                if name in cls.sections
            }
        tracker._load(data)
        for section in cls.sections:  # no record of when it changed: show it as fresh
            if section not in tracker.changed and tracker._section_lines(section):
                tracker.changed[section] = tracker.turn
        return tracker

    def __repr__(self) -> str:
        return f"{type(self).__name__}(turn={self.turn})"

    # ----------------------------------------------------------------- hooks

    @abc.abstractmethod
    def _extract(self, said: Sequence[Said]) -> Any:
        """What the patterns find in the new messages (the type ``_merge`` takes)."""

    @abc.abstractmethod
    def _llm_prompt(self) -> str:
        """The system prompt asking for this mode's structure as JSON."""

    @abc.abstractmethod
    def _validate(self, value: Any) -> Any:
        """The LLM's parsed JSON as ``_extract`` would return it; ValueError if unusable."""

    @abc.abstractmethod
    def _merge(self, found: Any) -> set[str]:
        """Merge ``found`` into the state within the bounds; return the sections it touched."""

    @abc.abstractmethod
    def _section_lines(self, section: str) -> list[str]:
        """The rendered lines of ``section`` (header first), or [] when it is empty."""

    @abc.abstractmethod
    def _state(self) -> dict[str, Any]:
        """The mode's own state as JSON-ready data."""

    @abc.abstractmethod
    def _load(self, data: Mapping[str, Any]) -> None:
        """Restore the mode's own state from ``data``, tolerating missing or bad entries."""

    # ----------------------------------------------------------------- LLM path

    def _ask_llm(self, said: Sequence[Said], llm: LLMClient) -> Any:
        """The LLM's extraction, or ``None`` when the call or its answer failed."""
        notes = self.render() or "(nothing yet)"
        shown = [f"{s.role}: {_excerpt(s.text)}" for s in said if s.text.strip()]
        while len(shown) > 1 and sum(len(s) for s in shown) > LLM_INPUT_CHARS:
            shown.pop(0)  # the latest messages matter most
        body = (
            f"Notes so far (for reference; do not repeat them):\n{notes}\n\n"
            "New messages:\n" + "\n\n".join(shown)
        )
        messages = [
            {"role": "system", "content": self._llm_prompt()},
            {"role": "user", "content": body},
        ]
        try:
            return llm.complete_json(
                messages,
                validate=self._validate,
                feature=LLM_FEATURE,
                max_tokens=LLM_MAX_TOKENS,
            )
        except LLMError as exc:
            log.info("%s tracker: LLM extraction failed, using patterns: %s", self.mode, exc)
        except Exception as exc:  # a client breaking its contract still must not break us
            log.warning("%s tracker: LLM client raised %r, using patterns", self.mode, exc)
        return None


def _count(value: Any) -> int:
    """A non-negative int from saved data (0 for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)
