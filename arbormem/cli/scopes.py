"""What the CLI says when the scope it reads holds nothing.

A mistyped ``--user`` or ``--agent`` is a valid, empty scope: commands answered
"No sessions." or an empty prompt and nothing more. :func:`hint_if_empty`
adds a line on stderr naming the scopes the store does hold, nearest to the
one asked for first, so the typo shows (stdout, perhaps ``--json`` for a
program, is left as it was).
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

import click

#: How many users or agents a hint names.
SHOWN = 5


def nearest(name: str, candidates: list[str], n: int = SHOWN) -> list[str]:
    """Up to ``n`` of ``candidates``, most like ``name`` first (ties by name).

    >>> nearest("sma", ["alice", "sam", "samuel"])
    ['sam', 'samuel', 'alice']
    """

    def likeness(other: str) -> float:
        return SequenceMatcher(None, name.casefold(), other.casefold()).ratio()

    return sorted(set(candidates), key=lambda c: (-likeness(c), c))[:n]


def _listed(names: list[str], total: int) -> str:
    more = f" and {total - len(names)} more" if total > len(names) else ""
    return ", ".join(names) + more


def empty_scope_hint(mem: Any, *, all_agents: bool = False) -> str | None:
    """A hint when the scope of ``mem`` (all its user's agents with ``all_agents``)
    holds no message; None when it holds some."""
    scope = mem.scope

    def holds(user: str, agent: str) -> bool:
        # A thread can outlive its messages (all of them forgotten): it does not count.
        return bool(mem.stats(user=user, agent=agent).messages)

    if any(holds(s.user, s.agent) for s in mem.scopes(scope.user) if all_agents or s == scope):
        return None
    where = f"user {scope.user!r}"
    if not all_agents:
        where += f" with agent {scope.agent!r}"
    agents = [s.agent for s in mem.scopes(scope.user) if holds(s.user, s.agent)]
    if agents:
        return (
            f"hint: nothing is stored for {where}. Agents of user {scope.user!r} in this "
            f"store, nearest first: {_listed(nearest(scope.agent, agents), len(agents))} "
            "(choose one with --agent)"
        )
    threads: dict[str, list[str]] = {}
    for s in mem.scopes():
        threads.setdefault(s.user, []).append(s.agent)
    # Nearest first, and only as many checked for messages as are shown.
    users = []
    for user in nearest(scope.user, list(threads), n=len(threads)):
        if any(holds(user, agent) for agent in threads[user]):
            users.append(user)
            if len(users) == SHOWN:
                break
    if not users:
        return (
            f"hint: nothing is stored for {where}: the store {mem.path} holds no messages yet "
            "('arbormem ingest FILE' adds some)"
        )
    # All were checked when fewer than SHOWN hold messages; else the others are counted.
    total = len(users) if len(users) < SHOWN else len(threads) - (scope.user in threads)
    return (
        f"hint: nothing is stored for {where}. Users in this store, nearest first: "
        f"{_listed(users, total)} (choose one with --user)"
    )


def hint_if_empty(mem: Any, *, all_agents: bool = False) -> None:
    """Print :func:`empty_scope_hint` on stderr, if there is one."""
    hint = empty_scope_hint(mem, all_agents=all_agents)
    if hint:
        click.echo(hint, err=True)
