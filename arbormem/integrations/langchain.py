"""A LangChain chat message history kept in arbormem.

>>> from arbormem import Memory
>>> from arbormem.integrations.langchain import ArbormemChatMessageHistory
>>> history = ArbormemChatMessageHistory(Memory("memory.db"), "chat-1")  # doctest: +SKIP
>>> history.add_user_message("I moved to Lisbon.")                       # doctest: +SKIP

Each message is one arbormem message of the session ``session_id``: its words
indexed for recall, the LangChain message itself kept in the metadata so it
reads back as it was (tool calls and ids included). ``clear()`` forgets the
session for good.

LangChain marks ``BaseChatMessageHistory`` deprecated since langchain-core 1.6.4,
to be removed in 2.0: this adapter is pinned to langchain-core 1.x
(``pip install 'arbormem[langchain]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from arbormem.errors import NotFound
from arbormem.integrations._calls import call, scope_kwargs

#: The metadata key holding the LangChain message.
MESSAGE_KEY = "langchain_message"

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content if p)
    return text.strip() or f"[{message.type} message]"


class ArbormemChatMessageHistory(BaseChatMessageHistory):
    """The history of one conversation (``session_id``) in an arbormem memory
    (``Memory``, ``AsyncMemory`` or a client), in the scope ``user``/``agent`` (the
    memory's default when left out)."""

    def __init__(
        self,
        memory: Any,
        session_id: str,
        *,
        user: str | None = None,
        agent: str | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        self.memory = memory
        self.session_id = session_id
        self._scope = scope_kwargs(user, agent)

    # LangChain declares ``messages`` an attribute; whether mypy calls this property an
    # override depends on the order it reads the modules in, hence unused-ignore.
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override, unused-ignore]
        """The session's messages, oldest first."""
        stored = call(self.memory, "messages", session=self.session_id, **self._scope)
        out: list[BaseMessage] = []
        for m in stored:
            kept = m.metadata.get(MESSAGE_KEY)
            if isinstance(kept, dict):
                out.extend(messages_from_dict([kept]))
            else:  # added some other way: rebuilt from its role and words
                kind = {v: k for k, v in _ROLES.items()}.get(m.role, "human")
                if kind != "tool":
                    out.extend(messages_from_dict([{"type": kind, "data": {"content": m.content}}]))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages, in order, in one transaction."""
        if not messages:
            return
        records = [
            {
                "content": _text(m),
                "role": _ROLES.get(m.type, "user"),
                "speaker": m.name or None,
                "metadata": {MESSAGE_KEY: message_to_dict(m)},
            }
            for m in messages
        ]
        call(self.memory, "add_many", records, session=self.session_id, **self._scope)

    def clear(self) -> None:
        """Forget the session's messages for good."""
        try:
            call(self.memory, "forget", session=self.session_id, **self._scope)
        except NotFound:
            pass
