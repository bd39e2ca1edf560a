"""Image memories in PostgreSQL: rows keyed by scope, bytes inside the database.

``images`` holds one row per image memory, keyed like every table by its scope and
thread, and unique per thread by content hash (the dedup of a scope). The bytes are
kept once per hash in ``image_blobs`` and a vision model's answers once per hash and
model in ``image_captions``: both are content-addressed, as the embedding cache
``vectors`` is, and hold no scope. A blob is reached only through an image row of
the caller's scope, so two tenants storing the same picture share its bytes and
nothing else. Forgetting a caption message, a session or a thread deletes the image
rows in the same transaction (:mod:`.deleting`); the bytes no row uses go at the next
purge (:meth:`PostgresImages.sweep_blobs`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from arbormem.errors import StoreError
from arbormem.ids import new_id
from arbormem.store.images import IMAGE_COLUMNS, MUTABLE_FIELDS, ImageRow, image_row
from arbormem.store.postgres.common import utc
from arbormem.store.postgres.connection import PostgresConnection
from arbormem.store.types import Thread
from arbormem.timeutil import utcnow

_COLUMNS = IMAGE_COLUMNS


def _row(r: Sequence[Any]) -> ImageRow:
    return image_row(r, utc)


class PostgresImages(PostgresConnection):
    """The :class:`~arbormem.store.images.ImageStore` capability."""

    # -- bytes ---------------------------------------------------------------------------

    def put_blob(self, digest: str, data: bytes) -> None:
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO image_blobs (digest, data) VALUES (%s, %s)"
                " ON CONFLICT (digest) DO NOTHING",
                (digest, data),
            )

    def blob(self, digest: str) -> bytes | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT data FROM image_blobs WHERE digest = %s", (digest,)
            ).fetchone()
        return bytes(row[0]) if row else None

    def sweep_blobs(self) -> int:
        if self.read_only:
            return 0
        with self._writing() as conn:
            conn.execute(
                "DELETE FROM image_captions c WHERE NOT EXISTS"
                " (SELECT 1 FROM images i WHERE i.digest = c.digest)"
            )
            # The CLIP vectors of pictures no image refers to (arbormem.images.clip).
            conn.execute(
                "DELETE FROM vectors v WHERE v.model LIKE 'clip:%%' AND NOT EXISTS"
                " (SELECT 1 FROM images i WHERE i.digest = v.chash)"
            )
            return int(
                conn.execute(
                    "DELETE FROM image_blobs b WHERE NOT EXISTS"
                    " (SELECT 1 FROM images i WHERE i.digest = b.digest)"
                ).rowcount
            )

    # -- rows ----------------------------------------------------------------------------

    def insert_image(self, row: ImageRow) -> ImageRow:
        image_id = row.id or new_id()
        with self._writing() as conn:
            # The scope comes with the thread: a row is never written to a scope its
            # thread is not in.
            done = conn.execute(
                f"INSERT INTO images (scope_id, id, {_COLUMNS})"
                " SELECT t.scope_id, nextval('image_ids'), %(uid)s, t.id, %(digest)s, %(mime)s,"
                " %(size)s, %(width)s, %(height)s, %(phash)s, %(session)s, %(ts)s, %(caption)s,"
                " %(source)s, %(scene)s, %(importance)s, %(entities)s, %(speaker)s,"
                " %(caption_rowid)s, %(shared_in)s, %(url)s, %(metadata)s, %(recalls)s,"
                " %(recalled_at)s, %(expired_at)s, %(created_at)s"
                " FROM threads t WHERE t.id = %(thread)s",
                {
                    "uid": image_id,
                    "thread": row.thread_id,
                    "digest": row.digest,
                    "mime": row.mime,
                    "size": row.size,
                    "width": row.width,
                    "height": row.height,
                    "phash": row.phash,
                    "session": row.session,
                    "ts": row.timestamp,
                    "caption": row.caption,
                    "source": row.caption_source,
                    "scene": row.scene,
                    "importance": float(row.importance),
                    "entities": json.dumps(list(row.entities), ensure_ascii=False),
                    "speaker": row.speaker,
                    "caption_rowid": row.caption_rowid,
                    "shared_in": row.shared_in,
                    "url": row.url,
                    "metadata": json.dumps(dict(row.metadata), ensure_ascii=False),
                    "recalls": row.recalls,
                    "recalled_at": row.recalled_at,
                    "expired_at": row.expired_at,
                    "created_at": row.created_at or utcnow(),
                },
            )
            if done.rowcount != 1:
                raise StoreError(f"no thread {row.thread_id} to store image {image_id!r} in")
        stored = self.image(image_id)
        assert stored is not None
        return stored

    def image(self, image_id: str) -> ImageRow | None:
        with self._reading() as conn:
            r = conn.execute(
                f"SELECT {_COLUMNS} FROM images WHERE uid = %s", (image_id,)
            ).fetchone()
        return _row(r) if r else None

    def image_by_digest(self, thread: Thread, digest: str) -> ImageRow | None:
        with self._reading() as conn:
            r = conn.execute(
                f"SELECT {_COLUMNS} FROM images WHERE scope_id = %(s)s AND thread_id = %(t)s"
                " AND digest = %(d)s",
                {**self._keys(thread), "d": digest},
            ).fetchone()
        return _row(r) if r else None

    def images(
        self,
        threads: Sequence[Thread],
        *,
        expired: bool | None = None,
        caption_rowids: Sequence[int] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[ImageRow]:
        if not threads:
            return []
        where = "scope_id = ANY(%(s)s) AND thread_id = ANY(%(t)s)"
        args: dict[str, Any] = {
            "s": sorted({self._keys(t)["s"] for t in threads}),
            "t": sorted({t.id for t in threads}),
        }
        if expired is not None:
            where += " AND expired_at IS NOT NULL" if expired else " AND expired_at IS NULL"
        if caption_rowids is not None:
            where += " AND caption_rowid = ANY(%(c)s)"
            args["c"] = sorted({int(r) for r in caption_rowids})
        elif ids is not None:
            where += " AND uid = ANY(%(u)s)"
            args["u"] = sorted(set(ids))
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM images WHERE {where} ORDER BY id", args
            ).fetchall()
        return [_row(r) for r in rows]

    def images_by_id(self, image_ids: Sequence[str]) -> list[ImageRow]:
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM images WHERE uid = ANY(%s) ORDER BY id",
                (sorted(set(image_ids)),),
            ).fetchall()
        return [_row(r) for r in rows]

    def recall_images(self, recalls: Mapping[str, int], at: datetime) -> None:
        if not recalls:
            return
        with self._writing() as conn, conn.cursor() as cur:
            cur.executemany(
                "UPDATE images SET recalls = recalls + %s, recalled_at = %s WHERE uid = %s",
                [(n, at, image_id) for image_id, n in sorted(recalls.items())],
            )

    def update_image(self, image_id: str, **changes: Any) -> None:
        unknown = set(changes) - MUTABLE_FIELDS
        if unknown:
            raise ValueError(f"cannot change {sorted(unknown)} of an image")
        if not changes:
            return
        # The names are checked above: only known columns reach the SQL.
        sets = ", ".join(f"{name} = %({name})s" for name in sorted(changes))
        with self._writing() as conn:
            conn.execute(
                f"UPDATE images SET {sets} WHERE uid = %(uid__)s", {**changes, "uid__": image_id}
            )

    def delete_images(self, image_ids: Sequence[str]) -> int:
        if not image_ids:
            return 0
        with self._writing() as conn:
            return int(
                conn.execute("DELETE FROM images WHERE uid = ANY(%s)", (list(image_ids),)).rowcount
            )

    def cached_caption(self, digest: str, model: str) -> dict[str, Any] | None:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT answer FROM image_captions WHERE digest = %s AND model = %s",
                (digest, model),
            ).fetchone()
        return json.loads(r[0]) if r else None

    def cache_caption(self, digest: str, model: str, answer: Mapping[str, Any]) -> None:
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO image_captions (digest, model, answer) VALUES (%s, %s, %s)"
                " ON CONFLICT (digest, model) DO UPDATE SET answer = excluded.answer",
                (digest, model, json.dumps(dict(answer), ensure_ascii=False)),
            )
