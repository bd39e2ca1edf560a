"""Token budgets of context assembly, checked as properties over generated histories."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbormem.context.assemble import MIN_BUDGET, TRUNCATED, ContextBuilder, RecallItem
from arbormem.models import Message
from arbormem.tokens import default_counter

T0 = datetime(2026, 2, 14, 15, 23, 5, tzinfo=timezone.utc)
COUNTER = default_counter()

words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=400
)
history = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), words), max_size=40)


def messages(pairs: list[tuple[str, str]]) -> list[Message]:
    return [
        Message(
            id=f"m{i}",
            role=role,
            content=text,
            timestamp=T0 + timedelta(minutes=i),
            session="s",
            index=i,
        )
        for i, (role, text) in enumerate(pairs)
    ]


def count_messages(chat: list[dict[str, str]]) -> int:
    from arbormem.context.assemble import MESSAGE_OVERHEAD, REPLY_PRIMER

    return REPLY_PRIMER + sum(COUNTER.count(m["content"]) + MESSAGE_OVERHEAD for m in chat)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=history,
    recalled=st.lists(words, max_size=30),
    summary=st.text(max_size=2000),
    state=st.text(max_size=800),
    system=st.text(min_size=1, max_size=600),
    query=st.text(min_size=1, max_size=3000),
    budget=st.integers(min_value=MIN_BUDGET, max_value=3000),
    window=st.integers(min_value=64, max_value=32000),
)
def test_budget_is_never_exceeded_and_system_and_input_survive(
    pairs: list[tuple[str, str]],
    recalled: list[str],
    summary: str,
    state: str,
    system: str,
    query: str,
    budget: int,
    window: int,
) -> None:
    items = [
        RecallItem(text=t, rank=i, header="[2023-05-08 13:56 UTC] s1", order=i)
        for i, t in enumerate(recalled)
    ]
    ctx = ContextBuilder(COUNTER).build(
        query=query,
        budget=budget,
        mode="conversation",
        session="s",
        system=system,
        summary=summary,
        recall=items,
        state=state,
        window=messages(pairs),
        context_window=window,
    )
    assert ctx.prompt_tokens <= ctx.budget <= budget
    assert count_messages(ctx.messages) == ctx.prompt_tokens
    # The system prompt and the input are always there, at worst cut with a marker.
    sent_system = ctx.section("system").text
    assert sent_system == system or (TRUNCATED in sent_system and sent_system.strip())
    sent_query = ctx.messages[-1]["content"]
    assert ctx.messages[-1]["role"] == "user"
    assert sent_query == query or TRUNCATED in sent_query
    assert ctx.messages[0]["content"].startswith(sent_system)
    assert 1 <= ctx.max_tokens <= max(1, window - ctx.prompt_tokens)


def test_drop_order_window_first_then_recall_then_truncation() -> None:
    window = messages([("user", f"window message number {i} " * 5) for i in range(30)])
    recall = [
        RecallItem(text=f"recalled fact {i} " * 4, rank=i, header="[2023] s1", order=i)
        for i in range(20)
    ]
    builder = ContextBuilder(COUNTER)
    roomy = builder.build(
        query="q?", budget=5000, mode="m", session="s", recall=recall, window=window
    )
    assert roomy.dropped == {"window": 0, "recall": 0, "truncated": 0}
    tight = builder.build(
        query="q?", budget=1000, mode="m", session="s", recall=recall, window=window
    )
    assert tight.dropped["window"] > 0 and tight.dropped["recall"] == 0
    kept = tight.section("window").text
    assert "number 29" in kept and "number 0 " not in kept  # the oldest went first
    tighter = builder.build(
        query="q?", budget=200, mode="m", session="s", recall=recall, window=window
    )
    assert tighter.dropped["window"] == 29 and tighter.dropped["recall"] > 0
    assert "recalled fact 0 " in tighter.section("recall").text  # the most relevant stays


def test_an_oversized_message_is_cut_with_a_visible_marker() -> None:
    huge = messages([("user", "word " * 5000)])
    ctx = ContextBuilder(COUNTER).build(
        query="what did I say?", budget=300, mode="m", session="s", window=huge
    )
    assert ctx.prompt_tokens <= 300
    assert TRUNCATED in ctx.section("window").text


def test_window_messages_carry_their_utc_timestamp() -> None:
    ctx = ContextBuilder(COUNTER).build(
        query="hi", budget=500, mode="m", session="s", window=messages([("user", "hello there")])
    )
    assert ctx.messages[1]["content"] == "[2026-02-14 15:23:05 UTC] hello there"
    assert ctx.messages[1]["role"] == "user"


def test_max_tokens_fits_the_model_window() -> None:
    ctx = ContextBuilder(COUNTER).build(
        query="x " * 50, budget=10_000, mode="m", session="s", context_window=200, reply_tokens=4096
    )
    assert ctx.prompt_tokens + ctx.max_tokens <= 200
    assert ctx.max_tokens >= 1


def test_budget_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValueError):
        ContextBuilder(COUNTER).build(query="x", budget=MIN_BUDGET - 1, mode="m", session="s")


@given(st.text(alphabet="🎂蛋糕ab é", min_size=1, max_size=60), st.integers(1, 40))
def test_a_cut_never_leaves_half_a_character(text: str, max_tokens: int) -> None:
    counter = default_counter()
    out = counter.truncate(text, max_tokens)
    assert "\ufffd" not in out and text.startswith(out)
    assert counter.count(out) <= max_tokens
