"""Context assembly: what goes into the next prompt, within a token budget.

A :class:`Context` has these sections, in this order:

1. ``system``: the system prompt with the memory mode's additions;
2. ``summary``: the rolling summary of older history in this session;
3. ``recall``: recalled memory: topic paths (names, summaries, dates) and
   recalled turns with their speaker and date, grouped under session dates;
4. ``state``: what the memory mode tracks (task, files, decisions...);
5. ``window``: the sliding window of recent messages, each prefixed with its
   UTC timestamp (``[2026-02-14 15:23:05 UTC]``);
6. ``input``: the current input.

Sections 1-4 form the system message of the rendered chat; the window
messages follow with their own roles; the input comes last as a user message.

Over budget, in this order: the oldest window messages go first, then the
recalled block loses its least relevant items, then oversized messages are
cut with a visible ``[...truncated...]`` marker. The system prompt and the
current input are never dropped; they are cut only if they alone exceed the
budget. The reply's ``max_tokens`` comes from the model's context window: at
least 1, never more than what is left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arbormem.models import Message
from arbormem.timeutil import display
from arbormem.tokens import TokenCounter

TRUNCATED = "[...truncated...]"
#: What one chat message costs beyond its text (role, separators), OpenAI-style.
MESSAGE_OVERHEAD = 4
#: Tokens that prime the reply.
REPLY_PRIMER = 3
#: The smallest budget that can hold a system prompt and an input at all.
MIN_BUDGET = 32
#: While packing, a prompt estimated within this many tokens of the budget is counted exactly.
NEAR = 16

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory of this conversation. "
    "When memories disagree, trust the newer one."
)


@dataclass
class Section:
    """One part of the prompt and what it costs."""

    name: str
    text: str
    tokens: int
    items: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "text": self.text, "tokens": self.tokens, "items": self.items}


@dataclass
class Context:
    """An assembled prompt: its sections, the chat messages, and their cost."""

    sections: list[Section]
    messages: list[dict[str, str]]
    prompt_tokens: int
    budget: int
    max_tokens: int
    counter: str
    mode: str
    session: str
    dropped: dict[str, int] = field(default_factory=dict)

    def section(self, name: str) -> Section:
        return next(s for s in self.sections if s.name == name)

    @property
    def text(self) -> str:
        """Everything the model will read, as one string."""
        return "\n\n".join(m["content"] for m in self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "session": self.session,
            "budget": self.budget,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "token_counter": self.counter,
            "dropped": self.dropped,
            "sections": [s.to_dict() for s in self.sections],
            "messages": self.messages,
        }


@dataclass
class RecallItem:
    """One recalled piece: a rendered block and its rank (lower is more relevant)."""

    text: str
    rank: int
    #: When set, turns of the same session are grouped under this header.
    header: str | None = None
    when: datetime | None = None
    order: int = 0
    #: Relevance score (higher is better), used to pack the budget by value per token.
    score: float | None = None


def stamp(message: Message) -> str:
    """A window message as the model sees it: UTC time first, then the speaker."""
    who = f"{message.speaker}: " if message.speaker and message.role == "user" else ""
    if message.role == "tool":
        who = "[tool result] "
    return f"[{display(message.timestamp)}] {who}{message.content}"


def chat_role(message: Message) -> str:
    # Chat APIs reject tool messages without a call id; a tool result is shown as user text.
    return message.role if message.role in ("user", "assistant", "system") else "user"


def render_recall(items: Sequence[RecallItem]) -> str:
    """Recalled items as a compact block: paths as they are, turns grouped by session."""
    if not items:
        return ""
    paths = [i for i in items if i.header is None]
    turns = sorted(
        (i for i in items if i.header is not None), key=lambda i: (i.when or datetime.min, i.order)
    )
    lines: list[str] = []
    if paths:
        lines.append("Related topics:")
        lines.extend(i.text for i in sorted(paths, key=lambda i: i.rank))
    current = None
    for item in turns:
        if item.header != current:
            if lines:
                lines.append("")
            lines.append(item.header or "")
            current = item.header
        lines.append(item.text)
    return "\n".join(lines)


class ContextBuilder:
    """Fits sections into a budget with the documented drop order."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def _cost(self, text: str) -> int:
        return self.counter.count(text) + MESSAGE_OVERHEAD if text else 0

    def _truncate(self, text: str, max_tokens: int) -> str:
        """Cut ``text`` to fit ``max_tokens`` including the visible marker."""
        if self.counter.count(text) <= max_tokens:
            return text
        room = max_tokens - self.counter.count(" " + TRUNCATED)
        if room <= 0:
            return self.counter.truncate(TRUNCATED, max(0, max_tokens))
        return self.counter.truncate(text, room).rstrip() + " " + TRUNCATED

    #: How much a long item is penalised when packing: value / tokens ** DENSITY.
    DENSITY = 0.2

    @classmethod
    def _packing_order(cls, items: Sequence[RecallItem], costs: Sequence[int]) -> list[int]:
        """The order items are offered to the budget: by rank, or, when every item has
        a relevance score, by relevance per token, so a tight budget is spent on
        what is worth most for its size."""
        if not items or any(i.score is None for i in items):
            return list(range(len(items)))

        # Relevance above the least relevant item: scores of a ranking share an offset
        # that says nothing about worth, and would let short filler crowd out facts.
        floor = min(i.score or 0.0 for i in items)

        def value(i: int) -> float:
            return ((items[i].score or 0.0) - floor) / max(costs[i], 1) ** cls.DENSITY

        return sorted(range(len(items)), key=lambda i: (-value(i), i))

    def build(
        self,
        *,
        query: str,
        budget: int,
        mode: str,
        session: str,
        system: str = DEFAULT_SYSTEM_PROMPT,
        summary: str = "",
        recall: Sequence[RecallItem] = (),
        state: str = "",
        window: Sequence[Message] = (),
        context_window: int = 8192,
        reply_tokens: int = 1024,
    ) -> Context:
        if budget < MIN_BUDGET:
            raise ValueError(f"a context budget below {MIN_BUDGET} tokens cannot hold a prompt")
        # The prompt may not take the whole context window: leave room for a reply.
        budget = max(MIN_BUDGET, min(budget, context_window - 1 - REPLY_PRIMER))
        count = self.counter.count
        recall_items = sorted(recall, key=lambda i: i.rank)
        window_msgs = list(window)
        window_texts = [stamp(m) for m in window_msgs]
        window_costs = [count(t) + MESSAGE_OVERHEAD for t in window_texts]
        item_costs = [count(i.text) + 1 for i in recall_items]
        header_cost = {h: count(h) + 2 for h in {i.header for i in recall_items if i.header}}
        texts = {"system": system, "summary": summary, "state": state}
        dropped = {"window": 0, "recall": 0, "truncated": 0}

        def recall_estimate(items: Sequence[int]) -> int:
            if not items:
                return 0
            headers = {h for i in items if (h := recall_items[i].header)}
            return 6 + sum(item_costs[i] for i in items) + sum(header_cost[h] for h in headers)

        def fixed() -> int:
            n = REPLY_PRIMER + MESSAGE_OVERHEAD + count(texts["system"]) + 2
            n += count(query) + MESSAGE_OVERHEAD
            for key, label in (("summary", 10), ("state", 5)):
                if texts[key]:
                    n += count(texts[key]) + label
            return n

        # Fit with cheap per-piece estimates first; the exact count is checked below.
        base = fixed()
        everything = list(range(len(recall_items)))
        while (
            base + recall_estimate(everything) + sum(window_costs) > budget
            and len(window_costs) > 1
        ):
            window_costs.pop(0)
            window_texts.pop(0)
            window_msgs.pop(0)
            dropped["window"] += 1
        # The recalled block is shortened from its least relevant end, but a smaller
        # item further down still goes in where a larger one did not fit.
        room = budget - base - sum(window_costs) - 6
        chosen: list[int] = []
        headers: set[str] = set()
        for i in self._packing_order(recall_items, item_costs):
            header = recall_items[i].header
            cost = item_costs[i] + (header_cost[header] if header and header not in headers else 0)
            if cost <= room:
                chosen.append(i)
                room -= cost
                if header:
                    headers.add(header)
            else:
                dropped["recall"] += 1
        kept = set(chosen)
        skipped = [
            recall_items[i] for i in self._packing_order(recall_items, item_costs) if i not in kept
        ]
        recall_items = [recall_items[i] for i in sorted(chosen)]

        def system_text() -> str:
            parts = [texts["system"]]
            if texts["summary"]:
                parts.append("Summary of earlier conversation:\n" + texts["summary"])
            block = render_recall(recall_items)
            if block:
                parts.append("Recalled memory:\n" + block)
            if texts["state"]:
                parts.append("Tracked state:\n" + texts["state"])
            return "\n\n".join(p for p in parts if p)

        def total() -> int:
            n = REPLY_PRIMER + count(system_text()) + MESSAGE_OVERHEAD
            n += count(query) + MESSAGE_OVERHEAD
            return n + sum(count(t) + MESSAGE_OVERHEAD for t in window_texts)

        # Exact accounting: the same drop order, one piece at a time. Counting the
        # whole prompt is the expensive part, so after each drop the total is
        # lowered by the piece's own count, and counted exactly again only once
        # that says the prompt may fit.
        def shrink(more: Callable[[], bool], drop: Callable[[], int]) -> int:
            now = total()
            while now > budget and more():
                now -= drop()
                if now <= budget + NEAR:
                    now = total()
            return now

        def drop_window() -> int:
            dropped["window"] += 1
            window_msgs.pop(0)
            return count(window_texts.pop(0)) + MESSAGE_OVERHEAD

        def drop_recall() -> int:
            dropped["recall"] += 1
            item = recall_items.pop()
            saved = count(item.text) + 1
            if item.header and all(i.header != item.header for i in recall_items):
                saved += header_cost[item.header]
            return saved

        shrink(lambda: len(window_texts) > 1, drop_window)
        now = shrink(lambda: bool(recall_items), drop_recall)
        # The estimates err on the safe side: use what room is left on skipped items,
        # added on their own counts and checked exactly once at the end.
        slack = budget - now
        added: list[RecallItem] = []
        shown = {i.header for i in recall_items if i.header}
        for item in skipped:
            if slack < 8:
                break
            cost = count(item.text) + 2
            if item.header and item.header not in shown:
                cost += header_cost[item.header]
            if cost > slack:
                continue
            added.append(item)
            if item.header:
                shown.add(item.header)
            slack -= cost
        if added:
            recall_items.extend(added)
            recall_items.sort(key=lambda i: i.rank)
            dropped["recall"] -= len(added)
            while added and total() > budget:
                recall_items.remove(added.pop())
                dropped["recall"] += 1
        # Oversized pieces are cut, with a visible marker.
        if total() > budget and window_texts:
            keep = count(window_texts[0]) - (total() - budget)
            if keep > 8:
                window_texts[0] = self._truncate(window_texts[0], keep)
                dropped["truncated"] += 1
            else:
                window_texts.pop(0)
                window_msgs.pop(0)
                dropped["window"] += 1
        for key in ("state", "summary"):
            over = total() - budget
            if over > 0 and texts[key]:
                keep = count(texts[key]) - over
                texts[key] = self._truncate(texts[key], keep) if keep > 8 else ""
                dropped["truncated"] += 1
        # The input and the system prompt are never dropped, only cut as a last resort.
        over = total() - budget
        if over > 0:
            keep = max(max(1, budget // 4), count(query) - over)
            if keep < count(query):
                query = self._truncate(query, keep)
                dropped["truncated"] += 1
        while total() > budget and count(texts["system"]) > 1:
            texts["system"] = self._truncate(
                texts["system"], max(1, count(texts["system"]) - (total() - budget))
            )
            dropped["truncated"] += 1
        while total() > budget and count(query) > 1:
            query = self._truncate(query, max(1, count(query) - (total() - budget)))
        system_message = system_text()
        messages = [{"role": "system", "content": system_message}]
        messages += [
            {"role": chat_role(m), "content": t} for m, t in zip(window_msgs, window_texts)
        ]
        messages.append({"role": "user", "content": query})
        prompt_tokens = total()
        recall_text = render_recall(recall_items)
        sections = [
            Section("system", texts["system"], count(texts["system"])),
            Section("summary", texts["summary"], count(texts["summary"])),
            Section("recall", recall_text, count(recall_text), len(recall_items)),
            Section("state", texts["state"], count(texts["state"])),
            Section(
                "window",
                "\n".join(window_texts),
                sum(count(t) for t in window_texts),
                len(window_texts),
            ),
            Section("input", query, count(query)),
        ]
        max_tokens = max(1, min(reply_tokens, context_window - prompt_tokens))
        return Context(
            sections=sections,
            messages=messages,
            prompt_tokens=prompt_tokens,
            budget=budget,
            max_tokens=max_tokens,
            counter=self.counter.name,
            mode=mode,
            session=session,
            dropped=dropped,
        )
