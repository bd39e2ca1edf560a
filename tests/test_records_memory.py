"""Typed records through the public API, on real SQLite files: extraction after every
add (in the background, flushed by ``wait``), ``remember``, ``records``,
``search_records``, ``record_history``, ``forget_record``, forgetting messages,
export and import, the records section of ``context``, an LLM that answers or fails
(a real HTTP server speaking the OpenAI protocol), and the CLI in subprocesses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import InputError, Memory, NotFound
from arbormem.context.assemble import ContextBuilder, RecallItem
from arbormem.embed import HashingEmbedder
from arbormem.llm import LLMConfig, OpenAIChatClient
from arbormem.models import Message
from arbormem.tokens import default_counter

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply

T0 = datetime(2024, 1, 5, 10, 0, tzinfo=timezone.utc)
MOVE = datetime(2024, 5, 5, 10, 0, tzinfo=timezone.utc)


def open_memory(path: Path, **options: Any) -> Memory:
    return Memory(path, embedder=HashingEmbedder(64), user="sam", agent="bot", **options)


def tell_the_move(mem: Memory) -> None:
    mem.add("I live in Paris.", speaker="Sam", timestamp=T0)
    mem.add("Nice city!", role="assistant", timestamp=T0 + timedelta(seconds=5))
    mem.add("Big news: I moved to Lyon last week!", speaker="Sam", timestamp=MOVE)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with open_memory(tmp_path / "m.db") as memory:
        yield memory


def test_every_add_is_read_for_records_and_a_change_closes_the_old_value(mem: Memory) -> None:
    tell_the_move(mem)
    assert mem.wait(timeout=60)
    (now,) = mem.records(attribute="home")
    assert (now.subject, now.value, now.current) == ("Sam", "Lyon", True)
    every = mem.records(attribute="home", current=False)
    assert sorted(r.value for r in every if r.value) == ["Lyon", "Paris"]
    history = mem.record_history(now.id)
    assert [r.value for r in history] == ["Paris", "Lyon"]
    paris = history[0]
    assert paris.superseded_by == now.id and now.supersedes == paris.id
    assert paris.valid_to == now.valid_from
    # the source of each record is the message that said it
    said = {m.content: m.id for m in mem.messages()}
    assert now.sources == (said["Big news: I moved to Lyon last week!"],)
    # as of March, Paris held
    (then,) = mem.records(attribute="home", as_of="2024-03-01T00:00:00Z")
    assert then.value == "Paris"
    hits = mem.search_records("Which city does Sam live in now?")
    assert hits and hits[0].record.value == "Lyon" and hits[0].to_dict()["score"] > 0
    assert mem.search_records("Where did Sam live?", as_of="2024-02-01")[0].record.value == "Paris"


def test_records_are_read_after_the_extraction_under_way_without_a_wait(mem: Memory) -> None:
    """A read of records waits for the background job, so what was just said is there."""
    mem.add("My phone number is 555-0101.", speaker="Sam", timestamp=T0)
    assert [r.value for r in mem.records(attribute="phone")] == ["555-0101"]


def test_remember_stores_a_record_as_given_and_updates_like_an_extracted_one(
    mem: Memory,
) -> None:
    tell_the_move(mem)
    done = mem.remember(
        "Sam lives in Berlin.",
        subject="Sam",
        attribute="home",
        value="Berlin",
        when="2024-09-01T00:00:00Z",
    )
    assert done.action == "superseded" and done.record is not None
    assert done.record.value == "Berlin" and len(done.closed) == 1
    assert [r.value for r in mem.record_history(done.record.id)] == ["Paris", "Lyon", "Berlin"]
    again = mem.remember("Sam lives in Berlin.", subject="Sam", attribute="home", value="Berlin")
    assert again.action == "merged" and again.record.id == done.record.id
    assert len(mem.records(attribute="home", current=False)) == 3
    assert done.to_dict()["record"]["value"] == "Berlin"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "x" * 401}, "text"),
        ({"text": "Sam is tall.", "kind": "opinion"}, "kind"),
        ({"text": "Sam lives in Lyon.", "attribute": "home"}, "subject"),
        ({"text": "Sam lives in Lyon.", "negated": "yes"}, "negated"),
        ({"text": "Sam lives in Lyon.", "when": "the other day"}, "when"),
        ({"text": "Sam lives in Lyon.", "tags": "travel"}, "tags"),
        # Lone surrogates (found by the API fuzzer): refused, not a UnicodeEncodeError.
        ({"text": "Sam lives in \ud800."}, "text"),
        ({"text": "Sam lives in Lyon.", "subject": "S\udc00m"}, "subject"),
        ({"text": "Sam lives in Lyon.", "tags": ["home", "\ud800"]}, "tags[1]"),
    ],
)
def test_remember_refuses_bad_arguments_and_writes_nothing(
    mem: Memory, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as caught:
        mem.remember(**arguments)
    assert caught.value.field == field
    assert mem.records(current=False) == []


def test_reads_refuse_bad_arguments(mem: Memory) -> None:
    for call, field in (
        (lambda: mem.records(kind="gossip"), "kind"),
        (lambda: mem.records(as_of="soon"), "as_of"),
        (lambda: mem.records(limit=0), "limit"),
        (lambda: mem.search_records("home", k=0), "k"),
        (lambda: mem.record_history(""), "record_id"),
    ):
        with pytest.raises(InputError) as caught:
            call()
        assert caught.value.field == field
    with pytest.raises(NotFound):
        mem.record_history("rec-nope")
    with pytest.raises(NotFound):
        mem.forget_record("rec-nope")


def test_forgetting_a_record_lets_what_it_replaced_hold_again(mem: Memory) -> None:
    tell_the_move(mem)
    (lyon,) = mem.records(attribute="home")
    done = mem.forget_record(lyon.id)
    assert done.records == (lyon.id,) and done.purged
    (paris,) = mem.records(attribute="home")
    assert paris.value == "Paris" and paris.current
    assert len(mem.messages()) == 3  # the messages stay


def test_records_can_be_extracted_again_from_the_log(mem: Memory) -> None:
    tell_the_move(mem)
    (lyon,) = mem.records(attribute="home")
    mem.forget_record(lyon.id)
    assert mem.records(attribute="home")[0].value == "Paris"
    # only the move's position: what Paris came from stays as it is
    assert mem.rebuild_records(start=2, end=3) == 1
    (back,) = mem.records(attribute="home")
    assert back.value == "Lyon" and back.supersedes is not None
    assert [r.value for r in mem.record_history(back.id)] == ["Paris", "Lyon"]
    # everything again: the same records, nothing twice
    before = sorted(r.id for r in mem.records(current=False))
    assert mem.rebuild_records() == 3
    assert sorted(r.id for r in mem.records(current=False)) == before
    with pytest.raises(InputError):
        mem.rebuild_records(start=-1)


def test_forgetting_the_message_takes_its_record_with_it(mem: Memory) -> None:
    tell_the_move(mem)
    moved = next(m for m in mem.messages() if "Lyon" in m.content)
    mem.forget(moved.id)
    assert [r.value for r in mem.records(attribute="home", current=False)] == ["Paris"]
    assert mem.records(attribute="home")[0].current


def test_an_llm_extracts_the_records_and_one_that_fails_gives_the_patterns(
    tmp_path: Path,
) -> None:
    with FakeOpenAI() as server:
        config = LLMConfig(model="fake", base_url=server.base_url, max_retries=0)
        llm = OpenAIChatClient(config, sleep=lambda _s: None)
        with open_memory(tmp_path / "llm.db", llm=llm, tree=False) as mem:
            first = mem.add("I work at Initech these days.", speaker="Sam", timestamp=T0)
            answer = {
                "kind": "fact",
                "text": "Sam works at Initech.",
                "subject": "Sam",
                "attribute": "employer",
                "value": "Initech",
                "sources": [first.id],
            }
            server.queue(Reply(json.dumps({"records": [answer]})))
            assert mem.wait(timeout=60)
            (record,) = mem.records(attribute="employer")
            assert record.value == "Initech" and "llm" in record.tags
            # a server error: the patterns read the batch, no message is lost
            server.queue(Reply(status=500))
            mem.add("I moved to Lyon last week!", speaker="Sam", timestamp=MOVE)
            assert mem.wait(timeout=60)
            (home,) = mem.records(attribute="home")
            assert home.value == "Lyon" and "llm" not in home.tags
            # garbage: the same
            server.queue(Reply("Sure! Sam has a new phone, I think."))
            mem.add("My new number is 555-0199.", speaker="Sam", timestamp=MOVE)
            assert mem.wait(timeout=60)
            assert [r.value for r in mem.records(attribute="phone")] == ["555-0199"]
            assert len(mem.messages()) == 3
            assert len(server.chat_requests()) == 3  # one call per batch


def test_export_carries_records_and_import_restores_them_with_their_history(
    mem: Memory, tmp_path: Path
) -> None:
    tell_the_move(mem)
    mem.remember("Sam is vegetarian.", subject="Sam", attribute="diet", value="vegetarian")
    dump = mem.export(tmp_path / "dump.json")
    assert dump.document["version"] == 4 and dump.records == 3
    before = sorted((r.to_dict() for r in mem.records(current=False)), key=lambda r: r["id"])
    with open_memory(tmp_path / "other.db") as other:
        assert other.import_(tmp_path / "dump.json").records == 3
        assert other.wait(timeout=60)
        after = sorted((r.to_dict() for r in other.records(current=False)), key=lambda r: r["id"])
        assert after == before
        (lyon,) = other.records(attribute="home")
        assert [r.value for r in other.record_history(lyon.id)] == ["Paris", "Lyon"]
    # a version 2 export (no records) still imports, and its records are extracted
    old = json.loads((tmp_path / "dump.json").read_text())
    old["version"] = 2
    for thread in old["threads"]:
        del thread["records"]
    with open_memory(tmp_path / "v2.db") as v2:
        assert v2.import_(old).records == 0
        assert [r.value for r in v2.records(attribute="home")] == ["Lyon"]


def test_an_export_with_a_bad_record_imports_nothing(mem: Memory, tmp_path: Path) -> None:
    tell_the_move(mem)
    document = json.loads(json.dumps(mem.export().document))
    document["threads"][0]["records"]["records"][0]["kind"] = "gossip"
    with open_memory(tmp_path / "bad.db") as other:
        with pytest.raises(InputError) as caught:
            other.import_(document)
        assert "threads[0].records.records[0]" in (caught.value.field or "")
        assert other.messages() == [] and other.records(current=False) == []


def test_context_puts_the_current_value_first_and_the_old_one_as_earlier(mem: Memory) -> None:
    tell_the_move(mem)
    for n in range(30):
        mem.add(
            f"Chatter {n}: the weather was grey again and the train was late once more.",
            speaker="Sam" if n % 2 else None,
            role="user" if n % 2 else "assistant",
            timestamp=MOVE + timedelta(minutes=n + 1),
        )
    mem.wait(timeout=60)
    ctx = mem.context("Which city does Sam live in now?", budget_tokens=300)
    records = ctx.section("records")
    assert "Sam lives in Lyon." in records.text and "Earlier: Paris" in records.text
    assert ctx.prompt_tokens <= 300
    system = ctx.messages[0]["content"]
    assert (
        system.index("Sam lives in Lyon.") < system.index("Recalled memory")
        if ("Recalled memory" in system)
        else True
    )


def test_a_turn_trimmed_from_the_window_goes_back_to_recall(tmp_path: Path) -> None:
    """The bug the issue names: a turn of the current session was kept out of recall
    because it was in the window, then the budget trimmed it from the window."""
    with open_memory(tmp_path / "w.db") as mem:
        mem.add("My new phone number is 555-0199.", speaker="Sam", session="s1", timestamp=T0)
        for n in range(12):
            mem.add(
                f"Turn {n}: we talked about the garden, the roses, the tomatoes and the rain "
                "that kept falling all week long without a break.",
                speaker="Sam",
                session="s1",
                timestamp=T0 + timedelta(minutes=n + 1),
            )
        ctx = mem.context("What is my phone number?", budget_tokens=300, session="s1")
        assert "555-0199" not in ctx.section("window").text  # trimmed from the window...
        assert "555-0199" in ctx.section("recall").text  # ...so it is recalled


def test_the_builder_takes_a_window_turn_back_into_recall_when_it_leaves_the_window() -> None:
    at = datetime(2024, 1, 1, tzinfo=timezone.utc)
    window = [
        Message(
            id=f"m{n}",
            role="user",
            content=("The phone number is 555-0199." if n == 0 else "filler text " * 30),
            timestamp=at + timedelta(minutes=n),
            session="s1",
            index=n,
        )
        for n in range(6)
    ]
    item = RecallItem(
        text="The phone number is 555-0199.",
        rank=0,
        header="[2024-01-01]",
        when=at,
        order=0,
        score=1.0,
        message_id="m0",
    )
    builder = ContextBuilder(default_counter())
    tight = builder.build(
        query="phone?", budget=200, mode="conversation", session="s1", recall=[item], window=window
    )
    assert "m0" not in [m.id for m in window[-tight.section("window").items :]]
    assert "555-0199" in tight.section("recall").text
    roomy = builder.build(
        query="phone?", budget=4000, mode="conversation", session="s1", recall=[item], window=window
    )
    # shown in the window: not repeated in the recalled block
    assert "555-0199" in roomy.section("window").text
    assert "555-0199" not in roomy.section("recall").text


def test_a_read_only_store_reads_its_records(tmp_path: Path) -> None:
    with open_memory(tmp_path / "ro.db") as mem:
        tell_the_move(mem)
    with open_memory(tmp_path / "ro.db", read_only=True) as ro:
        assert [r.value for r in ro.records(attribute="home")] == ["Lyon"]
        with pytest.raises(Exception, match="read-only"):
            ro.remember("Sam likes tea.", subject="Sam")


def test_tenants_keep_their_records_apart(tmp_path: Path) -> None:
    with open_memory(tmp_path / "t.db") as mem:
        acme = mem.for_tenant("acme")
        acme.add("I moved to Lyon last week!", speaker="Sam", timestamp=MOVE)
        mem.add("I moved to Oslo last week!", speaker="Sam", timestamp=MOVE)
        assert [r.value for r in acme.records(attribute="home")] == ["Lyon"]
        assert [r.value for r in mem.records(attribute="home")] == ["Oslo"]


def test_the_records_commands(tmp_path: Path) -> None:
    env = {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash"}
    for text, stamp in (
        ("I live in Paris.", "2024-01-05T10:00:00Z"),
        ("Big news: I moved to Lyon last week!", "2024-05-05T10:00:00Z"),
    ):
        assert (
            run_cli("add", text, "--speaker", "Sam", "--timestamp", stamp, env=env).returncode == 0
        )
    out = run_cli("records", "search", "Where does Sam live now?", "--json", env=env)
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    top = hits[0]
    for key in (
        "id",
        "kind",
        "text",
        "subject",
        "attribute",
        "value",
        "valid_from",
        "valid_to",
        "superseded_by",
        "sources",
        "score",
    ):
        assert key in top
    assert top["value"] == "Lyon" and all(h["valid_to"] is None for h in hits)
    every = json.loads(run_cli("records", "search", "live", "--all", "--json", env=env).stdout)
    assert {h["value"] for h in every} >= {"Paris", "Lyon"}
    listed = json.loads(run_cli("records", "list", "--all", "--json", env=env).stdout)
    assert len(listed) == 2
    history = json.loads(run_cli("records", "history", top["id"], "--json", env=env).stdout)
    assert [r["value"] for r in history] == ["Paris", "Lyon"]
    said = run_cli(
        "records",
        "remember",
        "Sam is vegan.",
        "--subject",
        "Sam",
        "--attribute",
        "diet",
        "--value",
        "vegan",
        "--json",
        env=env,
    )
    assert json.loads(said.stdout)["action"] == "added"
    gone = run_cli("records", "forget", top["id"], "--yes", "--json", env=env)
    assert json.loads(gone.stdout)["records"] == [top["id"]]
    now = json.loads(run_cli("records", "list", "--attribute", "home", "--json", env=env).stdout)
    assert [r["value"] for r in now] == ["Paris"]
    text = run_cli("records", "list", env=env).stdout
    assert "Sam is vegan." in text and "Sam lives in Paris." in text
    rebuilt = run_cli("records", "rebuild", "--json", env=env)
    assert json.loads(rebuilt.stdout) == {"messages_read": 2}
    again = json.loads(run_cli("records", "list", "--attribute", "home", "--json", env=env).stdout)
    assert [r["value"] for r in again] == ["Lyon"]
    bad = run_cli("records", "history", "rec-nope", env=env)
    assert bad.returncode == 1 and "rec-nope" in bad.stderr
    refused = run_cli("records", "forget", "rec-x", env=env, input="n\n")
    assert "Nothing forgotten" in refused.stderr


def test_search_finds_records_beside_the_turns_and_ranks_the_turns_as_without(
    mem: Memory,
) -> None:
    tell_the_move(mem)
    mem.remember("Sam likes green tea.", kind="preference", subject="Sam")
    plain = mem.search("Where does Sam live now?", k=3)
    assert plain.records == []
    both = mem.search("Where does Sam live now?", k=3, records=True)
    # The turns are the same list with or without records: where turns are scored
    # (bench locomo), records change nothing.
    assert [(h.id, h.score) for h in both] == [(h.id, h.score) for h in plain]
    assert 1 <= len(both.records) <= 3
    top = both.records[0]
    assert (top.record.attribute, top.record.value, top.record.current) == ("home", "Lyon", True)
    said = {m.content: m.id for m in mem.messages()}
    assert top.message_ids == [said["Big news: I moved to Lyon last week!"]]
    assert [r.score for r in both.records] == sorted((r.score for r in both.records), reverse=True)
    # current records only: the closed Paris record is not offered
    assert all(r.record.valid_to is None for r in both.records)
    out = both.to_dict()
    assert [h["id"] for h in out["hits"]] == [h.id for h in both]
    assert out["records"][0]["id"] == top.record.id
    assert out["records"][0]["message_ids"] == top.message_ids
    assert out["archived"] == [] and out["archived_count"] == 0
    json.dumps(out)  # JSON-ready
    tea = mem.search("green tea", k=5, records=True).records
    assert tea and tea[0].record.text == "Sam likes green tea." and tea[0].message_ids == []
    with pytest.raises(InputError, match="records"):
        mem.search("tea", records="yes")  # type: ignore[arg-type]


def test_search_records_reach_every_agent_with_all_agents(tmp_path: Path) -> None:
    with Memory(tmp_path / "a.db", embedder=HashingEmbedder(64), user="sam", agent="a") as mem:
        mem.add("I moved to Lyon last week!", speaker="Sam", timestamp=MOVE)
        mem.add("I work at Acme now.", speaker="Sam", timestamp=MOVE, agent="b")
        mine = mem.search("Where does Sam work?", records=True).records
        assert all(r.record.attribute != "employer" for r in mine)
        every = mem.search("Where does Sam work?", records=True, all_agents=True).records
        assert any(r.record.value == "Acme" for r in every)
        assert mem.search("anything", records=True, user="nobody").records == []


def test_search_records_through_async_memory(tmp_path: Path) -> None:
    import asyncio

    from arbormem import AsyncMemory

    async def run() -> list[str]:
        async with AsyncMemory(
            tmp_path / "async.db", embedder=HashingEmbedder(64), user="sam", agent="bot"
        ) as amem:
            await amem.add("I moved to Lyon last week!", speaker="Sam", timestamp=MOVE)
            hits = await amem.search("Where does Sam live?", records=True)
            return [r.record.value or "" for r in hits.records]

    assert asyncio.run(run()) == ["Lyon"]


def test_the_search_command_shows_records_with_their_sources(tmp_path: Path) -> None:
    env = {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash"}
    added = run_cli(
        "add",
        "Big news: I moved to Lyon last week!",
        "--speaker",
        "Sam",
        "--timestamp",
        "2024-05-05T10:00:00Z",
        "--json",
        env=env,
    )
    assert added.returncode == 0, added.stderr
    plain = run_cli("search", "Where does Sam live?", "--json", env=env)
    assert isinstance(json.loads(plain.stdout), list)  # unchanged without --records
    out = run_cli("search", "Where does Sam live?", "--records", "--json", env=env)
    assert out.returncode == 0, out.stderr
    both = json.loads(out.stdout)
    assert set(both) == {"hits", "records", "archived", "archived_count"}
    (record,) = both["records"]
    assert record["value"] == "Lyon" and record["message_ids"] == [both["hits"][0]["id"]]
    text = run_cli("search", "Where does Sam live?", "--records", env=env).stdout
    assert "Records:" in text and "Sam lives in Lyon." in text and both["hits"][0]["id"] in text
