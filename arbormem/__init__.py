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
    RemoteError,
    RerankerError,
    SchemaError,
    StoreError,
    TreeError,
)
from arbormem.jobs import PendingJob
from arbormem.memory import Memory
from arbormem.models import Hit, Hits, ImageRef, Ingested, Message, Scope, Session
from arbormem.recall.rerank import Reranker
from arbormem.recall.retriever import RecallConfig
from arbormem.records.model import Record
from arbormem.records.service import RecordHit
from arbormem.results import (
    Exported,
    Forgotten,
    ImageHit,
    ImageMemory,
    ImagesExpired,
    Imported,
    PreparedSearch,
    Purged,
    RankingFeatures,
    RecordsForgotten,
    Reembedded,
    Remembered,
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
    from arbormem.client import AsyncClient, Client

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # AsyncMemory pulls in asyncio: imported when first asked for, so a command-line
    # call that never uses it starts faster.
    if name == "AsyncMemory":
        from arbormem.async_memory import AsyncMemory

        return AsyncMemory
    if name in ("Client", "AsyncClient"):
        # The HTTP client needs the server extra (httpx2): loaded only when asked for.
        from arbormem import client

        return getattr(client, name)
    raise AttributeError(f"module 'arbormem' has no attribute {name!r}")


__all__ = [
    "ArbormemError",
    "AsyncClient",
    "AsyncMemory",
    "Client",
    "ConfigError",
    "Context",
    "Embedder",
    "EmbedderError",
    "Exported",
    "Forgotten",
    "Hit",
    "Hits",
    "ImageHit",
    "ImageMemory",
    "ImageRef",
    "ImagesExpired",
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
    "Record",
    "RecordHit",
    "RecordsForgotten",
    "Reembedded",
    "Remembered",
    "RemoteError",
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
