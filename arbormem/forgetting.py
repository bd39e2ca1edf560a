"""Forgetting: deleting messages for good, with everything derived from them.

A forget deletes the messages, their index rows, vectors no longer used, the tree
nodes they leave empty, and the summaries and tracked state that may quote them;
then it purges the store, so the text leaves its files (or the result says why
not yet). Nothing waits for other processes' readers under the write lock.
"""

from __future__ import annotations

from arbormem.engine import Engine
from arbormem.errors import InputError, NotFound
from arbormem.models import Scope
from arbormem.results import Forgotten, Purged
from arbormem.store.types import Deleted, Purge


class Forgetter:
    """Forget and purge on one engine (see the module docs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.backend

    def messages(
        self, scope: Scope, *, message_id: str | None, session: str | None, wait: float
    ) -> Forgotten:
        """Forget one message, or one session, of ``scope``'s thread."""
        engine = self.engine
        with engine.write_lock:
            engine.checks.wait()  # no check may rebuild a tree while it is being deleted
            thread = engine.thread(scope)
            if thread is None:
                raise NotFound(f"nothing stored for scope {scope}")
            engine.working.wait()
            if message_id is not None:
                row = self.backend.get(message_id)
                doomed = [row] if row and row.message.scope == scope else []
            else:
                doomed = self.backend.messages(thread, session=session)
            leaves = set(self.backend.message_leaves([r.rowid for r in doomed]).values())
            with self.backend.transaction():
                if message_id is not None:
                    deleted = self.backend.delete_messages([message_id], thread)
                    if not deleted.messages:
                        raise NotFound(f"no message {message_id!r} in scope {scope}")
                else:
                    assert session is not None
                    deleted = self.backend.delete_session(thread, session)
                    if not deleted.messages and not deleted.sessions:
                        raise NotFound(f"no session {session!r} in scope {scope}")
                engine.grower.forgotten(thread, leaves)
            # Summaries and trackers may quote what went. Background upkeep was drained
            # before the deletion (it could otherwise re-save a summary made from the
            # old messages); the reset happens outside the store's transaction because
            # upkeep takes its locks in the other order.
            if message_id is not None:
                for row in doomed:
                    engine.working.reset_derived(thread, row.message.session)
            engine.forgotten([thread], deleted.chashes)
        return self._after(deleted, wait)

    def threads(self, scope: Scope, *, whole_user: bool, wait: float) -> Forgotten:
        """Forget ``scope``'s thread, or with ``whole_user`` every thread of its user."""
        engine = self.engine
        with engine.write_lock:
            engine.checks.wait()
            threads = (
                self.backend.threads(scope.user, tenant=scope.tenant)
                if whole_user
                else engine.threads(scope, False, wait=True)
            )
            if not threads:
                raise NotFound(
                    f"nothing stored for {'user ' + scope.user if whole_user else scope}"
                )
            engine.working.wait()  # no upkeep may save state for a deleted thread
            total = Deleted()
            for thread in threads:
                deleted = self.backend.delete_thread(thread)
                engine.forgotten([thread], deleted.chashes)
                total.messages += deleted.messages
                total.sessions += deleted.sessions
                total.threads += deleted.threads
        return self._after(total, wait)

    def _after(self, deleted: Deleted, wait: float) -> Forgotten:
        # Outside the write lock: waiting for another process's readers must not hold
        # up this process's writes. One purge for all the threads forgotten.
        done = self.purge(wait=wait, rewrite=None)
        return Forgotten(
            messages=deleted.messages,
            sessions=deleted.sessions,
            threads=deleted.threads,
            purged=done.purged,
            purge_pending=done.purge_pending,
        )

    def purge(self, *, wait: float, rewrite: bool | None) -> Purged:
        """Finish taking deleted text out of the store's files (see
        :meth:`Memory.purge <arbormem.Memory.purge>`)."""
        done: Purge = self.backend.purge(wait=wait, rewrite=rewrite)
        self.engine.purged(done)
        return Purged(purged=done.purged, purge_pending=done.pending)


def check_target(message_id: str | None, session: str | None, user_given: bool) -> None:
    """What a forget names must be one thing, and something."""
    if message_id is not None and session is not None:
        raise InputError("give a message id or a session, not both", field="forget")
    if message_id is None and session is None and not user_given:
        raise InputError(
            "say what to forget: a message id, session=..., agent=... or user=...",
            field="forget",
        )
