"""Reorganising idle threads in the background.

A daemon thread wakes when the quietest thread has been idle for
``idle_seconds`` since its last write or search and reorganises it, once per
burst of activity. The reorganiser plans without holding any lock and applies
its changes in one short transaction only if the tree did not change
meanwhile, so it never blocks or races ``add`` and ``search``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from arbormem.store.types import Thread

log = logging.getLogger(__name__)


class IdleReorganizer:
    """Calls ``run(thread)`` for threads that went quiet after being written."""

    def __init__(self, idle_seconds: float, run: Callable[[Thread], object]) -> None:
        self.idle_seconds = idle_seconds
        self._run = run
        self._last: dict[int, tuple[Thread, float]] = {}
        self._pending: set[int] = set()
        self._cond = threading.Condition()
        self._stopped = False
        self.runs = 0
        self._worker = threading.Thread(target=self._loop, name="arbormem-reorganize", daemon=True)
        self._worker.start()

    def touch(self, thread: Thread, *, wrote: bool) -> None:
        """Note activity on a thread (a write makes it due for reorganising)."""
        with self._cond:
            self._last[thread.id] = (thread, time.monotonic())
            if wrote:
                self._pending.add(thread.id)
            self._cond.notify()

    def _due(self) -> tuple[Thread | None, float]:
        now = time.monotonic()
        wait = self.idle_seconds
        for thread_id in list(self._pending):
            thread, at = self._last[thread_id]
            left = at + self.idle_seconds - now
            if left <= 0:
                return thread, 0.0
            wait = min(wait, left)
        return None, wait

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                thread, wait = self._due()
                if thread is None:
                    self._cond.wait(timeout=wait if self._pending else None)
                    continue
                self._pending.discard(thread.id)
            try:
                self._run(thread)
                self.runs += 1
            except Exception:  # a background failure must never take the process down
                log.exception("background reorganisation of thread %s failed", thread.id)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._worker.join(timeout=30)
