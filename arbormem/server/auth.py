"""Who a request is: an API key of the key file, or a JWT from a configured issuer.

The same :class:`Authenticator` serves the REST routes (as a FastAPI dependency)
and the MCP endpoint (as the SDK's token verifier), so both accept the same
credentials and confine them to the same tenant.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbormem.errors import ConfigError
from arbormem.server.keys import KeyRing, Principal

#: The scope a JWT must carry to write (space-separated ``scope`` claim).
WRITE_SCOPE = "memory:write"


@dataclass(frozen=True)
class JWTConfig:
    """Bearer JWTs accepted besides API keys: signature, issuer, audience and expiry
    are all checked; the tenant comes from ``tenant_claim``."""

    issuer: str
    audience: str
    #: An HMAC secret, a PEM public key (the text, or a path to a file holding it), or
    #: the issuer's JWKS URL (``https://.../jwks.json``; keys picked by ``kid``, cached).
    key: str
    algorithms: tuple[str, ...] = ("RS256",)
    tenant_claim: str = "tenant"

    def verification_key(self) -> Any:
        if self.key.startswith(("https://", "http://")):
            import jwt

            return jwt.PyJWKClient(self.key, cache_keys=True, lifespan=300, timeout=5)
        if self.key.startswith("-----BEGIN"):
            return self.key
        path = Path(self.key).expanduser()
        if any(a.startswith(("RS", "ES", "PS", "Ed")) for a in self.algorithms):
            if not path.is_file():
                raise ConfigError(f"JWT key {self.key!r}: no such PEM file")
            return path.read_text(encoding="utf-8")
        return self.key


@dataclass
class Authenticator:
    """Turns a bearer credential into a :class:`Principal`, or None."""

    ring: KeyRing | None
    jwt: JWTConfig | None = None
    #: With auth off every request is this tenant's, able to write.
    enabled: bool = True
    _jwt_key: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.jwt is not None:
            self._jwt_key = self.jwt.verification_key()

    def principal(self, token: str | None) -> Principal | None:
        if not self.enabled:
            return Principal(tenant="", read_only=False, key_id="local")
        if not token:
            return None
        if self.ring is not None:
            found = self.ring.lookup(token)
            if found is not None:
                return found
        if self.jwt is not None and token.count(".") == 2:
            return self._from_jwt(token)
        return None

    def _from_jwt(self, token: str) -> Principal | None:
        import jwt

        assert self.jwt is not None
        try:
            key = (
                self._jwt_key.get_signing_key_from_jwt(token).key
                if isinstance(self._jwt_key, jwt.PyJWKClient)
                else self._jwt_key
            )
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self.jwt.algorithms),
                audience=self.jwt.audience,
                issuer=self.jwt.issuer,
                # exp, aud and iss are checked only when present unless required.
                options={"require": ["exp", "iss", "aud", "sub"]},
                leeway=5,
            )
        except jwt.PyJWTError:  # a bad token, or no key for its kid at the JWKS URL
            return None
        tenant = claims.get(self.jwt.tenant_claim)
        if not isinstance(tenant, str) or not tenant.strip():
            return None
        scopes = str(claims.get("scope", "")).split()
        return Principal(
            tenant=tenant, read_only=WRITE_SCOPE not in scopes, key_id=f"jwt:{claims['sub']}"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
