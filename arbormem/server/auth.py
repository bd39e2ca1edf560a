"""Who a request is: an API key of the key file, or a JWT from a configured issuer.

The same :class:`Authenticator` serves the REST routes (as a FastAPI dependency)
and the MCP endpoint (as the SDK's token verifier), so both accept the same
credentials and confine them to the same tenant.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbormem.errors import ConfigError
from arbormem.server.keys import PREFIX, KeyRing, Principal

#: The scope a JWT must carry to write (space-separated ``scope`` claim).
WRITE_SCOPE = "memory:write"
#: How long a verified JWT is trusted without checking its signature again.
JWT_TRUST_SECONDS = 60.0
#: Verified JWTs remembered at most (then forgotten all at once).
JWT_CACHE_SIZE = 4096


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
    #: Verified tokens: token -> (principal, monotonic time it stops being trusted).
    _verified: dict[str, tuple[Principal, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.jwt is not None:
            self._jwt_key = self.jwt.verification_key()

    def may_block(self, token: str | None) -> bool:
        """Whether checking ``token`` may wait on the network or the CPU for long (a
        JWT not verified yet: its key may come from the issuer's JWKS URL), so that
        an event loop should check it in a thread."""
        if not (self.enabled and self.jwt is not None and token) or token.startswith(PREFIX):
            return False
        known = self._verified.get(token)
        return known is None or known[1] <= time.monotonic()

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
            known = self._verified.get(token)
            if known is not None and known[1] > time.monotonic():
                return known[0]
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
        found = Principal(
            tenant=tenant, read_only=WRITE_SCOPE not in scopes, key_id=f"jwt:{claims['sub']}"
        )
        # An agent sends the same token on every call until it expires: verifying
        # its signature once is enough (for a minute at most, so a rotated key
        # counts soon; never past the token's expiry).
        trust = min(float(claims["exp"]) - time.time(), JWT_TRUST_SECONDS)
        if trust > 0:
            if len(self._verified) >= JWT_CACHE_SIZE:
                self._verified.clear()
            self._verified[token] = (found, time.monotonic() + trust)
        return found


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
