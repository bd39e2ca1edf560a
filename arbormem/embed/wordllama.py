"""The default embedder: WordLlama, a static token-embedding model.

Its 16 MB weights ship inside the ``wordllama`` wheel, it needs no torch and
embeds tens of thousands of sentences a second on one CPU core. WordLlama's
``load()`` tries to download even when the files are installed, so the package
folder is passed as the cache and downloads are switched off.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError


class WordLlamaEmbedder(Embedder):
    """WordLlama ``l2_supercat`` at 256 dimensions (or a truncation of it)."""

    batch_size = 512

    def __init__(self, config: str = "l2_supercat", dim: int = 256) -> None:
        self.config = config
        self.dimensions = dim
        self.model_id = f"wordllama/{config}-{dim}"
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError as exc:  # pragma: no cover - it is a base dependency
                raise EmbedderError(
                    "the default embedder needs the 'wordllama' package: pip install wordllama"
                ) from exc
            folder = os.path.dirname(wordllama.__file__)
            try:
                trunc = None if self.dimensions == 256 else self.dimensions
                self._model = WordLlama.load(
                    config=self.config, cache_dir=folder, disable_download=True, trunc_dim=trunc
                )
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load WordLlama {self.config!r} at {self.dimensions} dimensions "
                    f"from {folder}: {exc}"
                ) from exc
        return self._model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vectors = model.embed(list(texts), norm=False, batch_size=self.batch_size)
        return l2_normalize(np.asarray(vectors, dtype=np.float32))

    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (a LLaMA-2 BPE)."""
        return self._load().tokenizer
