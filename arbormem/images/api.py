"""The image methods of :class:`~arbormem.Memory` (a mixin, so that ``memory.py``
stays a table of contents): each checks its arguments and hands the work to
:class:`~arbormem.images.service.ImagesService`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arbormem import arguments
from arbormem.errors import InputError
from arbormem.images.service import MAX_IMAGE_HITS
from arbormem.results import Forgotten, ImageHit, ImageMemory, ImagesExpired
from arbormem.store.types import PURGE_WAIT
from arbormem.timeutil import parse_timestamp, utcnow

if TYPE_CHECKING:
    from arbormem.forgetting import Forgetter
    from arbormem.images.service import ImagesService
    from arbormem.models import Scope


class ImageMethods:
    """Images as memories: see ``docs/images.md``."""

    if TYPE_CHECKING:
        _images: ImagesService
        _forgetter: Forgetter

        def _scope(self, user: str | None, agent: str | None) -> Scope: ...
        def _query(self, query: Any) -> str: ...
        def _session(self, value: Any) -> str | None: ...

    def _image_id(self, value: Any) -> str:
        return arguments.name(value, "image_id", max_bytes=1024, strip=False)

    def add_image(
        self,
        image: Any,
        *,
        caption: str | None = None,
        session: str | None = None,
        timestamp: datetime | str | float | None = None,
        speaker: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        shared_in: str | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> ImageMemory:
        """Store an image (a path, bytes or a binary file object of a PNG, JPEG, WebP
        or GIF, checked by its bytes) as a memory of the scope.

        It joins its session at its time like a message; its caption (``caption``,
        else the vision model's when one is configured, else what the file and the
        turns around it say) is indexed, so ``search``, ``context()`` and
        :meth:`search_images` find it. The same bytes stored again in the scope
        return the first image with ``duplicate=True``. ``shared_in`` names the
        message that shared it.

        >>> mem.add_image("receipt.png", caption="lunch receipt, 14.20 EUR")  # doctest: +SKIP
        """
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InputError(
                f"must be a JSON object (a mapping), got {arguments.type_name(metadata)}",
                field="metadata",
            )
        scope = self._scope(user, agent)
        if shared_in is not None:
            shared_in = arguments.name(shared_in, "shared_in", strip=False)
        return self._images.add(
            scope,
            image,
            caption=caption,
            session=self._session(session),
            timestamp=timestamp,
            speaker=speaker,
            metadata=metadata,
            shared_in=shared_in,
        )

    def get_image(
        self, image_id: str, *, user: str | None = None, agent: str | None = None
    ) -> ImageMemory:
        """One image memory by id (the reference its caption message carries);
        :class:`~arbormem.errors.NotFound` when it is not in this scope."""
        return self._images.get(self._scope(user, agent), self._image_id(image_id))

    def image_bytes(
        self, image_id: str, *, user: str | None = None, agent: str | None = None
    ) -> bytes:
        """The stored bytes of an image (NotFound for one recorded by URL only)."""
        return self._images.data(self._scope(user, agent), self._image_id(image_id))

    def list_images(
        self,
        *,
        expired: bool | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[ImageMemory]:
        """The scope's images in the order they were stored: all, the live ones
        (``expired=False``) or the soft-expired ones (``expired=True``)."""
        if expired is not None:
            arguments.flag(expired, "expired")
        return self._images.listed(self._scope(user, agent), expired=expired)

    def search_images(
        self,
        query: str,
        *,
        k: int = 10,
        user: str | None = None,
        agent: str | None = None,
        all_agents: bool = False,
    ) -> list[ImageHit]:
        """The ``k`` images whose captions best answer ``query``, best first (the
        hybrid recall of turns, over captions). Each hit counts as a recall, which
        slows its fading."""
        self._query(query)
        arguments.count(k, "k", 1, MAX_IMAGE_HITS)
        arguments.flag(all_agents, "all_agents")
        return self._images.search(self._scope(user, agent), query, k, all_agents=all_agents)

    def similar_images(
        self,
        image: Any,
        *,
        k: int = 10,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[ImageHit]:
        """The scope's live images that look most like ``image`` (an image id, or an
        image as :meth:`add_image` takes it), by perceptual hash, nearest first."""
        arguments.count(k, "k", 1, MAX_IMAGE_HITS)
        if isinstance(image, str):
            # An id is looked up in the store: it must be one a store can hold. (Any
            # other text is read as a path, which read_source checks.)
            arguments.utf8_size(image, "image")
        return self._images.similar(self._scope(user, agent), image, k)

    def expire_images(
        self,
        *,
        now: datetime | str | float | None = None,
        purge: bool = False,
        user: str | None = None,
        agent: str | None = None,
    ) -> ImagesExpired:
        """Soft-expire the images whose strength fell below ``image_expire_below``
        (out of recall, kept, restorable); with ``purge``, delete the soft-expired
        ones older than ``image_max_age_days``, bytes included. ``now`` is the clock
        (the current time by default)."""
        arguments.flag(purge, "purge")
        when = utcnow() if now is None else parse_timestamp(now, field="now")
        return self._images.expire(self._scope(user, agent), when, purge=purge)

    def restore_image(
        self,
        image_id: str,
        *,
        now: datetime | str | float | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> ImageMemory:
        """Bring a soft-expired image back into recall, its strength renewed at ``now``."""
        when = utcnow() if now is None else parse_timestamp(now, field="now")
        return self._images.restore(self._scope(user, agent), self._image_id(image_id), when)

    def forget_image(
        self,
        image_id: str,
        *,
        user: str | None = None,
        agent: str | None = None,
        wait: float = PURGE_WAIT,
    ) -> Forgotten:
        """Delete an image for good: its row, its caption message and, when no other
        image of the store has the same bytes, its file."""
        wait = arguments.seconds(wait, "wait")
        scope = self._scope(user, agent)
        image = self._images.get(scope, self._image_id(image_id))
        if image.message_id is not None:
            return self._forgetter.messages(
                scope, message_id=image.message_id, session=None, wait=wait
            )
        self._images.backend.delete_images([image.id])
        done = self._forgetter.purge(wait=wait, rewrite=None)
        return Forgotten(purged=done.purged, purge_pending=done.purge_pending)
