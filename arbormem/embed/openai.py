"""Any OpenAI-compatible ``/v1/embeddings`` endpoint through the official client.

OpenAI itself, Ollama (``http://localhost:11434/v1``), LM Studio, vLLM, and the
like. The base URL and key come from the arguments, then ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY``. Local servers that need no key get a placeholder one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible server."""

    batch_size = 128

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self.timeout = timeout
        self.max_retries = max_retries
        self._dims = dimensions
        suffix = f"-{dimensions}" if dimensions else ""
        self.model_id = f"openai/{model}{suffix}"
        self._client: Any = None

    def _client_or_new(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
        return self._client

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        if self._dims is None:
            self._dims = int(self.embed_batch(["dimension probe"]).shape[1])
        return self._dims

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import openai

        where = f"embedding endpoint {self.base_url or 'api.openai.com'} (model {self.model!r})"
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self._dims is not None and self.model.startswith("text-embedding-3"):
            kwargs["dimensions"] = self._dims
        try:
            response = self._client_or_new().embeddings.create(**kwargs)
            rows = sorted(response.data, key=lambda item: item.index)
            vectors = [row.embedding for row in rows]
        except openai.OpenAIError as exc:
            raise EmbedderError(f"{where}: the call failed: {exc}") from exc
        except Exception as exc:  # a reply that is not an embeddings response at all
            raise EmbedderError(f"{where}: the reply is not embeddings: {exc!r:.200}") from exc
        if len(vectors) != len(texts):
            raise EmbedderError(f"{where} returned {len(vectors)} vectors for {len(texts)} texts")
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderError(f"{where}: the vectors are not numbers of one length") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbedderError(f"{where}: the vectors have shape {matrix.shape}")
        # A NaN or all-zero vector would be stored for good and rank nothing.
        if not np.isfinite(matrix).all() or not np.abs(matrix).sum(axis=1).all():
            raise EmbedderError(f"{where}: some vectors are not finite or are all zero")
        if self._dims is None:
            self._dims = int(matrix.shape[1])
        elif matrix.shape[1] != self._dims:
            raise EmbedderError(
                f"{where} returned {matrix.shape[1]}-d vectors, expected {self._dims}"
            )
        return l2_normalize(matrix)
