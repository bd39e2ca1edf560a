"""Optional CLIP embeddings (``arbormem[clip]``): a tiny random CLIP model built in a
temporary folder (transformers' CLIPModel, a tokenizer of single letters) and loaded
through the real path, sentence-transformers from a local folder. Skipped, saying
why, when sentence-transformers is not installed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.errors import InputError
from arbormem.images.clip import PREFIX, model_id_of
from arbormem.settings import Settings

from .test_images import picture

_SKIP = "CLIP tests need sentence-transformers (and torch): pip install 'arbormem[clip]'"


def tiny_clip(root: Path) -> Path:
    """A random CLIP model small enough to build in a second, saved as a
    sentence-transformers folder; returns the folder."""
    pytest.importorskip("sentence_transformers", reason=_SKIP)
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizer,
    )

    hf = root / "hf"
    hf.mkdir()
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in letters:
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    (hf / "vocab.json").write_text(json.dumps(vocab))
    (hf / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(hf / "vocab.json"), str(hf / "merges.txt"))
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(hf)
    layer = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
             "num_attention_heads": 2}  # fmt: skip
    config = CLIPConfig(
        text_config={
            **layer,
            "vocab_size": len(vocab),
            "max_position_embeddings": 77,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 1,
        },
        vision_config={**layer, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(7)
    CLIPModel(config).save_pretrained(hf)
    folder = root / "tiny-clip"
    SentenceTransformer(modules=[models.CLIPModel(str(hf))], device="cpu").save(str(folder))
    return folder


def clip_memory(path: Path, model: Path) -> Memory:
    config = Settings.resolve(db=str(path), clip_model=str(model), llm=None)
    return Memory(settings=config, embedder=HashingEmbedder(64), llm=None)


def test_a_clip_model_folder_is_required_and_never_downloaded(tmp_path: Path) -> None:
    with clip_memory(tmp_path / "m.db", tmp_path / "clip-ViT-B-32") as mem:
        with pytest.raises(InputError, match="never downloads") as caught:
            mem.add_image(picture(), caption="a red card")
        assert "clip_model" in str(caught.value) and "clip-ViT-B-32" in str(caught.value)
        assert mem.list_images() == []  # refused before anything was stored


def test_clip_embeds_images_and_ranks_them_beside_captions(tmp_path: Path) -> None:
    folder = tiny_clip(tmp_path)
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(folder), device="cpu")
    pictures = {
        "red": picture(color=(220, 20, 20)),
        "green": picture(color=(20, 200, 40), stripes=3),
        "blue": picture(color=(10, 10, 230), stripes=6),
    }
    query = "a bright shape"
    with clip_memory(tmp_path / "m.db", folder) as mem:
        stored = {
            name: mem.add_image(data, caption=f"picture number {n} of the set")
            for n, (name, data) in enumerate(pictures.items())
        }
        key = PREFIX + model_id_of(folder)
        for name, data in pictures.items():
            kept = mem.backend.cached_caption(stored[name].digest, key)
            assert kept is not None
            expected = reference.encode(
                [Image.open(io.BytesIO(data)).convert("RGB")], normalize_embeddings=True
            )[0]
            assert np.allclose(kept["vector"], expected, atol=1e-5)
        fused = [h.image.id for h in mem.search_images(query, k=3)]
    # The caption ranking alone, from the same store without the model.
    with Memory(tmp_path / "m.db", embedder=HashingEmbedder(64), llm=None) as plain:
        captions = [h.image.id for h in plain.search_images(query, k=3)]
    text = reference.encode([query], normalize_embeddings=True)[0]
    by_clip = sorted(
        stored,
        key=lambda name: (
            -float(
                np.dot(
                    reference.encode(
                        [Image.open(io.BytesIO(pictures[name])).convert("RGB")],
                        normalize_embeddings=True,
                    )[0],
                    text,
                )
            )
        ),
    )
    score = {i: 1 / (61 + r) for r, i in enumerate(captions)}
    for r, name in enumerate(by_clip):
        score[stored[name].id] += 1 / (61 + r)
    assert fused == sorted(score, key=lambda i: (-score[i], i))
