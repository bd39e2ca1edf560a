"""Settings of the topic tree."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any

from arbormem.config import is_flag
from arbormem.errors import ConfigError

#: (smallest, largest) of each number setting; None: no bound on that side.
_RANGES: dict[str, tuple[float | None, float | None]] = {
    # A full node groups two neighbours that are off the active path; with two
    # children one of them always is on it, so nothing could ever be grouped.
    "max_children": (3, None),
    "split_threshold": (-1.0, 1.0),
    "min_exchanges": (1, None),
    "max_exchanges": (1, None),
    "dense_weight": (0.0, 1.0),
    "gap_minutes": (0.0, None),
    "summary_words": (5, None),
    "reorganize_idle_seconds": (0.0, None),
}
_WHOLE = ("max_children", "min_exchanges", "max_exchanges", "summary_words")


@dataclass(frozen=True)
class TreeConfig:
    """How the tree grows and how much it weighs in recall.

    The defaults are one configuration used for every thread: the boundary
    settings (``split_threshold``, ``dense_weight``) were fitted on the dialogue
    segmentation development data, the rest chosen on the LoCoMo development
    conversations (see ``docs/benchmarks.md``).
    """

    #: Grow a tree at all. Off, arbormem ranks turns without topic signals ("flat").
    enabled: bool = True
    #: No node has more children than this; older consecutive children are grouped.
    max_children: int = 10
    #: A message whose continuity with the active topic (1 - the boundary model's
    #: probability, see :mod:`arbormem.tree.segment`) falls below this opens a new topic.
    split_threshold: float = 0.40
    #: Exchanges a topic holds before a message may open the next one.
    min_exchanges: int = 1
    #: Exchanges after which a topic is closed whatever the drift.
    max_exchanges: int = 24
    #: Weight of the embedding features against the word features in the boundary
    #: model (0.5: as fitted; 0: words only; 1: embeddings only).
    dense_weight: float = 0.5
    #: Silence (minutes) inside one session that opens a new topic.
    gap_minutes: float = 30.0
    #: Longest topic summary, in words.
    summary_words: int = 60
    #: Ask the configured LLM to decide topic changes (it names topics in any case).
    llm_decisions: bool = True
    #: Seconds a thread must be idle before it is reorganised in the background
    #: (``None``: only when :meth:`Memory.reorganize` is called).
    reorganize_idle_seconds: float | None = None

    def __post_init__(self) -> None:
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if value is None and name == "reorganize_idle_seconds":
                continue
            kind = "a whole number" if name in _WHOLE else "a number"
            number: float | None = None
            if isinstance(value, numbers.Real) and not is_flag(value):
                try:
                    number = float(value)
                except OverflowError:  # an int past float's range
                    number = math.inf
                if name in _WHOLE and not number.is_integer():
                    number = None
            if (
                number is None
                or not math.isfinite(number)
                or (low is not None and number < low)
                or (high is not None and number > high)
            ):
                bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
                raise ConfigError(f"tree setting {name} must be {kind} {bounds} (got {value!r})")
            # numpy numbers and whole floats are kept as Python's own int and float.
            object.__setattr__(self, name, int(value) if name in _WHOLE else float(value))
        if self.max_exchanges < self.min_exchanges:
            raise ConfigError(
                f"tree setting max_exchanges ({self.max_exchanges}) is below "
                f"min_exchanges ({self.min_exchanges})"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
