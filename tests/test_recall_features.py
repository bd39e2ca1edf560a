"""The features of a search's candidates (arbormem.recall.features) against their
definitions, computed here one candidate at a time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.recall.features import FEATURES
from arbormem.timeexpr import closeness


def test_date_closeness_is_each_turns_own(tmp_path: Path) -> None:
    # Turns every five hours from late February to mid-March, several a day, written
    # with offsets from UTC of -9 to +9 hours (the store keeps them in UTC): each
    # turn's closeness to the dates asked about is its own day's.
    start = datetime(2024, 2, 20, 22, 30, tzinfo=timezone.utc)
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as m:
        for i in range(120):
            zone = timezone(timedelta(hours=(i % 19) - 9))
            when = (start + timedelta(hours=5 * i, minutes=i)).astimezone(zone)
            m.add(f"the kite festival, note {i}", timestamp=when, session=f"s{i // 10}")
        thread = m.backend.thread(m.scope.user, m.scope.agent)
        assert thread is not None
        for query in ("kite festival in early March 2024", "the kite festival on March 3, 2024"):
            question, rowids, X, _, rows = m.engine.retriever.candidates([thread], query)
            assert question.ranges and len(rowids) > 20
            temp = X[:, FEATURES.index("temp")].tolist()
            want = [closeness(rows[r].message.timestamp, question.ranges) for r in rowids]
            assert temp == np.asarray(want, dtype=np.float32).tolist()
            assert 0 < min(temp) < 1 and max(temp) == 1.0
