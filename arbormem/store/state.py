"""The session-state capability: each session's working memory as a JSON object
(its mode, tracked state and rolling summary; see :mod:`arbormem.context.working`)."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from arbormem.store.core import StoreCore
from arbormem.store.types import (
    Thread,
)


class SessionStateStore(StoreCore):
    """Per-session working-memory state."""

    @abc.abstractmethod
    def session_state(self, thread: Thread, session: str) -> dict[str, Any]:
        """The stored working-memory state of a session (``{}`` when none)."""

    @abc.abstractmethod
    def put_session_state(self, thread: Thread, session: str, state: Mapping[str, Any]) -> None:
        """Store a session's working-memory state (a JSON object)."""

    @abc.abstractmethod
    def session_states(self, thread: Thread) -> dict[str, dict[str, Any]]:
        """Every stored session state of a thread, by session, in session order,
        sessions that hold only a state (a mode set before the session's first
        message) included."""
