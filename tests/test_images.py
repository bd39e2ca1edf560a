"""Images as memories: stored once by their bytes, captioned, found by text, fading
with time, forgotten with their files. Real image files made with Pillow, real SQLite
files, the vision model through the fake OpenAI server."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from arbormem import AsyncMemory, Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import InputError, NotFound
from arbormem.images.fading import Curve
from arbormem.settings import Settings
from arbormem.store.images import ImageRow

from .fake_openai import FakeOpenAI, Reply

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def picture(
    fmt: str = "PNG",
    color: tuple[int, int, int] = (200, 30, 30),
    size: tuple[int, int] = (64, 48),
    stripes: int = 0,
    **save: object,
) -> bytes:
    """A real image file of ``fmt``; ``stripes`` draws vertical bars, so that two
    pictures can differ in their perceptual hash."""
    img = Image.new("RGB", size, color)
    for x in range(0, size[0], max(1, size[0] // max(1, stripes))) if stripes else ():
        for y in range(size[1]):
            for dx in range(max(1, size[0] // (2 * stripes))):
                if x + dx < size[0]:
                    img.putpixel((x + dx, y), (255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, fmt, **save)
    return buf.getvalue()


def files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture(params=["sqlite-file", "postgres"])
def mem(request: pytest.FixtureRequest, db_path: Path) -> Memory:
    """A memory on each back-end that keeps images: an SQLite file (bytes in files
    beside it) and PostgreSQL (bytes inside the database)."""
    target = db_path if request.param == "sqlite-file" else request.getfixturevalue("pg_url")
    with Memory(target, embedder=HashingEmbedder(64), llm=None) as m:
        yield m


def on_postgres(mem: Memory) -> bool:
    return mem.path.startswith("postgresql")


def kept(mem: Memory) -> int:
    """How many pictures' bytes the store keeps (files beside an SQLite store, rows of
    PostgreSQL's ``image_blobs``)."""
    if on_postgres(mem):
        with mem.backend._reading() as conn:  # type: ignore[attr-defined]
            return int(conn.execute("SELECT count(*) FROM image_blobs").fetchone()[0])
    return len(files_in(Path(mem.path + ".images")))


# -- adding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "mime"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")],
)
def test_each_format_is_stored_from_bytes_and_read_back(mem: Memory, fmt: str, mime: str) -> None:
    data = picture(fmt)
    stored = mem.add_image(data, caption="a red card")
    assert stored.mime == mime and (stored.width, stored.height) == (64, 48)
    assert mem.image_bytes(stored.id) == data
    if on_postgres(mem):
        assert stored.file is None and kept(mem) == 1
        return
    assert stored.file is not None and Path(stored.file).read_bytes() == data
    assert Path(stored.file).parent.parent == Path(mem.path + ".images")


def test_a_path_and_a_file_object_are_accepted(mem: Memory, tmp_path: Path) -> None:
    path = tmp_path / "beach_holiday.jpg"
    path.write_bytes(picture("JPEG", color=(10, 120, 200)))
    by_path = mem.add_image(path)
    assert "beach holiday" in by_path.caption  # the file name, when nothing else speaks
    with open(tmp_path / "beach_holiday.jpg", "rb") as handle:
        again = mem.add_image(handle)
    assert again.duplicate and again.id == by_path.id


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"", "it is empty"),
        (b"%PDF-1.7 not a picture", "do not start like a PNG, JPEG, WebP or GIF"),
        (picture("PNG")[:60], "damaged PNG"),
        (picture("BMP"), "do not start like"),
        (12, "must be a path, bytes or a binary file object"),
        ("no/such/file.png", "no such file"),
    ],
)
def test_bad_images_are_refused_naming_the_argument(
    mem: Memory, value: object, problem: str
) -> None:
    with pytest.raises(InputError, match=problem) as caught:
        mem.add_image(value)
    assert caught.value.field == "image"
    assert mem.list_images() == [] and mem.messages() == []


def test_an_image_id_is_its_scope_and_bytes_so_storing_again_gives_the_same_text(
    tmp_path: Path,
) -> None:
    texts = []
    for n in (1, 2):
        with Memory(tmp_path / f"{n}.db", embedder=HashingEmbedder(64), llm=None) as m:
            first = m.add_image(picture(), caption="the harbour at dusk")
            other = m.add_image(picture(), caption="the harbour at dusk", user="bea")
            assert first.id != other.id  # another scope, another image
            texts.append((first.id, m.get(first.message_id or "").content))
    assert texts[0] == texts[1]


def test_a_text_file_object_is_refused_with_the_fix(mem: Memory, tmp_path: Path) -> None:
    (tmp_path / "x.png").write_bytes(picture())
    with (
        open(tmp_path / "x.png", encoding="latin-1") as handle,
        pytest.raises(InputError, match="binary mode"),
    ):
        mem.add_image(handle)


def test_a_png_in_disguise_is_refused_by_its_bytes(mem: Memory, tmp_path: Path) -> None:
    fake = tmp_path / "photo.png"
    fake.write_bytes(b"GIF89a" + b"\x00" * 40)  # a GIF signature, not a decodable GIF
    with pytest.raises(InputError, match="damaged GIF"):
        mem.add_image(fake)


def test_an_id_that_is_not_valid_utf8_is_refused_naming_the_argument(mem: Memory) -> None:
    # Found by the API fuzzer: a lone surrogate reached the store's lookup and raised
    # UnicodeEncodeError there.
    with pytest.raises(InputError, match=r"'image'.*unpaired surrogate"):
        mem.similar_images("\ud800")


def test_same_bytes_are_one_image_per_scope_across_sessions(mem: Memory) -> None:
    data = picture()
    first = mem.add_image(data, caption="red card", session="s1")
    second = mem.add_image(data, caption="another caption", session="s2")
    assert second.duplicate and second.id == first.id and second.caption == "red card"
    assert len(mem.list_images()) == 1
    other = mem.add_image(data, caption="red card", user="bob")
    assert not other.duplicate and other.id != first.id
    # One file for both scopes: the bytes are kept once per hash.
    assert kept(mem) == 1


def test_an_image_joins_its_session_at_its_time_like_a_message(mem: Memory) -> None:
    mem.add("Look at the receipt from lunch", session="s1", timestamp=T0, speaker="Ann")
    image = mem.add_image(
        picture(),
        caption="lunch receipt 14.20 EUR",
        session="s1",
        speaker="Ann",
        timestamp=T0 + timedelta(seconds=5),
    )
    assert image.session == "s1" and image.timestamp.startswith("2026-03-01T12:00:05")
    turns = mem.messages(session="s1")
    assert [t.metadata.get("image", {}).get("id") for t in turns] == [None, image.id]
    assert turns[1].speaker == "Ann" and image.message_id == turns[1].id


# -- captions ---------------------------------------------------------------------------


def test_captions_from_the_file_itself(mem: Memory) -> None:
    exif = Image.Exif()
    exif[0x010E] = "Harbour at dawn"
    exif[0x0132] = "2025:07:14 06:12:00"
    jpeg = picture("JPEG", exif=exif.tobytes())
    from_exif = mem.add_image(jpeg)
    assert "Harbour at dawn" in from_exif.caption and "2025-07-14" in from_exif.caption
    assert from_exif.caption_source == "file"
    info = PngImagePlugin.PngInfo()
    info.add_text("Description", "Quarterly revenue chart")
    png = picture("PNG", color=(1, 2, 3), pnginfo=info)
    assert "Quarterly revenue chart" in mem.add_image(png).caption


def test_a_caption_from_the_turns_around_it_when_the_file_says_nothing(mem: Memory) -> None:
    mem.add("Here is my new puppy, Biscuit!", session="s1", speaker="Ann")
    image = mem.add_image(picture(color=(9, 9, 9)), session="s1")
    assert image.caption_source == "context" and "Biscuit" in image.caption


@pytest.fixture(scope="module")
def server() -> FakeOpenAI:
    with FakeOpenAI() as running:
        yield running


def vision_memory(path: Path, server: FakeOpenAI, timeout: float = 5.0) -> Memory:
    config = Settings.resolve(
        db=str(path),
        vision_model="fake-vision",
        vision_base_url=server.base_url,
        vision_timeout=timeout,
        llm=None,
    )
    return Memory(settings=config, embedder=HashingEmbedder(64), llm=None)


GOOD = json.dumps(
    {
        "caption": "A bar chart of monthly sales, March highest.",
        "entities": ["sales", "March"],
        "scene": "chart",
        "importance": 0.8,
    }
)


def test_a_vision_model_captions_and_its_answer_is_cached_by_hash(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    server.reset()
    server.queue(Reply(GOOD))
    with vision_memory(tmp_path / "v.db", server) as m:
        image = m.add_image(picture(color=(5, 200, 5)))
        assert image.caption_source == "vision" and image.scene == "chart"
        assert image.importance == 0.8 and image.entities == ("sales", "March")
        sent = server.chat_requests()[-1]["body"]["messages"][-1]["content"]
        assert sent[1]["image_url"]["url"].startswith("data:image/png;base64,")
        # The same bytes in another scope: the cached answer, no second request.
        again = m.add_image(picture(color=(5, 200, 5)), user="bob")
        assert again.caption == image.caption and len(server.chat_requests()) == 1
        # The caller's caption wins over the model.
        given = m.add_image(picture(color=(7, 7, 7)), caption="mine")
        assert given.caption_source == "caller" and len(server.chat_requests()) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply("not json at all"),
        Reply(json.dumps({"caption": "", "scene": "chart"})),
        Reply(json.dumps({"caption": "x", "importance": 7})),
        Reply(json.dumps(["a", "list"])),
        Reply(status=500),
        Reply(raw="{garbage"),
    ],
    ids=["prose", "empty-caption", "importance-out-of-range", "a-list", "500", "protocol"],
)
def test_a_failing_vision_model_falls_back_and_never_loses_the_image(
    tmp_path: Path, server: FakeOpenAI, reply: Reply
) -> None:
    server.reset()
    server.default = reply
    with vision_memory(tmp_path / "v.db", server) as m:
        m.add("my new bike", speaker="Ann")
        image = m.add_image(picture(color=(1, 100, 1)))
        assert image.caption_source in ("file", "context") and "bike" in image.caption
        assert m.image_bytes(image.id) == picture(color=(1, 100, 1))
        assert m.search_images("bike")[0].image.id == image.id


def test_a_vision_model_that_times_out_falls_back(tmp_path: Path, server: FakeOpenAI) -> None:
    server.reset()
    server.default = Reply(GOOD, delay=1.5)
    with vision_memory(tmp_path / "v.db", server, timeout=0.3) as m:
        image = m.add_image(picture(color=(3, 3, 90)), caption=None)
        assert image.caption_source != "vision" and m.list_images()[0].id == image.id


# -- finding ----------------------------------------------------------------------------


def test_text_search_finds_images_by_caption_and_search_and_context_show_them(
    mem: Memory,
) -> None:
    mem.add("We talked about the garden and the weather.", session="s1")
    receipt = mem.add_image(picture(), caption="receipt from the pharmacy", session="s1")
    mem.add_image(picture(color=(0, 0, 250)), caption="a blue kite over the dunes", session="s1")
    hits = mem.search_images("pharmacy receipt")
    assert hits[0].image.id == receipt.id
    assert all(h.image.id for h in hits)  # only images, never the plain turn
    mem.wait()  # recalls are written in the background
    assert mem.get_image(receipt.id).recalls == 1  # a hit counts as a recall
    found = mem.search("pharmacy receipt")
    assert found[0].message.metadata["image"]["id"] == receipt.id
    prompt = mem.context("what did the pharmacy receipt say?", budget_tokens=800)
    assert f"[image {receipt.id}] receipt from the pharmacy" in prompt.text


def test_similar_images_by_perceptual_hash(mem: Memory) -> None:
    plain = mem.add_image(picture(color=(40, 40, 40)), caption="grey")
    striped = mem.add_image(picture(color=(40, 40, 40), stripes=4), caption="striped")
    near = mem.similar_images(picture(color=(40, 40, 40), stripes=4, size=(128, 96)))
    assert near[0].image.id == striped.id and near[0].distance == 0
    assert [h.image.id for h in mem.similar_images(plain.id)] == [striped.id]


def test_get_image_is_confined_to_its_scope(mem: Memory) -> None:
    image = mem.add_image(picture(), caption="x", user="alice")
    with pytest.raises(NotFound):
        mem.get_image(image.id, user="bob")
    assert mem.get_image(image.id, user="alice").id == image.id


def test_async_memory_adds_and_searches_images(db_path: Path) -> None:
    async def run() -> list[str]:
        async with AsyncMemory(db_path, embedder=HashingEmbedder(64), llm=None) as m:
            await m.add_image(picture(), caption="a lighthouse at night")
            return [h.image.caption for h in await m.search_images("lighthouse")]

    assert asyncio.run(run()) == ["a lighthouse at night"]


# -- forgetting -------------------------------------------------------------------------


def test_forget_leaves_no_file_behind(mem: Memory) -> None:
    one = mem.add_image(picture(), caption="one", session="s1")
    mem.add_image(picture(color=(0, 90, 0)), caption="two", session="s2")
    mem.add_image(picture(), caption="one again", user="bob")  # same bytes, other scope
    assert kept(mem) == 2
    done = mem.forget_image(one.id)
    assert done.messages == 1 and mem.list_images() != []
    assert kept(mem) == 2  # bob's image still needs those bytes
    mem.forget(session="s2")
    assert mem.list_images() == [] and kept(mem) == 1
    mem.forget(user="bob")
    assert kept(mem) == 0


def test_forgetting_the_caption_message_forgets_the_image(mem: Memory) -> None:
    image = mem.add_image(picture(), caption="one")
    assert image.message_id is not None
    mem.forget(image.message_id)
    assert mem.list_images() == [] and kept(mem) == 0


def test_an_in_memory_store_keeps_bytes_in_its_database() -> None:
    with Memory(":memory:", embedder=HashingEmbedder(64), llm=None) as m:
        image = m.add_image(picture(), caption="x")
        assert image.file is None and m.image_bytes(image.id) == picture()
        m.forget_image(image.id)
        assert m.backend.blob(image.digest) is None


# -- fading -----------------------------------------------------------------------------


def row(importance: float, recalls: int = 0, at: datetime = T0) -> ImageRow:
    return ImageRow(
        id="x",
        thread_id=1,
        digest="d",
        mime="image/png",
        size=1,
        session="s",
        timestamp=at,
        caption="c",
        caption_source="caller",
        importance=importance,
        recalls=recalls,
    )


CURVE = Curve()


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, 1),
    st.floats(0, 1),
    st.integers(0, 20),
    st.floats(0, 400),
    st.floats(0, 400),
)
def test_strength_falls_with_time_and_rises_with_importance_and_recalls(
    a: float, b: float, recalls: int, d1: float, d2: float
) -> None:
    lo, hi = sorted((a, b))
    early, late = sorted((d1, d2))
    at_early, at_late = T0 + timedelta(days=early), T0 + timedelta(days=late)
    s = CURVE.strength
    assert 0 <= s(row(lo, recalls), at_late) <= s(row(lo, recalls), at_early) <= 1
    assert s(row(lo, recalls), at_late) <= s(row(hi, recalls), at_late)
    assert s(row(lo, recalls), at_late) <= s(row(lo, recalls + 1), at_late)


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.integers(0, 5))
def test_one_half_life_halves_the_strength(importance: float, recalls: int) -> None:
    h = CURVE.half_life(importance, recalls)
    assert 7.0 * 1.5**recalls <= h + 1e-9 and h <= 30.0 * 1.5**recalls + 1e-9
    after = CURVE.strength(row(importance, recalls), T0 + timedelta(days=h))
    assert after == pytest.approx(0.5)


def test_half_lives_at_the_ends_are_the_settings() -> None:
    assert CURVE.half_life(0.0, 0) == 7.0 and CURVE.half_life(1.0, 0) == 30.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 60)), min_size=1, max_size=6))
def test_expire_follows_the_schedule_exactly(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[float, int]]
) -> None:
    """Images stored at generated days with generated importance: after expire at a
    chosen moment, exactly those whose strength is below the threshold are out of
    recall, and restoring brings one back."""
    path = tmp_path_factory.mktemp("fade") / "m.db"
    with Memory(path, embedder=HashingEmbedder(64), llm=None) as m:
        stored = []
        for i, (importance, day) in enumerate(history):
            image = m.add_image(
                picture(color=(i * 20 % 256, 7, 7)),
                caption=f"picture number {i}",
                timestamp=T0 + timedelta(days=day),
            )
            m.backend.update_image(image.id, importance=importance)
            stored.append((image.id, importance, day))
        now = T0 + timedelta(days=45)
        done = m.expire_images(now=now)
        expected = {
            i for i, imp, day in stored if 0.5 ** ((45 - day) / CURVE.half_life(imp, 0)) < 0.1
        }
        assert set(done.expired) == expected
        assert {x.id for x in m.list_images(expired=True)} == expected
        live = {h.message.metadata["image"]["id"] for h in m.search("picture number", k=50)}
        assert live == {i for i, _, _ in stored} - expected
        if expected:
            back = m.restore_image(sorted(expected)[0], now=now)
            assert not back.expired and back.message_id is not None
            assert m.expire_images(now=now).expired == ()  # renewed as of now


def test_expired_images_past_the_maximum_age_are_purged_with_their_files(mem: Memory) -> None:
    old = mem.add_image(picture(), caption="old photo", timestamp=T0)
    mem.add_image(picture(color=(0, 1, 2)), caption="new photo", timestamp=T0 + timedelta(days=95))
    first = mem.expire_images(now=T0 + timedelta(days=60))
    assert first.expired == (old.id,) and first.purged == ()
    assert all(h.image.id != old.id for h in mem.search_images("old photo"))
    assert kept(mem) == 2  # soft-expired: kept
    later = mem.expire_images(now=T0 + timedelta(days=100), purge=True)
    assert later.purged == (old.id,) and kept(mem) == 1
    with pytest.raises(NotFound):
        mem.get_image(old.id)


# -- ingest -----------------------------------------------------------------------------


def test_openai_image_parts_are_ingested_as_images(mem: Memory, tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "whiteboard_sketch.png").write_bytes(picture(color=(250, 250, 0)))
    data = base64.b64encode(picture("JPEG", color=(0, 0, 0))).decode()
    conversation = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What does this error mean?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}},
                ],
            },
            {"role": "assistant", "content": "It is a missing import."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And our plan:"},
                    {"type": "image_url", "image_url": {"url": "pics/whiteboard_sketch.png"}},
                    {"type": "image_url", "image_url": {"url": "https://example.org/cat.jpg"}},
                ],
            },
        ]
    }
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(conversation))
    from arbormem.ingest.formats import read_conversation_file

    done = mem.ingest(read_conversation_file(source).records)
    images = mem.list_images()
    assert len(images) == 3
    shared = done.messages[0]
    assert images[0].shared_in == shared.id and "error" in images[0].caption
    assert shared.metadata["parts"][0]["image_url"]["url"] == f"sha256:{images[0].digest}"
    assert (images[1].file is not None) != on_postgres(mem)  # bytes inside PostgreSQL
    assert images[1].size and "whiteboard sketch" in images[1].caption
    assert images[2].url == "https://example.org/cat.jpg" and images[2].file is None
    with pytest.raises(NotFound, match="recorded by its URL"):
        mem.image_bytes(images[2].id)
    # Ingesting again stores nothing new.
    mem.ingest(read_conversation_file(source).records)
    assert len(mem.list_images()) == 3


def test_a_bad_image_part_refuses_the_batch_naming_file_and_field(
    mem: Memory, tmp_path: Path
) -> None:
    source = tmp_path / "chat.jsonl"
    lines = [
        {"role": "user", "content": "hello"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
        },
    ]
    source.write_text("\n".join(json.dumps(x) for x in lines))
    from arbormem.ingest.formats import read_conversation_file

    with pytest.raises(InputError) as caught:
        mem.ingest(read_conversation_file(source).records)
    assert caught.value.source == str(source) and caught.value.line == 2
    assert "image_url" in (caught.value.field or "")
    assert mem.messages() == [] and mem.list_images() == []


def test_locomo_shared_pictures_become_images_with_their_caption(mem: Memory) -> None:
    mem.add_many(
        [
            {
                "content": "Look what I painted last week!",
                "speaker": "Caroline",
                "metadata": {
                    "dia_id": "D1:3",
                    "img_url": ["https://example.org/p.jpg"],
                    "blip_caption": "a photo of a painting of a sunset over a lake",
                },
            }
        ],
        session="session_1",
    )
    (image,) = mem.list_images()
    assert image.caption == "a photo of a painting of a sunset over a lake"
    assert image.caption_source == "caller" and image.url == "https://example.org/p.jpg"
    assert mem.search_images("sunset painting")[0].image.id == image.id


# -- the CLI ----------------------------------------------------------------------------


def test_cli_images_add_search_show(tmp_path: Path) -> None:
    from .conftest import run_cli

    (tmp_path / "field.png").write_bytes(picture(color=(0, 200, 0)))
    (tmp_path / "notes.txt").write_text("not a picture")
    db = ["--db", str(tmp_path / "cli.db"), "--embedder", "hash"]
    added = run_cli(
        "images",
        "add",
        str(tmp_path / "field.png"),
        "--caption",
        "a green football field",
        "--json",
        *db,
    )
    assert added.returncode == 0, added.stderr
    (image,) = json.loads(added.stdout)
    found = run_cli("images", "search", "football", "--json", *db)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert [h["id"] for h in hits] == [image["id"]] and hits[0]["file"]
    shown = run_cli("images", "show", image["id"], "--json", *db)
    assert json.loads(shown.stdout)["recalls"] == 1
    again = run_cli("images", "add", str(tmp_path / "field.png"), *db)
    assert "already stored" in again.stdout
    bad = run_cli("images", "add", str(tmp_path / "notes.txt"), *db)
    assert bad.returncode == 1 and "notes.txt" in bad.stderr and "PNG, JPEG" in bad.stderr
    missing = run_cli("images", "show", "nope", *db)
    assert missing.returncode == 1 and "no image 'nope'" in missing.stderr


def test_image_search_follows_adds_forgets_and_expiry(mem: Memory) -> None:
    first = mem.add_image(picture(), caption="a violin on a chair", timestamp=T0)
    assert [h.image.id for h in mem.search_images("violin")] == [first.id]
    mem.add("an ordinary turn about a violin concert")  # turns are never image hits
    second = mem.add_image(picture(color=(0, 0, 1)), caption="a violin case at the station")
    assert {h.image.id for h in mem.search_images("violin", k=5)} == {first.id, second.id}
    mem.forget_image(second.id)
    assert [h.image.id for h in mem.search_images("violin", k=5)] == [first.id]
    # Three recalls since it was stored: about 47 days of half-life, renewed today.
    soon = datetime.now(timezone.utc) + timedelta(days=60)
    assert mem.expire_images(now=soon).expired == ()
    assert mem.expire_images(now=soon + timedelta(days=100)).expired == (first.id,)
    assert mem.search_images("violin") == []
    mem.restore_image(first.id)
    assert [h.image.id for h in mem.search_images("violin")] == [first.id]
