"""Tools that let a tool-calling LLM walk the topic tree top-down by itself.

:data:`TOOLS` holds the JSON-schema definitions (OpenAI ``tools`` format);
:class:`TreeNavigator` executes a call and returns a JSON-ready answer. Errors
come back as ``{"error": "..."}`` for the model to read, never as exceptions.

* ``view_node(path)``: a node (by child positions from the root, ``[]`` for
  the root) with its name, summary, dates, message range and its children;
* ``get_messages(start, end)``: raw messages by position, at most 50 at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from arbormem.arguments import shown
from arbormem.models import Message
from arbormem.timeutil import format_timestamp
from arbormem.tree.view import TopicNode, find

MAX_MESSAGES = 50
#: Characters of one message a call returns, and of all its messages together: a
#: model's context is small, and a stored message may be a megabyte.
MAX_MESSAGE_CHARS = 4_000
MAX_RESULT_CHARS = 40_000
#: Largest position a call may name (SQLite's integers end at 2**63).
MAX_POSITION = 2**62

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "view_node",
            "description": (
                "Show one node of the conversation's topic tree and its children. Start with "
                "path [] (the root) and descend into the children whose names and summaries "
                "look relevant. Leaves are single exchanges; read them with get_messages."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0},
                        "description": "Child positions from the root, e.g. [] or [2, 0].",
                    }
                },
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_messages",
            "description": (
                "Read raw messages by their position in the conversation, from start "
                f"(inclusive) to end (exclusive), at most {MAX_MESSAGES} at a time. Long "
                f"messages are cut at {MAX_MESSAGE_CHARS:,} characters."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "start": {"type": "integer", "minimum": 0},
                    "end": {"type": "integer", "minimum": 1},
                },
                "required": ["start", "end"],
                "additionalProperties": False,
            },
        },
    },
]


def _summary(node: TopicNode) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": node.path,
        "kind": node.kind,
        "messages": [node.first_index, node.last_index + 1],
        "message_count": node.message_count,
        "from": format_timestamp(node.first_at) if node.first_at else None,
        "to": format_timestamp(node.last_at) if node.last_at else None,
    }
    if node.kind != "leaf":
        out["name"] = node.name
        out["summary"] = node.summary
        out["children"] = len(node.children)
    return out


def _message(m: Message, room: int) -> dict[str, Any]:
    limit = min(MAX_MESSAGE_CHARS, max(room, 0))
    out = {
        "index": m.index,
        "role": m.role,
        "speaker": m.speaker,
        "content": m.content[:limit],
        "timestamp": format_timestamp(m.timestamp),
        "session": m.session,
    }
    if len(m.content) > limit:
        out["truncated"] = f"{len(m.content) - limit:,} more characters not shown"
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TreeNavigator:
    """Executes :data:`TOOLS` calls against one scope of a memory."""

    def __init__(
        self,
        load_tree: Callable[[], TopicNode],
        load_messages: Callable[[int, int], list[Message]],
    ) -> None:
        self._load_tree = load_tree
        self._load_messages = load_messages
        self._root: TopicNode | None = None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one tool call; ``arguments`` as the model sent them (JSON text or a dict)."""
        # A model's arguments can be anything: too deep or too long to parse, a list.
        try:
            if isinstance(arguments, str):
                args = json.loads(arguments)
            elif arguments is None or isinstance(arguments, Mapping):
                args = dict(arguments or {})
            else:
                return {"error": "arguments must be a JSON object"}
        except json.JSONDecodeError as exc:
            return {"error": f"arguments are not valid JSON: {exc.msg}"}
        except (ValueError, RecursionError):
            return {"error": "arguments are not usable JSON (too deep or too long)"}
        if not isinstance(args, dict):
            return {"error": "arguments must be a JSON object"}
        # A name that is not a string (a list, say) is not a key a dict can look up.
        allowed = (
            {"view_node": {"path"}, "get_messages": {"start", "end"}}.get(name)
            if isinstance(name, str)
            else None
        )
        if allowed is None:
            return {"error": f"unknown tool {shown(name)}; use view_node or get_messages"}
        extra = sorted(str(k) for k in args if k not in allowed)
        if extra:
            return {"error": f"unknown arguments {extra}; {name} takes {sorted(allowed)}"}
        if name == "view_node":
            return self.view_node(args.get("path", []))
        return self.get_messages(args.get("start"), args.get("end"))

    def view_node(self, path: Any) -> dict[str, Any]:
        if not isinstance(path, list) or not all(_is_int(i) for i in path):
            return {"error": "path must be a list of integers, e.g. [] or [1, 0]"}
        if self._root is None:
            self._root = self._load_tree()
        try:
            node = find(self._root, path)
        except IndexError as exc:
            return {"error": str(exc)}
        return {**_summary(node), "children": [_summary(c) for c in node.children]}

    def get_messages(self, start: Any, end: Any) -> dict[str, Any]:
        if not (_is_int(start) and _is_int(end) and 0 <= start < end <= MAX_POSITION):
            return {"error": "start and end must be integers with 0 <= start < end"}
        if end - start > MAX_MESSAGES:
            return {"error": f"at most {MAX_MESSAGES} messages per call; narrow the range"}
        out, room = [], MAX_RESULT_CHARS
        for m in self._load_messages(start, end):
            item = _message(m, room)
            out.append(item)
            room -= len(item["content"])
        return {"messages": out}
