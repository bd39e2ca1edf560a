"""The writer's document frequencies of the turn index (arbormem.store.sqlite.termcounts):
inside its own transaction, ``term_frequencies`` gives what the index's vocabulary
table gives, reading it only for what the writer cannot know."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from arbormem.ids import content_hash
from arbormem.store import NewMessage, SQLiteBackend
from arbormem.store.sqlite.termcounts import countable
from arbormem.store.types import Thread
from arbormem.text import analyze

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


class Counting(SQLiteBackend):
    """A real store that records the vocabulary reads it makes."""

    reads: list[list[str]]

    def doc_frequencies(self, key: str, terms: Sequence[str]) -> dict[str, int]:
        self.reads.append(list(terms))
        return super().doc_frequencies(key, terms)


def open_store(path: Path) -> Counting:
    store = Counting(path)
    store.reads = []
    return store


def add(store: SQLiteBackend, texts: list[str], start: int) -> Thread:
    thread = store.thread("u", "a", create=True)
    assert thread is not None
    store.append(
        thread,
        [
            NewMessage(
                id=f"m{start + i}",
                role="user",
                content=text,
                timestamp=T0 + timedelta(minutes=start + i),
                session="s",
                terms=" ".join(analyze(text)),
                chash=content_hash(text),
            )
            for i, text in enumerate(texts)
        ],
    )
    return thread


def in_write(store: Counting, terms: list[str]) -> dict[str, int]:
    """Frequencies as the tree reads them: inside the writer's transaction."""
    with store.transaction():
        found, _ = store.term_frequencies(terms)
    return found


def truth(store: SQLiteBackend, terms: list[str]) -> dict[str, int]:
    return SQLiteBackend.doc_frequencies(store, "turn", terms)


WORDS = ["kite", "repair", "boat", "sail", "garden", "absent"]


def test_a_store_begun_empty_never_reads_the_vocabulary(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["kite flying, kite repair", "sailing boat"], 0)
    add(store, ["boat repair", "garden kite"], 2)
    terms = [analyze(w)[0] for w in WORDS]
    assert (
        in_write(store, terms)
        == truth(store, terms)
        == {
            "kite": 2,
            "repair": 2,
            "boat": 2,
            "sail": 1,
            "garden": 1,
        }
    )
    assert store.reads == []
    add(store, ["kite again"], 4)
    assert in_write(store, terms) == truth(store, terms)
    assert store.reads == []
    store.close()


def test_outside_a_write_the_index_answers(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["kite repair"], 0)
    found, total = store.term_frequencies(["kite", "boat"])
    assert (found, total) == ({"kite": 1}, 1)
    assert store.reads == [["kite", "boat"]]
    store.close()


def test_a_forget_makes_the_writer_read_again(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["kite repair", "kite flying", "boat"], 0)
    terms = ["kite", "repair", "boat"]
    assert in_write(store, terms) == {"kite": 2, "repair": 1, "boat": 1}
    store.delete_messages(["m0"])
    assert in_write(store, terms) == truth(store, terms) == {"kite": 1, "boat": 1}
    assert store.reads  # the counts were dropped, the index read
    store.close()


def test_a_rolled_back_write_is_not_counted(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["kite repair"], 0)
    with pytest.raises(RuntimeError), store.transaction():
        add(store, ["kite boat", "kite sail"], 1)
        assert store.term_frequencies(["kite"])[0] == {"kite": 3}
        raise RuntimeError("the caller gives up")
    assert in_write(store, ["kite", "boat"]) == truth(store, ["kite", "boat"]) == {"kite": 1}
    store.close()


def test_another_connections_write_makes_the_writer_read_again(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["kite repair"], 0)
    assert in_write(store, ["kite", "boat"]) == {"kite": 1}
    other = SQLiteBackend(tmp_path / "s.db")
    add(other, ["kite boat"], 1)
    other.close()
    assert in_write(store, ["kite", "boat"]) == truth(store, ["kite", "boat"])
    assert in_write(store, ["kite", "boat"]) == {"kite": 2, "boat": 1}
    store.close()


def test_a_store_opened_with_turns_reads_each_term_once_then_counts_it(tmp_path: Path) -> None:
    first = SQLiteBackend(tmp_path / "s.db")
    add(first, ["kite repair", "boat"], 0)
    first.close()
    store = open_store(tmp_path / "s.db")
    assert in_write(store, ["kite", "boat"]) == {"kite": 1, "boat": 1}
    assert store.reads == [["kite", "boat"]]
    add(store, ["kite garden"], 2)
    store.reads.clear()
    assert in_write(store, ["kite", "garden"]) == truth(store, ["kite", "garden"])
    # "kite" was counted on from its read; "garden" is new to the writer: read.
    assert store.reads == [["garden"]]
    store.close()


def test_terms_the_tokenizer_may_split_are_always_read(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    add(store, ["café crème", "cafe"], 0)
    terms = [*analyze("café crème"), "cafe", "caf"]
    assert in_write(store, terms) == truth(store, terms)
    assert store.reads  # the non-ASCII terms and the ASCII runs inside them
    assert all(not countable(t) or t == "caf" for read in store.reads for t in read)
    store.close()


def test_countable_terms() -> None:
    assert countable("kite") and countable("2023") and countable("a1")
    assert not countable("café") and not countable("Kite") and not countable("")
    assert not countable("x" * 1000)
