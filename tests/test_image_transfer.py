"""Images in exports, imports and ``arbormem migrate``: rows, fading state and bytes
carried losslessly; a broken image entry refuses the whole import."""

from __future__ import annotations

import base64
import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import InputError
from arbormem.ingest.formats import read_conversation_file
from arbormem.store import open_store
from arbormem.store.migrate import migrate

from .test_images import T0, files_in, picture


def _memory(target: str | Path) -> Memory:
    return Memory(target, embedder=HashingEmbedder(64), llm=None, reranker=None)


def _fill(mem: Memory, path: Path) -> dict[str, str]:
    """Images of every kind: captioned, shared by a message, soft-expired, by URL."""
    mem.add("look at the harbour at dawn", session="s1", timestamp=T0, speaker="Ann")
    shared = mem.messages()[-1].id
    boats = mem.add_image(
        picture(color=(0, 90, 200), stripes=3),
        caption="fishing boats in the harbour",
        session="s1",
        timestamp=T0,
        speaker="Ann",
        shared_in=shared,
        metadata={"album": "trip"},
    )
    receipt = mem.add_image(
        picture("JPEG", color=(250, 250, 240)), caption="a receipt for 14.20", session="s2"
    )
    old = mem.add_image(picture("GIF", color=(9, 9, 9)), caption="an old gif", timestamp=T0)
    # A year on, all three fade out; two come back.
    faded = mem.expire_images(now=datetime.now(timezone.utc) + timedelta(days=365))
    assert set(faded.expired) == {boats.id, receipt.id, old.id}
    mem.restore_image(boats.id)
    mem.restore_image(receipt.id)
    mem.search_images("receipt")  # a recall
    conversation = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "the view from the bridge"},
                    {"type": "image_url", "image_url": {"url": "https://example.org/b.jpg"}},
                ],
            }
        ]
    }
    source = path / "chat.json"
    source.write_text(json.dumps(conversation))
    mem.ingest(read_conversation_file(source).records)
    mem.wait()
    return {"boats": boats.id, "receipt": receipt.id, "old": old.id}


def _document(mem: Memory) -> dict[str, Any]:
    out = dict(mem.export(everything=True).to_dict())
    del out["exported_at"]
    return out


def test_export_and_import_carry_images_losslessly(tmp_path: Path) -> None:
    with _memory(tmp_path / "a.db") as mem:
        ids = _fill(mem, tmp_path)
        dump = mem.export(tmp_path / "dump.json")
        before = _document(mem)
        listed = {i.id: i.to_dict() for i in mem.list_images()}
    assert dump.images == 4 and dump.document["version"] == 4
    (thread,) = dump.document["threads"]
    assert {i["id"] for i in thread["images"]} >= set(ids.values())
    with _memory(tmp_path / "b.db") as other:
        done = other.import_(tmp_path / "dump.json")
        assert done.images == 4
        assert _document(other) == before
        after = {i.id: i.to_dict() for i in other.list_images()}
        for image_id, item in listed.items():
            moved = after[image_id]
            assert {k: v for k, v in moved.items() if k not in ("file", "strength")} == {
                k: v for k, v in item.items() if k not in ("file", "strength")
            }
            if item["file"]:
                assert moved["file"] and str(tmp_path / "b.db.images") in moved["file"]
        assert other.image_bytes(ids["receipt"]) == picture("JPEG", color=(250, 250, 240))
        assert other.get_image(ids["old"]).expired
        hit = other.search("fishing boats harbour", k=3)[0]
        assert hit.image is not None and hit.image.id == ids["boats"]
        # Importing again stores nothing twice.
        assert other.import_(tmp_path / "dump.json").images == 0
        assert len(other.list_images()) == 4
    assert len(files_in(tmp_path / "b.db.images")) == 3


def test_an_export_before_images_still_imports(tmp_path: Path) -> None:
    with _memory(tmp_path / "a.db") as mem:
        image = mem.add_image(picture(), caption="a red square")
        old = copy.deepcopy(dict(mem.export().document))
    old["version"] = 3
    for t in old["threads"]:
        del t["images"]
    with _memory(tmp_path / "b.db") as other:
        assert other.import_(old).images == 0
        # The caption message comes back as text; no image, so no reference.
        hit = other.search("red square")[0]
        assert hit.message.content.startswith(f"[image {image.id}]") and hit.image is None


def _broken(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    change(out["threads"][0]["images"][0])
    return out


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda e: e.update(data=e["data"][:-8] + "AAAAAAA="), "data", "does not hash"),
        (lambda e: e.update(data="not base64!"), "data", "not valid base64"),
        (lambda e: e.update(sha256="xyz"), "sha256", "64 lowercase hex"),
        (lambda e: e.update(caption_message="nope"), "caption_message", "'nope'"),
        (lambda e: e.update(importance=3), "importance", "from 0 to 1"),
        (lambda e: e.pop("timestamp"), "timestamp", "timestamp"),
        (lambda e: e.update(data=None), "data", "only a picture recorded by its URL"),
    ],
)
def test_a_broken_image_entry_refuses_the_whole_import_naming_it(
    tmp_path: Path, change: Any, field: str, words: str
) -> None:
    with _memory(tmp_path / "a.db") as mem:
        mem.add("a turn before the picture")
        mem.add_image(picture(), caption="a red square")
        doc = dict(mem.export().document)
    bad = _broken(doc, change)
    with _memory(tmp_path / "b.db") as other:
        with pytest.raises(InputError, match=words) as caught:
            other.import_(bad)
        assert f"threads[0].images[0].{field}" in str(caught.value)
        assert other.messages() == [] and other.list_images() == []
    assert files_in(tmp_path / "b.db.images") == []


def test_the_bytes_in_an_export_are_the_file(tmp_path: Path) -> None:
    data = picture("WEBP", color=(1, 2, 3))
    with _memory(tmp_path / "a.db") as mem:
        mem.add_image(data, caption="webp")
        (entry,) = mem.export().document["threads"][0]["images"]
    assert base64.b64decode(entry["data"]) == data and entry["size"] == len(data)


@pytest.mark.parametrize("kind", ["sqlite-file", "postgres"])
def test_migrate_copies_images_and_their_bytes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = tmp_path / "first.db"
    with _memory(first) as mem:
        ids = _fill(mem, tmp_path)
        original = _document(mem)
    target = (
        str(tmp_path / "second.db") if kind == "sqlite-file" else request.getfixturevalue("pg_url")
    )
    src, dst = open_store(first, read_only=True), open_store(target)
    done = migrate(src, dst)
    src.close()
    dst.close()
    assert done.verified and done.images == 4 and done.destination.images == 4
    with _memory(target) as mem:
        assert _document(mem) == original
        assert mem.image_bytes(ids["boats"]) == picture(color=(0, 90, 200), stripes=3)
        assert mem.search_images("receipt")[0].image.id == ids["receipt"]
        hit = mem.search("fishing boats harbour", k=3)[0]
        assert hit.image is not None and hit.image.id == ids["boats"]
    src, dst = open_store(first, read_only=True), open_store(target)
    assert migrate(src, dst).images == 0  # run again: nothing copied twice
    src.close()
    dst.close()
