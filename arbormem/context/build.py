"""Building the prompt for the next turn from a session's working memory and recall.

:func:`build_context` is what :meth:`Memory.context <arbormem.Memory.context>` does,
on explicit collaborators: the store (the session's window), the working memory
(mode, tracked state, rolling summary), and two functions that recall for the
query (turns and topic paths), already bound to the caller's scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from arbormem import arguments
from arbormem.config import UNSET
from arbormem.context.assemble import (
    DEFAULT_SYSTEM_PROMPT,
    MIN_BUDGET,
    REPLY_PRIMER,
    Context,
    ContextBuilder,
    RecallItem,
)
from arbormem.context.modes import get_mode
from arbormem.context.trackers import new_tracker
from arbormem.context.working import SessionMemory, WorkingMemory
from arbormem.errors import InputError
from arbormem.models import Hit, ImageRef, Message
from arbormem.settings import budget_tokens as budget_of
from arbormem.store.base import Backend
from arbormem.store.types import Thread
from arbormem.tokens import default_counter
from arbormem.tree.recall import TopicPath

#: Past this share of the model's context window, older turns are compressed into
#: the summary in the background; past BLOCK_AT, before the context is built.
WARN_AT = 0.7
BLOCK_AT = 0.9


#: Share of the budget the records section may take at most.
RECORDS_SHARE = 0.3
#: Recalled turns that a record merely restating them gives way to.
RECALLED_FIRST = 10
#: The most turns (and topic paths) a context recalls.
MAX_RECALL = 10_000


def check_context_arguments(
    *,
    budget_tokens: Any,
    default_budget: int,
    k: Any,
    paths: Any,
    system_prompt: Any,
    max_bytes: int,
    context_window: Any,
    reply_tokens: Any,
) -> int:
    """Refuse a bad argument of :meth:`Memory.context <arbormem.Memory.context>`
    (an :class:`InputError` naming it); the budget in tokens."""
    if budget_tokens is UNSET:
        budget = default_budget
    elif budget_tokens is None:
        raise InputError(
            "must be a whole number of tokens, got None",
            field="budget_tokens",
            hint="leave it out for the configured budget",
        )
    else:
        try:
            budget = budget_of(budget_tokens)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InputError(str(exc), field="budget_tokens") from None
    if k is not None:
        arguments.count(k, "k", 1, MAX_RECALL)
    arguments.count(paths, "paths", 0, MAX_RECALL)
    if system_prompt is not None:  # "" is the default prompt, as None is
        arguments.text(system_prompt, "system_prompt", max_bytes=max_bytes, blank=True)
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
    return budget


def image_line(message: Message, image: ImageRef) -> str:
    """A recalled caption message as the model reads it: marked as an image, with
    the day it was shared and what resolves it (the id for ``get_image`` and
    ``image_bytes``, the stored file when there is one), then the caption."""
    caption = message.content.removeprefix(f"[image {image.id}]").strip()
    where = f", file {image.file}" if image.file else f", url {image.url}" if image.url else ""
    size = f", {image.size:,} bytes" if image.size else ""
    mime = image.mime or "not stored"
    mark = f"[image {image.id}, shared {message.timestamp.date().isoformat()}, {mime}{size}{where}]"
    who = message.speaker or message.role
    return f"{who}: {mark} {caption}"


def recall_items(hits: Sequence[Hit], paths: Sequence[TopicPath]) -> list[RecallItem]:
    """Recalled turns (grouped under their session's date) and topic paths, ranked.
    Turns the window shows stay in the list: the builder leaves them out while the
    window keeps them, and takes them back when it does not."""
    items = []
    rank = 0
    for hit in hits:
        m = hit.message
        # Who said it: the speaker's name, else the role (an assistant turn has no name).
        text = (
            image_line(m, hit.image)
            if hit.image is not None
            else m.text
            if m.speaker
            else f"{m.role}: {m.content}"
        )
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
                message_id=m.id,
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
    records: Callable[[int, set[str]], str] | None = None,
) -> Context:
    """The prompt for the next turn of ``session`` (see :meth:`Memory.context
    <arbormem.Memory.context>`). ``thread`` is None when the scope stores nothing;
    ``window_size`` is the model's context window in tokens; ``records`` gives the
    records section within a number of tokens (see :data:`RECORDS_SHARE`), told which
    messages recall ranks first (a record that only repeats them is not worth its room)."""
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
    items = recall_items(hits, found_paths)
    first = {h.message.id for h in hits[:RECALLED_FIRST]}
    held = records(int(budget * RECORDS_SHARE), first) if records is not None and thread else ""
    builder = ContextBuilder(counter)
    return builder.build(
        query=query,
        budget=budget,
        mode=state.mode,
        session=session,
        system=system,
        summary=state.summary.text,
        records=held,
        recall=items,
        state=state.tracker.render(),
        window=inside,
        context_window=window_size,
        reply_tokens=reply_tokens,
    )
