"""API keys: each belongs to one tenant, may be read-only, and is stored hashed.

A key is ``amk_<id>_<secret>``. The key file (JSON, beside the store by default)
holds, per key, its id, tenant, read-only flag, creation time and the SHA-256 of
the whole key, never the key itself: a copy of the file lets nobody in. The
secret has 192 random bits, so an unsalted fast hash is enough (there is nothing
to guess by brute force). The server rereads the file when it changes, so a key
created or revoked with ``arbormem keys`` counts without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arbormem.errors import ConfigError, InputError, NotFound
from arbormem.timeutil import format_timestamp, utcnow

PREFIX = "amk_"


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a tenant, and whether it may write."""

    tenant: str
    read_only: bool = False
    #: The key's id, or ``jwt:<subject>`` for a bearer token, or ``"local"`` with auth off.
    key_id: str = "local"


@dataclass(frozen=True)
class KeyInfo:
    """A stored key, without its secret (what ``arbormem keys list`` shows)."""

    id: str
    tenant: str
    read_only: bool
    created_at: str
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def default_keys_path(db: str) -> Path:
    """Where the keys of the store at ``db`` live unless told otherwise."""
    if db == ":memory:" or "://" in db:
        raise ConfigError(
            f"the store {db!r} has no folder to keep API keys in: "
            "give --keys FILE (or ARBORMEM_KEYS)"
        )
    return Path(f"{Path(db).expanduser()}.keys.json")


class KeyRing:
    """The keys of one key file: create, list, revoke, and look a key up."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    # -- the file -------------------------------------------------------------------

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._entries = None, {}
            return self._entries
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return self._entries
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            entries = {e["id"]: e for e in data["keys"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{self.path}: not a readable arbormem key file ({exc}); "
                "restore it or move it away and create keys again"
            ) from None
        self._stamp, self._entries = stamp, entries
        return entries

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "keys": list(entries.values())}, indent=2)
        fd, tmp = tempfile.mkstemp(prefix=".keys-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)  # hashes only, yet nobody else's business
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._stamp = None

    # -- operations -----------------------------------------------------------------

    def create(self, tenant: str, *, read_only: bool = False, name: str | None = None) -> str:
        """A new key for ``tenant``; the only time its text is seen."""
        if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 200:
            raise InputError("must be a non-blank name of at most 200 characters", field="tenant")
        with self._lock:
            entries = dict(self._read())
            key_id = secrets.token_hex(4)
            while key_id in entries:
                key_id = secrets.token_hex(4)
            key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
            entries[key_id] = {
                "id": key_id,
                "tenant": tenant,
                "read_only": bool(read_only),
                "created_at": format_timestamp(utcnow()),
                "name": name,
                "sha256": _digest(key),
            }
            self._write(entries)
        return key

    def list(self) -> list[KeyInfo]:
        with self._lock:
            entries = self._read()
        return [
            KeyInfo(e["id"], e["tenant"], e["read_only"], e["created_at"], e.get("name"))
            for e in entries.values()
        ]

    def revoke(self, key_id: str) -> KeyInfo:
        """Remove a key by its id (or by the key itself)."""
        if key_id.startswith(PREFIX):
            key_id = key_id[len(PREFIX) :].split("_", 1)[0]
        with self._lock:
            entries = dict(self._read())
            entry = entries.pop(key_id, None)
            if entry is None:
                raise NotFound(
                    f"no key {key_id!r} in {self.path} ('arbormem keys list' shows them)"
                )
            self._write(entries)
        return KeyInfo(
            entry["id"], entry["tenant"], entry["read_only"], entry["created_at"], entry.get("name")
        )

    def lookup(self, key: str) -> Principal | None:
        """The principal of a presented key, or None when it is not a live key."""
        if not key.startswith(PREFIX):
            return None
        key_id = key[len(PREFIX) :].split("_", 1)[0]
        with self._lock:
            entry = self._read().get(key_id)
        if entry is None or not hmac.compare_digest(entry["sha256"], _digest(key)):
            return None
        return Principal(tenant=entry["tenant"], read_only=entry["read_only"], key_id=key_id)
