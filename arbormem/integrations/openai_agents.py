"""The OpenAI Agents SDK on arbormem: a ``Session`` and memory tools.

>>> from agents import Agent, Runner                          # doctest: +SKIP
>>> from arbormem import Memory
>>> from arbormem.integrations.openai_agents import ArbormemSession, memory_tools
>>> mem = Memory("memory.db", user="alice")                    # doctest: +SKIP
>>> agent = Agent(name="helper", tools=memory_tools(mem))      # doctest: +SKIP
>>> Runner.run_sync(agent, "hi", session=ArbormemSession(mem, "chat-1"))  # doctest: +SKIP

:class:`ArbormemSession` implements the SDK's session protocol (``get_items``,
``add_items``, ``pop_item``, ``clear_session``): every item a run produces is
stored as one message of the arbormem session named ``session_id``, the item
itself kept in the message's metadata so the history reads back exactly as it
was written, and its text (the user's words, the assistant's answer, a tool's
call and output) indexed, so later searches and other sessions recall it.

:func:`memory_tools` gives an agent ``search_memory`` and ``remember``.

Needs ``pip install 'arbormem[openai-agents]'`` (openai-agents 0.24.x).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agents import FunctionTool, function_tool
from agents.memory import SessionSettings

from arbormem.errors import NotFound
from arbormem.integrations._calls import acall, scope_kwargs

#: The metadata key that holds the SDK's item on each message.
ITEM_KEY = "openai_agents_item"

#: Message roles of the SDK mapped to arbormem's; ``developer`` is a system message.
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _parts_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                value = part.get("text") or part.get("refusal") or part.get("transcript")
                if isinstance(value, str):
                    texts.append(value)
        return "\n".join(texts)
    return ""


def item_message(item: Mapping[str, Any]) -> tuple[str, str]:
    """The role and the text to index of one SDK item.

    Conversation messages keep their role and words; a tool call is the
    assistant's (``name(arguments)``), its output the tool's. Items without words
    (reasoning, an image) are stored under their type so the history stays whole.
    """
    kind = item.get("type")
    role = item.get("role")
    if isinstance(role, str) and kind in (None, "message"):
        text = _parts_text(item.get("content"))
        return _ROLES.get(role, "user"), text or f"[{role} message]"
    if kind == "function_call":
        return "assistant", f"{item.get('name')}({item.get('arguments') or ''})"
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _parts_text(output)
        return "tool", text or json.dumps(output, default=str)
    return "tool", f"[{kind or 'item'}]"


def _item_of(message: Any) -> dict[str, Any] | None:
    stored = message.metadata.get(ITEM_KEY)
    if isinstance(stored, Mapping):
        return dict(stored)
    # A message added some other way (the CLI, an import) joins the history as text.
    if message.role in ("user", "assistant", "system"):
        return {"role": message.role, "content": message.content}
    return None


class ArbormemSession:
    """A conversation history of the OpenAI Agents SDK kept in arbormem.

    ``memory`` is an :class:`arbormem.Memory`, an :class:`arbormem.AsyncMemory` or a
    client with their methods; ``session_id`` names the arbormem session (each
    ``Runner.run`` with this session reads its items and adds the new ones);
    ``user`` and ``agent`` pick the scope (the memory's default when left out).
    ``session_settings.limit`` caps how many of the latest items a run reads.
    """

    def __init__(
        self,
        memory: Any,
        session_id: str,
        *,
        user: str | None = None,
        agent: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        self.memory = memory
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self._scope = scope_kwargs(user, agent)

    async def _messages(self) -> list[Any]:
        return list(await acall(self.memory, "messages", session=self.session_id, **self._scope))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items (all when None), oldest first."""
        if limit is None:
            limit = self.session_settings.limit
        items = [i for m in await self._messages() if (i := _item_of(m)) is not None]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        """Store the items, in order, in one transaction."""
        if not items:
            return
        records = []
        for item in items:
            plain = json.loads(json.dumps(item, default=str))  # the SDK's own wire form
            role, text = item_message(plain)
            records.append({"content": text, "role": role, "metadata": {ITEM_KEY: plain}})
        await acall(self.memory, "add_many", records, session=self.session_id, **self._scope)

    async def pop_item(self) -> Any | None:
        """Forget the latest item of the session and return it (None when it is empty)."""
        messages = await self._messages()
        if not messages:
            return None
        last = messages[-1]
        await acall(self.memory, "forget", last.id, **self._scope)
        return _item_of(last) or {"role": last.role, "content": last.content}

    async def clear_session(self) -> None:
        """Forget every item of the session (for good: index rows and vectors too)."""
        try:
            await acall(self.memory, "forget", session=self.session_id, **self._scope)
        except NotFound:
            pass  # nothing stored yet: already clear


def memory_tools(
    memory: Any,
    *,
    user: str | None = None,
    agent: str | None = None,
    k: int = 5,
) -> list[FunctionTool]:
    """Two tools for an agent: ``search_memory(query)``, which answers with the best
    ``k`` remembered messages (text, date, role, score), and ``remember(fact)``, which
    stores a fact for later sessions."""
    scope = scope_kwargs(user, agent)

    @function_tool
    async def search_memory(query: str) -> str:
        """Search long-term memory: earlier conversations and remembered facts.

        Args:
            query: What to look for, in a few words.
        """
        hits = await acall(memory, "search", query, k=k, **scope)
        return json.dumps(
            [
                {
                    "text": h.message.text,
                    "date": h.message.timestamp.date().isoformat(),
                    "role": h.message.role,
                    "score": round(float(h.score), 3),
                }
                for h in hits
            ]
        )

    @function_tool
    async def remember(fact: str) -> str:
        """Store a fact in long-term memory so later conversations can recall it.

        Args:
            fact: The fact, as one self-contained sentence.
        """
        message = await acall(
            memory, "add", fact, role="assistant", metadata={"via": "remember"}, **scope
        )
        return f"remembered (id {message.id})"

    return [search_memory, remember]
