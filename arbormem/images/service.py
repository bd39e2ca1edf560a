"""Storing, finding, fading and forgetting image memories (see :mod:`arbormem.images`).

An image memory is a row of the store's images capability plus one message of its
thread, the *caption message* (``[image <id>] <caption>``, its metadata naming the
image). The message is what makes the caption a memory like any turn: it sits in
the image's session at its time, is indexed lexically and embedded, grows the topic
tree, and comes back from ``search`` and ``context()``. Soft-expiring an image
deletes its caption message (the row and the bytes stay); restoring writes it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arbormem import arguments
from arbormem.errors import InputError, NotFound
from arbormem.ids import stable_id
from arbormem.images.caption import Caption, ask_vision, fallback
from arbormem.images.fading import Curve
from arbormem.images.files import ImageFile, check, hamming, read_source
from arbormem.images.ingest import Pending, attach, extract
from arbormem.ingest.formats import Record
from arbormem.llm import LLMClient, LLMConfig, OpenAIChatClient
from arbormem.models import Hit, ImageRef, Message, Scope
from arbormem.results import ImageHit, ImageMemory, ImagesExpired
from arbormem.store.images import ImageRow
from arbormem.store.types import Thread
from arbormem.timeutil import format_timestamp, parse_timestamp, utcnow

if TYPE_CHECKING:
    from arbormem.engine import Engine
    from arbormem.ingest.pipeline import Writer

log = logging.getLogger(__name__)

#: Turns before an image read for its caption when nothing else describes it.
AROUND = 2
#: Characters of the sharing message kept in a caption message.
SHARED_WORDS = 500
#: The most images one search returns.
MAX_IMAGE_HITS = 1000


def vision_client(engine: Engine) -> LLMClient | None:
    """The vision model's client, or None when ``vision_model`` is not set."""
    settings = engine.settings
    if not settings.vision_model:
        return None
    llm = settings.llm
    config = LLMConfig(
        model=settings.vision_model,
        base_url=settings.vision_base_url or (llm.base_url if llm else None),
        api_key=llm.api_key if llm else None,
        timeout=settings.vision_timeout,
        max_retries=1,
    )
    return OpenAIChatClient(config)


def url_digest(url: str) -> str:
    """The digest of a picture known only by its URL (never fetched)."""
    return "u" + hashlib.sha256(url.encode("utf-8")).hexdigest()


class ImagesService:
    """The image operations of one :class:`~arbormem.Memory` (a tenant view has its own)."""

    def __init__(self, engine: Engine, writer: Writer) -> None:
        self.engine = engine
        self.writer = writer
        self.backend = engine.backend
        self.curve = Curve.of(engine.settings)
        self._vision: LLMClient | None = None
        self._vision_made = False
        self._recalls: dict[str, int] = {}
        self._recalled_at: datetime | None = None
        self._recall_lock = threading.Lock()

    @property
    def vision(self) -> LLMClient | None:
        if not self._vision_made:
            self._vision = vision_client(self.engine)
            self._vision_made = True
        return self._vision

    # -- adding ------------------------------------------------------------------------

    def add(
        self,
        scope: Scope,
        source: Any,
        *,
        caption: str | None = None,
        session: str | None = None,
        timestamp: datetime | str | float | None = None,
        speaker: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        role: str = "user",
        shared_in: str | None = None,
        url: str | None = None,
        field: str = "image",
        checked: ImageFile | None = None,
    ) -> ImageMemory:
        """Store one image (``source``: a path, bytes, a file object; or None with
        ``url`` for a remote picture recorded without its bytes)."""
        settings = self.engine.settings
        limits = settings.limits
        image = checked
        if image is None and source is not None:
            data, name = read_source(source, field, max_bytes=settings.image_max_bytes)
            try:
                image = check(data, field, name=name)
            except InputError as exc:
                if exc.source or not isinstance(source, (str, os.PathLike)):
                    raise
                # The path given names the file better than the argument's name alone.
                raise InputError(
                    exc.problem, source=os.fspath(source), field=exc.field, hint=exc.hint
                ) from None
        if image is None and not url:
            raise InputError("is missing", field=field, hint="give a path, bytes or a file object")
        digest = image.digest if image is not None else url_digest(str(url))
        given = None
        if caption is not None:
            given = " ".join(
                arguments.text(caption, "caption", max_bytes=limits.message_bytes // 2).split()
            )
        if speaker is not None:
            speaker = arguments.name(speaker, "speaker", max_bytes=limits.name_bytes)
        meta = dict(metadata or {})
        if len(json.dumps(meta, ensure_ascii=False, default=str)) > limits.metadata_bytes:
            raise InputError(f"is over {limits.metadata_bytes:,} bytes as JSON", field="metadata")
        when = parse_timestamp(timestamp, field="timestamp") if timestamp is not None else None
        self.backend.writable()
        thread = self.engine.thread(scope, create=True)
        assert thread is not None
        existing = self.backend.image_by_digest(thread, digest)
        if existing is not None:
            return self.memory(existing, duplicate=True)
        chosen = self._caption(thread, image, given, session, shared_in, url)
        # The id is the scope's and the bytes' (or the URL's): it is written into the
        # caption's text, and a random one made the indexed words, the embedding and
        # the topic names differ each time the same conversation was stored.
        image_id = stable_id("image", thread.tenant, thread.user, thread.agent, digest)
        link: dict[str, Any] = {"id": image_id}
        if shared_in:
            link["shared_in"] = shared_in
        record = Record(
            content=self._indexed(image_id, chosen.text, chosen.source, shared_in),
            role=role,
            speaker=speaker,
            timestamp=when,
            metadata={"image": link},
            session=session,
        )
        with self.engine.write_lock, self.backend.transaction():
            raced = self.backend.image_by_digest(thread, digest)
            if raced is not None:
                return self.memory(raced, duplicate=True)
            if image is not None:
                self.backend.put_blob(digest, image.data)
            message = self.writer.add([record], scope=scope).messages[0]
            row = self.backend.get(message.id)
            assert row is not None
            if image is not None and image.taken_at is not None:
                meta.setdefault("taken_at", format_timestamp(image.taken_at))
            stored = self.backend.insert_image(
                ImageRow(
                    id=image_id,
                    thread_id=thread.id,
                    digest=digest,
                    mime=image.mime if image is not None else "",
                    size=len(image.data) if image is not None else 0,
                    width=image.width if image is not None else None,
                    height=image.height if image is not None else None,
                    phash=image.phash if image is not None else None,
                    session=message.session,
                    timestamp=message.timestamp,
                    caption=chosen.text,
                    caption_source=chosen.source,
                    scene=chosen.scene,
                    importance=chosen.importance,
                    entities=chosen.entities,
                    speaker=speaker,
                    caption_rowid=row.rowid,
                    shared_in=shared_in,
                    url=url,
                    metadata=meta,
                )
            )
        if image is not None:
            self._embed_picture(digest, image.data)
        return self.memory(stored)

    def _embed_picture(self, digest: str, data: bytes) -> None:
        """Store the picture's CLIP vector when a CLIP model is configured. The image
        is stored already: a model that fails is logged, and the picture is tried
        again when image search first reads it."""
        clip = self.engine.clip
        if clip is None or self.backend.vectors(clip.model_id, [digest]):
            return
        try:
            vec = clip.embed_images([data])[0]
        except Exception as exc:  # the model's own errors; the image is kept
            log.warning("CLIP could not embed image %s: %s", digest[:12], exc)
            return
        self.backend.put_vectors(clip.model_id, {digest: vec})

    def _caption(
        self,
        thread: Thread,
        image: ImageFile | None,
        given: str | None,
        session: str | None,
        shared_in: str | None,
        url: str | None,
    ) -> Caption:
        if given:
            return Caption(text=given, source="caller")
        client = self.vision
        if client is not None and image is not None:
            model = self.engine.settings.vision_model
            answer = self.backend.cached_caption(image.digest, model)
            if answer is None:
                answer = ask_vision(client, image)
                if answer is not None:
                    self.backend.cache_caption(image.digest, model, answer)
            if answer is not None:
                return Caption(
                    text=answer["caption"],
                    source="vision",
                    scene=answer["scene"],
                    importance=answer["importance"],
                    entities=tuple(answer["entities"]),
                )
        return fallback(image, self._around(thread, session, shared_in), url)

    def _indexed(self, image_id: str, caption: str, source: str, shared_in: str | None) -> str:
        """The caption message's text: the reference, the caption, and the words the
        picture was shared with. A picture is remembered with what was said as it was
        shown ("the photo she sent when she said she had started painting"); a question
        may name either. (A caption from the conversation holds those words already.)"""
        text = f"[image {image_id}] {caption}"
        if shared_in and source in ("caller", "vision"):
            row = self.backend.get(shared_in)
            if row is not None:
                text += f" (shared with: {row.message.text[:SHARED_WORDS]})"
        return text

    def _around(self, thread: Thread, session: str | None, shared_in: str | None) -> list[str]:
        """The text of the turns an image was shared with: the sharing message, else
        the last turns of its session."""
        if shared_in:
            row = self.backend.get(shared_in)
            return [row.message.text] if row is not None else []
        last = self.backend.messages(thread, session=session, last=AROUND, archived=False)
        return [r.message.text for r in last if "image" not in r.message.metadata]

    def extract(self, records: Sequence[Record]) -> tuple[list[Record], list[Pending]]:
        """See :func:`arbormem.images.ingest.extract`."""
        return extract(records, self.engine.settings)

    def attach(self, messages: Sequence[Message], pending: Sequence[Pending]) -> None:
        """See :func:`arbormem.images.ingest.attach`."""
        if pending:
            attach(self.add, messages, pending)

    # -- reading -----------------------------------------------------------------------

    def memory(
        self, row: ImageRow, *, duplicate: bool = False, message_id: str | None = None
    ) -> ImageMemory:
        if message_id is None and row.caption_rowid is not None:
            found = self.backend.rows([row.caption_rowid]).get(row.caption_rowid)
            message_id = found.message.id if found else None
        path = self.backend.blob_file(row.digest) if row.size else None
        return ImageMemory(
            id=row.id,
            caption=row.caption,
            caption_source=row.caption_source,
            session=row.session,
            timestamp=format_timestamp(row.timestamp),
            mime=row.mime,
            size=row.size,
            digest=row.digest,
            scene=row.scene,
            importance=row.importance,
            entities=row.entities,
            width=row.width,
            height=row.height,
            speaker=row.speaker,
            message_id=message_id,
            shared_in=row.shared_in,
            url=row.url,
            file=None if path is None else str(path),
            metadata=dict(row.metadata),
            recalls=row.recalls,
            strength=round(self.curve.strength(row, utcnow()), 6),
            expired=row.expired_at is not None,
            duplicate=duplicate,
        )

    def row(self, scope: Scope, image_id: str) -> ImageRow:
        """The image row of ``image_id`` in ``scope``, else :class:`NotFound`."""
        thread = self.engine.thread(scope, wait=False)
        row = self.backend.image(image_id)
        if row is None or thread is None or row.thread_id != thread.id:
            raise NotFound(f"no image {image_id!r} in scope {scope}")
        return row

    def get(self, scope: Scope, image_id: str) -> ImageMemory:
        return self.memory(self.row(scope, image_id))

    def data(self, scope: Scope, image_id: str) -> bytes:
        row = self.row(scope, image_id)
        data = self.backend.blob(row.digest) if row.size else None
        if data is None:
            raise NotFound(
                f"image {image_id!r} has no stored bytes"
                + (f": it was recorded by its URL, {row.url}" if row.url else "")
            )
        return data

    def listed(self, scope: Scope, *, expired: bool | None = None) -> list[ImageMemory]:
        thread = self.engine.thread(scope, wait=False)
        if thread is None:
            return []
        return [self.memory(r) for r in self.backend.images([thread], expired=expired)]

    def search(
        self, scope: Scope, query: str, k: int, *, all_agents: bool = False
    ) -> list[ImageHit]:
        """Images whose caption best answers ``query``: BM25 and cosine over the
        caption messages, fused (see :mod:`arbormem.images.index`). Each hit counts
        as a recall of its image."""
        threads = self.engine.threads(scope, all_agents)
        if not threads:
            return []
        best = self.engine.caption_index().search(threads, query, k)
        found = {r.id: r for r in self.backend.images(threads, ids=[i for i, _, _ in best])}
        out = [
            ImageHit(image=self.memory(found[i], message_id=mid), score=round(score, 6))
            for i, mid, score in best
            if i in found
        ]
        if out and not self.backend.read_only:
            self._recalled([h.image.id for h in out])
        return out

    def with_refs(self, threads: Sequence[Thread], hits: list[Hit]) -> list[Hit]:
        """``hits`` with :attr:`Hit.image` set on those whose message is an image's
        caption message. Only a message that names an image in its metadata and its
        text is looked up, all in one read: a search without image hits reads nothing."""
        named: dict[int, str] = {}
        for i, hit in enumerate(hits):
            link = hit.message.metadata.get("image")
            image_id = link.get("id") if isinstance(link, Mapping) else None
            if isinstance(image_id, str) and hit.message.content.startswith(f"[image {image_id}]"):
                named[i] = image_id
        if not named:
            return hits
        rows = {r.id: r for r in self.backend.images(threads, ids=list(named.values()))}
        out = list(hits)
        for i, image_id in named.items():
            row = rows.get(image_id)
            if row is None or row.caption_rowid is None:
                continue
            path = self.backend.blob_file(row.digest) if row.size else None
            ref = ImageRef(
                id=row.id,
                sha256=row.digest,
                mime=row.mime,
                size=row.size,
                file=None if path is None else str(path),
                url=row.url,
            )
            out[i] = replace(hits[i], image=ref)
        return out

    def _recalled(self, image_ids: list[str]) -> None:
        """Count recalls in memory and write them a moment later, in the background:
        a search does not wait for a write. ``expire`` (and ``Memory.wait``, and
        closing) write them first."""
        with self._recall_lock:
            for image_id in image_ids:
                self._recalls[image_id] = self._recalls.get(image_id, 0) + 1
            self._recalled_at = utcnow()
        self.engine.jobs.submit(
            "image recalls", self.flush_recalls, key=("image recalls", id(self)), delay=0.5
        )

    def flush_recalls(self) -> None:
        """Write the recalls counted since the last time."""
        with self._recall_lock:
            recalls, self._recalls = self._recalls, {}
            at = self._recalled_at
        if recalls and at is not None:
            self.backend.recall_images(recalls, at)

    def similar(self, scope: Scope, source: Any, k: int, *, field: str = "image") -> list[ImageHit]:
        """Images whose perceptual hash is nearest to that of ``source`` (an image
        id of the scope, or an image as :meth:`add` takes it)."""
        if isinstance(source, str) and self.backend.image(source) is not None:
            phash = self.row(scope, source).phash
            skip = source
        else:
            data, name = read_source(source, field, max_bytes=self.engine.settings.image_max_bytes)
            phash, skip = check(data, field, name=name).phash, None
        thread = self.engine.thread(scope, wait=False)
        if phash is None or thread is None:
            return []
        scored = [
            (hamming(phash, r.phash), r)
            for r in self.backend.images([thread], expired=False)
            if r.phash is not None and r.id != skip
        ]
        scored.sort(key=lambda pair: (pair[0], pair[1].id))
        return [
            ImageHit(image=self.memory(r), score=round(1 - d / 64, 6), distance=d)
            for d, r in scored[:k]
        ]

    # -- fading and forgetting -----------------------------------------------------------

    def expire(self, scope: Scope, now: datetime, *, purge: bool) -> ImagesExpired:
        """Soft-expire the scope's images whose strength fell below the threshold; with
        ``purge``, delete soft-expired ones older than the maximum age."""
        thread = self.engine.thread(scope)
        if thread is None:
            return ImagesExpired()
        self.backend.writable()
        self.flush_recalls()
        rows = self.backend.images([thread])
        expiring = [r for r in rows if self.curve.expires(r, now)]
        purging = [
            r.id
            for r in rows
            if purge and (self.curve.purgeable(r, now) or (r in expiring and self._old(r, now)))
        ]
        with self.engine.write_lock, self.backend.transaction():
            rowids = []
            for r in expiring:
                self.backend.update_image(r.id, caption_rowid=None, expired_at=now)
                if r.caption_rowid is not None:
                    rowids.append(r.caption_rowid)
            gone = [row.message.id for row in self.backend.rows(rowids).values()]
            if gone:
                deleted = self.backend.delete_messages(gone, thread)
                self.engine.forgotten([thread], deleted.chashes)
            if purging:
                self.backend.delete_images(purging)
        if gone or purging:
            done = self.backend.purge(wait=0.0, rewrite=False)
            self.engine.purged(done)
        live = len(self.backend.images([thread], expired=False))
        return ImagesExpired(
            expired=tuple(r.id for r in expiring), purged=tuple(purging), live=live
        )

    def _old(self, row: ImageRow, now: datetime) -> bool:
        return self.curve.age_days(row, now) > self.curve.max_age_days

    def restore(self, scope: Scope, image_id: str, now: datetime) -> ImageMemory:
        """Bring a soft-expired image back into recall, reinforced as of ``now``."""
        row = self.row(scope, image_id)
        if row.expired_at is None:
            return self.memory(row)
        self.backend.writable()
        thread = self.engine.thread(scope, create=True)
        assert thread is not None
        link: dict[str, Any] = {"id": row.id}
        if row.shared_in:
            link["shared_in"] = row.shared_in
        record = Record(
            content=self._indexed(row.id, row.caption, row.caption_source, row.shared_in),
            role="user",
            speaker=row.speaker,
            timestamp=row.timestamp,
            metadata={"image": link},
            session=row.session,
        )
        with self.engine.write_lock, self.backend.transaction():
            message = self.writer.add([record], scope=scope).messages[0]
            stored = self.backend.get(message.id)
            assert stored is not None
            self.backend.update_image(
                row.id, caption_rowid=stored.rowid, expired_at=None, recalled_at=now
            )
        return self.get(scope, image_id)
