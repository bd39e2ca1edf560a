"""The window key of a turn: its terms with its neighbours' in the same session.

A leaf module: the schema's migrations build window documents too.
"""

from __future__ import annotations

from collections.abc import Sequence

#: A turn's window key holds the turn and this many neighbours on each side (same session).
WINDOW_RADIUS = 2


def window_doc(parts: Sequence[str]) -> str:
    return " ".join(filter(None, parts))
