"""``arbormem migrate``: any store to any other, losslessly, resumably, verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import StoreError
from arbormem.store import open_store
from arbormem.store.migrate import migrate

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo"
if not LOCOMO.is_dir():
    LOCOMO = Path("/work/shared/datasets/locomo")
T0 = datetime(2025, 3, 1, 9, tzinfo=timezone.utc)


def _memory(target: str | Path, tenant: str = "") -> Memory:
    return Memory(target, embedder=HashingEmbedder(32), llm=None, reranker=None, tenant=tenant)


def _export(target: str | Path, tenant: str = "") -> dict[str, Any]:
    with _memory(target, tenant) as mem:
        out = mem.export(everything=True).to_dict()
    del out["exported_at"]
    return out


def _fill(target: str | Path) -> None:
    """Two users, two agents, sessions, metadata, an archived trivial exchange and
    session states: what an export holds, and a tree."""
    with _memory(target) as mem:
        for user, agent in (("ann", "bot"), ("ann", "coach"), ("bob", "bot")):
            for day in range(3):
                for i in range(6):
                    mem.add_many(
                        [
                            {
                                "content": "thanks a lot"
                                if i == 3
                                else f"{user} on day {day}: the kite {i} and the lake",
                                "timestamp": T0 + timedelta(days=day, minutes=2 * i),
                                "metadata": {"day": day, "n": i},
                            },
                            {
                                "role": "assistant",
                                "content": "you are welcome"
                                if i == 3
                                else f"noted, {user}, kite {i}",
                                "timestamp": T0 + timedelta(days=day, minutes=2 * i + 1),
                            },
                        ],
                        user=user,
                        agent=agent,
                    )
            mem.set_mode("code", user=user, agent=agent)
            mem.reorganize(prune_trivial_leaves=True, user=user, agent=agent)
        mem.wait()
    with _memory(target, "acme") as mem:  # another tenant's "ann": another person
        mem.add_many(
            [{"content": f"acme's ann and the harbour {i}", "timestamp": T0} for i in range(4)],
            user="ann",
            agent="bot",
        )


def test_sqlite_to_postgres_and_back_keeps_everything(pg_url: str, tmp_path: Path) -> None:
    first = tmp_path / "first.db"
    _fill(first)
    original = _export(first)
    assert any(
        m.get("archived") for t in original["threads"] for s in t["sessions"] for m in s["messages"]
    )
    src, dst = open_store(first, read_only=True), open_store(pg_url)
    there = migrate(src, dst)
    src.close()
    assert there.verified and there.copied == there.source.messages and there.trees == 4
    assert there.source.threads == 4
    assert there.source.nodes > 0 and there.source.archived > 0
    last = tmp_path / "last.db"
    src, dst = open_store(pg_url, read_only=True), open_store(last)
    back = migrate(src, dst)
    assert back.verified and back.destination == there.source
    # The tree came across whole: the same shape and names, node for node.
    for thread in src.threads(tenant=None):
        mine = dst.thread(thread.user, thread.agent, tenant=thread.tenant)
        assert mine is not None
        shape = [(n.kind, n.seq, n.first_index, n.last_index, n.name, n.frozen, n.archived)
                 for n in src.tree_nodes(thread)]  # fmt: skip
        assert shape == [
            (n.kind, n.seq, n.first_index, n.last_index, n.name, n.frozen, n.archived)
            for n in dst.tree_nodes(mine)
        ]
        assert dst.check_tree(mine, 100) == []
    src.close()
    dst.close()
    assert _export(last) == original
    assert _export(last, "acme") == _export(first, "acme")
    with _memory(last) as mem:  # the copy is a working store
        assert mem.search("kite lake", k=3, user="bob", agent="bot")


def test_an_interrupted_copy_resumes_where_it_stopped(pg_url: str, tmp_path: Path) -> None:
    first = tmp_path / "first.db"
    _fill(first)
    src, dst = open_store(first, read_only=True), open_store(pg_url)
    seen = 0

    def stop_half_way(n: int) -> None:
        nonlocal seen
        seen += n
        if seen > 60:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate(src, dst, batch=20, progress=stop_half_way)
    partial = dst.threads()
    assert partial and sum(dst.count(t) for t in partial) < src.count(src.threads()[0]) * 3
    done = migrate(src, dst, batch=20)
    assert done.verified and done.already > 0 and done.copied + done.already == done.source.messages
    src.close()
    dst.close()


def test_a_destination_holding_other_messages_is_refused(pg_url: str, tmp_path: Path) -> None:
    first = tmp_path / "first.db"
    _fill(first)
    with _memory(pg_url) as mem:
        mem.add("something else entirely", user="ann", agent="bot")
    src, dst = open_store(first, read_only=True), open_store(pg_url)
    with pytest.raises(StoreError, match="not an earlier copy"):
        migrate(src, dst)
    src.close()
    dst.close()


def test_the_command_copies_and_says_it_verified(pg_url: str, tmp_path: Path) -> None:
    first = tmp_path / "first.db"
    _fill(first)
    env = {**os.environ, "ARBORMEM_EMBEDDER": "hash"}
    out = subprocess.run(
        [sys.executable, "-m", "arbormem", "migrate", str(first), pg_url, "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["verified"] and report["source_sha256"] == report["destination_sha256"]
    again = subprocess.run(
        [sys.executable, "-m", "arbormem", "migrate", str(first), str(first)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert again.returncode == 1 and "is the source itself" in again.stderr


@pytest.mark.skipif(not LOCOMO.is_dir(), reason="the LoCoMo development set is not here")
def test_the_locomo_development_set_round_trips_to_an_identical_export(
    pg_url: str, tmp_path: Path
) -> None:
    from arbormem.bench.locomo import ingest_conversation, load_paths

    first = tmp_path / "locomo.db"
    with Memory(first, embedder=HashingEmbedder(64), llm=None, reranker=None) as mem:
        for source, conv in load_paths([str(LOCOMO)]):
            mem_user = Path(source).stem
            scoped = Memory(
                first, user=mem_user, embedder=HashingEmbedder(64), llm=None, reranker=None
            )
            with scoped:
                ingest_conversation(scoped, conv)
        assert len(mem.scopes()) == 5
    original = _export(first)
    assert sum(len(s["messages"]) for t in original["threads"] for s in t["sessions"]) == 2760
    src, dst = open_store(first, read_only=True), open_store(pg_url)
    assert migrate(src, dst).verified
    src.close()
    dst.close()
    last = tmp_path / "back.db"
    src, dst = open_store(pg_url, read_only=True), open_store(last)
    assert migrate(src, dst).verified
    src.close()
    dst.close()
    assert _export(last) == original
