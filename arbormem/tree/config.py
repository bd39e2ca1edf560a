"""Settings of the topic tree."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class TreeConfig:
    """How the tree grows and how much it weighs in recall.

    The defaults are one configuration chosen on the LoCoMo development
    conversations and used for every thread (see ``docs/benchmarks.md``).
    """

    #: Grow a tree at all. Off, arbormem ranks turns without topic signals ("flat").
    enabled: bool = True
    #: No node has more children than this; older consecutive children are grouped.
    max_children: int = 10
    #: An exchange whose similarity to the active topic falls below this opens a new topic.
    split_threshold: float = 0.35
    #: Exchanges a topic holds before drift may split it.
    min_exchanges: int = 2
    #: Exchanges after which a topic is closed whatever the drift.
    max_exchanges: int = 24
    #: Share of embedding cosine (against word overlap) in the drift similarity.
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
