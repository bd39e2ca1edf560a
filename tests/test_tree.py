"""The topic tree: how it grows, what it shows, how it heals and reorganises."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import ConfigError, InputError, TreeError
from arbormem.tree.config import TreeConfig
from arbormem.tree.view import TopicNode, to_dot, to_mermaid

from .fake_openai import FakeOpenAI, Reply

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)

TOPICS = {
    "garden": [
        "tomato seedlings need repotting",
        "compost for the tomato beds",
        "watering tomato plants in july heat",
        "tomato blight on the lower leaves",
    ],
    "car": [
        "the car engine makes a rattling noise",
        "engine oil change for the car",
        "car brakes squeal when cold",
        "car tyre pressure warning light",
    ],
    "trip": [
        "flights to Lisbon in may",
        "hotel near the Lisbon old town",
        "Lisbon tram tickets and day passes",
        "Lisbon restaurants for seafood",
    ],
}


def exchanges(topic: str, start: datetime, session: str) -> list[dict]:
    out = []
    for i, text in enumerate(TOPICS[topic]):
        when = start + timedelta(minutes=2 * i)
        out.append(
            {
                "role": "user",
                "content": f"Question about {text}?",
                "timestamp": when,
                "session": session,
            }
        )
        out.append(
            {
                "role": "assistant",
                "content": f"Here is advice on {text}.",
                "timestamp": when + timedelta(seconds=30),
                "session": session,
            }
        )
    return out


def daily_sessions(mem: Memory, days: int) -> None:
    """One session a day, the three topics in turn."""
    for day in range(days):
        topic = list(TOPICS)[day % 3]
        mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "t.db", embedder=HashingEmbedder(64), llm=None) as m:
        yield m


def topics(root: TopicNode) -> list[TopicNode]:
    return [n for n in root.walk() if n.kind in ("topic", "group")]


def test_sessions_become_topics_and_exchanges_become_leaves(mem: Memory) -> None:
    mem.add_many(exchanges("garden", T0, "s1"))
    mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
    root = mem.tree()
    assert [c.kind for c in root.children] == ["topic", "topic"]
    leaves = [n for n in root.walk() if n.kind == "leaf"]
    assert len(leaves) == 8
    assert all([m.role for m in leaf.messages] == ["user", "assistant"] for leaf in leaves)
    # Every message is in exactly one leaf, in order.
    indexes = [m.index for leaf in leaves for m in leaf.messages]
    assert indexes == list(range(16))
    first, second = root.children
    assert first.frozen and not second.frozen  # the active branch stays unfrozen
    assert first.name and first.summary and first.first_index == 0 and first.last_index == 7


def test_a_change_of_subject_opens_a_new_topic_under_the_session(mem: Memory) -> None:
    msgs = exchanges("garden", T0, "s1") + exchanges("car", T0 + timedelta(minutes=10), "s1")
    for m in msgs:
        mem.add(**m)
    session = mem.tree().children[0]
    names = [c.name for c in session.children]
    assert len(session.children) >= 2, names
    garden, car = session.children[0], session.children[-1]
    assert garden.last_index < car.first_index  # time runs down the tree


def test_a_growing_topic_is_described_by_its_subtopics(mem: Memory) -> None:
    # The session is still growing (no name of its own yet): it is described the way it
    # will be once frozen, from its subtopics, the growing one included.
    for m in exchanges("garden", T0, "s1") + exchanges("car", T0 + timedelta(minutes=10), "s1"):
        mem.add(**m)
    session = mem.tree().children[0]
    assert not session.frozen and len(session.children) >= 2
    assert session.children[-1].kind == "topic" and not session.children[-1].frozen
    for child in session.children:
        assert child.name and child.name in session.summary
    assert session.name in {c.name for c in session.children} or "&" in session.name


#: The content never splits a topic: what a test isolates is a rule of time or size.
NO_DRIFT = TreeConfig(split_threshold=0.0)


def test_silence_inside_a_session_opens_a_new_topic(tmp_path: Path) -> None:
    with Memory(tmp_path / "t.db", embedder=HashingEmbedder(64), llm=None, tree=NO_DRIFT) as mem:
        mem.add_many(exchanges("garden", T0, "s1")[:4])
        mem.add_many(exchanges("garden", T0 + timedelta(hours=5), "s1")[4:])
        session = mem.tree().children[0]
        assert len(session.children) == 2


def test_width_control_keeps_every_node_narrow(tmp_path: Path) -> None:
    config = TreeConfig(max_children=4)
    with Memory(tmp_path / "w.db", embedder=HashingEmbedder(64), tree=config, llm=None) as mem:
        daily_sessions(mem, 30)
        root = mem.tree()
        assert all(len(n.children) <= 4 for n in root.walk()), "width rule broken"
        assert any(n.kind == "group" for n in root.walk())
        depth = max(len(n.path) for n in root.walk())
        assert depth <= 8
        # Groups keep time order: each child starts after the previous one.
        for node in root.walk():
            starts = [c.first_index for c in node.children]
            assert starts == sorted(starts)
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 4) == []


def test_names_and_summaries_are_short(mem: Memory) -> None:
    for day, topic in enumerate(["garden", "car", "trip", "garden"]):
        mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
    for node in topics(mem.tree()):
        if node.frozen:
            assert 2 <= len(node.name.split()) <= 5, node.name
            assert len(node.summary.split()) <= 61, node.summary


def test_json_mermaid_and_dot_exports(mem: Memory) -> None:
    mem.add_many(exchanges("trip", T0, "s1"))
    mem.add_many(exchanges("car", T0 + timedelta(days=2), "s2"))
    data = json.loads(mem.render_tree("json", messages=True))
    assert data["kind"] == "root" and len(data["children"]) == 2
    topic = data["children"][0]
    for key in (
        "id",
        "name",
        "summary",
        "first_index",
        "last_index",
        "first_at",
        "last_at",
        "children",
        "frozen",
    ):
        assert key in topic
    leaf = topic["children"][0]["children"][0]
    assert leaf["kind"] == "leaf" and [m["role"] for m in leaf["messages"]] == ["user", "assistant"]
    assert "content" in leaf["messages"][0]
    mermaid = mem.render_tree("mermaid")
    assert mermaid.startswith("graph TD") and "-->" in mermaid
    dot = mem.render_tree("dot")
    assert dot.startswith("digraph") and "->" in dot
    text = mem.render_tree("text", summaries=True)
    assert text.startswith("ROOT")


def test_navigation_tools_walk_the_tree(mem: Memory) -> None:
    mem.add_many(exchanges("trip", T0, "s1"))
    nav = mem.tree_tools()
    names = [t["function"]["name"] for t in nav.tools]
    assert names == ["view_node", "get_messages"]
    root = nav.call("view_node", '{"path": []}')
    assert root["kind"] == "root" and len(root["children"]) == 1
    session = nav.call("view_node", {"path": [0]})
    assert session["name"] and session["children"]
    msgs = nav.call("get_messages", {"start": 0, "end": 2})["messages"]
    assert [m["index"] for m in msgs] == [0, 1] and "Lisbon" in msgs[0]["content"]
    assert "error" in nav.call("view_node", {"path": [7]})
    assert "error" in nav.call("view_node", "not json")
    assert "error" in nav.call("get_messages", {"start": 0, "end": 500})
    assert "error" in nav.call("delete_everything", {})


def test_forgetting_repairs_the_tree(mem: Memory) -> None:
    msgs = mem.add_many(exchanges("garden", T0, "s1"))
    mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
    secret = mem.add(
        "The garden shed key is under the blue flowerpot",
        session="s1",
        timestamp=T0 + timedelta(minutes=9),
    )
    mem.add_many(exchanges("trip", T0 + timedelta(days=3), "s3"))  # freezes what came before
    assert "flowerpot" in mem.render_tree("json", messages=True)
    mem.forget(secret.id)
    dump = mem.render_tree("json", messages=True)
    assert "flowerpot" not in dump
    mem.forget(session="s2")
    root = mem.tree()
    assert len(root.children) == 2
    assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []
    mem.forget(msgs[0].id)
    assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []


@pytest.mark.parametrize("first_use", ["search", "add"])
def test_an_inconsistent_tree_is_reported_and_rebuilt_on_open(
    tmp_path: Path, first_use: str
) -> None:
    path = tmp_path / "broken.db"
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
        before = mem.render_tree("json")
    conn = sqlite3.connect(path)
    victim = conn.execute("SELECT id FROM tree_nodes WHERE kind = 'leaf' LIMIT 1").fetchone()[0]
    conn.execute("UPDATE tree_nodes SET parent_id = 999999 WHERE id = ?", (victim,))
    conn.commit()
    conn.close()
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        # The first use of the thread checks it: a search does not wait for the check
        # (it runs in the background), an add waits and lands in the rebuilt tree.
        if first_use == "search":
            assert mem.search("tomato")
            expected = 16
        else:
            mem.add("and the tomatoes need staking", session="s2")
            expected = 17
        assert any(p.node == victim and "parent" in p.reason for p in mem.tree_problems)
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []
        after = json.loads(mem.render_tree("json"))
        assert sum(1 for _ in TopicNode.walk(mem.tree())) > 1
        assert json.loads(before)["message_count"] == 16
        assert after["message_count"] == expected
        assert mem.tree_log()[0].kind == "rebuild"


def test_tree_off_means_flat(tmp_path: Path) -> None:
    with Memory(tmp_path / "f.db", embedder=HashingEmbedder(64), tree=False, llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
        assert mem.tree().children == []
        assert "bm_topic" not in mem.search("tomato")[0].signals


def test_tree_signals_reach_the_ranking(mem: Memory) -> None:
    mem.add_many(exchanges("garden", T0, "s1"))
    mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
    hit = mem.search("tomato blight")[0]
    assert hit.signals.get("bm_topic", 0) > 0 and hit.signals.get("bm_sess", 0) > 0


def test_a_thread_stored_without_a_tree_gets_one_when_the_tree_is_on(tmp_path: Path) -> None:
    path = tmp_path / "late.db"
    with Memory(path, embedder=HashingEmbedder(64), tree=False, llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        assert mem.search("tomato")
        assert mem.tree().message_count == 16
        assert [s.first_index for s in mem.tree().children] == [0, 8]
        assert mem.tree_log()[0].kind == "rebuild"


# -- with an LLM --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def llm_memory(tmp_path: Path, server: FakeOpenAI) -> Memory:
    from arbormem.llm import LLMConfig, get_llm

    llm = get_llm(
        LLMConfig(model="fake", base_url=server.base_url, api_key="k", timeout=2, max_retries=0)
    )
    return Memory(tmp_path / "llm.db", embedder=HashingEmbedder(64), llm=llm)


def test_llm_decides_topic_changes_and_its_bad_answers_are_refused(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    server.reset()
    server.default = Reply('{"name": "Home Garden Care", "summary": "Tomatoes and compost."}')
    mem = llm_memory(tmp_path, server)
    try:
        mem.add_many(exchanges("garden", T0, "s1")[:4])  # bulk: the heuristic places these
        # Background naming and session upkeep are done: the next queued reply is the decision's.
        mem.engine.trees.drain()
        mem.engine.working.wait()
        session = mem.tree().children[0]
        active = session.children[-1]
        # A valid "new topic under the session" decision.
        server.queue(
            Reply(json.dumps({"decision": "new", "parent": session.id, "name": "Car Repairs"}))
        )
        mem.add(
            "My car engine rattles, what could it be?",
            session="s1",
            timestamp=T0 + timedelta(minutes=10),
        )
        session = mem.tree().children[0]
        assert session.children[-1].id != active.id
        new_topic = session.children[-1]
        # The LLM's decision is the one used: its name and origin are on the new topic.
        assert (new_topic.origin, new_topic.name) == ("llm", "Car Repairs")
        asked = [r for r in server.chat_requests() if "organise a conversation" in json.dumps(r)]
        assert len(asked) == 1
        # Garbage, a topic that does not exist, and a timeout: the heuristic decides, no crash.
        server.queue(Reply("this is not JSON at all"))
        mem.add("And the brakes squeal too.", session="s1", timestamp=T0 + timedelta(minutes=11))
        server.queue(Reply(json.dumps({"decision": "new", "parent": 424242})))
        mem.add(
            "Is it safe to drive like that?", session="s1", timestamp=T0 + timedelta(minutes=12)
        )
        server.queue(Reply('{"decision": "continue"}', delay=3))
        mem.add(
            "The noise is louder when cold.", session="s1", timestamp=T0 + timedelta(minutes=13)
        )
        assert len(mem.messages()) == 8
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []
        assert mem.tree().children[0].children[-1].first_index >= new_topic.first_index
    finally:
        mem.close()


def test_llm_names_frozen_topics_in_the_background(tmp_path: Path, server: FakeOpenAI) -> None:
    server.reset()
    server.default = Reply(
        '{"name": "Tomato Growing Tips", "summary": "Repotting, compost and '
        'blight on tomato plants."}'
    )
    mem = llm_memory(tmp_path, server)
    try:
        mem.add_many(exchanges("garden", T0, "s1"))
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
        mem.engine.trees.drain()  # wait for the background naming queue
        names = [n.name for n in topics(mem.tree()) if n.frozen]
        assert "Tomato Growing Tips" in names
        usage = mem.llm.usage.snapshot()["features"]
        assert usage["topic_summaries"]["calls"] >= 1
    finally:
        mem.close()


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("Line one\nLine two\x00\x07\x1b", "Line one Line two"),
        ("x" * 5000, None),
        ("   ", None),
        ("\U0001f389\U0001f389", None),
        ("<b>Bold</b> &amp; Co", None),
    ],
)
def test_an_llm_decisions_name_is_stored_clean_or_not_at_all(
    tmp_path: Path, server: FakeOpenAI, name: str, stored: str | None
) -> None:
    server.reset()
    server.default = Reply('{"name": "Home Garden Care", "summary": "Tomatoes and compost."}')
    mem = llm_memory(tmp_path, server)
    try:
        mem.add_many(exchanges("garden", T0, "s1")[:4])
        mem.engine.trees.drain()
        mem.engine.working.wait()
        session = mem.tree().children[0]
        server.queue(Reply(json.dumps({"decision": "new", "parent": session.id, "name": name})))
        mem.add("My car engine rattles, what could it be?", session="s1")
        new_topic = mem.tree().children[0].children[-1]
        assert new_topic.origin == "llm"  # the decision was used ...
        if stored is None:  # ... with the extractive name instead of the unusable one
            assert new_topic.name != name.strip() and new_topic.name
        else:
            assert new_topic.name == stored
    finally:
        mem.close()


def test_an_llm_nesting_every_exchange_deeper_stops_at_the_depth_limit(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    from arbormem.tree.grow import MAX_DEPTH

    server.reset()
    server.default = Reply('{"name": "Home Garden Care", "summary": "Tomatoes and compost."}')
    mem = llm_memory(tmp_path, server)
    try:
        for i in range(MAX_DEPTH + 4):
            active = (
                mem.backend.tree_state(mem.backend.thread("default", "default")).active_id
                if mem.backend.thread("default", "default")
                else None
            )
            answer = {"decision": "new", "parent": active or "root", "name": f"Level {i}"}
            server.queue(Reply(json.dumps(answer)))
            mem.add(f"question number {i} about something", session="s1")
            mem.add(f"answer number {i}", role="assistant", session="s1")
        depth = max(
            len([n for n in node.path]) for node in mem.tree().walk() if node.kind == "topic"
        )
        assert depth <= MAX_DEPTH
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []
        assert len(mem.messages()) == 2 * (MAX_DEPTH + 4)
    finally:
        mem.close()


def test_an_llm_name_answered_after_the_tree_moved_keeps_the_move(mem: Memory) -> None:
    # The background naming reads a topic, waits for the LLM, then writes: a move made
    # meanwhile (width control grouping the topic) must survive the write.
    for day in range(3):
        mem.add_many(exchanges(["trip", "car", "garden"][day], T0 + timedelta(days=day), f"s{day}"))
    thread = mem.backend.thread("default", "default")
    assert thread is not None
    before = next(n for n in mem.backend.tree_nodes(thread, kinds=["topic"]) if n.frozen)
    moved = mem.backend.tree_nodes(thread, ids=[before.id])[0]
    session = [n for n in mem.backend.tree_nodes(thread, kinds=["topic"]) if n.parent_id is None]
    target = next(n for n in session if n.id not in (before.id, before.parent_id))
    moved.parent_id = target.id
    mem.backend.put_nodes(thread, [moved])
    assert mem.engine.grower.apply_description(
        thread, before, "Lisbon Trip Plans", "Flights and hotels."
    )
    after = mem.backend.tree_nodes(thread, ids=[before.id])[0]
    assert (after.name, after.origin, after.parent_id) == ("Lisbon Trip Plans", "llm", target.id)
    # A topic whose description changed meanwhile keeps the newer one.
    assert not mem.engine.grower.apply_description(thread, before, "Stale Name", "Stale.")


def test_navigation_tools_answer_any_arguments_with_bounded_results() -> None:
    from arbormem.models import Message
    from arbormem.tree.navigate import MAX_RESULT_CHARS, TreeNavigator

    root = TopicNode(0, "root", "ROOT", "", 0, 49, None, None, 50, False)
    big = [
        Message(id=str(i), role="user", content="x" * 1_000_000, timestamp=T0, session="s", index=i)
        for i in range(50)
    ]
    nav = TreeNavigator(lambda: root, lambda a, b: big[a:b])
    calls = [
        ("view_node", [1, 2]),
        ("view_node", b'{"path": []}'),
        ("view_node", '{"path": [' + "1" * 5000 + "]}"),
        ("view_node", "[" * 100_000),
        ("view_node", {"path": [0], "extra": 1}),
        ("get_messages", {"start": 2**63, "end": 2**63 + 1}),
        ("get_messages", {"start": False, "end": True}),
    ]
    for name, args in calls:
        assert "error" in nav.call(name, args)  # type: ignore[arg-type]
    assert nav.call("view_node", {})["kind"] == "root"  # no path: the root
    result = nav.call("get_messages", {"start": 0, "end": 50})
    assert sum(len(m["content"]) for m in result["messages"]) <= MAX_RESULT_CHARS
    assert all("truncated" in m for m in result["messages"])


# -- reorganisation ------------------------------------------------------------------------


def test_reorganize_merges_related_branches_logs_and_undoes(mem: Memory) -> None:
    # The same subject in three sessions, separated by other subjects.
    plan = ["trip", "garden", "trip", "car", "trip", "garden"]
    for day, topic in enumerate(plan):
        mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
    before = mem.render_tree("json")
    result = mem.reorganize(similarity_threshold=0.5)
    assert set(result.to_dict()) >= {"merged", "pruned", "skipped", "duration_secs"}
    assert result.merged >= 1
    thread = mem.backend.thread("default", "default")
    assert thread is not None
    assert mem.backend.check_tree(thread, 10) == []
    assert len(mem.messages()) == 48  # raw messages untouched
    log = mem.tree_log()
    assert log[0].kind == "reorganize" and log[0].stats["merged"] == result.merged
    mem.undo_reorganize(result.log_id)
    restored = json.loads(mem.render_tree("json"))
    original = json.loads(before)

    def shape(node: dict) -> list:
        return [(c["kind"], c["first_index"], shape(c)) for c in node.get("children", [])]

    assert shape(restored) == shape(original)
    assert mem.tree_log()[0].undone_at is not None


def test_archiving_and_restoring_do_not_block_an_undo_but_forgetting_does(
    mem: Memory,
) -> None:
    plan = ["trip", "garden", "trip", "car", "trip", "garden"]
    for day, topic in enumerate(plan):
        mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
        mem.add_many(
            [
                {"content": "thanks!", "timestamp": T0 + timedelta(days=day, hours=1)},
                {
                    "role": "assistant",
                    "content": "any time!",
                    "timestamp": T0 + timedelta(days=day, hours=1, seconds=5),
                },
            ],
            session=f"s{day}",
        )
    first = mem.reorganize(similarity_threshold=0.5)
    assert first.merged >= 1
    pruned = mem.reorganize(similarity_threshold=0.99, prune_trivial_leaves=True)
    assert pruned.pruned >= 1
    # Both raise the thread's generation, which undo used to read as "messages were
    # forgotten since": neither reorganisation could then be undone.
    assert mem.restore_archived() > 0
    assert mem.undo_reorganize(pruned.log_id).already is False
    assert mem.undo_reorganize(first.log_id).already is False
    again = mem.reorganize(similarity_threshold=0.5)
    assert again.merged >= 1
    mem.forget(mem.messages()[0].id)  # a message the reorganisation saw
    with pytest.raises(TreeError, match="forgotten since"):
        mem.undo_reorganize(again.log_id)


def _shape(node: dict) -> list:
    kids = node.get("children", [])
    return [(c["kind"], c["first_index"], c["last_index"], _shape(c)) for c in kids]


def test_undo_right_after_a_reorganisation_restores_width_groups(mem: Memory) -> None:
    # 24 sessions: the root's oldest ones sit in width groups, and a merge could move
    # a group's last session out, deleting a group the undo cannot bring back.
    for day in range(24):
        mem.add_many(
            exchanges(["trip", "car", "garden"][day % 3], T0 + timedelta(days=day), f"s{day}")
        )
    thread = mem.backend.thread("default", "default")
    assert thread is not None
    before = json.loads(mem.render_tree("json"))
    assert any(c["kind"] == "group" for c in before["children"])
    result = mem.reorganize(similarity_threshold=0.5)
    assert result.merged >= 1 and mem.backend.check_tree(thread, 10) == []
    mem.undo_reorganize(result.log_id)
    assert mem.backend.check_tree(thread, 10) == []
    assert _shape(json.loads(mem.render_tree("json"))) == _shape(before)


def test_an_undo_that_would_break_the_tree_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    m = Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), tree=TreeConfig(max_children=4))
    for day, topic in enumerate(["trip", "garden", "trip", "car"]):
        m.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
    result = m.reorganize(similarity_threshold=0.5)
    assert result.merged >= 1
    for day in range(4, 8):  # the root fills up again: the moved topic has no room back
        m.add_many(exchanges(["car", "garden"][day % 2], T0 + timedelta(days=day), f"s{day}"))
    thread = m.backend.thread("default", "default")
    assert thread is not None
    before = m.render_tree("json")
    with pytest.raises(TreeError, match="cannot be undone"):
        m.undo_reorganize(result.log_id)
    assert m.render_tree("json") == before and m.backend.check_tree(thread, 4) == []
    assert m.tree_log()[0].undone_at is None
    # After a forget the logged node ids may belong to other nodes: refused too.
    second = m.reorganize(similarity_threshold=0.5)
    m.forget(session="s7")
    with pytest.raises(TreeError, match="forgotten"):
        m.undo_reorganize(second.log_id)
    m.close()


def test_a_reorganisation_of_a_forgotten_thread_writes_nothing(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), user="alice")
    m.add_many(exchanges("trip", T0, "s1"))
    thread = m.backend.thread("alice", "default")
    assert thread is not None
    m.forget(user="alice")
    result = m.engine.trees.reorganizer.run(thread)  # what the idle worker does with a stale handle
    assert result["aborted"] == "the thread was forgotten"
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("SELECT COUNT(*) FROM tree_state").fetchone() == (0,)
    assert conn.execute("SELECT COUNT(*) FROM tree_log").fetchone() == (0,)
    conn.close()
    m.close()


def add_a_trivial_exchange(mem: Memory) -> None:
    """Two sessions whose only trivial exchange is "ok" / "great, anything else?"."""
    mem.add_many(
        [
            {"role": "user", "content": "ok", "session": "s1", "timestamp": T0},
            {
                "role": "assistant",
                "content": "great, anything else?",
                "session": "s1",
                "timestamp": T0,
            },
            {
                "role": "user",
                "content": "Please explain in detail how the tomato blight spreads "
                "between plants in a humid greenhouse and what I should do about it this week",
                "session": "s1",
                "timestamp": T0,
            },
            {
                "role": "assistant",
                "content": "Blight spreads by spores in humid air.",
                "session": "s1",
                "timestamp": T0,
            },
        ]
    )
    long_reply = (
        "Check the brake pads first, then the discs for scoring, and if the squeal "
        "only happens in the cold morning it is usually moisture on the rotors that "
        "burns off after a few stops, which is harmless."
    )
    mem.add_many(
        [
            {
                "role": "user",
                "content": "Why do my car brakes squeal?",
                "session": "s2",
                "timestamp": T0 + timedelta(days=1),
            },
            {
                "role": "assistant",
                "content": long_reply,
                "session": "s2",
                "timestamp": T0 + timedelta(days=1),
            },
            {
                "role": "user",
                "content": "Thanks, and the tyres?",
                "session": "s2",
                "timestamp": T0 + timedelta(days=1),
            },
        ]
    )


def test_trivial_exchanges_are_soft_archived_and_restorable(mem: Memory) -> None:
    add_a_trivial_exchange(mem)
    result = mem.reorganize(prune_trivial_leaves=True)
    assert result.pruned == 1
    assert all(h.message.content != "ok" for h in mem.search("ok anything else", k=20))
    assert len(mem.messages()) == 7  # kept
    mem.undo_reorganize(result.log_id)
    assert any(h.message.content == "ok" for h in mem.search("ok anything else", k=20))


def test_the_full_text_search_leaves_archived_turns_out(mem: Memory) -> None:
    add_a_trivial_exchange(mem)
    thread = mem.backend.thread(mem.scope.user, mem.scope.agent)
    assert thread is not None
    # "ok" is a filler, never indexed (see arbormem.text): the reply's words are.
    before = mem.backend.lexical_search([thread], "turn", ["anyth"], 10)
    assert len(before) == 1
    assert mem.reorganize(prune_trivial_leaves=True).pruned == 1
    assert mem.backend.lexical_search([thread], "turn", ["anyth"], 10) == []


def test_archived_exchanges_stay_archived_through_export_and_import(
    mem: Memory, tmp_path: Path
) -> None:
    add_a_trivial_exchange(mem)
    assert mem.reorganize(prune_trivial_leaves=True).pruned == 1
    data = mem.export()
    flagged = [
        m["content"]
        for t in data.document["threads"]
        for s in t["sessions"]
        for m in s["messages"]
        if m.get("archived")
    ]
    assert flagged == ["ok", "great, anything else?"]
    copy = Memory(tmp_path / "copy.db", embedder=HashingEmbedder(64))
    copy.import_(data)
    assert all(h.message.content != "ok" for h in copy.search("ok anything else", k=20))
    assert len(copy.messages()) == len(mem.messages())
    assert copy.restore_archived() == 2
    assert any(h.message.content == "ok" for h in copy.search("ok anything else", k=20))
    data.document["threads"][0]["sessions"][0]["messages"][0]["archived"] = "yes"
    with pytest.raises(InputError, match="archived"):
        Memory(tmp_path / "third.db", embedder=HashingEmbedder(64)).import_(data)
    copy.close()


def test_archived_marks_survive_a_message_joining_the_exchange(mem: Memory, tmp_path: Path) -> None:
    """Imported last, an archived exchange is the copy's open one; a reply joins it.
    Its messages stay archived there, and the copy's export still marks them."""
    add_a_trivial_exchange(mem)
    mem.reorganize(prune_trivial_leaves=True)
    for m in mem.messages()[2:]:
        mem.forget(m.id)
    with Memory(tmp_path / "copy.db", embedder=HashingEmbedder(64), llm=None) as copy:
        assert copy.import_(mem.export()).archived == 2
        copy.add(
            "and one more thing about the greenhouse",
            role="assistant",
            session="s1",
            timestamp=T0,
        )
        flagged = [
            m["content"]
            for t in copy.export().document["threads"]
            for s in t["sessions"]
            for m in s["messages"]
            if m.get("archived")
        ]
        assert flagged == ["ok", "great, anything else?"]


def test_an_import_says_what_it_could_not_archive(mem: Memory, tmp_path: Path) -> None:
    add_a_trivial_exchange(mem)
    mem.reorganize(prune_trivial_leaves=True)
    data = mem.export()
    with Memory(tmp_path / "flat.db", embedder=HashingEmbedder(64), llm=None, tree=False) as flat:
        counts = flat.import_(data)
    assert (counts.archived, counts.not_archived) == (0, 2)
    with Memory(tmp_path / "tree.db", embedder=HashingEmbedder(64), llm=None) as tree:
        counts = tree.import_(data)
    assert (counts.archived, counts.not_archived) == (2, 0)


def test_an_archived_exchange_reaches_search_through_no_neighbour(mem: Memory) -> None:
    mem.add_many(
        [
            {"role": "user", "content": "thanks, the swordfish code worked", "session": "s1"},
            {"role": "assistant", "content": "any time!", "session": "s1"},
            {
                "role": "user",
                "content": "Now please plan the kayak trip to Lake Tahoe for next weekend with "
                "my two brothers and our dog, including where to rent the boats",
                "session": "s1",
            },
            {
                "role": "assistant",
                "content": "For the kayak trip to Lake Tahoe, rent boats at the north shore "
                "marina, park at the public lot and bring a life vest for the dog.",
                "session": "s1",
            },
        ]
    )
    mem.add_many(
        [
            {
                "role": "user",
                "content": "Different subject: my tax forms are due in April and I need the "
                "accountant's phone number again please",
                "session": "s2",
            },
            {
                "role": "assistant",
                "content": "The accountant is in your contacts under Smith; the forms are due "
                "on April 15 so book a slot soon.",
                "session": "s2",
            },
        ]
    )

    def swordfish() -> str:
        return mem.search("swordfish code", k=1)[0].message.content

    assert swordfish().startswith("thanks")
    assert mem.reorganize(prune_trivial_leaves=True).pruned == 1
    # Neither the neighbouring turns' windows nor their topic's content hold its words.
    # (Dense search still offers its nearest turns, on no word of the archived one.)
    hits = mem.search("swordfish code", k=10)
    assert not any(v for h in hits for k, v in h.signals.items() if k.startswith("bm_"))
    top = mem.search("kayak trip Lake Tahoe", k=1, neighbors=2)[0]
    trivial = {"thanks, the swordfish code worked", "any time!"}
    assert top.neighbors and not trivial & {n.content for n in top.neighbors}
    assert mem.restore_archived() == 2
    assert swordfish().startswith("thanks")
    top = mem.search("kayak trip Lake Tahoe", k=1, neighbors=3)[0]
    assert trivial <= {n.content for n in top.neighbors}


def test_archived_exchanges_survive_a_rebuild_and_can_be_restored(tmp_path: Path) -> None:
    path = tmp_path / "archived.db"
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        add_a_trivial_exchange(mem)
        log_id = mem.reorganize(prune_trivial_leaves=True).log_id
    conn = sqlite3.connect(path)
    conn.execute("UPDATE tree_nodes SET parent_id = 999999 WHERE kind = 'leaf'")
    conn.commit()
    conn.close()
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:

        def found() -> bool:
            return any(h.message.content == "ok" for h in mem.search("ok anything else", k=20))

        assert not found()  # the first search rebuilds the tree; "ok" stays archived
        assert mem.tree_log()[0].kind == "rebuild"
        archived = [n for n in TopicNode.walk(mem.tree()) if n.archived]
        assert [m.content for n in archived for m in n.messages] == ["ok", "great, anything else?"]
        with pytest.raises(TreeError, match="rebuilt"):
            mem.undo_reorganize(log_id)
        assert mem.restore_archived() == 2
        assert found() and not any(n.archived for n in TopicNode.walk(mem.tree()))


def test_a_crash_during_reorganisation_leaves_the_tree_as_it_was(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for day, topic in enumerate(["trip", "garden", "trip", "car", "trip"]):
        mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
    before = mem.render_tree("json")

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mem.backend, "log_tree", boom)
    with pytest.raises(RuntimeError):
        mem.reorganize(similarity_threshold=0.5)
    monkeypatch.undo()
    assert mem.render_tree("json") == before


def test_idle_threads_are_reorganised_in_the_background(tmp_path: Path) -> None:
    config = TreeConfig(reorganize_idle_seconds=0.2)
    with Memory(tmp_path / "bg.db", embedder=HashingEmbedder(64), tree=config, llm=None) as mem:
        done = threading.Event()
        original = mem.engine.trees.reorganize

        def spy(*args: object, **kwargs: object) -> object:
            out = original(*args, **kwargs)  # type: ignore[arg-type]
            done.set()
            return out

        mem.engine.trees.reorganize = spy  # type: ignore[method-assign]
        for day, topic in enumerate(["trip", "garden", "trip"]):
            mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
        assert done.wait(timeout=30), "no background reorganisation happened"
        assert mem.tree_log()[0].kind == "reorganize"


def saved_topic_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[tuple[int | None, str]]]:
    """A store of four sessions whose topic vectors were saved beside it, and the
    (topic id, summary) of its two best paths for "tomato compost"."""
    import arbormem.tree.recall as tree_recall

    monkeypatch.setattr(tree_recall, "SAVE_AFTER", 1)
    db = tmp_path / "t.db"
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        for day, topic in enumerate(["garden", "car", "trip", "garden"]):
            mem.add_many(exchanges(topic, T0 + timedelta(days=day), f"s{day}"))
        expected = [(p.topic.id, p.topic.summary) for p in mem.topic_paths("tomato compost", k=2)]
    return db, expected


def test_topic_vectors_are_saved_for_the_next_process_and_forgotten_with_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, expected = saved_topic_vectors(tmp_path, monkeypatch)
    saved = list(tmp_path.glob("t.db.ann/topics-*.npz"))
    assert len(saved) == 1

    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        asked: list[str] = []
        real = mem.backend.vectors

        def counting(model_id: str, chashes: Sequence[str]) -> dict:
            asked.extend(chashes)
            return real(model_id, chashes)

        monkeypatch.setattr(mem.backend, "vectors", counting)
        found = mem.topic_paths("tomato compost", k=2)
        assert [(p.topic.id, p.topic.summary) for p in found] == expected
        assert asked == []  # every topic vector came from the saved file
        mem.forget(session="s3")
    assert not saved[0].exists()


def test_damaged_saved_topic_vectors_are_read_again_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db, expected = saved_topic_vectors(tmp_path, monkeypatch)
    (saved,) = tmp_path.glob("t.db.ann/topics-*.npz")
    whole = saved.read_bytes()
    # A flipped byte (the zip's checksum catches it) and a file cut short used to fail
    # every topic search with zipfile.BadZipFile.
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    # Damage in the zip's directory reads as an unknown compression method, or as an
    # encrypted member: NotImplementedError and RuntimeError, not BadZipFile.
    entry = whole.find(b"PK\x01\x02")
    method = bytearray(whole)
    method[entry + 10 : entry + 12] = (99).to_bytes(2, "little")
    encrypted = bytearray(whole)
    encrypted[entry + 8] |= 1
    for damaged in (bytes(flipped), whole[: len(whole) // 2], bytes(method), bytes(encrypted)):
        saved.write_bytes(damaged)
        caplog.clear()
        with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
            found = mem.topic_paths("tomato compost", k=2)
            assert [(p.topic.id, p.topic.summary) for p in found] == expected
        assert "unusable" in caplog.text


def test_node_briefs_agree_with_the_stored_nodes(tmp_path: Path) -> None:
    with Memory(tmp_path / "b.db", embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
        thread = mem.backend.thread("default", "default")
        assert thread is not None
        full = mem.backend.tree_nodes(thread, kinds=["topic", "group"])
        briefs = mem.backend.node_briefs(thread, ["topic", "group"])
        assert len(full) == len(briefs) > 2
        by_id = {b.id: b for b in briefs}
        for node in full:
            b = by_id[node.id]
            assert (b.parent_id, b.kind, b.first_index, b.last_index) == (
                node.parent_id,
                node.kind,
                node.first_index,
                node.last_index,
            )
            assert (bool(b.frozen), bool(b.archived), b.chash) == (
                node.frozen,
                node.archived,
                node.chash,
            )


def test_topics_left_growing_by_a_forget_still_answer_topic_paths(tmp_path: Path) -> None:
    with Memory(tmp_path / "g.db", embedder=HashingEmbedder(64), llm=None) as mem:
        msgs = []
        for i, t in enumerate(["tomato seedlings repotting", "compost tomato beds"]):
            at = T0 + timedelta(minutes=2 * i)
            msgs.append({"role": "user", "content": f"Question about {t}?", "timestamp": at})
            msgs.append({"role": "assistant", "content": f"Advice on {t}.", "timestamp": at})
        mem.add_many(msgs, session="s1")
        last = mem.add("And watering tomato beds?", session="s1", timestamp=T0 + timedelta(hours=1))
        assert mem.topic_paths("tomato", k=3, threshold=0.0)
        # Forgetting the open exchange leaves its topics unfrozen, off the active path.
        mem.forget(last.id)
        mem.add("The car needs an oil change.", session="s1", timestamp=T0 + timedelta(hours=2))
        names = [p.topic.name.lower() for p in mem.topic_paths("tomato", k=3, threshold=0.0)]
        assert any("tomato" in n for n in names)


def garden_store(path: Path) -> Path:
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
    return path


def count_checks(monkeypatch: pytest.MonkeyPatch, fail_first: Exception | None = None) -> list[int]:
    """Count the tree checks run from now on; the first one raises ``fail_first``."""
    import arbormem.tree.check as tree_check

    real = tree_check.check
    calls: list[int] = []

    def counting(grower: object, thread: object) -> object:
        calls.append(1)
        if fail_first is not None and len(calls) == 1:
            raise fail_first
        return real(grower, thread)  # type: ignore[arg-type]

    monkeypatch.setattr(tree_check, "check", counting)
    return calls


def test_a_failing_tree_check_stops_writes_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = garden_store(tmp_path / "c.db")
    calls = count_checks(monkeypatch, fail_first=RuntimeError("disk hiccup"))
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        with pytest.raises(RuntimeError, match="disk hiccup"):
            mem.add("the roses need pruning", session="s1")
        assert len(mem.messages()) == 8  # nothing written on an unchecked tree
        mem.add("the roses need pruning", session="s1")  # checked again, then written
        assert len(mem.messages()) == 9 and len(calls) == 2


def test_a_background_check_on_a_memory_store_does_not_block_an_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    import arbormem.tree.check as tree_check

    mem = Memory(":memory:", embedder=HashingEmbedder(64), llm=None)
    mem.add("hello about tomatoes in the garden")
    data = mem.export()
    thread = mem.backend.thread("default", "default")
    assert thread is not None
    mem.engine.checks._checks.clear()  # as if the store had just been opened
    real = tree_check.OpenChecks._run

    def late(self: tree_check.OpenChecks, job: object, background: bool) -> None:
        time.sleep(0.3)  # the background check starts after the import took the store
        real(self, job, background)  # type: ignore[arg-type]

    monkeypatch.setattr(tree_check.OpenChecks, "_run", late)
    assert mem.search("tomatoes")  # starts the check in the background
    result: list[dict] = []
    worker = threading.Thread(target=lambda: result.append(mem.import_(data)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "import_ and the background check deadlocked"
    assert result and result[0].skipped == 1
    mem.close()


def test_a_tree_unchanged_since_it_passed_the_check_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = garden_store(tmp_path / "k.db")
    checked = count_checks(monkeypatch)

    def open_and_search() -> None:
        with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
            assert mem.search("tomato")
            assert mem.tree_problems == []

    open_and_search()
    assert len(checked) == 1  # the adds changed the tree since the last check
    open_and_search()
    assert len(checked) == 1  # unchanged since it passed: not read again
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add("the roses need pruning", session="s1")  # a write clears the mark
    assert len(checked) == 1  # (this process's check was skipped: nothing changed before)
    open_and_search()
    assert len(checked) == 2


def test_a_growing_topics_content_index_lags_a_little_and_catches_up_on_close(
    tmp_path: Path,
) -> None:
    from arbormem.text import analyze

    path = tmp_path / "g.db"
    mem = Memory(path, embedder=HashingEmbedder(64), llm=None, tree=NO_DRIFT)

    def content(node: TopicNode) -> list[str]:
        inside = [m for m in mem.messages() if node.first_index <= m.index <= node.last_index]
        return [t for m in inside for t in analyze(m.text)]

    def indexed(node: TopicNode) -> list[str]:
        return mem.backend.node_docs("segment", [node.id]).get(node.id, "").split()

    old = mem.add("an old note about taxes", session="s0", timestamp=T0 - timedelta(days=3))
    # One subject, one exchange per call; 23 exchanges end between two re-indexings
    # (at 24 the last one lands exactly on one).
    turns = (exchanges("garden", T0, "s1") * 6)[:46]
    lagged = False
    for i in range(0, len(turns), 2):
        pair = [
            dict(t, timestamp=T0 + timedelta(minutes=i + j)) for j, t in enumerate(turns[i : i + 2])
        ]
        mem.add_many(pair)
        # Indexed as it grows, a little behind: a prefix of its content, most of it.
        # (Width-control groups have no content index of their own.)
        for node in [n for n in topics(mem.tree()) if n.kind == "topic"]:
            full, done = content(node), indexed(node)
            assert done == full[: len(done)] and len(done) >= 0.75 * len(full)
            lagged = lagged or len(done) < len(full)
    assert lagged
    growing = [n for n in topics(mem.tree()) if not n.frozen]
    assert any(len(indexed(n)) < len(content(n)) for n in growing)
    mem.forget(old.id)  # moves the tree on under the growing topics: still caught up
    mem.close()
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as mem:
        assert all(indexed(n) == content(n) for n in growing)


def test_pictures_escape_what_their_languages_would_read() -> None:
    name = 'Crème "Brûlée" <i>x</i> #35; a\\b\nnext'
    topic = TopicNode(2, "topic", name, "", 0, 3, None, None, 4, True)
    root = TopicNode(0, "root", "", "", 0, 3, None, None, 4, False, children=[topic])
    dot = to_dot(root)
    assert 'n2 [label="Crème \\"Brûlée\\" <i>x</i> #35; a\\\\b next\\n0-3"];' in dot
    mermaid = to_mermaid(root)
    assert 'n2["Crème #34;Brûlée#34; #60;i#62;x#60;/i#62; #35;35; a\\b next<br/>0-3"]' in mermaid
    # A label opening with a backtick is Markdown to Mermaid, and failed to parse.
    ticked = TopicNode(3, "topic", "`cargo build` flags", "", 4, 5, None, None, 2, True)
    root.children.append(ticked)
    assert 'n3["#96;cargo build#96; flags<br/>4-5"]' in to_mermaid(root)


def test_an_llm_topic_description_is_cleaned_and_bounded() -> None:
    from arbormem.tree.summarize import validate_digest

    check = validate_digest(60)
    name, summary = check({"name": "Tab\there\nnewline", "summary": "word " * 20 + "y" * 20_000})
    assert name == "Tab here newline" and len(summary) <= 60 * 8
    for bad in ("x" * 3000, "Bell\x07 Esc\x1b[2J Nul\x00 &amp; &lt;b&gt;", "<i>Tag</i> name"):
        with pytest.raises(ValueError):
            check({"name": bad, "summary": "fine"})


@pytest.mark.parametrize(
    ("setting", "fix"),
    [
        ({"max_children": 2}, "max_children must be a whole number of at least 3"),
        ({"max_children": 4.5}, "max_children must be a whole number"),
        ({"split_threshold": float("nan")}, "split_threshold must be a number from -1.0 to 1.0"),
        ({"dense_weight": 1.5}, "dense_weight must be a number from 0.0 to 1.0"),
        ({"min_exchanges": 6, "max_exchanges": 4}, "max_exchanges (4) is below min_exchanges (6)"),
        ({"reorganize_idle_seconds": -1}, "reorganize_idle_seconds must be a number of at least"),
    ],
)
def test_unusable_tree_settings_are_refused_by_name(setting: dict[str, float], fix: str) -> None:
    # max_children=2 used to grow nodes past the width rule (one of two children is
    # always on the active path, so none could be grouped), and every open then
    # found the tree broken and rebuilt it.
    with pytest.raises(ConfigError, match=re.escape(fix)):
        TreeConfig(**setting)  # type: ignore[arg-type]


def test_the_narrowest_tree_allowed_keeps_the_width_rule(tmp_path: Path) -> None:
    # A new subject every exchange: with max_children=2 this grew a node to 3 children.
    config = TreeConfig(max_children=3)
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), tree=config) as mem:
        for i in range(120):
            role = "user" if i % 2 == 0 else "assistant"
            mem.add(f"zz{i // 2} yy{i // 2} message {i}", role=role)
        thread = mem.backend.thread(mem.scope.user, mem.scope.agent)
        assert thread is not None
        assert mem.backend.check_tree(thread, 3) == []


def test_a_huge_message_is_named_from_its_beginning() -> None:
    from arbormem.models import Message
    from arbormem.tree.summarize import DIGEST_CHARS, digest_messages

    head = "We packed the kayak paddles and the kayak spray deck for the river. " * 250
    tail = "Zebra herds crossed the zebra plains near the zebra reserve. " * 4000
    assert len(head) < DIGEST_CHARS < len(head) + len(tail)
    message = Message(
        id="m1",
        index=0,
        role="user",
        content=head + tail,
        timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc),
        session="s1",
    )
    digest = digest_messages([message], {}, 1)
    assert "Kayak" in digest.name and "Zebra" not in digest.name, digest.name


def test_topic_paths_look_up_only_the_terms_the_posting_budget_affords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arbormem.recall.retriever import RecallConfig

    with Memory(
        tmp_path / "m.db", embedder=HashingEmbedder(64), recall=RecallConfig(posting_budget=20)
    ) as mem:
        for i in range(60):
            role = "user" if i % 2 == 0 else "assistant"
            mem.add(
                f"weather chat {i} about weather {'and the kayak trip' if i == 31 else ''}",
                role=role,
            )
        searched: list[list[str]] = []
        search = mem.backend.node_search

        def spy(threads: object, key: str, terms: list[str], *args: object, **kw: object) -> object:
            if key == "topic":
                searched.append(list(terms))
            return search(threads, key, terms, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(mem.backend, "node_search", spy)
        paths = mem.topic_paths("weather kayak", k=1, drill=False)
        assert searched == [["kayak"]]  # "weather" is in every turn: past the budget
        assert paths and paths[0].topic.first_index <= 31 <= paths[0].topic.last_index


@pytest.mark.parametrize(
    ("texts", "wanted"),
    [
        (
            [
                "We're flying to New York next month!",
                "New York in spring is great, see Central Park.",
                "Yes, New York has so much to see.",
            ],
            "New York",
        ),
        (
            [
                "I want to teach my kids about kindness.",
                "Kindness is contagious; small acts of kindness matter.",
                "We started a kindness jar at home.",
            ],
            "Kindness",
        ),
        (
            ["Anything new? I baked sourdough bread.", "Anything new with the sourdough starter?"],
            "Sourdough",
        ),
    ],
)
def test_vague_words_stay_out_of_names_but_names_and_nouns_built_on_them_do_not(
    texts: list[str], wanted: str
) -> None:
    from arbormem.models import Message
    from arbormem.tree.summarize import digest_messages

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    messages = [
        Message(id=str(i), role="user", content=t, timestamp=at, session="s", index=i)
        for i, t in enumerate(texts)
    ]
    name = digest_messages(messages, {}, 1000).name
    assert wanted in name and "Anything" not in name, name


def test_a_vague_word_does_not_come_back_through_a_noun_sharing_its_stem() -> None:
    from arbormem.models import Message
    from arbormem.tree.summarize import digest_messages

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    texts = [
        "She gave me a kind gesture, kind words and a kind smile.",
        "Kindness matters, kindness at the shelter.",
    ]
    messages = [
        Message(id=str(i), role="user", content=t, timestamp=at, session="s", index=i)
        for i, t in enumerate(texts)
    ]
    digest = digest_messages(messages, {}, 100)
    # "kindness" stems to "kind": its weight used to bring back the vague "kind",
    # named ("Gesture Kind Words") and listed as a keyphrase.
    assert "Kind " not in digest.name + " " and "kind" not in digest.keyphrases
    assert "Kindness" in digest.keyphrases


ANOTHER_WRITER = """
import sys
from datetime import datetime, timezone
from arbormem import Memory
from arbormem.embed import HashingEmbedder
with Memory(sys.argv[1], embedder=HashingEmbedder(64), llm=None) as mem:
    mem.add("tomato seedlings need water", timestamp=datetime(2026, 1, 5, 9, 2, tzinfo=timezone.utc))
"""


def test_a_rolled_back_batch_leaves_no_stale_tree_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "stale.db"
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add("planning the garden beds", timestamp=T0)
        mem.add("sure, let's plan", role="assistant", timestamp=T0 + timedelta(seconds=5))

        def interrupted(done: int) -> None:
            raise KeyboardInterrupt

        batch = [
            {
                "content": f"car engine message {i} rattles belts",
                "role": ["user", "assistant"][i % 2],
                "timestamp": T0 + timedelta(seconds=60 + i),
            }
            for i in range(6)
        ]
        with pytest.raises(KeyboardInterrupt):
            mem.add_many(batch, progress=interrupted)  # grows the tree, then rolls back
        assert len(mem.messages()) == 2
        # Another process reaches the tree version the rolled-back batch had claimed.
        subprocess.run([sys.executable, "-c", ANOTHER_WRITER, str(db)], check=True, timeout=120)
        mem.add("and compost too", role="assistant", timestamp=T0 + timedelta(minutes=3))
        mem.add("what about mulch", timestamp=T0 + timedelta(minutes=4))
        thread = mem.backend.thread("default", "default")
        assert thread is not None
        # The batch's tree, never stored, was taken as current: counts and leaves broke.
        assert mem.backend.check_tree(thread, mem.tree_config.max_children) == []
        assert len(mem.messages()) == 5


def test_topic_paths_and_messages_refuse_bad_arguments_by_name(mem: Memory) -> None:
    mem.add_many(exchanges("garden", T0, "s1"))
    # k=-1 used to return every path but the last; 2.5 and None raised TypeError and
    # AttributeError; a position past 64 bits raised OverflowError.
    for kwargs, field in (
        ({"k": -1}, "k"),
        ({"k": 2.5}, "k"),
        ({"k": True}, "k"),
        ({"threshold": 2.0}, "threshold"),
        ({"threshold": "high"}, "threshold"),
    ):
        with pytest.raises(InputError, match=f"^'?{field}"):
            mem.topic_paths("tomato", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="query"):
        mem.topic_paths(None)  # type: ignore[arg-type]
    for name in ("start", "end", "limit"):
        with pytest.raises(InputError, match=name):
            mem.messages(**{name: 2**70})
        with pytest.raises(InputError, match=name):
            mem.messages(**{name: -1})
    assert len(mem.messages(start=2, end=4)) == 2 and mem.topic_paths("tomato", k=1)


def test_a_rebuild_never_leaves_an_archived_message_in_a_live_exchange(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    long = " ".join(["the tomato seedlings need repotting into larger pots"] * 4)
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add(long + "?", timestamp=T0)
        mem.add("Yes: " + long + ".", role="assistant", timestamp=T0 + timedelta(seconds=10))
        mem.add("thanks for the kumquat tip!", timestamp=T0 + timedelta(seconds=20))
        mem.add(
            "you're welcome, enjoy the kumquat!",
            role="assistant",
            timestamp=T0 + timedelta(seconds=30),
        )
        for day in range(1, 6):
            mem.add(long.replace("tomato", "car"), timestamp=T0 + timedelta(days=day))
            mem.add(long, role="assistant", timestamp=T0 + timedelta(days=day, seconds=10))
        assert mem.reorganize(similarity_threshold=1.0, prune_trivial_leaves=True).pruned
        assert not [h for h in mem.search("kumquat", k=10) if "kumquat" in h.message.content]
        mem.forget(mem.messages()[1].id)  # the garden answer: its question stands alone
    # A narrower tree is rebuilt from the messages on open. Replaying joined the lone
    # question and the archived thanks in one live exchange; the thanks stayed hidden
    # from search and restore_archived could not bring them back.
    with Memory(db, embedder=HashingEmbedder(64), llm=None, tree=TreeConfig(max_children=3)) as mem:
        mem.search("kumquat")  # opens the thread, which starts the check
        assert any("width rule" in p.reason for p in mem.tree_problems)  # rebuilt
        found = [h.message.content for h in mem.search("kumquat", k=10)]
        assert sum("kumquat" in text for text in found) == 2
        thread = mem.backend.thread("default", "default")
        assert thread is not None
        assert mem.backend.archived_leaves(thread, which="partly") == []


#: Small talk told apart by a word (a number in it would make it state a fact).
PARTY_WORDS = ("fun", "wild", "lovely", "loud")


def test_archived_small_talk_reaches_no_topic_path_or_prompt(mem: Memory) -> None:
    long = " ".join(["the tomato seedlings need repotting into larger pots"] * 4)
    for e in range(4):
        at = T0 + timedelta(minutes=2 * e)
        mem.add(long + "?", timestamp=at)
        mem.add("Yes: " + long + ".", role="assistant", timestamp=at + timedelta(seconds=10))
    for e in range(4):
        at = T0 + timedelta(days=1, minutes=2 * e)
        mem.add(f"Ha, the kumquat party was {PARTY_WORDS[e]}!", timestamp=at)
        mem.add(
            "Kumquat party indeed, glad you enjoyed it.",
            role="assistant",
            timestamp=at + timedelta(seconds=10),
        )
    for e in range(2):
        at = T0 + timedelta(days=2, minutes=2 * e)
        mem.add(long.replace("tomato", "car") + "?", timestamp=at)
        mem.add("Sure: " + long + ".", role="assistant", timestamp=at + timedelta(seconds=10))
    assert mem.reorganize(similarity_threshold=0.99, prune_trivial_leaves=True).pruned == 4
    assert not [h for h in mem.search("kumquat party", k=5) if "umquat" in h.message.content]
    # The topic of the archived exchanges kept its name and summary in recall: its
    # path, and the prompt, quoted what search no longer returned.
    assert not [p for p in mem.topic_paths("kumquat party", k=3) if "umquat" in p.render()]
    question = "what about the kumquat party?"
    assert "umquat" not in mem.context(question).text.replace(question, "")
    assert mem.restore_archived() == 8
    assert [p for p in mem.topic_paths("kumquat party", k=3) if "umquat" in p.render()]


def test_undo_is_refused_once_forgotten_nodes_ids_went_to_new_ones(mem: Memory) -> None:
    def add(topic: str, day: int, session: str, n: int = 4, hours: int = 0) -> None:
        mem.add_many(exchanges(topic, T0 + timedelta(days=day, hours=hours), session)[: 2 * n])

    add("trip", 0, "s0")
    add("garden", 1, "s1")
    add("car", 2, "s2")
    add("trip", 2, "s2", hours=3)
    add("garden", 3, "s3")
    done = mem.reorganize(similarity_threshold=0.5)
    assert done.merged >= 1
    mem.forget(session="s3")
    mem.forget(session="s2")
    # As many messages again: SQLite hands the freed row and node ids to the new ones,
    # the count of old messages is back where it was, and undo moved the new nodes.
    for day in range(4, 10):
        add("garden", day, f"s{day}", n=2)
    with pytest.raises(TreeError, match="forgotten since"):
        mem.undo_reorganize(done.log_id)


def test_an_archived_topic_on_the_active_path_comes_back_with_a_live_exchange(
    tmp_path: Path,
) -> None:
    src = Memory(tmp_path / "src.db", embedder=HashingEmbedder(64), llm=None)
    for e in range(3):
        at = T0 + timedelta(minutes=2 * e)
        src.add(f"Ha, the kumquat party was {PARTY_WORDS[e]}!", timestamp=at, session="s0")
        src.add(
            "Kumquat party indeed, glad you enjoyed it.",
            role="assistant",
            timestamp=at + timedelta(seconds=10),
            session="s0",
        )
    long = " ".join(["the tomato seedlings need repotting into larger pots"] * 4)
    for e in range(2):
        at = T0 + timedelta(days=1, minutes=2 * e)
        src.add(long + "?", timestamp=at, session="s1")
        src.add("Yes: " + long + ".", role="assistant", timestamp=at + timedelta(seconds=10))
    src.reorganize(similarity_threshold=0.99, prune_trivial_leaves=True)
    src.forget(session="s1")
    src.export(tmp_path / "x.json")
    src.close()
    # Imported, the archived small talk is the active path, and its topics archived.
    with Memory(tmp_path / "dst.db", embedder=HashingEmbedder(64), llm=None) as dst:
        dst.import_(tmp_path / "x.json")
    talk = " ".join(["glad you enjoyed the kumquat party, it was fun indeed"] * 3)
    at = T0 + timedelta(minutes=30)
    with Memory(tmp_path / "dst.db", embedder=HashingEmbedder(64), llm=None) as dst:
        dst.add(talk + "?", timestamp=at, session="s0")
        dst.add("Sure, " + talk + ".", role="assistant", timestamp=at + timedelta(seconds=10))
        # The new live exchange joined an archived topic, which stayed archived: its
        # path was out of recall.
        assert dst.topic_paths("kumquat party", k=3)
        thread = dst.backend.thread("default", "default")
        assert thread is not None
        assert dst.restore_archived() == 6
        dst.add(talk + "!", timestamp=at + timedelta(minutes=5), session="s0")
        # The next add wrote the cursor's stale copies back, archived again.
        assert not [n for n in dst.backend.tree_nodes(thread, kinds=["topic"]) if n.archived]


def test_shapes_read_in_one_pass_walk_the_tree_as_lazily_read_ones(tmp_path: Path) -> None:
    from arbormem.tree.recall import Outline

    config = TreeConfig(max_children=4)
    with Memory(tmp_path / "o.db", embedder=HashingEmbedder(64), tree=config, llm=None) as mem:
        daily_sessions(mem, 20)
        store = mem.backend
        thread = store.thread("default", "default")
        assert thread is not None
        every = store.node_briefs(thread)
        inner = [b for b in every if b.kind in ("topic", "group")]
        assert any(b.kind == "group" for b in inner) and any(b.kind == "leaf" for b in every)
        lazy, bulk = Outline(store, thread), Outline(store, thread)
        shapes = store.node_shapes(thread)
        assert shapes is not None and bulk.add_shapes(shapes) == len(every)
        node_briefs = store.node_briefs
        missing = max(b.id for b in every) + 1000
        walked: dict[str, tuple[list, set[int]]] = {}
        for name, outline in (("bulk", bulk), ("lazy", lazy)):
            asked: set[int] = set()

            def counting(t, kinds=None, ids=None, asked=asked):  # type: ignore[no-untyped-def]
                asked.update(ids or [])
                return node_briefs(t, kinds, ids)

            store.node_briefs = counting  # type: ignore[method-assign]
            seen = []
            for node_id in [b.id for b in every] + [missing]:
                chain = outline.lineage(node_id)
                seen.append(
                    (
                        node_id in outline,
                        chain,
                        [outline.kind(n) for n in chain],
                        outline.brief(node_id) if node_id != missing else None,
                    )
                )
            walked[name] = (seen, asked)
            store.node_briefs = node_briefs  # type: ignore[method-assign]
        assert walked["bulk"][0] == walked["lazy"][0]
        by_id = {b.id: b._replace(chash=None) for b in every}
        assert [s[3] for s in walked["lazy"][0][:-1]] == [by_id[b.id] for b in every]
        assert walked["lazy"][0][-1][:2] == (False, [])
        # Read in one pass, shapes cost no look-up: only the unknown id was asked for.
        assert {b.id for b in inner} <= walked["lazy"][1]
        assert walked["bulk"][1] == {missing}
        leaves = [b.id for b in every if b.kind == "leaf"]
        assert (
            bulk.parents([*leaves, missing])
            == lazy.parents(leaves)
            == {b.id: b.parent_id for b in every if b.kind == "leaf"}
        )


def test_a_large_threads_tree_shapes_are_preloaded_without_changing_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import arbormem.recall.retriever as recall

    config = TreeConfig(max_children=4)
    path = tmp_path / "p.db"
    with Memory(path, embedder=HashingEmbedder(64), tree=config, llm=None) as mem:
        daily_sessions(mem, 12)
    queries = ["tomato blight", "Lisbon tram tickets", "car brakes", "seafood in may"]

    def results(preload_from: int) -> tuple[list[list[tuple[str, dict]]], int]:
        monkeypatch.setattr(recall, "PRELOAD_FROM", preload_from)
        with Memory(path, embedder=HashingEmbedder(64), tree=config, llm=None) as mem:
            thread = mem.backend.thread("default", "default")
            assert thread is not None
            first = [(h.message.id, h.signals) for h in mem.search(queries[0])]
            outline = mem.engine.retriever.tree._nodes(thread).nodes  # type: ignore[union-attr]
            deadline = time.monotonic() + 30
            while preload_from < 10**9 and outline._bulk is None and time.monotonic() < deadline:
                time.sleep(0.01)
            shapes = len(outline._bulk) if outline._bulk is not None else 0
            rest = [[(h.message.id, h.signals) for h in mem.search(q)] for q in queries[1:]]
            return [first, *rest], shapes

    lazy, none = results(10**9)
    preloaded, shapes = results(50)
    assert none == 0 and shapes > 3
    assert preloaded == lazy and all(lazy)


def test_node_shapes_agree_with_node_briefs_and_stop_when_asked(tmp_path: Path) -> None:
    from arbormem.store.types import NodeShapes

    with Memory(tmp_path / "s.db", embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add_many(exchanges("garden", T0, "s1"))
        mem.add_many(exchanges("trip", T0 + timedelta(days=1), "s2"))
        store = mem.backend
        thread = store.thread("default", "default")
        assert thread is not None
        briefs = store.node_briefs(thread)
        read, built = store.node_shapes(thread), NodeShapes.of(briefs)
        assert read is not None and len(read) == len(built) == len(briefs) > 8
        for b in briefs:
            assert read.get(b.id) == built.get(b.id) == tuple(b._replace(chash=None))
        assert read.get(max(b.id for b in briefs) + 1) is None and read.get(-5) is None
        stop = threading.Event()
        stop.set()
        assert store.node_shapes(thread, stop) is None


REORGANIZE_AND_SHOW = """
import json, sys
from arbormem import Memory
from arbormem.embed import HashingEmbedder
with Memory(sys.argv[1], embedder=HashingEmbedder(16), llm=None) as mem:
    result = mem.reorganize(similarity_threshold=0.45, prune_trivial_leaves=True)
    result = result.to_dict()
    result.pop("duration_secs")
    print(json.dumps({"result": result, "tree": json.loads(mem.render_tree("json"))}))
"""


def test_reorganize_gives_the_same_tree_in_every_process(tmp_path: Path) -> None:
    """Two runs on identical copies gave different trees with the same counts: a
    summary's sentences were scored by summing term weights over a set of strings,
    whose order (and so the float sum, and so which of two equal sentences won)
    changed with each process's string hashing."""
    import random
    import shutil
    import subprocess
    import sys

    rng = random.Random(4)
    words = [
        "garden",
        "tomato",
        "compost",
        "car",
        "engine",
        "brakes",
        "Lisbon",
        "flights",
        "hotel",
        "snake",
        "code",
        "server",
        "coffee",
        "dog",
        "walk",
        "Maria",
        "Paris",
        "doctor",
        "Monday",
        "budget",
        "rent",
    ]
    base = tmp_path / "base.db"
    with Memory(base, embedder=HashingEmbedder(16), llm=None) as mem:
        at = T0
        for s in range(16):
            topic = rng.sample(words, 6)
            batch = []
            for i in range(rng.randint(4, 24)):
                at += timedelta(minutes=rng.choice([1, 2, 5, 40]))
                text = " ".join(rng.choice(topic) for _ in range(rng.choice([3, 8, 25])))
                batch.append(
                    {
                        "role": ("user", "assistant")[i % 2],
                        "content": text.capitalize() + ".",
                        "timestamp": at,
                        "speaker": rng.choice([None, "Ann", "Bo"]),
                    }
                )
            mem.add_many(batch, session=f"s{s}")
            at += timedelta(days=1)
    outputs = []
    for seed in ("1", "2", "3", "4"):
        copy = tmp_path / f"copy{seed}.db"
        shutil.copy(base, copy)
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", REORGANIZE_AND_SHOW, str(copy)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0]["result"]["merged"] > 0
    for other in outputs[1:]:
        assert other == outputs[0]


def test_a_growing_topic_is_named_without_what_was_forgotten_from_it(mem: Memory) -> None:
    # The grower holds the messages of its active topics, to name them when they
    # freeze without reading them back: a forget in between must reach that copy.
    mem.add_many(exchanges("garden", T0, "s1"))
    secret = mem.add(
        "Here is advice on the tomato seedlings in the blue flowerpot by the shed.",
        role="assistant",
        session="s1",
        timestamp=T0 + timedelta(minutes=9),
    )
    assert "flowerpot" in mem.render_tree("json")  # the view names the active topic
    mem.forget(secret.id)
    mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))  # freezes the garden topics
    named = mem.render_tree("json")
    assert "tomato" in named.lower()
    assert "flowerpot" not in named.lower() and "shed" not in named.lower()


def test_a_topic_named_after_the_store_was_reopened_matches_one_named_in_one_go(
    tmp_path: Path,
) -> None:
    # A cursor read back from the store (a new process) holds the active topics'
    # messages as the one that grew them did.
    def grow(path: Path, reopen: bool) -> str:
        mem = Memory(path, embedder=HashingEmbedder(64), llm=None)
        mem.add_many(exchanges("garden", T0, "s1")[:4])
        if reopen:
            mem.close()
            mem = Memory(path, embedder=HashingEmbedder(64), llm=None)
        mem.add_many(exchanges("garden", T0, "s1")[4:])
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))
        mem.add_many(exchanges("trip", T0 + timedelta(days=2), "s3"))
        out = [(n.name, n.summary, n.keyphrases) for n in TopicNode.walk(mem.tree())]
        mem.close()
        return json.dumps(out)

    assert grow(tmp_path / "a.db", reopen=True) == grow(tmp_path / "b.db", reopen=False)


def _checking_the_cursors_messages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Have every topic named from the messages its cursor held also read them from the
    store, and fail on any difference; returns the ids of the topics so named."""
    from arbormem.tree.naming import TopicNaming

    named: list[int] = []
    digest = TopicNaming.digest

    def checked(self, thread, node, children=None, messages=None, *, holds_leaf=False):  # type: ignore[no-untyped-def]
        if messages:
            stored = self.node_messages(thread, node, live=True)
            assert [m.id for m in messages] == [m.id for m in stored], node.id
            named.append(node.id)
        if holds_leaf:
            # Named without reading its children: a leaf must be among them.
            self._place_messages()
            kids = self.backend.tree_nodes(thread, parent=node.id)
            assert any(k.kind == "leaf" for k in kids), node.id
        return digest(self, thread, node, children, messages, holds_leaf=holds_leaf)

    monkeypatch.setattr(TopicNaming, "digest", checked)
    return named


def test_a_topic_that_gets_a_topic_below_it_is_named_from_all_its_messages(
    tmp_path: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cursor holds the messages of the topic exchanges join, to name it when it
    # freezes; an LLM may open a topic below it, whose messages are the parent's too:
    # the parent then reads them from the store.
    named = _checking_the_cursors_messages(monkeypatch)
    server.reset()
    server.default = Reply("not a description")  # names stay extractive
    mem = llm_memory(tmp_path, server)
    try:
        for i in range(4):
            thread = mem.backend.thread("default", "default")
            active = mem.backend.tree_state(thread).active_id if thread else None
            answer = {"decision": "new", "parent": active or "root", "name": f"Level {i}"}
            server.queue(Reply(json.dumps(answer)))
            mem.add(f"question number {i} about kites and rivers", session="s1")
            mem.add(f"answer number {i} about rivers", role="assistant", session="s1")
            mem.add(f"and a follow-up {i} on kites", session="s1")
            mem.add(f"more on kites {i}", role="assistant", session="s1")
        mem.add_many(exchanges("car", T0 + timedelta(days=1), "s2"))  # freezes s1's topics
        assert named  # the deepest topic was named from the cursor's messages
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []
    finally:
        mem.close()


def test_topics_named_from_the_cursor_are_named_from_their_stored_messages(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = _checking_the_cursors_messages(monkeypatch)
    daily_sessions(mem, 4)
    mem.add_many(exchanges("garden", T0 + timedelta(days=4, minutes=1), "s3"))
    assert len(named) >= 4
