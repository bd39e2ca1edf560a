"""Every public entry point checks its arguments: a wrong value is an InputError naming
the field, never a fallback to a default and never a raw TypeError or sqlite3 error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arbormem import AsyncMemory, InputError, Memory
from arbormem.embed import HashingEmbedder

#: Every Memory method that takes user= and agent=, with arguments that would work.
SCOPED: dict[str, Callable[[Memory, dict[str, Any]], Any]] = {
    "add": lambda m, kw: m.add("another note", **kw),
    "add_many": lambda m, kw: m.add_many([{"content": "another note"}], **kw),
    "search": lambda m, kw: m.search("secret", **kw),
    "get": lambda m, kw: m.get(m.messages()[0].id, **kw),
    "messages": lambda m, kw: m.messages(**kw),
    "sessions": lambda m, kw: m.sessions(**kw),
    "stats": lambda m, kw: m.stats(**kw),
    "forget": lambda m, kw: m.forget(**kw),
    "forget_message": lambda m, kw: m.forget(m.messages()[0].id, **kw),
    "forget_session": lambda m, kw: m.forget(session=m.sessions()[0].id, **kw),
    "current_session": lambda m, kw: m.current_session(**kw),
    "set_mode": lambda m, kw: m.set_mode("code", **kw),
    "context": lambda m, kw: m.context("secret", **kw),
    "tree": lambda m, kw: m.tree(**kw),
    "render_tree": lambda m, kw: m.render_tree(**kw),
    "reorganize": lambda m, kw: m.reorganize(**kw),
    "undo_reorganize": lambda m, kw: m.undo_reorganize(1, **kw),
    "restore_archived": lambda m, kw: m.restore_archived(**kw),
    "tree_log": lambda m, kw: m.tree_log(**kw),
    "tree_tools": lambda m, kw: m.tree_tools(**kw),
    "topic_paths": lambda m, kw: m.topic_paths("secret", **kw),
    "export": lambda m, kw: m.export(**kw),
    "prepare_search": lambda m, kw: m.prepare_search(**kw),
}

#: Ids that are not ids: each must be refused, whatever the call.
BAD_IDS = ["", "   ", "\t\n", 0, 7, b"bob", ["bob"], 1.5, True]


@pytest.mark.parametrize("method", sorted(SCOPED))
def test_a_blank_or_mistyped_id_is_refused_never_the_default_scope(
    memory: Memory, method: str
) -> None:
    # search(user="") searched the default user, and forget(user="") deleted the
    # default user's whole thread.
    memory.add("the safe code is 4711", session="vault")
    before = memory.export()
    for field in ("user", "agent"):
        for bad in BAD_IDS:
            with pytest.raises(InputError) as err:
                SCOPED[method](memory, {field: bad})
            assert err.value.field == field, (field, bad)
    assert memory.export()["threads"] == before["threads"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_scopes_and_async_calls_refuse_a_blank_id_too(memory: Memory, bad: Any) -> None:
    memory.add("the safe code is 4711")
    with pytest.raises(InputError, match="'user'"):
        memory.scopes(bad)
    calls: list[Callable[[AsyncMemory], Any]] = [
        lambda a: a.search("safe code", user=bad),
        lambda a: a.messages(user=bad),
        lambda a: a.forget(user=bad),
        lambda a: a.export(user=bad),
        lambda a: a.stats(agent=bad),
    ]
    wrapped = AsyncMemory(memory=memory)
    for call in calls:
        with pytest.raises(InputError):
            asyncio.run(call(wrapped))
    assert [m.content for m in memory.messages()] == ["the safe code is 4711"]


def test_a_blank_id_in_the_cli_is_a_clean_error(db_path: Path) -> None:
    from .conftest import run_cli

    with Memory(db_path, embedder=HashingEmbedder(16), llm=None) as mem:
        mem.add("the safe code is 4711")
    for args in (("--user", " ", "forget", "--everything-of-user", "--yes"),):
        out = run_cli(*args, env={"ARBORMEM_DB": str(db_path), "ARBORMEM_EMBEDDER": "hash:16"})
        assert out.returncode != 0 and "'user'" in out.stderr
        assert "Traceback" not in out.stderr
    with Memory(db_path, embedder=HashingEmbedder(16), llm=None) as mem:
        assert len(mem.messages()) == 1
