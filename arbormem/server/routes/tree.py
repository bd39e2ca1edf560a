"""``/v1/tree``: a node of a user's topic tree, by id or by path, with its children."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from arbormem.errors import InputError, NotFound
from arbormem.server import schemas
from arbormem.server.deps import ReadMemory
from arbormem.server.routes.messages import AgentQ, UserQ
from arbormem.server.schemas import AUTH_ERRORS, LOOKUP_ERRORS, answer
from arbormem.tree.view import TopicNode

router = APIRouter(prefix="/v1", tags=["tree"])


def find_node(root: TopicNode, node: int | None, path: str | None) -> TopicNode:
    """The node with id ``node``, or at ``path`` (child positions, ``"0/2"``), or the root."""
    if node is not None and path is not None:
        raise InputError("give node or path, not both", field="path")
    if node is not None:
        for n in root.walk():
            if n.id == node:
                return n
        raise NotFound(f"no topic node {node} in this scope's tree")
    at = root
    if path:
        for step in path.strip("/").split("/"):
            if not step.isdigit():
                raise InputError(
                    f"must be child positions joined by '/', like 0/2, got {path!r}", field="path"
                )
            index = int(step)
            if index >= len(at.children):
                raise NotFound(f"no child {index} under node {at.id} (path {path!r})")
            at = at.children[index]
    return at


def node_view(n: TopicNode, *, messages: bool) -> dict[str, Any]:
    """The node with its children listed one level deep."""
    out = n.to_dict(messages=messages)
    if "children" in out:
        out["children"] = [
            {k: v for k, v in child.items() if k not in ("children", "messages")}
            for child in out["children"]
        ]
    return out


@router.get(
    "/tree", response_model=schemas.TopicNodeOut, responses={**AUTH_ERRORS, **LOOKUP_ERRORS}
)
def get_node(
    mem: ReadMemory,
    user: UserQ,
    agent: AgentQ = None,
    node: Annotated[int | None, Query(ge=0, description="A node id")] = None,
    path: Annotated[str | None, Query(max_length=512, description="Child positions, 0/2")] = None,
    messages: bool = False,
) -> Response:
    """The root (by default), a node by id or by path; its children one level deep."""
    root = mem.tree(user=user, agent=agent, messages=messages)
    return answer(node_view(find_node(root, node, path), messages=messages))
