"""Conversation files in every supported shape become the right records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbormem import Memory
from arbormem.bench.locomo import questions_of
from arbormem.errors import InputError
from arbormem.ingest.formats import evidence_ids, parse_locomo, read_conversation_file

from .conftest import tiny_locomo, write_json


def test_message_list(tmp_path: Path, memory: Memory) -> None:
    path = write_json(
        tmp_path / "chat.json",
        [
            {"role": "user", "content": "hi", "timestamp": "2026-01-01T10:00:00Z", "mood": "sunny"},
            {"role": "assistant", "content": "hello!", "name": "Botty"},
        ],
    )
    conv = read_conversation_file(path)
    assert conv.format == "messages"
    stored = memory.add_many(conv.records, session="chat")
    assert stored[0].metadata == {"mood": "sunny"}
    assert stored[1].speaker == "Botty"


def test_openai_chat_object_with_parts_and_tool_calls(tmp_path: Path, memory: Memory) -> None:
    path = write_json(
        tmp_path / "openai.json",
        {
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this picture?"},
                        {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "look", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "content": "a red bicycle", "tool_call_id": "c1"},
            ]
        },
    )
    conv = read_conversation_file(path)
    assert conv.format == "openai"
    stored = memory.add_many(conv.records, session="s")
    assert stored[1].content == "What is in this picture?"
    assert stored[1].metadata["parts"][0]["type"] == "image_url"
    assert json.loads(stored[2].content)[0]["function"]["name"] == "look"
    assert stored[3].role == "tool" and stored[3].metadata["tool_call_id"] == "c1"


def test_tool_calls_with_empty_content_and_image_only_messages_are_stored(
    tmp_path: Path, memory: Memory
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    image = {"type": "image_url", "image_url": {"url": "http://x/y.png"}}
    path = write_json(
        tmp_path / "openai.json",
        {
            "messages": [
                {"role": "user", "content": [image]},
                # Many serialisers write "" (not null) beside the calls.
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "assistant", "content": [], "tool_calls": [call]},
            ]
        },
    )
    stored = memory.add_many(read_conversation_file(path).records, session="s")
    assert stored[0].content == "[image_url]" and stored[0].metadata["parts"] == [image]
    assert json.loads(stored[1].content) == [call] == json.loads(stored[2].content)
    # A message that is blank and nothing else is still refused, by name.
    write_json(path, {"messages": [{"role": "user", "content": "  "}]})
    with pytest.raises(InputError, match=r"messages\[0\]\.content.*is empty"):
        memory.add_many(read_conversation_file(path).records, session="t")


def test_jsonl_messages_and_fine_tuning_conversations(tmp_path: Path, memory: Memory) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "messages": [
                            {"role": "user", "content": "q1"},
                            {"role": "assistant", "content": "a1"},
                        ]
                    }
                ),
                json.dumps({"messages": [{"role": "user", "content": "q2"}]}),
            ]
        )
    )
    conv = read_conversation_file(path)
    assert [r.session for r in conv.records] == ["mixed-1", "mixed-1", "mixed-2"]
    memory.add_many(conv.records)
    assert [s.id for s in memory.sessions()] == ["mixed-1", "mixed-2"]


def test_locomo_both_shapes(tmp_path: Path) -> None:
    single = write_json(tmp_path / "conv-x.json", tiny_locomo())
    wrapped = write_json(
        tmp_path / "locomo10.json",
        [
            {
                "sample_id": "a",
                "conversation": {k: v for k, v in tiny_locomo().items() if k != "qa"},
                "qa": tiny_locomo()["qa"],
            },
            {"sample_id": "b", "conversation": tiny_locomo(), "qa": []},
        ],
    )
    conv = read_conversation_file(single)
    assert conv.format == "locomo"
    assert conv.records[2].content.endswith("[shares a cat and a dog asleep]")
    assert conv.records[0].role == "user" and conv.records[1].role == "assistant"
    assert conv.records[0].metadata["dia_id"] == "D1:1"
    many = read_conversation_file(wrapped)
    assert {r.session for r in many.records} >= {"a/session_1", "b/session_2"}
    parsed = parse_locomo(json.loads(wrapped.read_text()), str(wrapped))
    assert [c.sample_id for c in parsed] == ["a", "b"]
    assert len(parsed[0].qa) == 4


def test_a_locomo_turn_without_a_speaker_name_is_refused_by_field(tmp_path: Path) -> None:
    # null was stored as the speaker "None", and the turn given to the other speaker.
    for bad in (None, "", 7):
        conv = tiny_locomo()
        conv["session_1"][1]["speaker"] = bad
        path = write_json(tmp_path / "conv.json", conv)
        with pytest.raises(InputError, match=r"'session_1\[1\]\.speaker': must be the speaker"):
            read_conversation_file(path)
    conv = tiny_locomo()
    conv["speaker_a"] = None
    with pytest.raises(InputError, match=r"'speaker_a': must be the speaker"):
        read_conversation_file(write_json(tmp_path / "conv.json", conv))
    # A padded name is the same speaker: "Ana " used to be given the other role.
    conv = tiny_locomo()
    conv["session_1"][0]["speaker"] = "Ana "
    records = read_conversation_file(write_json(tmp_path / "conv.json", conv)).records
    assert (records[0].speaker, records[0].role) == ("Ana", "user")


def test_evidence_ids_split_packed_entries() -> None:
    assert evidence_ids(["D8:6; D9:17", "D1:2", "garbage", "D1:2"]) == ["D8:6", "D9:17", "D1:2"]
    assert evidence_ids("D3:4,D3:5") == ["D3:4", "D3:5"]


def test_evidence_ranges_name_every_turn_in_between() -> None:
    # BENCHMARK.md: "Da:b-Da:c" names every turn from Da:b to Da:c inclusive.
    assert evidence_ids(["D12:3-D12:5"]) == ["D12:3", "D12:4", "D12:5"]
    assert evidence_ids(["D12:5 - D12:3", "D1:1"]) == ["D12:3", "D12:4", "D12:5", "D1:1"]
    assert evidence_ids("D2:7-9; D4:1") == ["D2:7", "D2:8", "D2:9", "D4:1"]
    # Across sessions, the turns between the two in the conversation's order.
    order = ["D1:8", "D1:9", "D1:11", "D2:1", "D2:2"]
    assert evidence_ids(["D1:9-D2:1"], order) == ["D1:9", "D1:11", "D2:1"]
    assert evidence_ids(["D1:9-D2:1"]) == ["D1:9", "D2:1"]


def test_benchmark_questions_expand_evidence_ranges() -> None:
    conv = tiny_locomo()
    conv["qa"] = [
        {"question": "Who has a cat?", "evidence": ["D1:1-D1:3"], "category": 1},
        {"question": "What happened?", "evidence": ["D1:3-D2:2"], "category": 1},
    ]
    (parsed,) = parse_locomo(conv, "conv.json")
    ranged, crossing = questions_of(parsed)
    assert ranged.evidence == {"D1:1", "D1:2", "D1:3"}
    assert crossing.evidence == {"D1:3", "D2:1", "D2:2"}


def test_jsonl_lines_end_only_at_newlines(tmp_path: Path, memory: Memory) -> None:
    # json.dumps(ensure_ascii=False) leaves these separators raw inside strings.
    texts = ["first\u2028line two", "para\u2029graph", "next\u0085line"]
    path = tmp_path / "odd.jsonl"
    lines = [json.dumps({"role": "user", "content": t}, ensure_ascii=False) for t in texts]
    path.write_text("\r\n".join(lines) + "\n", encoding="utf-8")
    conv = read_conversation_file(path)
    assert [r.content for r in conv.records] == texts
    memory.add_many(conv.records)
    assert [m.content for m in memory.messages()] == texts


def test_a_json_file_holding_one_message_object_is_that_message(
    tmp_path: Path, memory: Memory
) -> None:
    path = write_json(tmp_path / "one.json", {"role": "user", "content": "Leo likes chess."})
    conv = read_conversation_file(path)
    assert conv.format == "message"
    assert [m.content for m in memory.add_many(conv.records)] == ["Leo likes chess."]
    # Checked like any message, and the error says where.
    write_json(path, {"role": "wizard", "content": "hi"})
    with pytest.raises(InputError, match=r"one\.json: 'role': unknown role"):
        memory.add_many(read_conversation_file(path).records)


def test_a_json_list_of_conversations_is_one_session_each(tmp_path: Path, memory: Memory) -> None:
    # As in JSONL: an object with a 'messages' list and no 'content' is a conversation.
    path = write_json(
        tmp_path / "convs.json",
        [
            {
                "messages": [
                    {"role": "user", "content": "q1"},
                    {"role": "assistant", "content": "a1"},
                ]
            },
            {"messages": [{"role": "user", "content": "q2"}]},
        ],
    )
    conv = read_conversation_file(path)
    assert conv.format == "conversations"
    assert [r.session for r in conv.records] == ["convs-1", "convs-1", "convs-2"]
    memory.add_many(conv.records)
    assert [(s.id, s.message_count) for s in memory.sessions()] == [("convs-1", 2), ("convs-2", 1)]
    # A bad message is named by its conversation, not as a message missing 'content'.
    write_json(path, [{"messages": [{"role": "user", "content": "q"}]}, {"messages": [{"x": 1}]}])
    with pytest.raises(InputError, match=r"'\[1\]\.messages\[0\]\.content': missing"):
        read_conversation_file(path)


@pytest.mark.parametrize("text", ["", "\n  \n", "\ufeff"])
def test_an_empty_json_file_holds_no_message_as_an_empty_jsonl_file_does(
    tmp_path: Path, text: str
) -> None:
    for name in ("empty.json", "empty.jsonl"):
        (tmp_path / name).write_text(text, encoding="utf-8")
        conv = read_conversation_file(tmp_path / name)
        assert conv.records == [], name


def test_a_bad_turn_of_a_locomo_list_names_its_conversation(tmp_path: Path) -> None:
    items = [
        {"sample_id": f"conv-{n}", "conversation": tiny_locomo(f"conv-{n}"), "qa": []}
        for n in range(3)
    ]
    items[2]["conversation"]["session_2"][1]["text"] = 7
    path = write_json(tmp_path / "locomo10.json", items)
    with pytest.raises(InputError) as err:
        read_conversation_file(path)
    assert "'[2].conversation.session_2[1].text'" in str(err.value)
    assert "conv-2" in str(err.value)
    # A single conversation's fields keep their plain names.
    single = tiny_locomo()
    single["session_2"][1]["text"] = 7
    with pytest.raises(InputError, match=r"locomo\.json: 'session_2\[1\]\.text': must be a string"):
        read_conversation_file(write_json(tmp_path / "locomo.json", single))
