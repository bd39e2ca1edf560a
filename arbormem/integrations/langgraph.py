"""LangGraph's long-term memory kept in arbormem: a ``BaseStore`` and memory tools.

>>> from arbormem import Memory
>>> from arbormem.integrations.langgraph import ArbormemStore, memory_tool_node
>>> store = ArbormemStore(Memory("memory.db"))                       # doctest: +SKIP
>>> store.put(("alice", "memories"), "m1", {"text": "Likes green tea"})  # doctest: +SKIP
>>> store.search(("alice",), query="what does she drink?")          # doctest: +SKIP
>>> graph = builder.compile(store=store)                             # doctest: +SKIP

**Namespaces are scopes.** The first label of a namespace is the arbormem user,
the second the agent (``default`` when the namespace has one label); deeper
labels group items inside that scope. Two users' items never meet in one
search. Each item is one message of the session ``langgraph <namespace>``,
its value kept whole in the message's metadata and its text (the fields
named by ``index``, all string fields by default) indexed, so
``search(query=...)`` is arbormem's hybrid recall, and the items are found by
arbormem's own searches of that scope too.

``put`` on an existing key replaces the item: the old message is forgotten (for
good) and the new one stored under the same id, keeping ``created_at``. If
storing the new one fails, the old one is put back.

:func:`memory_tools` / :func:`memory_tool_node` give a graph ``search_memory``
and ``remember`` tools that reach whichever store the graph was compiled with.

Needs ``pip install 'arbormem[langgraph]'`` (langgraph 1.x).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Annotated, Any

from langchain_core.tools import BaseTool, tool
from langgraph.config import get_config
from langgraph.prebuilt import InjectedStore, ToolNode
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path

from arbormem.errors import NotFound
from arbormem.integrations._calls import call
from arbormem.timeutil import parse_timestamp

#: The metadata key holding an item on its message.
ITEM_KEY = "langgraph_item"
#: Sessions holding store items start with this, then the namespace.
SESSION_PREFIX = "langgraph "
DEFAULT_AGENT = "default"


def scope_of(namespace: Sequence[str]) -> tuple[str, str]:
    """The (user, agent) a namespace lives in."""
    return namespace[0], namespace[1] if len(namespace) > 1 else DEFAULT_AGENT


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: exact values, nested objects, and the operators
    ``$eq $ne $gt $gte $lt $lte``."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, Mapping) and all(
            _matches(value.get(k), v) for k, v in wanted.items()
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    comparisons = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }
    if op not in comparisons:
        raise ValueError(f"unsupported filter operator {op!r}: use $eq $ne $gt $gte $lt $lte")
    return bool(comparisons[op](float(value), float(arg)))


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path))
    )
    return all(p == "*" or n == p for n, p in pairs)


class ArbormemStore(BaseStore):
    """A LangGraph ``BaseStore`` on an arbormem memory (``Memory``, ``AsyncMemory`` or
    a client with their methods).

    ``index_fields`` names the value fields whose text is indexed when a ``put``
    gives no ``index`` (LangGraph's path syntax: ``"text"``, ``"facts[*]"``); by
    default every string in the value is. ``search_depth`` is how many hits of each
    scope a query search weighs before the namespace and filter are applied.
    """

    def __init__(
        self,
        memory: Any,
        *,
        index_fields: Sequence[str] | None = None,
        search_depth: int = 100,
    ) -> None:
        self.memory = memory
        self.index_fields = list(index_fields) if index_fields else None
        self.search_depth = search_depth
        self._salt = str(getattr(memory, "tenant", "") or "")

    # -- the two abstract methods ------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result each (None for a put)."""
        ops = list(ops)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(tuple(op.namespace), op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread, so the event loop never waits on the disk."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations --------------------------------------------------------------------

    def _id(self, namespace: tuple[str, ...], key: str) -> str:
        digest = hashlib.sha256(json.dumps([self._salt, namespace, key]).encode()).hexdigest()
        return f"lg-{digest[:32]}"

    def _message(self, namespace: tuple[str, ...], key: str) -> Any | None:
        user, agent = scope_of(namespace)
        try:
            return call(self.memory, "get", self._id(namespace, key), user=user, agent=agent)
        except NotFound:
            return None

    @staticmethod
    def _item(message: Any, score: float | None = None) -> SearchItem:
        data = message.metadata[ITEM_KEY]
        return SearchItem(
            namespace=tuple(data["namespace"]),
            key=data["key"],
            value=data["value"],
            created_at=parse_timestamp(data["created_at"]),
            updated_at=message.timestamp,
            score=score,
        )

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        message = self._message(namespace, key)
        if message is None:
            return None
        found = self._item(message)
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _text(self, value: Mapping[str, Any], index: Any) -> tuple[str, bool]:
        if index is False:
            return json.dumps(value, ensure_ascii=False, sort_keys=True), False
        paths = index if isinstance(index, list) else self.index_fields
        if paths:
            texts = [t for p in paths for t in get_text_at_path(value, p)]
        else:
            texts = list(_strings(value))
        text = "\n".join(t for t in texts if t.strip())
        return text or json.dumps(value, ensure_ascii=False, sort_keys=True), True

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        user, agent = scope_of(namespace)
        old = self._message(namespace, op.key)
        message_id = self._id(namespace, op.key)
        if op.value is None:
            if old is not None:
                call(self.memory, "forget", message_id, user=user, agent=agent)
            return
        if not isinstance(op.value, Mapping):
            raise TypeError(f"a store value must be a dict, got {type(op.value).__name__}")
        value = json.loads(json.dumps(dict(op.value)))  # stored as JSON: fail before forgetting
        text, indexed = self._text(value, op.index)
        created = old.metadata[ITEM_KEY]["created_at"] if old is not None else None
        record = {
            "namespace": list(namespace),
            "key": op.key,
            "value": value,
            "indexed": indexed,
            "created_at": created or datetime.now(timezone.utc).isoformat(),
        }
        session = SESSION_PREFIX + "/".join(namespace)
        if old is not None:
            call(self.memory, "forget", message_id, user=user, agent=agent)
        try:
            call(
                self.memory,
                "add",
                text,
                id=message_id,
                session=session,
                metadata={ITEM_KEY: record},
                user=user,
                agent=agent,
            )
        except Exception:
            if old is not None:  # the new value could not be stored: keep the old one
                call(
                    self.memory,
                    "add",
                    old.content,
                    id=message_id,
                    session=old.session,
                    timestamp=old.timestamp,
                    metadata=dict(old.metadata),
                    user=user,
                    agent=agent,
                )
            raise

    def _scopes(self, prefix: tuple[str, ...]) -> list[tuple[str, str]]:
        if len(prefix) >= 2:
            return [(prefix[0], prefix[1])]
        scopes = call(self.memory, "scopes", prefix[0] if prefix else None)
        return [(s.user, s.agent) for s in scopes]

    def _items_of(self, user: str, agent: str) -> list[Any]:
        """Every item message of a scope, oldest first."""
        sessions = call(self.memory, "sessions", user=user, agent=agent)
        messages: list[Any] = []
        for session in sessions:
            if session.id.startswith(SESSION_PREFIX):
                messages.extend(
                    call(self.memory, "messages", session=session.id, user=user, agent=agent)
                )
        return [m for m in messages if ITEM_KEY in m.metadata]

    def _wanted(self, message: Any, op: SearchOp) -> bool:
        data = message.metadata.get(ITEM_KEY)
        if not isinstance(data, Mapping):
            return False
        namespace = tuple(data["namespace"])
        if namespace[: len(op.namespace_prefix)] != tuple(op.namespace_prefix):
            return False
        return not op.filter or all(_matches(data["value"].get(k), v) for k, v in op.filter.items())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        found: list[SearchItem] = []
        for user, agent in self._scopes(prefix):
            if op.query:
                depth = max(self.search_depth, 2 * (op.offset + op.limit))
                hits = call(self.memory, "search", op.query, k=depth, user=user, agent=agent)
                found.extend(
                    self._item(h.message, float(h.score))
                    for h in hits
                    if self._wanted(h.message, op) and h.message.metadata[ITEM_KEY]["indexed"]
                )
            else:
                found.extend(
                    self._item(m) for m in self._items_of(user, agent) if self._wanted(m, op)
                )
        if op.query:
            found.sort(key=lambda i: -(i.score or 0.0))
        else:
            found.sort(key=lambda i: i.updated_at, reverse=True)  # newest first
        return found[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        for user, agent in self._scopes(()):
            for message in self._items_of(user, agent):
                namespace = tuple(message.metadata[ITEM_KEY]["namespace"])
                if all(_namespace_matches(namespace, c) for c in op.match_conditions or ()):
                    namespaces.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _namespace(template: Sequence[str]) -> tuple[str, ...]:
    """A namespace whose ``{name}`` labels are filled from the run's ``configurable``."""
    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:  # called outside a graph run
        configurable = {}
    labels = []
    for label in template:
        if label.startswith("{") and label.endswith("}"):
            name = label[1:-1]
            if name not in configurable:
                raise ValueError(f"namespace label {label} needs config['configurable'][{name!r}]")
            labels.append(str(configurable[name]))
        else:
            labels.append(label)
    return tuple(labels)


def memory_tools(
    namespace: Sequence[str] = ("{user_id}", "memories"), k: int = 5
) -> list[BaseTool]:
    """``search_memory`` and ``remember`` tools working on the graph's store (any
    ``BaseStore``, injected by LangGraph, hidden from the model) in ``namespace``,
    whose ``{name}`` labels come from ``config["configurable"]``."""
    template = tuple(namespace)

    @tool
    def search_memory(query: str, store: Annotated[Any, InjectedStore()]) -> str:
        """Search long-term memory for what is known about the user."""
        items = store.search(_namespace(template), query=query, limit=k)
        return json.dumps([{"text": i.value.get("text", i.value), "key": i.key} for i in items])

    @tool
    def remember(fact: str, store: Annotated[Any, InjectedStore()]) -> str:
        """Store a fact about the user in long-term memory, as one self-contained sentence."""
        key = uuid.uuid4().hex
        store.put(_namespace(template), key, {"text": fact})
        return f"remembered ({key})"

    return [search_memory, remember]


def memory_tool_node(namespace: Sequence[str] = ("{user_id}", "memories"), k: int = 5) -> ToolNode:
    """A prebuilt ``ToolNode`` running :func:`memory_tools`."""
    return ToolNode(memory_tools(namespace, k))
