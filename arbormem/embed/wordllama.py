"""The default embedder: WordLlama, a static token-embedding model.

Its 16 MB weights ship inside the ``wordllama`` wheel, it needs no torch and
embeds tens of thousands of sentences a second on one CPU core.

The model is an embedding table and a tokenizer: a text's vector is the mean
of its tokens' rows. arbormem reads the two files from the installed package
itself instead of going through ``WordLlama.load()``, which tries to download
files that are already installed, takes half a second to import (pydantic,
requests) and configures the root logger as a side effect. A test checks that
the vectors are the same as WordLlama's own.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError

#: Width of the published WordLlama tables; smaller sizes are a prefix of it.
FULL_DIM = 256

#: Chunks of at least this many texts are tokenised on all cores at once.
PARALLEL_FROM = 32


def package_folder() -> Path:
    """Where the ``wordllama`` package is installed (without importing it)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            "the default embedder needs the 'wordllama' package: pip install wordllama"
        )
    return Path(next(iter(spec.submodule_search_locations)))


class WordLlamaEmbedder(Embedder):
    """WordLlama ``l2_supercat`` at 256 dimensions (or a truncation of it)."""

    batch_size = 512

    def __init__(self, config: str = "l2_supercat", dim: int = FULL_DIM) -> None:
        if not 0 < dim <= FULL_DIM:
            raise EmbedderError(f"WordLlama vectors have 1 to {FULL_DIM} dimensions, not {dim}")
        self.config = config
        self.dimensions = dim
        self.model_id = f"wordllama/{config}-{dim}"
        self._table: np.ndarray | None = None
        self._tokenizer: Any = None

    def _load(self) -> tuple[np.ndarray, Any]:
        if self._table is None:
            folder = package_folder()
            weights = folder / "weights" / f"{self.config}_{FULL_DIM}.safetensors"
            vocab = folder / "tokenizers" / f"{self.config}_tokenizer_config.json"
            try:
                from safetensors import safe_open
                from tokenizers import Tokenizer

                with safe_open(str(weights), framework="np") as f:
                    table = f.get_tensor("embedding.weight")
                self._tokenizer = Tokenizer.from_file(str(vocab))
                self._tokenizer.no_truncation()
                self._tokenizer.no_padding()
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load WordLlama {self.config!r} from {weights} and {vocab}: {exc}"
                ) from exc
            self._table = np.ascontiguousarray(table[:, : self.dimensions], dtype=np.float32)
        return self._table, self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        table, tokenizer = self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start : start + self.batch_size])
            # The batch call spreads a large chunk over the cores; for a few texts its
            # thread pool costs more than the tokenising itself.
            if len(chunk) < PARALLEL_FROM:
                ids = [tokenizer.encode(t, add_special_tokens=False).ids for t in chunk]
            else:
                ids = [e.ids for e in tokenizer.encode_batch(chunk, add_special_tokens=False)]
            # The mean of each text's token rows. One small sum per text is faster than
            # one segmented sum (np.add.reduceat) over the gathered rows of the chunk.
            for row, tokens in enumerate(ids, start):
                if tokens:
                    rows = table[np.clip(tokens, 0, len(table) - 1)]
                    out[row] = rows.sum(axis=0) / len(tokens)
        return l2_normalize(out)

    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (a LLaMA-2 BPE)."""
        return self._load()[1]
