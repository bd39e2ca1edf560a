"""Export and import carry each session's working memory: mode, tracked state, summary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import InputError, Memory
from arbormem.embed import HashingEmbedder

T0 = datetime(2026, 3, 2, 18, 4, tzinfo=timezone.utc)


def open_memory(path: Path) -> Memory:
    return Memory(path, embedder=HashingEmbedder(64), llm=None)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Memory]:
    """A store whose sessions hold a code task, a long summarised chat and a mode
    chosen before any message."""
    with open_memory(tmp_path / "source.db") as mem:
        mem.set_mode("code", session="fix")
        mem.add_many(
            [
                {"content": "Fix the login crash in src/auth.py", "timestamp": T0},
                {
                    "role": "assistant",
                    "content": "I fixed src/auth.py and added tests/test_auth.py",
                    "timestamp": T0 + timedelta(seconds=20),
                },
            ],
            session="fix",
        )
        for i in range(30):
            when = T0 + timedelta(days=1, minutes=2 * i)
            mem.add_many(
                [
                    {
                        "content": f"Question {i} about the garden plan and the compost",
                        "timestamp": when,
                    },
                    {
                        "role": "assistant",
                        "content": f"Answer {i}: water the tomatoes daily",
                        "timestamp": when + timedelta(seconds=30),
                    },
                ],
                session="garden",
            )
        mem.context("what about compost?", session="garden")
        mem.set_mode("reasoning", session="plan")
        mem.engine.working.wait()
        yield mem


def without_date(export: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in export.items() if k != "exported_at"}


def test_export_import_export_is_identical(source: Memory, tmp_path: Path) -> None:
    first = source.export(tmp_path / "first.json", everything=True)
    sessions = {s["id"]: s for s in first.document["threads"][0]["sessions"]}
    # The modes, the code tracker's files and the summary were left out of the export.
    assert {k: s["state"]["mode"] for k, s in sessions.items()} == {
        "fix": "code",
        "garden": "conversation",
        "plan": "reasoning",
    }
    assert "src/auth.py" in sessions["fix"]["state"]["tracker"]["files"]
    assert sessions["garden"]["state"]["summary"] and sessions["plan"]["messages"] == []
    with open_memory(tmp_path / "copy.db") as copy:
        counts = copy.import_(tmp_path / "first.json")
        assert (counts.messages, counts.session_states) == (62, 3)
        second = copy.export(everything=True)
        assert json.dumps(without_date(second.to_dict())) == json.dumps(
            without_date(first.to_dict())
        )
        assert copy.context("next?", session="fix").mode == "code"
        assert "src/auth.py" in copy.context("next?", session="fix").section("state").text
        assert copy.context("next?", session="plan").mode == "reasoning"
        garden = copy.context("compost?", session="garden").section("summary").text
        assert garden == source.context("compost?", session="garden").section("summary").text
        # Importing again restores nothing over the states the copy has now.
        assert copy.import_(first).session_states == 0


def test_a_version_1_export_still_imports(tmp_path: Path) -> None:
    old = {
        "format": "arbormem-export",
        "version": 1,
        "exported_at": "2026-01-01T00:00:00Z",
        "threads": [
            {
                "user": "sam",
                "agent": "default",
                "sessions": [
                    {
                        "id": "s1",
                        "metadata": {},
                        "messages": [
                            {
                                "id": "m1",
                                "index": 0,
                                "role": "user",
                                "speaker": None,
                                "content": "my postcode is BS1 4QA",
                                "timestamp": "2026-01-01T00:00:00.000000Z",
                                "metadata": {},
                            }
                        ],
                    }
                ],
            }
        ],
    }
    with open_memory(tmp_path / "old.db") as mem:
        counts = mem.import_(old)
        assert (counts.messages, counts.session_states) == (1, 0)
        again = mem.export(user="sam")
        assert again.document["version"] == 4
        # a session without a state has none; version 3 adds the thread's records,
        # version 4 its images
        assert [
            {k: v for k, v in t.items() if k not in ("records", "images")}
            for t in again.document["threads"]
        ] == old["threads"]
    for version in (0, 5, "2", True):
        with pytest.raises(InputError, match="reads 1, 2, 3 and 4"):
            open_memory(tmp_path / "v.db").import_({**old, "version": version})


@pytest.mark.parametrize(
    ("state", "field"),
    [
        ("code", "state"),
        ({"mode": "poetry"}, "state.mode"),
        ({"mode": "code", "tracker": {"mode": "reasoning"}}, "state.tracker"),
        ({"mode": "code", "tracker": []}, "state.tracker"),
        ({"mode": "code", "summary": 5}, "state.summary"),
        ({"mode": "code", "seen": -1}, "state.seen"),
        ({"mode": "code", "floor": True}, "state.floor"),
    ],
)
def test_a_bad_state_is_refused_naming_it(
    source: Memory, tmp_path: Path, state: Any, field: str
) -> None:
    data = source.export()
    data.document["threads"][0]["sessions"][1]["state"] = state
    with open_memory(tmp_path / "bad.db") as other:
        with pytest.raises(InputError, match=rf"sessions\[1\]\.{field}\b") as caught:
            other.import_(data)
        assert caught.value.field == f"threads[0].sessions[1].{field}"
        assert other.messages() == []  # nothing of the file was stored


def test_state_positions_follow_renumbered_messages(source: Memory, tmp_path: Path) -> None:
    data = source.export()
    fix = data.document["threads"][0]["sessions"][0]
    assert fix["state"]["seen"] == 2  # the tracker read both messages
    data.document["threads"][0]["sessions"] = [fix]
    with open_memory(tmp_path / "busy.db") as busy:
        busy.add_many([{"content": f"earlier note {i}", "session": "old"} for i in range(3)])
        busy.import_(data)
        assert [m.index for m in busy.messages(session="fix")] == [3, 4]
        state = busy.export().document["threads"][0]["sessions"][1]["state"]
        assert state["seen"] == 5 and state["mode"] == "code"
