"""The arbormem server (``arbormem serve``, the ``server`` extra): REST under ``/v1``,
MCP over streamable HTTP at ``/mcp``, an OpenAI-compatible proxy, API keys per tenant.

The key file (:mod:`arbormem.server.keys`) needs no extra; the rest needs FastAPI and
the MCP SDK, imported when first used.
"""

from typing import TYPE_CHECKING, Any

from arbormem.server.auth import Authenticator, JWTConfig
from arbormem.server.keys import KeyRing, Principal

if TYPE_CHECKING:
    from arbormem.server.app import create_app
    from arbormem.server.state import ProxyConfig


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from arbormem.server.app import create_app

        return create_app
    if name == "ProxyConfig":
        from arbormem.server.state import ProxyConfig

        return ProxyConfig
    raise AttributeError(f"module 'arbormem.server' has no attribute {name!r}")


__all__ = ["Authenticator", "JWTConfig", "KeyRing", "Principal", "ProxyConfig", "create_app"]
