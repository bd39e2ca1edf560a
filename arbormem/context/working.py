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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from arbormem.context.modes import get_mode
from arbormem.context.summary import SummaryPolicy, SummaryState, clamp, update
from arbormem.context.trackers import Tracker, new_tracker, tracker_from_dict
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
        self, backend: Backend, llm: Any = None, policy: SummaryPolicy = SummaryPolicy()
    ) -> None:
        self.backend = backend
        self.llm = llm
        self.policy = policy
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[Any]] = []
        self._queued: dict[object, threading.Timer] = {}

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
        """Run upkeep in the background worker.

        Work with a ``key`` starts ``interval`` seconds later and is coalesced:
        while one with the same key waits to start, another is not queued (the
        waiting one reads the newer messages when it runs).
        """
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="arbormem-upkeep"
                )
            self._pending = [f for f in self._pending if not f.done()]
            if key is None:
                self._pending.append(self._executor.submit(work))
                return
            if key in self._queued:
                return
            done: Future[Any] = Future()
            self._pending.append(done)
            timer = threading.Timer(self.interval, self._start, (key, work, done))
            timer.daemon = True
            self._queued[key] = timer
            timer.start()

    def _start(self, key: object, work: Callable[[], object], done: Future[Any]) -> None:
        """Hand keyed work to the worker; ``done`` follows its outcome."""

        def run() -> None:
            with self._lock:
                self._queued.pop(key, None)
            try:
                done.set_result(work())
            except BaseException as exc:
                done.set_exception(exc)

        with self._lock:
            # A timer firing while close() starts the same work: only one goes on.
            if done.running() or done.done():
                return
            done.set_running_or_notify_cancel()
            if self._executor is not None:
                try:
                    self._executor.submit(run)
                    return
                except RuntimeError:  # shut down under a firing timer
                    pass
            run()  # closed meanwhile: run it here (run() never raises; ``done`` gets it)

    @property
    def busy(self) -> bool:
        return any(not f.done() for f in self._pending)

    def wait(self, timeout: float | None = None) -> None:
        """Start delayed upkeep at once, and wait for all upkeep submitted so far."""
        self._start_delayed()
        for future in list(self._pending):
            try:
                future.result(timeout=timeout)
            except Exception as exc:  # upkeep failures are logged, never raised here
                log.warning("background upkeep failed: %s", exc)

    def _start_delayed(self) -> None:
        with self._lock:
            timers = list(self._queued.values())
        for timer in timers:
            timer.cancel()
            work_key, work, done = timer.args
            if not done.done():
                self._start(work_key, work, done)

    def close(self) -> None:
        """Start any delayed upkeep now, and wait for all of it."""
        self._start_delayed()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


# -- assembling a context -------------------------------------------------------------------

WARN_AT = 0.7
BLOCK_AT = 0.9


def recall_items(hits: list[Any], paths: list[Any], skip: set[str]) -> list[Any]:
    """Recalled turns (grouped under their session's date) and topic paths, ranked."""
    from arbormem.context.assemble import RecallItem

    items = []
    rank = 0
    for hit in hits:
        m = hit.message
        if m.id in skip:
            continue
        # Who said it: the speaker's name, else the role (an assistant turn has no name).
        text = m.text if m.speaker else f"{m.role}: {m.content}"
        if hit.superseded_by:
            text += "  (earlier; updated later)"
        items.append(
            RecallItem(
                text=text,
                score=hit.score,
                rank=rank,
                header=f"[{m.timestamp.date().isoformat()}]",
                when=m.timestamp,
                order=m.index,
            )
        )
        rank += 2
    # Topic paths come after the turns: they frame the recall, but the turns carry
    # the facts, so a tight budget spends itself on turns first.
    for i, path in enumerate(paths):
        floor = min((h.score for h in hits), default=1.0)
        items.append(
            RecallItem(text=path.render(max_summary_words=25), rank=rank + i, score=0.5 * floor)
        )
    return items


def _window(value: Any) -> int:
    from arbormem.config import to_whole
    from arbormem.context.assemble import MIN_BUDGET, REPLY_PRIMER

    tokens = to_whole(value)
    if tokens < MIN_BUDGET + REPLY_PRIMER + 1:
        raise ValueError(f"must be at least {MIN_BUDGET + REPLY_PRIMER + 1} tokens, got {tokens}")
    return tokens


def _budget(value: Any) -> int:
    from arbormem.config import to_whole
    from arbormem.context.assemble import MIN_BUDGET

    tokens = to_whole(value)
    if tokens < MIN_BUDGET:
        raise ValueError(f"must be at least {MIN_BUDGET} tokens to hold a prompt, got {tokens}")
    return tokens


def build_context(
    memory: Any,
    query: str,
    *,
    budget_tokens: Any,
    mode: str | None,
    session: str | None,
    system_prompt: str | None,
    k: int | None,
    paths: int,
    context_window: int | None,
    reply_tokens: int,
    user: str | None,
    agent: str | None,
) -> Any:
    """What :meth:`arbormem.Memory.context` does (documented there)."""
    from arbormem.config import UNSET, resolve
    from arbormem.context.assemble import DEFAULT_SYSTEM_PROMPT, ContextBuilder
    from arbormem.context.modes import resolve_mode
    from arbormem.errors import InputError, StoreError
    from arbormem.memory import DEFAULT_CONTEXT_BUDGET, DEFAULT_CONTEXT_WINDOW
    from arbormem.tokens import default_counter

    if not isinstance(query, str) or not query.strip():
        raise InputError("must be a non-empty string", field="query")
    budget = resolve(
        budget_tokens,
        "ARBORMEM_CONTEXT_BUDGET",
        "context_budget",
        DEFAULT_CONTEXT_BUDGET,
        _budget,
        field="budget_tokens",
    )
    from arbormem.context.assemble import MIN_BUDGET, REPLY_PRIMER

    smallest = MIN_BUDGET + REPLY_PRIMER + 1
    for name, value, low in (
        ("context_window", context_window, smallest),
        ("reply_tokens", reply_tokens, 0),
    ):
        if value is None and name == "context_window":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(
                f"must be an integer of at least {low} tokens, got {value!r}", field=name
            )
    window_size = (
        context_window
        or (getattr(memory.llm, "context_window", None) if memory.llm is not None else None)
        or resolve(
            UNSET, "ARBORMEM_CONTEXT_WINDOW", "context_window", DEFAULT_CONTEXT_WINDOW, _window
        )
    )
    scope = memory._scope(user, agent)
    if mode is not None and memory.read_only:
        raise StoreError(
            f"{memory.path} is read-only, and mode= is stored with the session: "
            "leave it out to use the session's stored mode"
        )
    # A read: no wait for the tree check, and no thread made for a scope that has none
    # (unless a mode is to be stored for it).
    thread = memory._thread(scope, create=mode is not None, wait=False)
    key = session or memory.current_session(user=scope.user, agent=scope.agent)
    default_mode = resolve_mode()
    if mode is not None:
        assert thread is not None
        memory.working.set_mode(thread, key, mode)
    counter = default_counter()
    state = (
        memory.working.load(thread, key, default_mode)
        if thread is not None
        else SessionMemory(mode=default_mode, tracker=new_tracker(default_mode))
    )
    spec = get_mode(state.mode)
    # Only the window is read here: the whole session is read only when it must be
    # compressed, which happens rarely (and mostly in the background).
    size = spec.window
    inside = (
        [
            r.message
            for r in memory.backend.messages(thread, session=key, start=state.floor, last=size)
        ]
        if size > 0 and thread is not None
        else []
    )

    def session_messages() -> list[Message]:
        assert thread is not None
        return [r.message for r in memory.backend.messages(thread, session=key)]

    system = (system_prompt or DEFAULT_SYSTEM_PROMPT) + (
        "\n" + spec.system_addition if spec.system_addition else ""
    )
    # Pressure on the model's context window: compress older turns in the
    # background past WARN_AT, and before answering past BLOCK_AT.
    pressure = (
        counter.count(system)
        + counter.count(state.summary.text)
        + sum(counter.count(m.content) + 10 for m in inside)
        + counter.count(query)
    ) / window_size
    if thread is None:
        pass  # nothing stored to compress
    elif pressure >= BLOCK_AT:
        memory.working.wait()
        messages = session_messages()
        state = memory.working.compress(thread, key, messages, default_mode)
        _, inside = memory.working.window(messages, state)
    elif pressure >= WARN_AT and not memory.read_only:  # (read-only: nothing to keep)
        memory.working.submit(
            lambda: memory.working.compress(thread, key, session_messages(), default_mode)
        )
    depth = k or min(max(30, budget // 25), 80)
    hits = (
        memory.search(query, k=depth, user=scope.user, agent=scope.agent)
        if thread is not None and memory.backend.state(thread).max_rowid
        else []
    )
    topic_paths = (
        memory.topic_paths(query, k=paths, user=scope.user, agent=scope.agent, drill=False)
        if paths and hits
        else []
    )
    items = recall_items(hits, topic_paths, {m.id for m in inside})
    builder = ContextBuilder(counter)
    return builder.build(
        query=query,
        budget=budget,
        mode=state.mode,
        session=key,
        system=system,
        summary=state.summary.text,
        recall=items,
        state=state.tracker.render(),
        window=inside,
        context_window=window_size,
        reply_tokens=reply_tokens,
    )
