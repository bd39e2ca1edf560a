"""arbormem: long-term memory for LLM agents.

Conversations are kept whole, indexed as they arrive, and recalled by hybrid
lexical and dense search, offline by default. Start with :class:`Memory`.
"""

from typing import TYPE_CHECKING, Any

from arbormem.embed import Embedder, get_embedder
from arbormem.errors import (
    ArbormemError,
    ConfigError,
    EmbedderError,
    InputError,
    LLMError,
    MessageTooLarge,
    NotFound,
    RerankerError,
    SchemaError,
    StoreError,
    TreeError,
)
from arbormem.memory import Memory
from arbormem.models import Hit, Hits, Ingested, Message, Scope, Session
from arbormem.recall.rerank import Reranker
from arbormem.recall.retriever import RecallConfig

if TYPE_CHECKING:
    from arbormem.async_memory import AsyncMemory

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # AsyncMemory pulls in asyncio: imported when first asked for, so a command-line
    # call that never uses it starts faster.
    if name == "AsyncMemory":
        from arbormem.async_memory import AsyncMemory

        return AsyncMemory
    raise AttributeError(f"module 'arbormem' has no attribute {name!r}")


__all__ = [
    "ArbormemError",
    "AsyncMemory",
    "ConfigError",
    "Embedder",
    "EmbedderError",
    "Hit",
    "Hits",
    "Ingested",
    "InputError",
    "LLMError",
    "Memory",
    "Message",
    "MessageTooLarge",
    "NotFound",
    "RecallConfig",
    "Reranker",
    "RerankerError",
    "SchemaError",
    "Scope",
    "Session",
    "StoreError",
    "TreeError",
    "__version__",
    "get_embedder",
]
