"""arbormem: long-term memory for LLM agents.

Conversations are kept whole, indexed as they arrive, and recalled by hybrid
lexical and dense search, offline by default. Start with :class:`Memory`.
"""

from typing import TYPE_CHECKING, Any

from arbormem.context.assemble import Context, Section
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
from arbormem.jobs import PendingJob
from arbormem.memory import Memory
from arbormem.models import Hit, Hits, Ingested, Message, Scope, Session
from arbormem.recall.rerank import Reranker
from arbormem.recall.retriever import RecallConfig
from arbormem.results import (
    Exported,
    Forgotten,
    Imported,
    PreparedSearch,
    Purged,
    RankingFeatures,
    Reembedded,
    Reorganized,
    Stats,
    TreeLogEntry,
    Undone,
)
from arbormem.settings import Settings
from arbormem.tree.check import TreeProblem
from arbormem.tree.navigate import TreeNavigator
from arbormem.tree.recall import PathNode, TopicPath
from arbormem.tree.view import TopicNode

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
    "Context",
    "Embedder",
    "EmbedderError",
    "Exported",
    "Forgotten",
    "Hit",
    "Hits",
    "Imported",
    "Ingested",
    "InputError",
    "LLMError",
    "Memory",
    "Message",
    "MessageTooLarge",
    "NotFound",
    "PathNode",
    "PendingJob",
    "PreparedSearch",
    "Purged",
    "RankingFeatures",
    "RecallConfig",
    "Reembedded",
    "Reorganized",
    "Reranker",
    "RerankerError",
    "SchemaError",
    "Scope",
    "Section",
    "Session",
    "Settings",
    "Stats",
    "StoreError",
    "TopicNode",
    "TopicPath",
    "TreeError",
    "TreeLogEntry",
    "TreeNavigator",
    "TreeProblem",
    "Undone",
    "__version__",
    "get_embedder",
]
