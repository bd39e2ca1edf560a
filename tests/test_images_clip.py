"""CLIP embeddings of pictures (:mod:`arbormem.images.clip`), with a real model.

The model is a tiny CLIP with random weights, built here in a temporary folder with
``transformers`` and loaded through the same path as a real one (``sentence-
transformers``, ``local_files_only``): these tests check what arbormem does with the
vectors (computed when an image is added, stored, read back, fused into image search,
deleted with the picture), not what CLIP knows. They need the ``clip`` extra and skip
without it; the settings checks at the top need nothing.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from arbormem import Memory, Settings
from arbormem.embed import HashingEmbedder
from arbormem.errors import ConfigError, InputError
from arbormem.images import clip as clip_module
from arbormem.images.index import RRF_K

COLORS = [(220, 20, 20), (20, 200, 40), (30, 40, 220), (240, 240, 30)]


def with_clip(spec: str) -> Settings:
    return Settings.resolve(image_embedder=spec)


def png(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


# -- the setting, checked when a memory opens ---------------------------------------------


def test_a_folder_without_a_model_is_refused_before_any_file_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    monkeypatch.setenv("ARBORMEM_IMAGE_EMBEDDER", f"clip:{tmp_path / 'nowhere'}")
    with pytest.raises(ConfigError, match=r"ARBORMEM_IMAGE_EMBEDDER.*config\.json"):
        Memory(db, llm=None)
    assert not db.exists()


def test_an_embedder_that_is_not_clip_is_refused_naming_the_forms() -> None:
    with pytest.raises(InputError, match=r"'none' or 'clip:FOLDER'") as caught:
        with_clip("openai:some-model")
    assert caught.value.field == "image_embedder"


def test_a_missing_package_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.setattr(clip_module, "PACKAGE", "arbormem_no_such_package")
    with pytest.raises(ConfigError, match=r'pip install "arbormem\[clip\]"'):
        Memory(tmp_path / "m.db", settings=with_clip(f"clip:{folder}"), llm=None)


# -- with a model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers", reason="the clip extra is not installed")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-clip")
    words = ["a", "picture", "of", "red", "green", "blue", "yellow", "sky", "grass", "sun"]
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for w in words:
        vocab[w + "</w>"] = len(vocab)
    for ch in "abcdefghijklmnopqrstuvwxyz":
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = transformers.CLIPTokenizer(
        str(folder / "vocab.json"),
        str(folder / "merges.txt"),
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    config = transformers.CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_attention_heads": 2,
            "num_hidden_layers": 2,
            "max_position_embeddings": 32,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 1,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_attention_heads": 2,
            "num_hidden_layers": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    processor = transformers.CLIPProcessor(
        image_processor=transformers.CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tokenizer,
    )
    transformers.CLIPModel(config).save_pretrained(str(folder))
    processor.save_pretrained(str(folder))
    return folder


def reference(folder: Path) -> object:
    """The same model loaded directly, to compute what arbormem should have stored."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


@pytest.fixture(params=["sqlite-file", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the memory lives: a SQLite file, or a real PostgreSQL database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "m.db")


@pytest.fixture
def clip_memory(tiny_clip: Path, store: str) -> Iterator[Memory]:
    with Memory(
        store,
        settings=with_clip(f"clip:{tiny_clip}"),
        embedder=HashingEmbedder(64),
        llm=None,
    ) as mem:
        yield mem


def test_a_picture_is_embedded_when_added_and_its_vector_kept_by_its_bytes(
    clip_memory: Memory, tiny_clip: Path
) -> None:
    data = png(COLORS[0])
    image = clip_memory.add_image(data, caption="a picture")
    model = clip_memory.engine.clip
    assert model is not None
    stored = clip_memory.engine.backend.vectors(model.model_id, [image.digest])
    expected = reference(tiny_clip).encode(  # type: ignore[attr-defined]
        [Image.open(io.BytesIO(data)).convert("RGB")], normalize_embeddings=True
    )[0]
    assert np.allclose(stored[image.digest], expected, atol=1e-5)
    # The same bytes in another scope are one vector.
    clip_memory.add_image(data, caption="a picture", user="someone else")
    assert clip_memory.engine.backend.vector_models()[model.model_id] == 1


def test_the_picture_signal_joins_the_caption_signals_by_its_rank(
    clip_memory: Memory, tiny_clip: Path, store: str
) -> None:
    datas = [png(c) for c in COLORS]
    images = [clip_memory.add_image(d, caption="a picture") for d in datas]
    query = "a red picture of the sky"
    with_clip = {h.image.id: h.score for h in clip_memory.search_images(query, k=10)}
    clip_memory.close()
    with Memory(store, embedder=HashingEmbedder(64), llm=None) as plain:
        without = {h.image.id: h.score for h in plain.search_images(query, k=10)}
    model = reference(tiny_clip)
    pictures = model.encode(  # type: ignore[attr-defined]
        [Image.open(io.BytesIO(d)).convert("RGB") for d in datas], normalize_embeddings=True
    )
    text = model.encode([query], normalize_embeddings=True)[0]  # type: ignore[attr-defined]
    order = np.argsort(-(pictures @ text), kind="stable")
    for rank, i in enumerate(order):
        image_id = images[int(i)].id
        assert with_clip[image_id] - without[image_id] == pytest.approx(
            1.0 / (RRF_K + rank + 1), abs=2e-6
        )


def test_forgetting_a_picture_takes_its_vector_and_reembedding_keeps_the_others(
    clip_memory: Memory,
) -> None:
    kept = clip_memory.add_image(png(COLORS[1]), caption="a picture of grass")
    gone = clip_memory.add_image(png(COLORS[2]), caption="a picture of the sky")
    model = clip_memory.engine.clip
    assert model is not None
    backend = clip_memory.engine.backend
    clip_memory.reembed(prune=True)
    assert set(backend.vectors(model.model_id, [kept.digest, gone.digest])) == {
        kept.digest,
        gone.digest,
    }
    clip_memory.forget_image(gone.id)
    clip_memory.purge(wait=5)
    assert set(backend.vectors(model.model_id, [kept.digest, gone.digest])) == {kept.digest}


def test_a_picture_without_a_stored_vector_is_embedded_when_search_first_reads_it(
    tiny_clip: Path, store: str
) -> None:
    db = store
    with Memory(db, embedder=HashingEmbedder(64), llm=None) as plain:
        image = plain.add_image(png(COLORS[3]), caption="a picture of the sun")
    with Memory(
        db, settings=with_clip(f"clip:{tiny_clip}"), embedder=HashingEmbedder(64), llm=None
    ) as mem:
        model = mem.engine.clip
        assert model is not None
        assert mem.engine.backend.vectors(model.model_id, [image.digest]) == {}
        assert [h.image.id for h in mem.search_images("sun", k=3)] == [image.id]
        assert set(mem.engine.backend.vectors(model.model_id, [image.digest])) == {image.digest}


def test_a_model_that_fails_to_load_loses_no_image_and_search_answers_from_captions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("sentence_transformers", reason="the clip extra is not installed")
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no such architecture"}')
    with Memory(
        tmp_path / "m.db",
        settings=with_clip(f"clip:{broken}"),
        embedder=HashingEmbedder(64),
        llm=None,
    ) as mem:
        image = mem.add_image(png(COLORS[0]), caption="a picture of a red kite")
        assert [h.image.id for h in mem.search_images("red kite", k=3)] == [image.id]
        assert mem.get_image(image.id).digest == image.digest
    assert "CLIP could not embed" in caplog.text
