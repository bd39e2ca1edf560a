"""Image memories on PostgreSQL: not stored yet.

The capability is answered honestly rather than left out: reads find no image, and
storing one raises a :class:`~arbormem.errors.StoreError` that says so, so
``Memory.add_image`` on a ``postgresql://`` store fails clearly, before anything
is written, and every other capability works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arbormem.errors import StoreError
from arbormem.store.images import ImageRow
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.types import Thread

NOT_YET = (
    "image memories are not stored in PostgreSQL yet: keep images in a SQLite store "
    "(a file path or sqlite:///path) for now"
)


class PostgresImages(PostgresConnection):
    """The :class:`~arbormem.store.images.ImageStore` capability: no images yet."""

    def put_blob(self, digest: str, data: bytes) -> None:
        raise StoreError(NOT_YET)

    def blob(self, digest: str) -> bytes | None:
        return None

    def sweep_blobs(self) -> int:
        return 0

    def insert_image(self, row: ImageRow) -> ImageRow:
        raise StoreError(NOT_YET)

    def image(self, image_id: str) -> ImageRow | None:
        return None

    def image_by_digest(self, thread: Thread, digest: str) -> ImageRow | None:
        return None

    def images(
        self,
        threads: Sequence[Thread],
        *,
        expired: bool | None = None,
        caption_rowids: Sequence[int] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[ImageRow]:
        return []

    def update_image(self, image_id: str, **changes: Any) -> None:
        raise StoreError(NOT_YET)

    def delete_images(self, image_ids: Sequence[str]) -> int:
        return 0

    def cached_caption(self, digest: str, model: str) -> dict[str, Any] | None:
        return None

    def cache_caption(self, digest: str, model: str, answer: Mapping[str, Any]) -> None:
        raise StoreError(NOT_YET)
