"""Image memories in SQLite: rows in the database, bytes in files beside it.

The bytes of each picture are kept once, in ``<store>.images/<2 hex>/<sha256>``
(written to a temporary name, then renamed, so a crash leaves no half file); an
in-memory store keeps them in its ``image_blobs`` table. Files are written and
swept under the store's write lock, so a sweep never removes the bytes of an image
another writer is storing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from arbormem.errors import StoreError
from arbormem.ids import new_id
from arbormem.store.images import IMAGE_COLUMNS, MUTABLE_FIELDS, ImageRow, image_row
from arbormem.store.sqlite.common import batches, load_json
from arbormem.store.sqlite.messages import SQLiteMessages
from arbormem.store.types import PURGE_WAIT, Deleted, Purge, Thread
from arbormem.timeutil import format_timestamp, parse_stored, utcnow

log = logging.getLogger("arbormem.store.sqlite")

_COLUMNS = IMAGE_COLUMNS


def _row(r: Sequence[Any]) -> ImageRow:
    return image_row(r, parse_stored)


def _stamp(value: Any) -> Any:
    return format_timestamp(value) if isinstance(value, datetime) else value


class SQLiteImages(SQLiteMessages):
    """Image rows, cached vision captions and content-addressed bytes."""

    @property
    def _image_folder(self) -> Path | None:
        return None if self._memory else Path(f"{self.path}.images")

    def _blob_path(self, digest: str) -> Path:
        folder = self._image_folder
        assert folder is not None
        if not digest.isalnum():  # a hex digest; never a path of the caller's making
            raise StoreError(f"not an image digest: {digest!r}")
        return folder / digest[:2] / digest

    # -- bytes ---------------------------------------------------------------------------

    def put_blob(self, digest: str, data: bytes) -> None:
        with self.transaction():
            if self._image_folder is None:
                self._writer.execute(
                    "INSERT OR IGNORE INTO image_blobs (digest, data) VALUES (?, ?)",
                    (digest, data),
                )
                return
            path = self._blob_path(digest)
            if path.is_file() and path.stat().st_size == len(data):
                return
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                temp = path.with_name(f".{digest}.{os.getpid()}.tmp")
                with open(temp, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temp, path)
            except OSError as exc:
                raise StoreError(f"cannot write the image file {path}: {exc}") from exc

    def blob(self, digest: str) -> bytes | None:
        if self._image_folder is None:
            with self._reading() as conn:
                row = conn.execute(
                    "SELECT data FROM image_blobs WHERE digest = ?", (digest,)
                ).fetchone()
            return bytes(row[0]) if row else None
        try:
            return self._blob_path(digest).read_bytes()
        except FileNotFoundError:
            return None

    def blob_file(self, digest: str) -> Path | None:
        if self._image_folder is None:
            return None
        path = self._blob_path(digest)
        return path if path.is_file() else None

    def sweep_blobs(self) -> int:
        if self.read_only:
            return 0
        removed = 0
        with self.transaction():
            c = self._writer
            c.execute("DELETE FROM image_captions WHERE digest NOT IN (SELECT digest FROM images)")
            # The CLIP vectors of pictures no image refers to (arbormem.images.clip).
            c.execute(
                "DELETE FROM vectors WHERE model LIKE 'clip:%'"
                " AND chash NOT IN (SELECT digest FROM images)"
            )
            if self._image_folder is None:
                return c.execute(
                    "DELETE FROM image_blobs WHERE digest NOT IN (SELECT digest FROM images)"
                ).rowcount
            folder = self._image_folder
            if not folder.is_dir():
                return 0
            used = {r[0] for r in c.execute("SELECT DISTINCT digest FROM images")}
            for sub in folder.iterdir():
                if not sub.is_dir():
                    continue
                for path in sub.iterdir():
                    name = path.name
                    if name in used:
                        continue
                    try:
                        path.unlink()
                        removed += 1
                    except OSError as exc:
                        log.warning("could not remove the image file %s: %s", path, exc)
                if not any(sub.iterdir()):
                    sub.rmdir()
        return removed

    def owns_path(self, path: Path) -> bool:
        folder = self._image_folder
        if folder is not None and folder.resolve() in path.resolve().parents:
            return True
        return super().owns_path(path)

    # -- rows ----------------------------------------------------------------------------

    def insert_image(self, row: ImageRow) -> ImageRow:
        created = row.created_at or utcnow()
        with self.transaction():
            self._writer.execute(
                f"INSERT INTO images ({_COLUMNS}) VALUES ({','.join('?' * 24)})",
                (
                    row.id or new_id(),
                    row.thread_id,
                    row.digest,
                    row.mime,
                    row.size,
                    row.width,
                    row.height,
                    row.phash,
                    row.session,
                    format_timestamp(row.timestamp),
                    row.caption,
                    row.caption_source,
                    row.scene,
                    float(row.importance),
                    json.dumps(list(row.entities), ensure_ascii=False),
                    row.speaker,
                    row.caption_rowid,
                    row.shared_in,
                    row.url,
                    json.dumps(dict(row.metadata), ensure_ascii=False),
                    row.recalls,
                    _stamp(row.recalled_at),
                    _stamp(row.expired_at),
                    format_timestamp(created),
                ),
            )
        stored = self.image(row.id)
        assert stored is not None
        return stored

    def image(self, image_id: str) -> ImageRow | None:
        with self._reading() as conn:
            r = conn.execute(f"SELECT {_COLUMNS} FROM images WHERE uid = ?", (image_id,)).fetchone()
        return _row(r) if r else None

    def image_by_digest(self, thread: Thread, digest: str) -> ImageRow | None:
        with self._reading() as conn:
            r = conn.execute(
                f"SELECT {_COLUMNS} FROM images WHERE thread_id = ? AND digest = ?",
                (thread.id, digest),
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
        marks = ",".join("?" * len(threads))
        where = f"thread_id IN ({marks})"
        args: list[Any] = [t.id for t in threads]
        if expired is not None:
            where += " AND expired_at IS NOT NULL" if expired else " AND expired_at IS NULL"
        out: list[ImageRow] = []
        with self._reading() as conn:
            if caption_rowids is None and ids is None:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM images WHERE {where} ORDER BY id", args
                ).fetchall()
                return [_row(r) for r in rows]
            column, wanted = (
                ("caption_rowid", list(dict.fromkeys(int(r) for r in caption_rowids)))
                if caption_rowids is not None
                else ("uid", list(dict.fromkeys(ids or ())))
            )
            for chunk, qs in batches(wanted, 400):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM images WHERE {where}"
                    f" AND {column} IN ({qs}) ORDER BY id",
                    [*args, *chunk],
                ).fetchall()
                out.extend(_row(r) for r in rows)
        return out

    def recall_images(self, recalls: Mapping[str, int], at: datetime) -> None:
        with self.transaction():
            self._writer.executemany(
                "UPDATE images SET recalls = recalls + ?, recalled_at = ? WHERE uid = ?",
                [(n, format_timestamp(at), image_id) for image_id, n in recalls.items()],
            )

    def update_image(self, image_id: str, **changes: Any) -> None:
        unknown = set(changes) - MUTABLE_FIELDS
        if unknown:
            raise ValueError(f"cannot change {sorted(unknown)} of an image")
        if not changes:
            return
        sets = ", ".join(f"{name} = ?" for name in changes)
        with self.transaction():
            self._writer.execute(
                f"UPDATE images SET {sets} WHERE uid = ?",
                [*(_stamp(v) for v in changes.values()), image_id],
            )

    def delete_images(self, image_ids: Sequence[str]) -> int:
        gone = 0
        with self.transaction():
            for chunk, qs in batches(list(image_ids)):
                gone += self._writer.execute(
                    f"DELETE FROM images WHERE uid IN ({qs})", chunk
                ).rowcount
        return gone

    def cached_caption(self, digest: str, model: str) -> dict[str, Any] | None:
        with self._reading() as conn:
            r = conn.execute(
                "SELECT answer FROM image_captions WHERE digest = ? AND model = ?",
                (digest, model),
            ).fetchone()
        return load_json(r[0]) if r else None

    def cache_caption(self, digest: str, model: str, answer: Mapping[str, Any]) -> None:
        with self.transaction():
            self._writer.execute(
                "INSERT OR REPLACE INTO image_captions (digest, model, answer) VALUES (?, ?, ?)",
                (digest, model, json.dumps(dict(answer), ensure_ascii=False)),
            )

    # -- forgetting ----------------------------------------------------------------------

    def delete_session(self, thread: Thread, session: str) -> Deleted:
        with self.transaction():
            result = super().delete_session(thread, session)
            # Soft-expired images of the session have no caption message to take
            # them along.
            self._writer.execute(
                "DELETE FROM images WHERE thread_id = ? AND session_key = ?",
                (thread.id, session),
            )
            return result

    def purge(self, *, wait: float = PURGE_WAIT, rewrite: bool | None = None) -> Purge:
        if not self.read_only:
            self.sweep_blobs()  # the bytes of forgotten images leave the disk first
        return super().purge(wait=wait, rewrite=rewrite)
