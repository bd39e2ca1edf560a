"""Checking a tree on open, and rebuilding it from the messages when it is unsound.

The messages are the truth; the tree is derived. A tree that fails a
consistency check (dangling parents, the width rule, index ranges, child
counts, messages outside the tree) is reported with the node at fault, logged,
and rebuilt from scratch by replaying the thread's messages through the
grower.

The check reads the whole tree (seconds at a million turns), so
:class:`OpenChecks` runs it once per thread and process: in the background
when the first use of the thread is a read, which does not wait for it, and
before anything writes to the tree, which does. A tree that passed is marked
with its version; every tree write changes the version, so a tree unchanged
since it last passed is not read again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from functools import partial

from arbormem.jobs import Jobs
from arbormem.store.types import Row, Thread, TreeState
from arbormem.tree.grow import TreeGrower

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TreeProblem:
    """One inconsistency: which node (None when it is about the thread) and what."""

    thread: str
    node: int | None
    reason: str

    def __str__(self) -> str:
        where = f"node {self.node}" if self.node is not None else "the tree"
        return f"{self.thread}: {where}: {self.reason}"


def check(grower: TreeGrower, thread: Thread) -> list[TreeProblem]:
    """Problems of one thread's tree (empty when sound)."""
    found = grower.backend.check_tree(thread, grower.config.max_children)
    return [TreeProblem(f"{thread.user}/{thread.agent}", node, reason) for node, reason in found]


def rebuild(grower: TreeGrower, thread: Thread, batch: int = 2000) -> int:
    """Throw the thread's tree away and grow it again from its messages.

    Runs in one transaction: either the new tree replaces the old one or
    nothing changes. Returns the number of messages replayed.
    """
    backend = grower.backend
    model = grower.embedder.model_id
    replayed = 0
    with grower.dropped_on_failure(), backend.transaction():
        backend.delete_nodes(thread)
        backend.set_tree_state(thread, TreeState())
        grower.forget_cursor(thread)
        chunk: list[Row] = []
        for row in backend.iter_rows(thread):
            chunk.append(row)
            if len(chunk) >= batch:
                grower.grow(thread, chunk, backend.vectors(model, [r.chash for r in chunk]))
                replayed += len(chunk)
                chunk = []
        if chunk:
            grower.grow(thread, chunk, backend.vectors(model, [r.chash for r in chunk]))
            replayed += len(chunk)
        # Exchanges archived by an earlier reorganisation stay archived in the new tree.
        archived = backend.archived_leaves(thread)
        if archived:
            backend.set_archived(thread, archived, True)
        # After a forget, replaying can join an archived exchange's messages to a live
        # one in one leaf: they come back into recall (hiding the live message would
        # lose it, and leaving them hidden in a live leaf made them unrestorable).
        mixed = backend.archived_leaves(thread, which="partly")
        if mixed:
            backend.set_archived(thread, mixed, False)
        if archived or mixed:
            grower.reindex_above(thread, archived + mixed)
            grower.forget_cursor(thread)  # its topics' content held the archived words
    return replayed


def repair(grower: TreeGrower, thread: Thread, problems: list[TreeProblem]) -> None:
    """Report each problem, rebuild the tree from the messages and log the rebuild."""
    for problem in problems:
        log.warning("topic tree inconsistent, rebuilding from the messages: %s", problem)
    replayed = rebuild(grower, thread)
    grower.backend.log_tree(
        thread,
        "rebuild",
        {"problems": [str(p) for p in problems], "messages": replayed},
        [],
    )


def check_and_repair(grower: TreeGrower, thread: Thread) -> list[TreeProblem]:
    """Check a thread's tree; if unsound, report each problem and rebuild it."""
    problems = check(grower, thread)
    if problems:
        repair(grower, thread, problems)
    return problems


@dataclass
class _Check:
    thread: Thread
    checked: threading.Event = field(default_factory=threading.Event)
    found: list[TreeProblem] = field(default_factory=list)
    error: Exception | None = None
    repaired: bool = False


class OpenChecks:
    """The check of each thread's tree, once per process.

    ``ensure(thread, wait=False)`` queues it on one background worker (one
    reader connection, however many threads are opened) and returns;
    ``ensure(thread, wait=True)`` returns once the tree is known sound or has
    been rebuilt, and raises if the check or the repair failed. Repairs happen
    under ``write_lock``, so a writer that holds it and waits for a background
    check repairs the tree itself. A check that failed is tried again by the
    next use of the thread.
    """

    def __init__(
        self, grower: TreeGrower, write_lock: threading.RLock, jobs: Jobs | None = None
    ) -> None:
        self.grower = grower
        self.write_lock = write_lock
        #: Where background checks run (see :mod:`arbormem.jobs`).
        self.jobs = jobs if jobs is not None else Jobs()
        #: Problems found (and repaired) so far.
        self.problems: list[TreeProblem] = []
        self._checks: dict[int, _Check] = {}
        self._lock = threading.Lock()

    def ensure(self, thread: Thread, *, wait: bool) -> None:
        with self._lock:
            job = self._checks.get(thread.id)
            new = job is None
            if job is None:
                job = self._checks[thread.id] = _Check(thread)
                if not wait:
                    self.jobs.submit("tree-check", partial(self._run, job, True))
        if new and wait:
            self._run(job, False)
        elif wait:
            job.checked.wait()
            self._repair(job)
        if wait and job.error is not None:
            raise job.error

    def _run(self, job: _Check, background: bool) -> None:
        backend = self.grower.backend
        sound_at: int | None = None
        try:
            version, passed = backend.tree_checked(job.thread)
            if passed is None or passed != version:  # else: unchanged since it passed
                job.found = check(self.grower, job.thread)
                sound_at = None if job.found else version
        except Exception as exc:
            job.error = exc
            with self._lock:
                self._checks.pop(job.thread.id, None)  # the next use tries again
        finally:
            job.checked.set()
        if sound_at is not None and not backend.read_only:
            try:  # after ``checked``: a writer may hold the store while waiting for it
                backend.mark_tree_checked(job.thread, sound_at)
            except Exception as exc:  # only costs a check on the next open
                log.warning("could not record the check of %s: %s", _scope(job.thread), exc)
        try:
            self._repair(job)
        except Exception as exc:
            if not background:
                raise
            log.warning("could not rebuild the topic tree of %s: %s", _scope(job.thread), exc)
        if background and job.error is not None:
            log.warning("could not check the topic tree of %s: %s", _scope(job.thread), job.error)

    def _repair(self, job: _Check) -> None:
        if not job.found or job.error is not None:
            return
        with self.write_lock:
            if job.repaired:
                return
            thread = job.thread
            if self.grower.backend.read_only:
                # Nothing can be rebuilt: the tree is used as stored, and said to be unsound once.
                log.warning(
                    "the topic tree of %s is unsound (%s) and the store is read-only: "
                    "it is used as stored; open the store writable once to rebuild it",
                    _scope(thread),
                    "; ".join(str(p) for p in job.found[:3]),
                )
                job.repaired = True
                self.problems.extend(job.found)
                return
            if self.grower.backend.thread(thread.user, thread.agent, tenant=thread.tenant) is None:
                job.repaired = True  # forgotten meanwhile: nothing left to rebuild
                return
            try:
                repair(self.grower, thread, job.found)
            except Exception as exc:
                job.error = exc
                with self._lock:
                    self._checks.pop(thread.id, None)
                raise
            job.repaired = True
            self.problems.extend(job.found)

    def wait(self) -> None:
        """Wait for the checks started so far, and for their repairs.

        Safe while holding ``write_lock``: the caller then repairs itself.
        """
        with self._lock:
            jobs = list(self._checks.values())
        for job in jobs:
            job.checked.wait()
            self._repair(job)

    def close(self) -> None:
        """Wait for the checks under way (the job runner is closed by its owner)."""
        try:
            self.wait()
        except Exception as exc:  # already logged where it failed; closing goes on
            log.warning("closing with a topic tree left unrepaired: %s", exc)


def _scope(thread: Thread) -> str:
    return f"{thread.user}/{thread.agent}"
