"""Reading a thread's tree as objects, and showing it: text, JSON, Mermaid, DOT."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arbormem.errors import NotFound
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import NodeRow, Thread
from arbormem.timeutil import display, format_timestamp


@dataclass
class TopicNode:
    """A node of the topic tree: the root, a topic, a width-control group or a leaf.

    Leaves are exchanges; their ``messages`` are filled when the tree is loaded
    with messages. ``path`` is the list of child positions from the root.
    """

    id: int
    kind: str
    name: str
    summary: str
    first_index: int
    last_index: int
    first_at: datetime | None
    last_at: datetime | None
    message_count: int
    frozen: bool
    archived: bool = False
    keyphrases: list[str] = field(default_factory=list)
    children: list[TopicNode] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    path: list[int] = field(default_factory=list)
    origin: str = "heuristic"

    @property
    def is_leaf(self) -> bool:
        return self.kind == "leaf"

    def walk(self) -> Iterator[TopicNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self, *, messages: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "path": self.path,
            "first_index": self.first_index,
            "last_index": self.last_index,
            "first_at": format_timestamp(self.first_at) if self.first_at else None,
            "last_at": format_timestamp(self.last_at) if self.last_at else None,
            "message_count": self.message_count,
        }
        if self.kind == "leaf":
            out["archived"] = self.archived
            out["messages"] = [
                {
                    "index": m.index,
                    "role": m.role,
                    "id": m.id,
                    **({"speaker": m.speaker, "content": m.content} if messages else {}),
                }
                for m in self.messages
            ]
        else:
            out.update(
                name=self.name,
                summary=self.summary,
                keyphrases=self.keyphrases,
                frozen=self.frozen,
                origin=self.origin,
                children=[c.to_dict(messages=messages) for c in self.children],
            )
        return out


#: The virtual root's fields after its id.
_EMPTY = ("root", "ROOT", "", 0, -1, None, None, 0, False)


def _node(row: NodeRow) -> TopicNode:
    assert row.id is not None
    return TopicNode(
        id=row.id,
        kind=row.kind,
        name=row.name,
        summary=row.summary,
        first_index=row.first_index,
        last_index=row.last_index,
        first_at=row.first_at,
        last_at=row.last_at,
        message_count=row.message_count,
        frozen=row.frozen,
        archived=row.archived,
        keyphrases=list(row.keyphrases),
        origin=row.origin,
    )


def load_tree(backend: Backend, thread: Thread, *, messages: bool = True) -> TopicNode:
    """The whole tree of a thread under a virtual root (id 0)."""
    rows = backend.tree_nodes(thread)
    nodes = {r.id: _node(r) for r in rows}
    root = TopicNode(0, "root", "ROOT", "", 0, -1, None, None, 0, False)
    for r in rows:  # rows come in seq order, so children stay in time order
        parent = nodes.get(r.parent_id) if r.parent_id is not None else root
        (parent or root).children.append(nodes[r.id])
    for node in root.walk():
        node.children.sort(key=lambda n: (n.first_index, n.id))
    if root.children:
        root.first_index = min(c.first_index for c in root.children)
        root.last_index = max(c.last_index for c in root.children)
        root.first_at = min(c.first_at for c in root.children if c.first_at)
        root.last_at = max(c.last_at for c in root.children if c.last_at)
        root.message_count = sum(c.message_count for c in root.children)

    def number(node: TopicNode, path: list[int]) -> None:
        node.path = path
        for i, child in enumerate(node.children):
            number(child, [*path, i])

    number(root, [])
    if messages:
        leaves = {n.id: n for n in root.walk() if n.kind == "leaf"}
        message_rows = list(backend.iter_rows(thread))
        leaf_of = backend.message_leaves([r.rowid for r in message_rows])
        for row in message_rows:
            leaf = leaves.get(leaf_of.get(row.rowid, -1))
            if leaf is not None:
                leaf.messages.append(row.message)
    return root


def _ordered(rows: list[NodeRow]) -> list[TopicNode]:
    """Sibling rows as nodes in time order (how :func:`load_tree` orders children)."""
    return sorted((_node(r) for r in rows), key=lambda n: (n.first_index, n.id))


def load_part(
    backend: Backend,
    thread: Thread,
    *,
    depth: int | None,
    node: int | None = None,
    open_leaf: int | None = None,
) -> TopicNode:
    """Part of a thread's tree, read level by level: the virtual root (or the node
    ``node``) with ``depth`` (at least 1) levels of descendants (all when None), plus the
    children of every topic on the way down to the leaf ``open_leaf``. Nodes whose
    children were not read come with none; ``path`` is numbered from the real root.

    A page that opens a 5,000-message thread's tree shows its top level only: this
    reads a few rows where :func:`load_tree` reads every node of the thread.
    """
    chain: list[int] = []  # from a top-level node down to open_leaf
    if open_leaf is not None:
        at: int | None = open_leaf
        while at is not None and len(chain) <= 64:  # a cycle never ends: stop deep
            chain.append(at)
            at = backend.parents(thread, [at]).get(at)
        chain.reverse()
    path: list[int] = []
    if node is None:
        top = TopicNode(0, *_EMPTY)
        top.children = _ordered(backend.tree_nodes(thread, parent=None))
        if top.children:
            top.first_index = min(c.first_index for c in top.children)
            top.last_index = max(c.last_index for c in top.children)
            top.first_at = min((c.first_at for c in top.children if c.first_at), default=None)
            top.last_at = max((c.last_at for c in top.children if c.last_at), default=None)
            top.message_count = sum(c.message_count for c in top.children)
    else:
        rows = backend.tree_nodes(thread, ids=[node])
        if not rows:
            raise NotFound(f"no topic {node} in this scope's tree")
        top = _node(rows[0])
        # Its path: its position among its siblings at each level above it.
        ancestry = [node]
        while len(ancestry) <= 64:
            parent = backend.parents(thread, [ancestry[-1]]).get(ancestry[-1])
            if parent is None:
                break
            ancestry.append(parent)
        ancestry.reverse()
        for i, nid in enumerate(ancestry):
            siblings = backend.tree_nodes(thread, parent=ancestry[i - 1] if i else None)
            order = [n.id for n in _ordered(siblings)]
            path.append(order.index(nid) if nid in order else 0)
        top.children = _ordered(backend.tree_nodes(thread, parent=node))
    on_way = set(chain)

    def fill(parent: TopicNode, level: int, at: list[int]) -> None:
        parent.path = at
        for i, child in enumerate(parent.children):
            deeper = depth is None or level < depth
            if child.kind != "leaf" and (deeper or child.id in on_way):
                child.children = _ordered(backend.tree_nodes(thread, parent=child.id))
            fill(child, level + 1, [*at, i])

    fill(top, 1, path)
    return top


def find(root: TopicNode, path: list[int]) -> TopicNode:
    """The node at a path of child positions; IndexError when there is none."""
    node = root
    for i in path:
        if not 0 <= i < len(node.children):
            raise IndexError(f"no child {i} under node {node.path or 'ROOT'}")
        node = node.children[i]
    return node


# -- text ------------------------------------------------------------------------------------


def _label(node: TopicNode) -> str:
    span = f"[{node.first_index}:{node.last_index + 1}]"
    if node.kind == "leaf":
        roles = "+".join(m.role for m in node.messages) if node.messages else "exchange"
        return f"{span} {roles}" + (" (archived)" if node.archived else "")
    when = f" {display(node.first_at, seconds=False)[:10]}" if node.first_at else ""
    marker = "" if node.frozen or node.kind == "root" else " (active)"
    return f"{node.name or '(unnamed)'} {span} ({node.message_count} msgs){when}{marker}"


def render_text(
    root: TopicNode,
    *,
    summaries: bool = False,
    messages: bool = False,
    max_depth: int | None = None,
    leaves: bool = True,
) -> str:
    """An indented plain-text tree (what ``arbormem tree`` prints with no colour)."""
    lines = [f"ROOT ({root.message_count} msgs, {len(root.children)} sub-nodes)"]

    def walk(node: TopicNode, prefix: str, depth: int) -> None:
        kids = [c for c in node.children if leaves or c.kind != "leaf"]
        for i, child in enumerate(kids):
            last = i == len(kids) - 1
            branch = "└─ " if last else "├─ "
            lines.append(prefix + branch + _label(child))
            inner = prefix + ("   " if last else "│  ")
            if summaries and child.summary and child.kind != "leaf":
                lines.append(inner + "  " + child.summary)
            if messages and child.kind == "leaf":
                for m in child.messages:
                    lines.append(inner + f"  {m.speaker or m.role}: {m.content}")
            if max_depth is None or depth + 1 < max_depth:
                walk(child, inner, depth + 1)

    walk(root, "", 0)
    return "\n".join(lines)


def render_rich(
    root: TopicNode,
    *,
    summaries: bool = False,
    messages: bool = False,
    max_depth: int | None = None,
    leaves: bool = True,
) -> Any:
    """A :class:`rich.tree.Tree` of the topic tree."""
    from rich.markup import escape
    from rich.tree import Tree

    tree = Tree(f"[bold]ROOT[/] ({root.message_count} msgs)")

    def walk(node: TopicNode, branch: Any, depth: int) -> None:
        for child in node.children:
            if child.kind == "leaf" and not leaves:
                continue
            style = (
                "dim"
                if child.kind == "leaf"
                else ("bold cyan" if child.kind == "topic" else "magenta")
            )
            label = f"[{style}]{escape(_label(child))}[/]"
            if summaries and child.summary and child.kind != "leaf":
                label += f"\n[italic]{escape(child.summary)}[/]"
            if messages and child.kind == "leaf":
                label += "".join(
                    f"\n{escape((m.speaker or m.role) + ': ' + m.content)}" for m in child.messages
                )
            sub = branch.add(label)
            if max_depth is None or depth + 1 < max_depth:
                walk(child, sub, depth + 1)

    walk(root, tree, 0)
    return tree


# -- pictures --------------------------------------------------------------------------------


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _picture_label(node: TopicNode) -> str:
    """A node's name on one line, shortened (its index range when it has none)."""
    name = " ".join((node.name or "").split())
    return _short(name or f"[{node.first_index}:{node.last_index + 1}]")


def _mermaid_text(text: str) -> str:
    # Mermaid reads '#...;' as an entity, a label's '<...>' as HTML and a label that
    # opens with a backtick as Markdown (an LLM's "`cargo build` flags" failed to
    # parse): all of them, and the quote that would end the label, become entities.
    text = text.replace("#", "#35;")
    for ch in '&"<>`':
        text = text.replace(ch, f"#{ord(ch)};")
    return text


def _dot_text(text: str) -> str:
    # In a DOT string only the quote and the backslash are special.
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_mermaid(root: TopicNode, *, leaves: bool = False) -> str:
    """A Mermaid ``graph TD`` of the topics (leaves too on request)."""
    lines = ["graph TD", '  n0["ROOT"]']
    for node in root.walk():
        for child in node.children:
            if child.kind == "leaf" and not leaves:
                continue
            text = _mermaid_text(_picture_label(child))
            span = f"{child.first_index}-{child.last_index}"
            lines.append(f'  n{child.id}["{text}<br/>{span}"]')
            lines.append(f"  n{node.id} --> n{child.id}")
    return "\n".join(lines) + "\n"


def to_dot(root: TopicNode, *, leaves: bool = False) -> str:
    """A Graphviz DOT digraph of the topics (leaves too on request)."""
    lines = [
        "digraph arbormem {",
        "  rankdir=TB;",
        '  node [shape=box, fontname="Helvetica"];',
        '  n0 [label="ROOT"];',
    ]
    for node in root.walk():
        for child in node.children:
            if child.kind == "leaf" and not leaves:
                continue
            text = _dot_text(_picture_label(child))
            label = f'"{text}\\n{child.first_index}-{child.last_index}"'
            shape = ", style=dashed" if child.kind == "group" else ""
            lines.append(f"  n{child.id} [label={label}{shape}];")
            lines.append(f"  n{node.id} -> n{child.id};")
    lines.append("}")
    return "\n".join(lines) + "\n"
