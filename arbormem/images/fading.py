"""The forgetting curve of image memories.

An image's strength is ``0.5 ** (t / half_life)``, ``t`` the days since it was last
reinforced (stored, recalled or restored). The half-life grows with importance, from
``image_half_life_days`` at 0 to ``image_half_life_max_days`` at 1, and is multiplied
by ``1 + image_recall_boost`` with each recall. Below ``image_expire_below`` the image
is soft-expired; soft-expired and older than ``image_max_age_days`` it may be purged.
Every function takes ``now``: the caller's clock decides, so tests are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from arbormem.settings import Settings
from arbormem.store.images import ImageRow

DAY = 86_400.0


@dataclass(frozen=True)
class Curve:
    """The parameters of the curve (see the module docs), from the settings."""

    half_life_days: float = 7.0
    half_life_max_days: float = 30.0
    recall_boost: float = 0.5
    expire_below: float = 0.1
    max_age_days: float = 90.0

    @classmethod
    def of(cls, settings: Settings) -> Curve:
        return cls(
            half_life_days=settings.image_half_life_days,
            half_life_max_days=settings.image_half_life_max_days,
            recall_boost=settings.image_recall_boost,
            expire_below=settings.image_expire_below,
            max_age_days=settings.image_max_age_days,
        )

    def half_life(self, importance: float, recalls: int) -> float:
        """Days for the strength to halve."""
        weight = min(1.0, max(0.0, importance))
        base = self.half_life_days + (self.half_life_max_days - self.half_life_days) * weight
        return base * (1.0 + self.recall_boost) ** max(0, recalls)

    def strength(self, row: ImageRow, now: datetime) -> float:
        """From 1 (just reinforced) towards 0."""
        since = row.recalled_at or row.timestamp
        days = max(0.0, (now - since).total_seconds() / DAY)
        return float(0.5 ** (days / self.half_life(row.importance, row.recalls)))

    def age_days(self, row: ImageRow, now: datetime) -> float:
        return max(0.0, (now - row.timestamp).total_seconds() / DAY)

    def expires(self, row: ImageRow, now: datetime) -> bool:
        """Whether a live image falls out of recall now."""
        return row.expired_at is None and self.strength(row, now) < self.expire_below

    def purgeable(self, row: ImageRow, now: datetime) -> bool:
        """Whether a soft-expired image is old enough to delete."""
        return row.expired_at is not None and self.age_days(row, now) > self.max_age_days
