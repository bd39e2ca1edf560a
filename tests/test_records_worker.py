"""Pattern extraction in a helper process: the same candidates as in the calling
thread, through a real helper subprocess; a helper
that cannot start, dies or hangs gives the batch to the calling thread, and a
memory that used the helper closes and exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.records import keeper as keeper_module
from arbormem.records import worker
from arbormem.records.extract import Context, Turn

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)

LINES = [
    ("Sam", "I live in Paris with my sister Ana."),
    ("Kim", "Oh nice, how long have you been there?"),
    ("Sam", "Five years. But big news: I moved to Lyon last week!"),
    ("Kim", "Wow. She must miss you. Did she keep the flat?"),
    ("Sam", "She did. My new number is 555-0199 by the way."),
    ("Kim", "Saved it. I started at Acme in March, by the way."),
    ("Sam", "I'm allergic to peanuts, so no satay at the party please."),
    ("Kim", "Noted. We went camping last weekend and it rained all day."),
    ("Sam", "I no longer eat meat, I switched to a vegetarian diet."),
    ("Kim", "I love hiking and I hate crowds."),
    ("Sam", "We decided to meet on Friday at the station instead."),
    ("Kim", "How to get there:\n1. Take the tram\n2. Change at the square\n3. Walk north"),
]


def turns(n: int = len(LINES)) -> list[Turn]:
    return [
        Turn(
            f"m{i}",
            text,
            T0 + timedelta(minutes=i),
            speaker,
            "user" if speaker == "Sam" else "assistant",
        )
        for i, (speaker, text) in enumerate((LINES * 4)[:n])
    ]


CONTEXT = Context(speakers=("Sam", "Kim"), scope="sam/bot")


@pytest.fixture(autouse=True)
def fresh_helper(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(worker, "ENABLED", True)
    worker.shutdown()
    yield
    worker.shutdown()


def _lines_as_messages(times: int) -> list[dict[str, Any]]:
    """LINES repeated ``times`` over, as messages a minute apart from T0."""
    return [
        {
            "content": text,
            "speaker": who,
            "role": "user" if who == "Sam" else "assistant",
            "timestamp": T0 + timedelta(minutes=i),
        }
        for i, (who, text) in enumerate(LINES * times)
    ]


def test_the_helper_gives_the_candidates_the_calling_thread_gives() -> None:
    batch = turns(40)
    here = worker.extract_batch(batch[2:], batch[:2], CONTEXT)
    assert here[0], "the batch must give candidates for the comparison to mean anything"
    helper = worker.shared()
    assert helper is not None
    with pytest.raises(worker.WorkerUnavailable, match="not ready"):
        helper.run(batch, [], CONTEXT)  # starting: the batch is for the calling thread
    assert helper.wait_ready(120)
    assert helper.run(batch[2:], batch[:2], CONTEXT) == here
    assert helper.served == 1
    # a large batch goes to the helper, and once it runs a small one does too
    assert worker.run_batch(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)[0]
    assert (
        worker.run_batch(batch[:2], [], CONTEXT) == worker.extract_batch(batch[:2], [], CONTEXT)[0]
    )
    assert helper.served == 3


def test_while_messages_arrive_a_batch_waits_for_the_helper_to_start() -> None:
    batch = turns(20)
    assert (
        worker.run_batch(batch, [], CONTEXT, writing=lambda: True)
        == (worker.extract_batch(batch, [], CONTEXT)[0])
    )
    helper = worker.shared()
    assert helper is not None and helper.served == 1  # it ran there, not here


def test_the_keeper_says_messages_are_being_written_until_adds_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(
        tmp_path / "m.db", user="sam", agent="bot", embedder=HashingEmbedder(32), llm=None
    ) as mem:
        keeper = mem.engine.records
        assert not keeper.writing()  # nothing added yet
        monkeypatch.setattr(keeper_module, "QUIET_SECONDS", 3600.0)
        mem.add_many(
            [{"content": text, "speaker": who, "timestamp": T0} for who, text in LINES[:4]]
        )
        assert keeper.writing()
        monkeypatch.setattr(keeper_module, "QUIET_SECONDS", 0.0)
        assert not keeper.writing()  # quiet for longer than that
        mem.wait()


NEVER_READY = "import time; time.sleep(120)"


def test_once_writes_pause_a_batch_waits_no_more_and_runs_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker, "START_WAIT", 0.01)
    slow = worker.ExtractionWorker(command=[sys.executable, "-c", NEVER_READY])
    monkeypatch.setattr(worker, "_shared", slow)
    answers = iter([True, True, False])
    looks: list[bool] = []

    def writing() -> bool:
        looks.append(next(answers))
        return looks[-1]

    batch = turns(20)
    assert (
        worker.run_batch(batch, [], CONTEXT, writing=writing)
        == (worker.extract_batch(batch, [], CONTEXT)[0])
    )
    assert looks == [True, True, False]  # looked until the writes paused
    assert slow.served == 0 and slow.alive  # ran here; the helper may still start


def test_a_small_batch_does_not_start_the_helper() -> None:
    worker.run_batch(turns(worker.MIN_TURNS - 1), [], CONTEXT)
    assert not worker.running()
    worker.run_batch(turns(worker.MIN_TURNS), [], CONTEXT)
    assert worker.running()


def test_a_bulk_add_starts_the_helper_as_its_writes_begin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No extraction job runs: whatever starts the helper is the add itself.
    monkeypatch.setattr(keeper_module.RecordKeeper, "schedule", lambda self, thread: None)
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(32), llm=None) as mem:
        msgs = [{"content": t, "speaker": who, "timestamp": T0} for who, t in LINES * 2]
        mem.add_many(msgs[: worker.MIN_TURNS - 1])
        assert not worker.running()  # a small add never pays for it
        mem.add_many(msgs[: worker.MIN_TURNS])
        assert worker.running()


def test_a_process_confined_to_one_core_extracts_in_the_calling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    batch = turns(40)
    assert worker.run_batch(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)[0]
    assert not worker.running()


def test_a_helper_that_cannot_start_leaves_the_batch_to_the_calling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    batch = turns(20)
    assert worker.run_batch(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)[0]
    assert worker.shared() is None  # not tried again in this process


def test_a_helper_that_died_leaves_the_batch_to_the_calling_thread_and_is_replaced() -> None:
    batch = turns(20)
    first = worker.shared()
    assert first is not None and first.wait_ready(120)
    assert first.run(batch, [], CONTEXT)  # it works, then it dies
    assert first._proc is not None
    first._proc.kill()
    first._proc.wait()
    with pytest.raises(worker.WorkerUnavailable):
        first.run(batch, [], CONTEXT)
    # the next batch starts another helper, which gives what the calling thread gives
    assert worker.run_batch(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)[0]
    second = worker.shared()
    assert second is not None and second is not first and second.wait_ready(120)
    assert worker.run_batch(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)[0]
    assert second.served >= 1


HANGS = textwrap.dedent(
    """
    import pickle, struct, sys, threading
    data = pickle.dumps(("ready", None))
    sys.stdout.buffer.write(struct.pack("!I", len(data)) + data)
    sys.stdout.buffer.flush()
    threading.Event().wait()  # reads nothing, answers nothing, never exits by itself
    """
)


def test_a_helper_that_does_not_answer_is_stopped_and_the_batch_runs_here() -> None:
    helper = worker.ExtractionWorker(timeout=0.5, command=[sys.executable, "-c", HANGS])
    assert helper.wait_ready(120)
    with pytest.raises(worker.WorkerUnavailable, match="did not answer"):
        helper.run(turns(20), [], CONTEXT)
    assert not helper.alive
    assert helper._proc is not None and helper._proc.poll() is not None  # killed, reaped


def test_a_helper_that_never_gets_ready_is_stopped() -> None:
    helper = worker.ExtractionWorker(
        timeout=0, command=[sys.executable, "-c", "import threading; threading.Event().wait()"]
    )
    with pytest.raises(worker.WorkerUnavailable, match="did not start"):
        helper.run(turns(20), [], CONTEXT)
    assert helper._proc is not None and helper._proc.poll() is not None


def records_of(path: Path, monkeypatch: pytest.MonkeyPatch, *, helper: bool) -> list[tuple]:
    monkeypatch.setattr(worker, "ENABLED", helper)
    if helper:  # ready before the batches come, or they would all run here
        started = worker.shared()
        assert started is not None and started.wait_ready(120)
    with Memory(path, embedder=HashingEmbedder(64), user="sam", agent="bot") as mem:
        mem.add_many(
            [
                {"content": t.text, "speaker": t.speaker, "role": t.role, "timestamp": t.timestamp}
                for t in turns(48)
            ]
        )
        assert mem.wait(timeout=120)
        return sorted(
            (r.kind, r.text, r.subject, r.attribute, r.value, r.current, len(r.sources))
            for r in mem.records(current=False)
        )


def test_a_memory_keeps_the_same_records_with_the_helper_as_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without = records_of(tmp_path / "a.db", monkeypatch, helper=False)
    assert not worker.running()
    with_helper = records_of(tmp_path / "b.db", monkeypatch, helper=True)
    helper = worker.shared()
    assert helper is not None and helper.served >= 1
    assert without and with_helper == without


def test_a_program_that_used_the_helper_exits_without_closing_its_memory(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        f"""
        from datetime import datetime, timedelta, timezone
        from arbormem import Memory
        from arbormem.embed import HashingEmbedder
        from arbormem.records import worker
        t0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
        assert worker.shared().wait_ready(120)
        mem = Memory({str(tmp_path / "m.db")!r}, embedder=HashingEmbedder(64))
        mem.add_many([
            {{"content": f"I moved to Lyon {{i}} weeks ago.", "speaker": "Sam",
              "timestamp": t0 + timedelta(minutes=i)}}
            for i in range(40)
        ])
        assert mem.wait(timeout=120)
        assert worker.shared().served >= 1
        print(len(mem.records(current=False)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_helper_and_leaves_its_parents_alone() -> None:
    parent = worker.shared()
    assert parent is not None and parent.wait_ready(120)
    batch = turns(20)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got a helper of its own, then leave
        ok = False
        try:
            mine = worker.shared()
            ok = mine is not None and mine is not parent and mine.wait_ready(120)
            ok = ok and mine.run(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)
            worker.shutdown()
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    assert said == b"1"
    # the parent's helper still answers, its frames not mixed with the child's
    assert parent.run(batch, [], CONTEXT) == worker.extract_batch(batch, [], CONTEXT)


@pytest.mark.parametrize(("batch", "piece"), [(1, 1), (5, 5), (7, 3), (64, 5)])
def test_the_records_found_do_not_depend_on_how_many_messages_a_batch_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, piece: int
) -> None:
    # Without an LLM a batch's size is only a cost (see keeper.BULK_BATCH), and so is
    # the size of the pieces it is sent to the helper in (keeper.PATTERN_BATCH): the
    # records, their sources and their history come out the same.
    msgs = _lines_as_messages(2)

    def records(name: str) -> list[tuple[object, ...]]:
        with Memory(tmp_path / name, embedder=HashingEmbedder(32), llm=None) as mem:
            stored = mem.add_many(msgs)
            mem.wait()
            index = {m.id: i for i, m in enumerate(stored)}
            return sorted(
                (
                    r.id,
                    r.kind,
                    r.text,
                    r.subject,
                    r.attribute,
                    r.value,
                    r.valid_from,
                    r.valid_to,
                    r.superseded_by,
                    tuple(index[s] for s in r.sources),
                )
                for r in mem.records(current=False)
            )

    whole = records("whole.db")
    monkeypatch.setattr(keeper_module, "BULK_BATCH", batch)
    monkeypatch.setattr(keeper_module, "PATTERN_BATCH", piece)
    assert len(whole) > 5
    assert records(f"by-{batch}-{piece}.db") == whole


def test_a_backlog_is_read_and_written_in_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bulk load holds the thread for each add_many, so extraction gets about one
    # write between two of them: a catch-up takes every message not read yet (up to
    # keeper.BULK_BATCH) in one transaction, not a helper's piece at a time, or it
    # falls behind the load in proportion.
    monkeypatch.setattr(keeper_module, "PATTERN_BATCH", 16)
    msgs = _lines_as_messages(10)
    with Memory(
        tmp_path / "m.db", user="sam", agent="bot", embedder=HashingEmbedder(32), llm=None
    ) as mem:
        keeper = mem.engine.records
        monkeypatch.setattr(keeper, "schedule", lambda thread: None)  # caught up below
        mem.add_many(msgs)
        backend = mem.engine.backend
        thread = backend.thread("sam", "bot")
        assert thread is not None and backend.records_cursor(thread) == 0
        cursors: list[int] = []
        real = backend.set_records_cursor

        def set_cursor(t: object, index: int) -> None:
            cursors.append(index)
            real(t, index)  # type: ignore[arg-type]

        monkeypatch.setattr(backend, "set_records_cursor", set_cursor)
        assert keeper.catch_up(thread) == len(msgs)
        assert cursors == [len(msgs)]
        assert len(mem.records(current=False)) > 5


def test_a_message_forgotten_while_its_batch_is_extracted_is_not_cited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = _lines_as_messages(1)
    with Memory(
        tmp_path / "m.db", user="sam", agent="bot", embedder=HashingEmbedder(32), llm=None
    ) as mem:
        keeper = mem.engine.records
        monkeypatch.setattr(keeper, "schedule", lambda thread: None)  # caught up below
        stored = mem.add_many(msgs)
        backend = mem.engine.backend
        thread = backend.thread("sam", "bot")
        assert thread is not None
        moved = stored[2].id  # "I moved to Lyon last week!"
        extract = keeper._extract

        def then_forget(*args: object, **kwargs: object) -> object:
            found = extract(*args, **kwargs)  # type: ignore[arg-type]
            cited = {s for _, _, cs in found for c in cs for s in c.record.sources}
            assert moved in cited  # read from it, then forgotten before the write
            backend.delete_messages([moved], thread)
            return found

        monkeypatch.setattr(keeper, "_extract", then_forget)
        assert keeper.catch_up(thread) == len(msgs)
        kept = mem.records(current=False)
        assert kept and all(moved not in r.sources for r in kept)
        assert not any("Lyon" in r.text for r in kept)
        assert any(stored[8].id in r.sources for r in kept)  # the others are read


def test_closing_behind_extraction_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    from functools import partial

    monkeypatch.setattr(keeper_module, "BULK_BATCH", 16)
    monkeypatch.setattr(keeper_module, "NOTE_SECONDS", 0.0)
    msgs = _lines_as_messages(10)
    mem = Memory(tmp_path / "m.db", user="sam", agent="bot", embedder=HashingEmbedder(32), llm=None)
    keeper = mem.engine.records
    monkeypatch.setattr(keeper, "schedule", lambda thread: None)
    mem.add_many(msgs)
    thread = mem.engine.backend.thread("sam", "bot")
    assert thread is not None
    # Started by close only: the catch-up runs while the memory is closing.
    mem.engine.jobs.submit("records", partial(keeper.catch_up, thread), delay=3600)
    with caplog.at_level(logging.INFO, logger="arbormem.records"):
        mem.close()
    notes = [r.getMessage() for r in caplog.records if "closing waits" in r.getMessage()]
    assert notes and "sam/bot: 16 of 120 messages read" in notes[0]
    assert "112 of 120" in notes[-1]
    with Memory(tmp_path / "m.db", user="sam", agent="bot", embedder=HashingEmbedder(32)) as again:
        assert len(again.records(current=False)) > 5
