"""Image hits in ``search`` and ``context()``: a caption message comes back with a
typed reference to its image (id, sha256, type, size, the stored file), every other
hit with none."""

from __future__ import annotations

import json
from pathlib import Path

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.models import ImageRef

from .conftest import run_cli
from .test_images import T0, picture


def test_search_hits_of_captions_carry_a_reference_to_the_image(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add("the pharmacy was closed on sunday", session="s1", timestamp=T0)
        data = picture()
        image = mem.add_image(data, caption="receipt from the pharmacy", session="s1")
        hits = mem.search("pharmacy receipt", k=5)
        by_id = {h.message.id: h for h in hits}
        caption_hit = by_id[image.message_id]
        ref = caption_hit.image
        assert isinstance(ref, ImageRef)
        assert (ref.id, ref.sha256, ref.mime, ref.size) == (
            image.id,
            image.digest,
            "image/png",
            len(data),
        )
        assert ref.file is not None and Path(ref.file).read_bytes() == data
        assert mem.image_bytes(ref.id) == data
        plain = [h for h in hits if h.message.id != image.message_id]
        assert plain and all(h.image is None for h in plain)
        assert caption_hit.to_dict()["image"] == ref.to_dict()
        assert plain[0].to_dict()["image"] is None
        assert ImageRef.from_dict(ref.to_dict()) == ref


def test_a_message_that_only_claims_an_image_gets_no_reference(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None) as mem:
        image = mem.add_image(picture(), caption="a red square")
        # Metadata naming a real image, but not its caption message's text.
        mem.add("talking about a red square", metadata={"image": {"id": image.id}})
        hits = mem.search("red square", k=5)
        refs = {h.message.id: h.image for h in hits}
        assert refs[image.message_id] is not None
        assert [r for i, r in refs.items() if i != image.message_id] == [None]


def test_a_soft_expired_image_leaves_search_with_its_reference(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None) as mem:
        image = mem.add_image(picture(), caption="a violin on a chair", timestamp=T0)
        assert mem.search("violin")[0].image is not None
        mem.expire_images(now="2027-01-01")
        assert all(h.image is None for h in mem.search("violin"))
        mem.restore_image(image.id)
        assert mem.search("violin")[0].image == ImageRef(
            id=image.id,
            sha256=image.digest,
            mime="image/png",
            size=image.size,
            file=image.file,
        )


def test_context_marks_a_recalled_image_with_its_date_and_reference(db_path: Path) -> None:
    with Memory(db_path, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add("we walked by the sea", session="old", timestamp=T0, speaker="Ann")
        image = mem.add_image(
            picture(), caption="a blue kite over the dunes", session="old", speaker="Ann"
        )
        mem.add("what should we cook tonight?", session="new")
        prompt = mem.context("the kite over the dunes", session="new", budget_tokens=800)
        recall = prompt.section("recall").text
        date = image.timestamp[:10]
        line = next(x for x in recall.splitlines() if x.startswith("Ann: [image"))
        assert line.startswith(f"Ann: [image {image.id}, shared {date}, image/png,")
        assert f"file {image.file}]" in line and line.endswith("a blue kite over the dunes")


def test_cli_search_json_has_the_image_key(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as mem:
        mem.add("an ordinary turn about lanterns")
        image = mem.add_image(picture(), caption="paper lanterns at the festival")
    done = run_cli("search", "lanterns", "--json", "--db", str(db), "--embedder", "hash")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    hits = hits["hits"] if isinstance(hits, dict) else hits
    refs = {h["id"]: h["image"] for h in hits}
    assert refs[image.message_id]["id"] == image.id
    assert refs[image.message_id]["sha256"] == image.digest
    assert [r for i, r in refs.items() if i != image.message_id] == [None]
