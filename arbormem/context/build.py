"""Building the prompt for the next turn from a session's working memory and recall.

:func:`build_context` is what :meth:`Memory.context <arbormem.Memory.context>` does,
on explicit collaborators: the store (the session's window), the working memory
(mode, tracked state, rolling summary), and two functions that recall for the
query (turns and topic paths), already bound to the caller's scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from arbormem.context.assemble import DEFAULT_SYSTEM_PROMPT, Context, ContextBuilder, RecallItem
from arbormem.context.modes import get_mode
from arbormem.context.trackers import new_tracker
from arbormem.context.working import SessionMemory, WorkingMemory
from arbormem.models import Hit, Message
from arbormem.store.base import Backend
from arbormem.store.types import Thread
from arbormem.tokens import default_counter
from arbormem.tree.recall import TopicPath

#: Past this share of the model's context window, older turns are compressed into
#: the summary in the background; past BLOCK_AT, before the context is built.
WARN_AT = 0.7
BLOCK_AT = 0.9


def recall_items(
    hits: Sequence[Hit], paths: Sequence[TopicPath], skip: set[str]
) -> list[RecallItem]:
    """Recalled turns (grouped under their session's date) and topic paths, ranked."""
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


def build_context(
    *,
    store: Backend,
    working: WorkingMemory,
    thread: Thread | None,
    session: str,
    query: str,
    budget: int,
    default_mode: str,
    system_prompt: str | None,
    k: int | None,
    paths: int,
    window_size: int,
    reply_tokens: int,
    search: Callable[[str, int], Sequence[Hit]],
    topic_paths: Callable[[str, int], Sequence[TopicPath]],
) -> Context:
    """The prompt for the next turn of ``session`` (see :meth:`Memory.context
    <arbormem.Memory.context>`). ``thread`` is None when the scope stores nothing;
    ``window_size`` is the model's context window in tokens."""
    read_only = store.read_only
    counter = default_counter()
    state = (
        working.load(thread, session, default_mode)
        if thread is not None
        else SessionMemory(mode=default_mode, tracker=new_tracker(default_mode))
    )
    spec = get_mode(state.mode)
    # Only the window is read here: the whole session is read only when it must be
    # compressed, which happens rarely (and mostly in the background).
    size = spec.window
    inside = (
        [r.message for r in store.messages(thread, session=session, start=state.floor, last=size)]
        if size > 0 and thread is not None
        else []
    )

    def session_messages() -> list[Message]:
        assert thread is not None
        return [r.message for r in store.messages(thread, session=session)]

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
        working.wait()
        messages = session_messages()
        state = working.compress(thread, session, messages, default_mode)
        _, inside = working.window(messages, state)
    elif pressure >= WARN_AT and not read_only:  # (read-only: nothing to keep)
        working.submit(lambda: working.compress(thread, session, session_messages(), default_mode))
    depth = k or min(max(30, budget // 25), 80)
    hits = search(query, depth) if thread is not None and store.state(thread).max_rowid else []
    found_paths = topic_paths(query, paths) if paths and hits else []
    items = recall_items(hits, found_paths, {m.id for m in inside})
    builder = ContextBuilder(counter)
    return builder.build(
        query=query,
        budget=budget,
        mode=state.mode,
        session=session,
        system=system,
        summary=state.summary.text,
        recall=items,
        state=state.tracker.render(),
        window=inside,
        context_window=window_size,
        reply_tokens=reply_tokens,
    )
