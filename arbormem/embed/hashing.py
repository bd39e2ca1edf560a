"""A dependency-free embedder: hashed word and bigram features.

Deterministic across processes and machines, instant to load, and good enough
to exercise every code path; the test-suite uses it as its fast embedder. It
knows nothing about meaning beyond shared words, so it is never the default.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.text import analyze


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, 1.0 if (value >> 63) & 1 else -1.0


class HashingEmbedder(Embedder):
    """Feature hashing of analysed unigrams (weight 1) and bigrams (weight 0.5)."""

    batch_size = 1024

    def __init__(self, dim: int = 256) -> None:
        self.dimensions = dim
        self.model_id = f"hash/{dim}"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            terms = analyze(text)
            for term in terms:
                col, sign = _bucket(term, self.dimensions)
                out[row, col] += sign
            for a, b in pairwise(terms):
                col, sign = _bucket(f"{a} {b}", self.dimensions)
                out[row, col] += 0.5 * sign
        return l2_normalize(out)
