"""Exceptions raised by arbormem.

Every error a caller can act on derives from :class:`ArbormemError`, and its
message names the thing at fault and what to do about it::

    ArbormemError
    ├── ConfigError        a setting is missing or has an unusable value
    ├── InputError         input data is malformed (names the file, line and field)
    │   └── MessageTooLarge    one message exceeds the stored size limit
    ├── NotFound           a message, session or node id does not exist in the scope
    ├── StoreError         the database cannot be opened, read or written
    │   └── SchemaError        the file's schema is newer than this arbormem, or corrupt
    ├── EmbedderError      an embedding model cannot be loaded or called
    ├── RerankerError      a reranking model cannot be loaded or called (search goes on without it)
    ├── LLMError           an LLM endpoint failed (callers fall back to the no-LLM path)
    └── RemoteError        an arbormem server refused a request or could not be reached

Driver errors (the database's, ``openai``'s...) are translated at the boundary, so
code using arbormem only ever needs to catch these.
"""

from __future__ import annotations


class ArbormemError(Exception):
    """Base class for every error arbormem raises on purpose."""


class ConfigError(ArbormemError):
    """A configuration value is missing or unusable."""


class InputError(ArbormemError, ValueError):
    """Input data is malformed; the message names where and how to fix it.

    ``source`` is the file name (or ``"<input>"``), ``line`` the 1-based line
    for line-oriented formats, ``field`` the offending key path.
    """

    def __init__(
        self,
        problem: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = source
        self.line = line
        self.field = field
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.line is not None:
            where.append(f"line {self.line}")
        text = " ".join(where)
        if self.field:
            text = f"{text}: {self.field!r}" if text else repr(self.field)
        text = f"{text}: {self.problem}" if text else self.problem
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class MessageTooLarge(InputError):
    """A message is larger than ``max_message_bytes`` and was not stored."""


class NotFound(ArbormemError, KeyError):
    """The requested message, session, user or node does not exist in this scope."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else "not found"


class StoreError(ArbormemError):
    """The storage back-end failed."""


class SchemaError(StoreError):
    """The database schema is newer than this version of arbormem, or damaged."""


class EmbedderError(ArbormemError):
    """An embedding model could not be loaded or failed to embed."""


class RerankerError(ArbormemError):
    """A reranking model could not be loaded or failed to score."""


class LLMError(ArbormemError):
    """An LLM call failed: timeout, HTTP error, or an unusable answer."""


class TreeError(ArbormemError):
    """A topic-tree operation cannot be done as asked (the message says why)."""


class RemoteError(ArbormemError):
    """An arbormem server (:class:`arbormem.Client`) refused a request (a missing or
    read-only key: ``status`` 401 or 403) or could not be reached (``status`` 0)."""

    def __init__(self, message: str, *, status: int, type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
