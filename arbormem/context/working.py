"""Working memory of a session: its mode, tracked state and rolling summary.

Each session of a thread keeps, in the store:

* ``mode``: conversation, code or reasoning (switchable at any time);
* ``tracker``: what the mode tracks, updated after every reply;
* ``summary`` and ``summary_upto``: the rolling summary and the message
  index it covers;
* ``seen``: the index after the last message the tracker has read;
* ``floor``: messages below this index have been compressed into the summary
  under context pressure and no longer count as part of the window.

Upkeep (tracker and summary) runs after a reply in a background worker, so
the user never waits for it; :meth:`WorkingMemory.wait` lets a caller (or the
blocking threshold) wait for it. One session's upkeep starts
``UPKEEP_INTERVAL`` seconds after the reply that asked for it, and replies that
arrive meanwhile are caught up by that same run: a burst of replies costs one
upkeep, not one each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arbormem.context.modes import get_mode
from arbormem.context.summary import SummaryPolicy, SummaryState, clamp, update
from arbormem.context.trackers import Tracker, new_tracker, tracker_from_dict
from arbormem.jobs import Jobs
from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import Thread

log = logging.getLogger(__name__)


@dataclass
class SessionMemory:
    """The stored working memory of one session."""

    mode: str
    tracker: Tracker
    summary: SummaryState = field(default_factory=SummaryState)
    seen: int = 0
    floor: int = 0
    #: The thread's generation when this was loaded (not stored): a forget since, in
    #: any process, means what was computed from it may quote forgotten messages.
    generation: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "tracker": self.tracker.to_dict(),
            "summary": self.summary.text,
            "summary_upto": self.summary.upto,
            "seen": self.seen,
            "floor": self.floor,
        }


#: Seconds from a reply to its session's upkeep (replies arriving meanwhile share it).
UPKEEP_INTERVAL = 0.25


class WorkingMemory:
    """Loads, updates and stores the working memory of sessions."""

    interval = UPKEEP_INTERVAL

    def __init__(
        self,
        backend: Backend,
        llm: Any = None,
        policy: SummaryPolicy = SummaryPolicy(),
        jobs: Jobs | None = None,
    ) -> None:
        self.backend = backend
        self.llm = llm
        self.policy = policy
        #: Where upkeep runs; a runner of its own when none is shared.
        self.jobs = jobs if jobs is not None else Jobs()
        self._lock = threading.RLock()

    # -- state ---------------------------------------------------------------------------

    def load(self, thread: Thread, session: str, default_mode: str) -> SessionMemory:
        data = self.backend.session_state(thread, session)
        stored = data.get("mode")
        mode: str = stored if isinstance(stored, str) else default_mode
        try:
            mode = get_mode(mode).name
        except Exception:
            mode = get_mode(default_mode).name
        tracker_data = data.get("tracker")
        tracker = None
        if isinstance(tracker_data, dict) and tracker_data.get("mode") == mode:
            try:
                tracker = tracker_from_dict(tracker_data)
            except Exception as exc:  # a damaged saved state is rebuilt, not fatal
                log.warning("cannot restore the %s tracker of session %s: %s", mode, session, exc)
        thread_state = self.backend.state(thread)
        next_index = thread_state.next_index
        state = SessionMemory(
            mode=mode,
            tracker=tracker or new_tracker(mode),
            summary=clamp(
                SummaryState(str(data.get("summary") or ""), int(data.get("summary_upto") or 0)),
                next_index,
            ),
            seen=min(int(data.get("seen") or 0), next_index) if tracker else 0,
            floor=min(int(data.get("floor") or 0), next_index),
            generation=thread_state.generation,
        )
        return state

    def save(self, thread: Thread, session: str, state: SessionMemory) -> bool:
        """Store ``state`` unless messages were forgotten since it was loaded (by this
        process or another: an upkeep may run for seconds with an LLM summary). A
        read-only store keeps nothing: the state served the call that made it."""
        if self.backend.read_only:
            return False
        with self.backend.transaction():
            if self.backend.state(thread).generation != state.generation:
                log.info("session %s changed while its upkeep ran; not saved", session)
                return False
            self.backend.put_session_state(thread, session, state.to_dict())
            return True

    def set_mode(self, thread: Thread, session: str, mode: str) -> SessionMemory:
        """Switch a session's mode; its messages, summary and window are kept."""
        mode = get_mode(mode).name  # "CODE" is "code": not a switch
        with self._lock:
            state = self.load(thread, session, mode)
            if state.mode != mode:
                state.mode, state.tracker, state.seen = mode, new_tracker(mode), 0
            self.save(thread, session, state)
            return state

    def reset_derived(self, thread: Thread, session: str) -> None:
        """After forgetting messages: drop what may quote them (summary, tracker)."""
        with self._lock:
            data = self.backend.session_state(thread, session)
            if not data:
                return
            stored = data.get("mode")
            mode: str = stored if isinstance(stored, str) else "conversation"
            fresh = SessionMemory(mode=mode, tracker=new_tracker(mode))
            self.backend.put_session_state(thread, session, fresh.to_dict())

    # -- upkeep ------------------------------------------------------------------------------

    def window(
        self, messages: list[Message], state: SessionMemory
    ) -> tuple[list[Message], list[Message]]:
        """Split a session's messages into (left the window, in the window)."""
        size = get_mode(state.mode).window
        live = [m for m in messages if m.index >= state.floor]
        inside = live[-size:] if size > 0 else []
        first_inside = inside[0].index if inside else (messages[-1].index + 1 if messages else 0)
        outside = [m for m in messages if m.index < first_inside]
        return outside, inside

    def pending(self, thread: Thread, session: str, state: SessionMemory) -> list[Message]:
        """What upkeep reads of a session: the messages the tracker has not seen or
        the summary does not cover, and the window. Not the whole session, which
        would make each upkeep of a long one cost more than the last."""
        start = min(state.seen, state.summary.upto)
        found = {
            r.message.index: r.message
            for r in self.backend.messages(thread, session=session, start=start)
        }
        size = get_mode(state.mode).window
        if size > 0:
            for r in self.backend.messages(thread, session=session, start=state.floor, last=size):
                found.setdefault(r.message.index, r.message)
        return [found[i] for i in sorted(found)]

    def upkeep(
        self,
        thread: Thread,
        session: str,
        messages: list[Message] | None,
        default_mode: str,
        *,
        force: bool = False,
    ) -> SessionMemory:
        """Update the tracker with unseen messages and fold older ones into the summary.

        ``messages`` are the session's, or None to read what is needed (see
        :meth:`pending`)."""
        with self._lock:
            state = self.load(thread, session, default_mode)
            if messages is None:
                messages = self.pending(thread, session, state)
            fresh = [m for m in messages if m.index >= state.seen]
            if fresh:
                state.tracker.update(fresh, self.llm)
                state.seen = fresh[-1].index + 1
            outside, _ = self.window(messages, state)
            state.summary = update(
                state.summary, outside, policy=self.policy, llm=self.llm, force=force
            )
            self.save(thread, session, state)
            return state

    def compress(
        self, thread: Thread, session: str, messages: list[Message], default_mode: str
    ) -> SessionMemory:
        """Under context pressure: fold the older half of the window into the summary."""
        with self._lock:
            state = self.load(thread, session, default_mode)
            _, inside = self.window(messages, state)
            if len(inside) < 2:
                return state
            cut = inside[len(inside) // 2].index
            state.floor = max(state.floor, cut)
            self.save(thread, session, state)
        return self.upkeep(thread, session, messages, default_mode, force=True)

    def submit(self, work: Callable[[], object], key: object = None) -> None:
        """Run upkeep in the background (on the memory's :class:`~arbormem.jobs.Jobs`).

        Work with a ``key`` starts ``interval`` seconds later and is coalesced:
        while one with the same key waits to start, another is not queued (the
        waiting one reads the newer messages when it runs).
        """
        if key is None:
            self.jobs.submit("upkeep", work)
        else:
            self.jobs.submit("upkeep", work, key=("upkeep", key), delay=self.interval)

    @property
    def busy(self) -> bool:
        """Whether upkeep is waiting, queued or running."""
        return any(job.kind == "upkeep" for job in self.jobs.pending())

    def wait(self, timeout: float | None = None) -> None:
        """Start delayed upkeep at once, and wait for all upkeep submitted so far."""
        self.jobs.wait(timeout, kind="upkeep")

    def close(self) -> None:
        """Start any delayed upkeep now, and wait for all of it (the job runner itself
        is closed by its owner)."""
        self.wait()
