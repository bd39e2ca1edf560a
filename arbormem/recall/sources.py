"""Where a search's candidate sources run: on the searching thread, or one of them
on a worker thread beside it.

A search reads several indexes that need nothing from each other (full-text
searches, the topics, the nearest vectors). :class:`Sources` runs the ones
named aside (the query's embedding above all, which releases the interpreter)
on its one worker thread, and the others, then whatever the caller has to do
meanwhile, on the searching thread.

Running side by side shortens a lone search; it does not make the work smaller. It
costs more of it: the hand-off to the worker, and the candidates read in two steps
(those of the full-text searches meanwhile, the others after), each step reading
the store and the tree once more. When other searches of the same process are
under way (a server under load), the cores are busy with them whatever this one
does: every source then runs on the searching thread, one after the other, and
nothing is read meanwhile (see :meth:`Sources.searching`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)


class Sources:
    """One worker thread, started on first use, shared by every searching thread."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        #: Held while the pool starts or stops; ``closed`` once :meth:`stop` ran.
        self.lock = threading.Lock()
        self.closed = False
        #: Held while the worker runs a job (see gather).
        self._idle = threading.Semaphore(1)
        #: Searches under way in this process (see searching).
        self._searches = 0
        self._count = threading.Lock()

    @contextmanager
    def searching(self) -> Iterator[bool]:
        """One search, under way while the block runs; gives whether it is alone
        (no other search of this process under way when it began). A search that
        is not alone passes ``crowded=True`` to :meth:`gather`."""
        with self._count:
            self._searches += 1
            alone = self._searches == 1
        try:
            yield alone
        finally:
            with self._count:
                self._searches -= 1

    def gather(
        self,
        jobs: Mapping[str, Callable[[], Any]],
        aside: Sequence[str] = (),
        meanwhile: Callable[[Mapping[str, Any], Callable[[], bool]], None] | None = None,
        concurrent: Callable[[], bool] = lambda: True,
        crowded: bool = False,
    ) -> dict[str, Any]:
        """Run the candidate sources: those named in ``aside`` on the worker thread
        when ``concurrent()`` says the store can read on other threads, the others
        here, in order; then ``meanwhile`` here, given this thread's results and a
        test of whether a worker's job still runs, if one does (and none failed).
        ``crowded`` (other searches under way): every job here, in order, and no
        ``meanwhile``: the caller then does that work once every job is done.
        Every job has finished when this returns or raises; the failure of the
        first failing job (in job order, ``meanwhile`` after them all) is raised,
        and any other is logged."""
        names = list(jobs)
        futures: dict[str, Future[Any]] = {}
        if crowded:
            aside, meanwhile = (), None
        for name in names:
            # The worker takes a job only when idle: searches on other threads would
            # otherwise queue behind each other's embedding.
            if name not in aside or not concurrent():
                continue
            pool = self._executor()
            if pool is None or not self._idle.acquire(blocking=False):
                break
            try:
                futures[name] = pool.submit(_releasing(jobs[name], self._idle))
            except RuntimeError:  # interpreter exiting, or closed meanwhile
                self._idle.release()
                break
        out: dict[str, Any] = {}
        failed: dict[str, Exception] = {}
        # This thread's share first, then the worker's results. An interrupt (Ctrl-C)
        # stops at once: a job not started is cancelled, and one under way (embedding
        # the query) is left to finish on its own; close() waits for it.
        try:
            for name in [n for n in names if n not in futures]:
                try:
                    out[name] = jobs[name]()
                except Exception as exc:
                    failed[name] = exc

            def running() -> bool:
                return not all(f.done() for f in futures.values())

            if meanwhile is not None and not failed and running():
                try:
                    meanwhile(out, running)
                except Exception as exc:
                    failed["meanwhile"] = exc
            for name in futures:
                try:
                    out[name] = futures[name].result()
                except Exception as exc:
                    failed[name] = exc
        except BaseException:
            for future in futures.values():
                future.cancel()
            raise
        if failed:
            first, *others = [name for name in [*names, "meanwhile"] if name in failed]
            for name in others:
                log.debug("candidate source %s also failed: %r", name, failed[name])
            raise failed[first]
        return out

    def _executor(self) -> ThreadPoolExecutor | None:
        """The worker pool (started on first use); None once closed."""
        with self.lock:
            if self._pool is None and not self.closed:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arbormem-recall")
            return self._pool

    def stop(self) -> ThreadPoolExecutor | None:
        """Start no worker again; the pool to shut down, if one started."""
        with self.lock:
            self.closed = True
            pool, self._pool = self._pool, None
        return pool


def _releasing(job: Callable[[], Any], slot: threading.Semaphore) -> Callable[[], Any]:
    """The job, giving ``slot`` back when it ends however it ends."""

    def run() -> Any:
        try:
            return job()
        finally:
            slot.release()

    return run
