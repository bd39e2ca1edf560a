"""Stable identifiers: time-ordered, unique across stores, safe in URLs.

A message id is 26 characters of Crockford base32: 48 bits of milliseconds
since the epoch then 80 random bits (the ULID layout), so ids sort roughly by
creation time and two stores never mint the same one.
"""

from __future__ import annotations

import hashlib
import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id() -> str:
    """A fresh 26-character time-ordered id."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def stable_id(*parts: str) -> str:
    """A 26-character id in the same alphabet, the same for the same ``parts``: for
    things whose identity is their content (an image memory is its scope and its
    bytes), so that storing the same conversation twice gives the same ids."""
    digest = hashlib.blake2b("\0".join(parts).encode("utf-8"), digest_size=16).digest()
    value = int.from_bytes(digest, "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def content_hash(text: str) -> str:
    """A short hash keying the embedding cache (same text, same vector)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
