from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder

#: Fixtures for tests against a real PostgreSQL server (``pg_server``, ``pg_url``).
pytest_plugins = ["tests.pg_fixtures"]

LOCOMO_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo"


@pytest.fixture(autouse=True)
def isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point every per-user folder at a temporary one and clear arbormem's variables."""
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith("ARBORMEM_") or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    # A developer's .env in the working directory must not configure an LLM for the tests.
    monkeypatch.chdir(home)
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("HOME", str(home))
    # The default background embedder (bge-small) would embed every test's messages on
    # a thread of its own; the tests that exercise it ask for it.
    monkeypatch.setenv("ARBORMEM_DEEP_EMBEDDER", "none")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db_path: Path) -> Iterator[Memory]:
    """A memory on a real SQLite file with the fast deterministic embedder."""
    with Memory(db_path, embedder=HashingEmbedder(64)) as mem:
        yield mem


@pytest.fixture
def locomo_dir() -> Path:
    if not LOCOMO_DIR.is_dir():
        pytest.skip("LoCoMo development files are not present in ../shared")
    return LOCOMO_DIR


#: SQL that removes what schema version 19 added (image memories).
UNDO_SCHEMA_FROM_19 = """
DROP TRIGGER images_caption_forgotten;
DROP TRIGGER images_thread_forgotten;
DROP TABLE images;
DROP TABLE image_captions;
DROP TABLE image_blobs;
"""
#: SQL that removes what schema versions 18 and later added (typed records, images).
UNDO_SCHEMA_FROM_18 = (
    UNDO_SCHEMA_FROM_19
    + """
DROP TABLE records;
DROP TABLE record_sources;
DROP TABLE record_fts;
DROP TABLE record_composites;
DROP TABLE record_composite_members;
DROP TABLE record_cursor;
"""
)
#: SQL that removes what schema versions 13 and later added, for tests that put a
#: store back at an older version (each such test adds what its own older versions
#: remove).
UNDO_SCHEMA_FROM_13 = (
    UNDO_SCHEMA_FROM_18
    + """
DROP TRIGGER threads_forgotten;
DROP TRIGGER threads_rewritten;
DROP TABLE store_clock;
DROP INDEX messages_archived;
DROP INDEX tree_nodes_archived;
DROP INDEX tree_briefs;
DROP TABLE pending_purges;
"""
)


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def run_cli(
    *args: str, env: dict[str, str] | None = None, input: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``arbormem`` entry point in a subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "arbormem", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        cwd=cwd,
        timeout=300,
    )


def tiny_locomo(sample: str = "conv-x") -> dict:
    """A small LoCoMo-shaped conversation written for the tests."""
    return {
        "sample_id": sample,
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "10:00 am on 3 March, 2024",
        "session_1": [
            {
                "speaker": "Ana",
                "dia_id": "D1:1",
                "text": "I adopted a grey cat named Pixel last week.",
            },
            {
                "speaker": "Ben",
                "dia_id": "D1:2",
                "text": "Lovely! Does Pixel get along with your dog?",
            },
            {
                "speaker": "Ana",
                "dia_id": "D1:3",
                "text": "Mostly, they nap together on the sofa.",
                "img_url": ["http://example.invalid/x.jpg"],
                "blip_caption": "a cat and a dog asleep",
            },
        ],
        "session_2_date_time": "6:30 pm on 20 April, 2024",
        "session_2": [
            {
                "speaker": "Ben",
                "dia_id": "D2:1",
                "text": "I started training for a marathon in Lisbon.",
            },
            {"speaker": "Ana", "dia_id": "D2:2", "text": "When is the race?"},
            {"speaker": "Ben", "dia_id": "D2:3", "text": "The Lisbon marathon is in October."},
        ],
        "qa": [
            {
                "question": "What is the name of Ana's cat?",
                "answer": "Pixel",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where is Ben's marathon?",
                "answer": "Lisbon",
                "evidence": ["D2:1; D2:3"],
                "category": 1,
            },
            {
                "question": "What did Ana's cat and dog do?",
                "answer": "nap",
                "evidence": ["D1:3"],
                "category": 3,
            },
            {"question": "What is Ben's favourite colour?", "evidence": [], "category": 5},
        ],
    }
