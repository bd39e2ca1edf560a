"""Fuzzing the public API and the importers: whatever a caller passes, the only
exceptions that come out are arbormem's own (:class:`arbormem.errors.ArbormemError`).

The default run is bounded by ``max_examples`` (a few hundred calls, well under a
minute); the ``slow`` variants run many more. No deadline: the machine is shared,
and speed is measured by benchmarks, not here.
"""

from __future__ import annotations

import asyncio
import collections
import json
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from arbormem import AsyncMemory, Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import ArbormemError
from arbormem.ingest.formats import read_conversation_file

from .conftest import run_cli, tiny_locomo

#: Settings of the default run: a budget of examples, no deadline (see the docstring).
FAST = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(FAST, max_examples=3000)

#: Outcomes of the last run, by call and result (printed: pytest -s shows them).
TALLY: collections.Counter[str] = collections.Counter()

# -- values ------------------------------------------------------------------------------

#: Any character, lone surrogates included: hypothesis leaves them out by default, and
#: st.text() drops them even from an alphabet that has them, hence the join.
ANY_CHAR = st.one_of(st.characters(), st.characters(categories=["Cs"]))
ANY_TEXT = st.lists(ANY_CHAR, max_size=24).map("".join)

SPECIAL_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\t\n",
        "\x00",
        "a\x00b",
        "\ud800",
        "ok \udcff",
        "x" * 1025,
        "é" * 600,
        "../../etc/passwd",
        "' OR '1'='1",
        "a'; DROP TABLE messages; --",
        "%",
        "_",
        "*",
        "NEAR",
        '"',
        "default",
        "session-1",
        "2026-03-02T18:05:10Z",
        "nan",
        "-1",
        "1e400",
        "user",
        "text",
        "json",
        "code",
    ]
)


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([0, 1, -1, 2**62, 2**63, 10**30]),
        st.floats(allow_nan=True, allow_infinity=True),
        ANY_TEXT,
        SPECIAL_TEXT,
    )


JSONISH = st.recursive(
    _scalars(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)

#: What a careless or hostile caller may pass for any argument.
HOSTILE = st.one_of(
    JSONISH,
    st.binary(max_size=8),
    st.tuples(ANY_TEXT),
    st.frozensets(st.integers(), max_size=2),
    st.sampled_from(
        [
            object(),
            Path("."),
            Path(""),
            datetime(1, 1, 1),
            datetime(9999, 12, 31, 23, 59, tzinfo=timezone.utc),
            len,
            float("nan"),
            [None],
            [[]],
            {"": None},
        ]
    ),
)

# -- the public API ----------------------------------------------------------------------

TEXT = st.one_of(st.sampled_from(["peanut allergy", "the safe code", "Lisbon marathon"]), ANY_TEXT)
SCOPE_ID = st.one_of(st.none(), st.sampled_from(["default", "alice", "bob"]))
SESSION = st.one_of(st.none(), st.sampled_from(["s1", "s2", "session-1"]))
COUNT = st.integers(min_value=0, max_value=30)
STAMP = st.one_of(st.none(), st.sampled_from(["2026-03-02T18:05:10Z", 1772474700, "yesterday"]))

SCOPED = {"user": SCOPE_ID, "agent": SCOPE_ID}


def _png(shade: int) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 12), (shade, 40, 90)).save(buf, "PNG")
    return buf.getvalue()


#: An image as add_image takes it: real PNG bytes, junk, a truncated file, a missing path.
IMAGE = st.one_of(
    st.sampled_from([_png(10), _png(200), b"\x89PNG\r\n\x1a\n", b"GIF89a", "no/such.png"]),
    st.integers(0, 255).map(_png),
)
IMAGE_ID = st.sampled_from(["nope", "01M8DB08MQRNRN37G6885XVGF9", ""])

#: For each method: its positional arguments, then its keywords, each with plausible
#: values (the fuzzer mixes in HOSTILE ones and leaves keywords out).
API: dict[str, tuple[dict[str, st.SearchStrategy[Any]], dict[str, st.SearchStrategy[Any]]]] = {
    "add": (
        {"content": TEXT},
        {
            "role": st.sampled_from(["user", "assistant", "human"]),
            "speaker": st.one_of(st.none(), st.just("Maya")),
            "session": SESSION,
            "timestamp": STAMP,
            "metadata": st.one_of(st.none(), st.just({"source": "chat"})),
            "id": st.one_of(st.none(), st.builds(lambda: uuid.uuid4().hex)),
            **SCOPED,
        },
    ),
    "add_many": (
        {"messages": st.lists(st.fixed_dictionaries({"content": TEXT}), max_size=3)},
        {"session": SESSION, "progress": st.just(lambda n: None), **SCOPED},
    ),
    "ingest": (
        {"messages": st.lists(st.fixed_dictionaries({"content": TEXT}), max_size=3)},
        {"session": SESSION, "progress": st.just(lambda n: None), **SCOPED},
    ),
    "search": (
        {"query": TEXT},
        {
            "k": COUNT,
            "session": SESSION,
            "since": STAMP,
            "until": STAMP,
            "role": st.one_of(st.none(), st.just("user")),
            "neighbors": COUNT,
            "all_agents": st.booleans(),
            "records": st.booleans(),
            **SCOPED,
        },
    ),
    "get": ({"message_id": st.sampled_from(["m1", "nope"])}, SCOPED),
    "messages": (
        {},
        {"session": SESSION, "start": COUNT, "end": COUNT, "limit": COUNT, **SCOPED},
    ),
    "sessions": ({}, SCOPED),
    "scopes": ({}, {"user": SCOPE_ID}),
    "stats": ({}, SCOPED),
    "forget": (
        {"message_id": st.one_of(st.none(), st.just("nope"))},
        {
            "session": st.one_of(st.none(), st.just("nope")),
            "wait": st.sampled_from([0, 0.0, 0.5]),
            **SCOPED,
        },
    ),
    "purge": ({}, {"wait": st.sampled_from([0, 0.1]), "rewrite": st.sampled_from([None, False])}),
    "current_session": ({}, SCOPED),
    "set_mode": (
        {"mode": st.sampled_from(["code", "conversation"])},
        {"session": SESSION, **SCOPED},
    ),
    "context": (
        {"query": TEXT},
        {
            "budget_tokens": st.sampled_from([300, 4000]),
            "mode": st.none(),
            "session": SESSION,
            "system_prompt": st.one_of(st.none(), st.just("Be brief.")),
            "k": st.one_of(st.none(), COUNT),
            "paths": COUNT,
            "context_window": st.one_of(st.none(), st.just(8192)),
            "reply_tokens": st.just(100),
            **SCOPED,
        },
    ),
    "tree": (
        {},
        {
            "messages": st.booleans(),
            "depth": st.one_of(st.none(), COUNT),
            "node": st.one_of(st.none(), COUNT),
            "open_at": st.one_of(st.none(), st.sampled_from(["m1", "nope"])),
            **SCOPED,
        },
    ),
    "render_tree": (
        {"format": st.sampled_from(["text", "json", "mermaid", "dot"])},
        {
            "summaries": st.booleans(),
            "messages": st.booleans(),
            "depth": st.one_of(st.none(), COUNT),
            "leaves": st.booleans(),
            **SCOPED,
        },
    ),
    "reorganize": (
        {"similarity_threshold": st.just(0.55), "prune_trivial_leaves": st.booleans()},
        SCOPED,
    ),
    "undo_reorganize": ({"log_id": COUNT}, SCOPED),
    "restore_archived": ({}, SCOPED),
    "tree_log": ({}, SCOPED),
    "topic_paths": (
        {"query": TEXT},
        {
            "k": COUNT,
            "threshold": st.just(0.3),
            "all_agents": st.booleans(),
            "drill": st.booleans(),
            **SCOPED,
        },
    ),
    "export": ({"dest": st.none()}, {"everything": st.booleans(), **SCOPED}),
    "prepare_search": ({}, SCOPED),
    "reembed": ({}, {"prune": st.booleans(), "progress": st.just(lambda n: None)}),
    "ranking_features": ({"query": TEXT}, SCOPED),
    "session_mode": ({}, {"session": SESSION, **SCOPED}),
    "for_tenant": ({"tenant": st.sampled_from(["", "acme", "other-co"])}, {}),
    "wait": ({}, {"timeout": st.sampled_from([None, 0, 0.5]), "indexed": st.booleans()}),
    "pending": ({}, {}),
    "check_writable": ({}, {}),
    "remember": (
        {"text": TEXT},
        {
            "kind": st.sampled_from(["fact", "preference", "procedure", "opinion"]),
            "subject": st.one_of(st.none(), st.just("Sam")),
            "attribute": st.one_of(st.none(), st.just("home")),
            "value": st.one_of(st.none(), st.just("Lyon")),
            "negated": st.booleans(),
            "when": STAMP,
            "tags": st.one_of(st.none(), st.just(["travel"])),
            "intent": st.one_of(st.none(), st.just("deploy")),
            "body": st.one_of(st.none(), st.just("1. build\n2. ship")),
            **SCOPED,
        },
    ),
    "records": (
        {},
        {
            "kind": st.one_of(st.none(), st.sampled_from(["fact", "event"])),
            "subject": st.one_of(st.none(), st.just("Sam")),
            "attribute": st.one_of(st.none(), st.just("home")),
            "current": st.booleans(),
            "as_of": STAMP,
            "limit": st.one_of(st.none(), COUNT),
            **SCOPED,
        },
    ),
    "search_records": (
        {"query": TEXT},
        {
            "k": COUNT,
            "current": st.booleans(),
            "as_of": STAMP,
            "kind": st.one_of(st.none(), st.just("fact")),
            "speaker": st.one_of(st.none(), st.just("Sam")),
            **SCOPED,
        },
    ),
    "rebuild_records": ({}, {"start": COUNT, "end": st.one_of(st.none(), COUNT), **SCOPED}),
    "record_history": ({"record_id": st.sampled_from(["rec-nope", ""])}, SCOPED),
    "forget_record": (
        {"record_id": st.sampled_from(["rec-nope", ""])},
        {"wait": st.sampled_from([0, 0.5]), **SCOPED},
    ),
    "add_image": (
        {"image": IMAGE},
        {
            "caption": st.one_of(st.none(), st.just("a chart of sales")),
            "session": SESSION,
            "timestamp": STAMP,
            "speaker": st.one_of(st.none(), st.just("Maya")),
            "metadata": st.one_of(st.none(), st.just({"source": "chat"})),
            "shared_in": st.one_of(st.none(), st.just("m1")),
            **SCOPED,
        },
    ),
    "get_image": ({"image_id": IMAGE_ID}, SCOPED),
    "image_bytes": ({"image_id": IMAGE_ID}, SCOPED),
    "list_images": ({}, {"expired": st.one_of(st.none(), st.booleans()), **SCOPED}),
    "search_images": ({"query": TEXT}, {"k": COUNT, "all_agents": st.booleans(), **SCOPED}),
    "similar_images": ({"image": st.one_of(IMAGE, IMAGE_ID)}, {"k": COUNT, **SCOPED}),
    "expire_images": ({}, {"now": STAMP, "purge": st.booleans(), **SCOPED}),
    "restore_image": ({"image_id": IMAGE_ID}, {"now": STAMP, **SCOPED}),
    "forget_image": (
        {"image_id": IMAGE_ID},
        {"wait": st.sampled_from([0, 0.0, 0.5]), **SCOPED},
    ),
    # Not methods: the navigator tree_tools() returns, and import_ from a mapping.
    "tree_tools.call": (
        {
            "name": st.sampled_from(["view_node", "get_messages"]),
            "arguments": st.sampled_from([{}, {"path": []}, {"start": 0, "end": 5}, "{}"]),
        },
        SCOPED,
    ),
}

#: The methods AsyncMemory has (each runs the Memory method in a worker thread).
ASYNC = (
    "add",
    "add_many",
    "ingest",
    "search",
    "get",
    "messages",
    "sessions",
    "forget",
    "export",
    "stats",
    "add_image",
    "search_images",
)


def _hostile_names(draw: st.DrawFn, names: list[str]) -> set[str]:
    """Which arguments get a hostile value: none in a third of the calls (so that the
    working paths run too), one in half, several in the rest."""
    how = draw(st.sampled_from(["none", "one", "one", "one", "several", "none"]))
    if how == "none" or not names:
        return set()
    if how == "one" or len(names) == 1:
        return {draw(st.sampled_from(names))}
    return set(draw(st.lists(st.sampled_from(names), min_size=2, max_size=len(names))))


@st.composite
def api_calls(draw: st.DrawFn) -> tuple[str, list[Any], dict[str, Any]]:
    """A method name, its positional arguments and some of its keywords, each value
    plausible or hostile."""
    method = draw(st.sampled_from(sorted(API)))
    positional, keywords = API[method]
    given = [k for k in keywords if draw(st.booleans())]
    hostile = _hostile_names(draw, [*positional, *given])
    args = [draw(HOSTILE if k in hostile else good) for k, good in positional.items()]
    kwargs = {k: draw(HOSTILE if k in hostile else keywords[k]) for k in given}
    return method, args, kwargs


def _invoke(mem: Memory, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if method == "tree_tools.call":
        return mem.tree_tools(**kwargs).call(*args)
    return getattr(mem, method)(*args, **kwargs)


def _seed(mem: Memory) -> None:
    """Something in two scopes to search, read and forget."""
    if len(mem.messages()) < 4:
        mem.add_many(
            [
                {"role": "user", "content": "Leo is allergic to peanuts.", "session": "s1"},
                {"role": "assistant", "content": "Noted: no peanuts for Leo.", "session": "s1"},
                {"role": "user", "content": "The safe code is 4711.", "session": "s2"},
                {"role": "assistant", "content": "I will remember the code.", "session": "s2"},
            ]
        )
        mem.add("Bob runs the Lisbon marathon in October.", user="bob", session="s1")


def _only_arbormem_errors(call: Callable[[], Any], label: str) -> None:
    what = label.split("(")[0]
    try:
        call()
        TALLY[f"{what}: returned"] += 1
    except ArbormemError as exc:
        TALLY[f"{what}: {type(exc).__name__}"] += 1
    except Exception as exc:  # the bug this module looks for
        raise AssertionError(f"{label} raised {type(exc).__name__}: {exc!s:.300}") from exc


def _tallied(name: str, fuzz: Callable[[], None]) -> None:
    TALLY.clear()
    fuzz()
    print(f"{name}: {sum(TALLY.values())} calls", dict(sorted(TALLY.items())))


def _fuzz_api(tmp_path: Path, config: settings) -> None:
    from hypothesis import given

    with Memory(tmp_path / "fuzz.db", embedder=HashingEmbedder(32), llm=None) as mem:
        wrapped = AsyncMemory(memory=mem)

        @config
        @given(call=api_calls(), in_async=st.booleans())
        def run(call: tuple[str, list[Any], dict[str, Any]], in_async: bool) -> None:
            _seed(mem)
            method, args, kwargs = call
            label = f"{method}(*{args!r:.200}, **{kwargs!r:.300})"
            if in_async and method in ASYNC:
                _only_arbormem_errors(
                    lambda: asyncio.run(getattr(wrapped, method)(*args, **kwargs)), "async " + label
                )
            else:
                _only_arbormem_errors(lambda: _invoke(mem, method, args, kwargs), label)

        run()


def test_the_public_api_raises_only_arbormem_errors(tmp_path: Path) -> None:
    _tallied("api", lambda: _fuzz_api(tmp_path, FAST))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_public_api_raises_only_arbormem_errors_long_run(tmp_path: Path) -> None:
    _tallied("api", lambda: _fuzz_api(tmp_path, SLOW))


# -- opening a store -----------------------------------------------------------------------

OPEN_KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "user": st.sampled_from(["default", "alice"]),
    "agent": st.sampled_from(["default", "bot"]),
    "embedder": st.sampled_from(["hash", "hash:16"]),
    "session_gap": st.sampled_from([0, 60, 1800.0]),
    "max_message_bytes": st.sampled_from([100, 1 << 20]),
    "max_name_bytes": st.sampled_from([64, 1024]),
    "max_metadata_bytes": st.sampled_from([100, 1000]),
    "ann_threshold": st.sampled_from([0, 100]),
    "read_only": st.sampled_from([None, False]),
    "tree": st.sampled_from([None, True, False]),
    "synchronous": st.sampled_from(["NORMAL", "full"]),
    "reranker": st.sampled_from([None, "none"]),
    "llm": st.none(),
}


def _fuzz_open(tmp_path: Path, config: settings) -> None:
    from hypothesis import given

    @st.composite
    def arguments(draw: st.DrawFn) -> tuple[Any, dict[str, Any]]:
        given = [k for k in sorted(OPEN_KEYWORDS) if draw(st.booleans())]
        hostile = _hostile_names(draw, ["path", *given])
        path = draw(
            HOSTILE
            if "path" in hostile
            else st.builds(lambda: str(tmp_path / f"{uuid.uuid4().hex}.db"))
        )
        kwargs = {k: draw(HOSTILE if k in hostile else OPEN_KEYWORDS[k]) for k in given}
        kwargs.setdefault("embedder", "hash")
        kwargs.setdefault("llm", None)
        return path, kwargs

    @config
    @given(call=arguments())
    def run(call: tuple[Any, dict[str, Any]]) -> None:
        path, kwargs = call

        def open_and_use() -> None:
            with Memory(path, **kwargs) as mem:
                mem.add("Leo is allergic to peanuts.", metadata={"k": "v"}, speaker="Maya")
                mem.search("peanuts")

        _only_arbormem_errors(open_and_use, f"Memory({path!r:.100}, **{kwargs!r:.300})")

    run()


def test_opening_a_store_raises_only_arbormem_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a hostile relative path lands here
    _tallied("open", lambda: _fuzz_open(tmp_path, settings(FAST, max_examples=60)))


# -- importers -----------------------------------------------------------------------------


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """``value`` with one node somewhere inside replaced by a hostile one (or dropped)."""
    here = data.draw(st.integers(0, 3), label="stop here") == 0 or depth > 8
    if isinstance(value, Mapping) and value and not here:
        key = data.draw(st.sampled_from(sorted(value, key=str)), label="key")
        out = dict(value)
        if data.draw(st.integers(0, 9), label="drop") == 0:
            del out[key]
        else:
            out[key] = _mutate(value[key], data, depth + 1)
        return out
    if isinstance(value, list) and value and not here:
        i = data.draw(st.integers(0, len(value) - 1), label="index")
        out_list = list(value)
        out_list[i] = _mutate(value[i], data, depth + 1)
        return out_list
    return data.draw(JSONISH, label="replacement")


def _export_sample() -> dict[str, Any]:
    with Memory(":memory:", embedder=HashingEmbedder(16), llm=None) as mem:
        _seed(mem)
        mem.add("a note with metadata", metadata={"tags": ["x"], "n": 1}, speaker="Maya")
        return mem.export(everything=True)


def _conversation_samples() -> dict[str, Any]:
    """One file of each shape ingest reads (written here, not copied from a dataset)."""
    messages = [
        {"role": "user", "content": "hi there", "speaker": "Ana", "timestamp": "2024-03-03T10:00"},
        {"role": "assistant", "content": "hello", "metadata": {"m": 1}, "id": "a1"},
    ]
    return {
        "list.json": messages,
        "chat.json": {"messages": messages},
        "lines.jsonl": messages,
        "locomo.json": tiny_locomo(),
    }


def _write(path: Path, value: Any) -> None:
    if path.suffix == ".jsonl" and isinstance(value, list):
        text = "\n".join(json.dumps(v) for v in value)
    else:
        text = json.dumps(value)
    path.write_text(text, encoding="utf-8")


def _fuzz_importers(tmp_path: Path, config: settings) -> None:
    from hypothesis import given

    export = _export_sample()
    samples = _conversation_samples()
    with Memory(tmp_path / "import.db", embedder=HashingEmbedder(16), llm=None) as mem:

        @config
        @given(
            kind=st.sampled_from(["export", "export-file", "bytes", *sorted(samples)]),
            data=st.data(),
        )
        def run(kind: str, data: st.DataObject) -> None:
            name = tmp_path / f"in-{uuid.uuid4().hex[:8]}{'.json' if 'export' in kind else ''}"
            if kind == "export":
                mutated = _mutate(export, data)
                _only_arbormem_errors(
                    lambda: mem.import_(mutated), f"import_ dict({mutated!r:.400})"
                )
                return
            if kind == "export-file":
                _write(name, _mutate(export, data))
                _only_arbormem_errors(
                    lambda: mem.import_(name), f"import_ file({name.read_text()!r:.400})"
                )
                return
            if kind == "bytes":
                base = json.dumps(samples["list.json"]).encode()
                cut = data.draw(st.integers(0, len(base)), label="cut")
                noise = data.draw(st.binary(max_size=6), label="noise")
                suffix = data.draw(st.sampled_from([".json", ".jsonl"]), label="suffix")
                name = name.with_suffix(suffix)
                name.write_bytes(base[:cut] + noise + base[cut + len(noise) :])
            else:
                name = name.with_name(name.name + "-" + kind)
                _write(name, _mutate(samples[kind], data))

            def ingest() -> None:
                mem.add_many(read_conversation_file(name).records)

            _only_arbormem_errors(ingest, f"ingest {kind}({name.read_bytes()!r:.400})")

        run()


def test_the_importers_raise_only_arbormem_errors(tmp_path: Path) -> None:
    _tallied("importers", lambda: _fuzz_importers(tmp_path, FAST))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_importers_raise_only_arbormem_errors_long_run(tmp_path: Path) -> None:
    _tallied("importers", lambda: _fuzz_importers(tmp_path, SLOW))


def _fuzz_cli_ingest(tmp_path: Path, config: settings) -> None:
    from hypothesis import given

    samples = _conversation_samples()
    env = {"ARBORMEM_DB": str(tmp_path / "cli.db"), "ARBORMEM_EMBEDDER": "hash:16"}

    @config
    @given(kind=st.sampled_from(sorted(samples)), data=st.data())
    def run(kind: str, data: st.DataObject) -> None:
        name = tmp_path / f"{uuid.uuid4().hex[:8]}-{kind}"
        _write(name, _mutate(samples[kind], data))
        out = run_cli("ingest", str(name), env=env)
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        assert out.returncode in (0, 1), (out.returncode, out.stderr[-500:])

    run()


def test_cli_ingest_of_mangled_files_never_shows_a_traceback(tmp_path: Path) -> None:
    # Real subprocesses cost a second each: a few here, many in the slow variant.
    _fuzz_cli_ingest(tmp_path, settings(FAST, max_examples=4))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cli_ingest_of_mangled_files_never_shows_a_traceback_long_run(tmp_path: Path) -> None:
    _fuzz_cli_ingest(tmp_path, settings(FAST, max_examples=150))


def test_the_fuzzers_reach_every_public_method() -> None:
    # A method added to Memory without an entry here would go unfuzzed.
    public = {
        name for name in dir(Memory) if not name.startswith("_") and callable(getattr(Memory, name))
    }
    left_out = {"close", "import_", "tree_tools"}  # fuzzed above in their own ways
    assert public - left_out <= set(API), sorted(public - left_out - set(API))
    assert set(ASYNC) <= {n for n in dir(AsyncMemory) if not n.startswith("_")}
