"""The web view: look at a memory in a browser.

``create_app(memory)`` builds an ASGI app (Starlette) with server-rendered pages:
scopes and sessions, the topic tree (expand, collapse, a message shown in its
topic), search with the signals that ranked each hit, the context for a query
under a budget with each section's tokens, and the reorganisation log with undo.
``arbormem ui`` serves a local store with it on 127.0.0.1; a server mounts it
behind its keys with ``create_app(memory_for_request, check_key=...)``.

Needs ``pip install 'arbormem[web]'``.
"""

from arbormem.web.app import KEY_COOKIE, Unauthorized, create_app

__all__ = ["KEY_COOKIE", "Unauthorized", "create_app"]
