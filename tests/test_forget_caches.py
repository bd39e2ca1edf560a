"""Forgotten messages never come back through a cache: provisional topic
descriptions, per-thread facts and topic outlines, or a saved vector index."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.recall.retriever import RecallConfig


def _open(path: Path, **kw: object) -> Memory:
    kw.setdefault("embedder", HashingEmbedder(64))
    return Memory(path, llm=None, **kw)  # type: ignore[arg-type]


def test_a_growing_topic_forgets_what_its_description_quoted(tmp_path: Path) -> None:
    m = _open(tmp_path / "m.db", user="alice", agent="bot")
    msgs = m.add_many(
        [
            {"role": "user", "content": "For the kayak trip my locker code is swordfish"},
            {"role": "assistant", "content": "Noted the kayak trip locker code."},
            {"role": "user", "content": "Which kayak paddles should I pack for the trip?"},
            {"role": "assistant", "content": "Pack two light kayak paddles for the trip."},
        ],
        session="s1",
    )
    assert "swordfish" in m.render_tree(summaries=True)
    m.forget(msgs[0].id)
    m.add("Also a dry bag for the kayak trip", session="s1")
    assert "swordfish" not in m.render_tree(summaries=True)
    paths = m.topic_paths("kayak trip locker code")
    assert not any("swordfish" in n.summary for p in paths for n in p.nodes)
    assert "swordfish" not in m.context("what is the kayak trip locker code?", session="s2").text
    m.close()


def test_a_new_thread_in_a_forgotten_threads_place_starts_clean(tmp_path: Path) -> None:
    m = _open(tmp_path / "m.db", user="alice", agent="bot")

    def sessions(secret: str, speaker: str, year: int) -> None:
        m.add_many(
            [
                {
                    "role": "user",
                    "speaker": speaker,
                    "content": f"My {secret} is important",
                    "timestamp": f"{year}-03-01T10:00:00",
                },
                {
                    "role": "assistant",
                    "content": f"Noted, the {secret} matters.",
                    "timestamp": f"{year}-03-01T10:00:05",
                },
            ],
            session="s1",
        )
        m.add_many(
            [
                {
                    "role": "user",
                    "speaker": speaker,
                    "content": "Let us plan the hiking trip",
                    "timestamp": f"{year}-03-05T10:00:00",
                },
                {
                    "role": "assistant",
                    "content": "Sure, the hiking trip it is.",
                    "timestamp": f"{year}-03-05T10:00:05",
                },
            ],
            session="s2",
        )

    sessions("secret password swordfish", "Maya", 2023)
    assert m.topic_paths("swordfish password")
    m.search("what did Maya say last week?")
    m.forget(user="alice", agent="bot")
    sessions("garden tomato harvest", "Jonas", 2025)
    assert m.topic_paths("swordfish password") == []
    new = m.backend.thread("alice", "bot")
    assert new is not None
    question = m.engine.retriever._question(
        [new], [m.backend.state(new)], "what did Jonas do last week?"
    )
    assert set(question.names) == {"Jonas"}
    assert question.ranges[0].start.year == 2025
    m.close()


def test_an_index_built_before_a_forget_elsewhere_is_not_saved(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    kw = dict(
        user="alice", agent="bot", ann_threshold=2, tree=False, recall=RecallConfig(lexical=False)
    )

    def load(m: Memory, texts: list[str]) -> None:
        m.add_many([{"role": "user", "content": t} for t in texts], session="s1")

    a = _open(path, **kw)
    load(a, ["my bank pin is 4921 swordfish", "the weather is mild", "I bought apples", "call mom"])
    b = _open(path, **kw)  # another process, in real use
    b.search("anything")  # builds its approximate index
    a.forget(user="alice", agent="bot")
    load(a, ["tomatoes need water", "the bus was late", "new shoes today", "movie night"])
    a.close()
    b.close()  # its index holds the forgotten vectors: it must not be written
    saved = path.parent / (path.name + ".ann")
    assert not saved.exists() or not any(saved.glob("*.usearch"))


def test_a_second_memory_on_the_file_never_brings_a_forgotten_thread_back(
    tmp_path: Path,
) -> None:
    # A forgotten thread's id (and its nodes' ids) come back with the next new thread.
    # Another Memory on the same file caches by those ids: a growing topic's description
    # and the tree cursor it writes with.
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)

    def fill(mem: Memory, word: str, user: str) -> None:
        for i in range(3):
            mem.add(f"How do I make {word} jam with sugar and lemon {i}?", user=user)
            mem.add(f"Cook the {word} jam slowly with lemon {i}.", role="assistant", user=user)

    fill(b, "quokkaberry", "alice")
    assert "quokkaberry" in b.render_tree("json", summaries=True, user="alice")
    a.forget(user="alice")
    fill(a, "gooseberry", "bob")
    assert "quokkaberry" not in b.render_tree("json", summaries=True, user="bob")
    assert "quokkaberry" not in b.context("jam lemon", user="bob", budget_tokens=2000).text
    b.add("And how do I store the jam in jars?", user="bob")
    b.add("Sterilise the jars first.", role="assistant", user="bob")
    a.close()
    b.close()
    assert b"quokkaberr" not in path.read_bytes()
    c = _open(path)
    assert c.search("quokkaberry", user="bob") == []
    c.close()


def test_an_upkeep_running_across_a_forget_does_not_save_what_it_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arbormem.context.working as session_module

    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)  # as two processes would
    msgs = []
    for i in range(18):
        text = "Quokkaberry Farm sells jam" if i == 1 else f"the shed roof repair plan {i}"
        msgs += [{"role": "user", "content": text}, {"role": "assistant", "content": f"noted {i}"}]
    stored = b.add_many(msgs, session="s")
    secret = next(m for m in stored if "Quokkaberry" in m.content)
    thread = b.backend.thread("default", "default")
    assert thread is not None
    real_update = session_module.update

    def slow_summary(*args: object, **kwargs: object) -> object:
        out = real_update(*args, **kwargs)  # type: ignore[arg-type]
        a.forget(secret.id)  # the other process forgets while this summary is written
        return out

    monkeypatch.setattr(session_module, "update", slow_summary)
    b.engine.working.upkeep(thread, "s", None, "conversation", force=True)
    assert "Quokkaberry" not in str(a.backend.session_state(thread, "s"))
    assert "Quokkaberry" not in a.context("shed roof", session="s").text
    a.close()
    b.close()


def test_a_thread_forgotten_during_a_search_lends_its_row_id_to_no_one(tmp_path: Path) -> None:
    """A search resolves alice's thread, then embeds the question (a remote model may
    take a while). Meanwhile another process forgets alice and a new user's thread
    gets the freed row id: the search raised KeyError, and topic paths showed the
    new user's topic as alice's. Ids are no longer reused (see the next test), but a
    search does not rely on it: here the other writer gives the newcomer alice's old
    id by hand."""
    db = tmp_path / "m.db"

    class Meanwhile(HashingEmbedder):
        newcomer = ""

        def embed_batch(self, texts):  # type: ignore[no-untyped-def]
            if Meanwhile.newcomer:
                user, Meanwhile.newcomer = Meanwhile.newcomer, ""
                with _open(db) as other:  # its own connections: another writer
                    other.forget(user="alice", agent="default")
                    made = other.backend.thread(user, "default", create=True)
                    with other.backend.transaction():
                        other.backend._writer.execute(  # type: ignore[attr-defined]
                            "UPDATE threads SET id = ? WHERE id = ?", (alice_id, made.id)
                        )
                    other.add_many(
                        [
                            {"content": "my bank password is hunter2, apples"},
                            {"role": "assistant", "content": "the bank password is noted"},
                        ],
                        user=user,
                    )
                    assert other.backend.thread(user, "default").id == alice_id
            return super().embed_batch(texts)

    # Each question new to the embedder's cache, so that embedding it lets the other in.
    asks = {
        "search": lambda m: m.search("bank password apples", user="alice"),
        "topic_paths": lambda m: m.topic_paths("apples and the bank password", user="alice"),
        "context": lambda m: m.context("what is the bank password?", user="alice").text,
    }
    with _open(db, embedder=Meanwhile(64)) as alice:
        for n, (name, ask) in enumerate(asks.items()):
            alice.add_many(
                [{"content": "alice likes apples"}, {"role": "assistant", "content": "noted"}],
                user="alice",
            )
            alice_id = alice.backend.thread("alice", "default").id
            assert alice.search("apples", user="alice")
            Meanwhile.newcomer = f"newcomer{n}"
            assert "hunter2" not in str(ask(alice)), name
            assert not Meanwhile.newcomer  # the other writer did come in


def test_a_new_thread_never_takes_a_forgotten_threads_id(tmp_path: Path) -> None:
    with _open(tmp_path / "m.db") as mem:
        mem.add("first", user="alice")
        alice = mem.backend.thread("alice", "default")
        mem.forget(user="alice", agent="default")
        mem.add("second", user="bob")
        bob = mem.backend.thread("bob", "default")
        assert alice is not None and bob is not None and bob.id > alice.id
