"""The background work of one :class:`~arbormem.Memory`, in one place.

Some work is better done off the caller's path: a session's upkeep after a reply
(its tracked state and rolling summary), naming new topics with an LLM, checking a
tree the first time a thread is opened, reorganising a thread that went quiet,
reading what the first searches of a large store would otherwise read piecemeal.
Each is a *job* submitted to the memory's :class:`Jobs`, which runs them on a
small pool of worker threads, can say what is pending (:meth:`Jobs.pending`),
waits for them (:meth:`Jobs.wait`), and drains them on close.

A job with a ``key`` is coalesced: while one with the same key waits to start,
submitting another returns the waiting one (it reads the newest state when it
runs). A job with a ``delay`` waits that long before it starts, unless
:meth:`Jobs.wait` or :meth:`Jobs.close` starts it sooner; with ``postpone=True``
a new submission pushes a waiting job's start back (the idle reorganiser: a
thread that is written again is not yet idle).

A job that fails is logged; its future carries the exception for anyone who
waits on it. Nothing a job raises reaches the caller that submitted it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Worker threads per memory: a long job (an LLM naming topics, a large preload) does
#: not hold up a session's upkeep behind it.
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class PendingJob:
    """A job not finished yet, as :meth:`Jobs.pending` reports it."""

    kind: str
    key: Hashable | None
    #: ``"waiting"`` (its delay not over), ``"queued"`` or ``"running"``.
    state: str
    #: Seconds since it was submitted.
    age: float
    #: What a running job said of its progress (see :meth:`Jobs.progress`): units
    #: done and the total it knows of (record extraction: messages read of the
    #: thread's); None when it says nothing.
    done: int | None = None
    total: int | None = None


class _Job:
    __slots__ = ("future", "key", "kind", "progress", "started", "submitted", "timer", "work")

    def __init__(self, kind: str, key: Hashable | None, work: Callable[[], Any]) -> None:
        self.kind = kind
        self.key = key
        self.work = work
        self.future: Future[Any] = Future()
        self.submitted = time.monotonic()
        self.started = False
        self.timer: threading.Timer | None = None
        self.progress: tuple[int, int] | None = None


class Jobs:
    """Background jobs of one memory: submit, list, wait, drain (see the module docs)."""

    def __init__(self, workers: int = DEFAULT_WORKERS, name: str = "arbormem") -> None:
        if workers < 1:
            raise ValueError("a job runner needs at least one worker")
        self._workers = workers
        self._name = name
        self._lock = threading.RLock()
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: list[_Job] = []
        self._waiting: dict[Hashable, _Job] = {}
        self._closed = False
        #: Set when the runner closes: long jobs (preloads) check it and stop early.
        self.stopping = threading.Event()
        #: The job each worker thread is running (see :meth:`progress`).
        self._current = threading.local()

    # -- submitting -----------------------------------------------------------------

    def submit(
        self,
        kind: str,
        work: Callable[[], T],
        *,
        key: Hashable | None = None,
        delay: float = 0.0,
        postpone: bool = False,
    ) -> Future[T]:
        """Run ``work`` in the background; ``kind`` names it in :meth:`pending`.

        After :meth:`close`, work runs at once on the caller's thread (a late
        upkeep at interpreter exit is finished, not lost)."""
        with self._lock:
            if self._closed:
                job = _Job(kind, key, work)
                self._run(job)
                return job.future
            self._jobs = [j for j in self._jobs if not j.future.done()]
            if key is not None and key in self._waiting:
                waiting = self._waiting[key]
                if postpone and waiting.timer is not None:
                    waiting.timer.cancel()
                    waiting.timer = self._timer(waiting, delay)
                return waiting.future
            job = _Job(kind, key, work)
            self._jobs.append(job)
            if delay > 0:
                if key is not None:
                    self._waiting[key] = job
                job.timer = self._timer(job, delay)
            else:
                self._queue(job)
            return job.future

    def postpone(self, key: Hashable, delay: float) -> bool:
        """Push the start of the waiting job with ``key`` back to ``delay`` seconds from
        now; False (and nothing done) when no job with that key waits."""
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is None or waiting.timer is None or self._closed:
                return False
            waiting.timer.cancel()
            waiting.timer = self._timer(waiting, delay)
            return True

    def _timer(self, job: _Job, delay: float) -> threading.Timer:
        timer = threading.Timer(delay, self._start, (job,))
        timer.daemon = True
        timer.name = f"{self._name}-timer"
        timer.start()
        return timer

    def _start(self, job: _Job) -> None:
        """A waiting job's time has come (or someone waits for it): queue it once."""
        with self._lock:
            if job.started:
                return
            if job.key is not None and self._waiting.get(job.key) is job:
                del self._waiting[job.key]
            if job.timer is not None:
                job.timer.cancel()
            if self._closed:
                job.started = True
                run_here = True
            else:
                self._queue(job)
                run_here = False
        if run_here:
            self._run(job)

    def _queue(self, job: _Job) -> None:
        job.started = True
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self._workers, thread_name_prefix=self._name
            )
        try:
            self._pool.submit(self._run, job)
        except RuntimeError:
            # The interpreter is exiting and its pools take no more work: the job
            # runs here instead, so an upkeep left waiting at exit is not lost.
            self._run(job)

    def _run(self, job: _Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        self._current.job = job
        try:
            result = job.work()
        except BaseException as exc:  # logged here; the future carries it to whoever waits
            if isinstance(exc, Exception):
                log.warning("background %s failed: %s", job.kind, exc, exc_info=True)
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
        finally:
            self._current.job = None

    def progress(self, done: int, total: int) -> None:
        """Say how far the job running on this thread is (``done`` of ``total``), for
        :meth:`pending`; a no-op outside a job."""
        job: _Job | None = getattr(self._current, "job", None)
        if job is not None:
            job.progress = (done, total)

    # -- seeing and waiting ---------------------------------------------------------

    def pending(self) -> list[PendingJob]:
        """The jobs not finished yet, oldest first."""
        now = time.monotonic()
        with self._lock:
            jobs = [j for j in self._jobs if not j.future.done()]
        out = []
        for job in jobs:
            if not job.started:
                state = "waiting"
            elif job.future.running():
                state = "running"
            else:
                state = "queued"
            done, total = job.progress if job.progress is not None else (None, None)
            out.append(
                PendingJob(job.kind, job.key, state, round(now - job.submitted, 3), done, total)
            )
        return out

    @property
    def busy(self) -> bool:
        """Whether any job is waiting, queued or running."""
        with self._lock:
            return any(not j.future.done() for j in self._jobs)

    def wait(self, timeout: float | None = None, *, kind: str | None = None) -> bool:
        """Start waiting jobs now and wait for every job submitted so far (of ``kind``,
        when given); True when they all finished within ``timeout`` seconds. Failures
        are not raised here (they were logged when they happened)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            jobs = [j for j in self._jobs if kind is None or j.kind == kind]
        for job in jobs:
            if not job.started:
                self._start(job)
        for job in jobs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                job.future.exception(timeout=left)
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Start every waiting job, wait for all of them, and stop the workers. Jobs
        submitted afterwards run at once on the caller's thread."""
        self.stopping.set()
        self.wait()
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            late = [j for j in self._jobs if not j.started]
        for job in late:  # submitted while the others drained
            self._start(job)
        if pool is not None:
            pool.shutdown(wait=True)
