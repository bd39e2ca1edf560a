"""The rolling summary of a session's older messages.

Messages that leave the sliding window are folded into one summary, in
batches, after a reply (never while the user waits):

* only when at least ``batch`` messages (10) left the window since the last
  summary;
* skipped when the batch has fewer than 4 meaningful messages *and* under
  5,000 characters of meaningful content (a meaningful message is a user or
  assistant message of at least three words that is not a tool call);
* the batch is merged into the existing summary: by the LLM when one is
  configured, extractively otherwise, and extractively when the LLM fails or
  answers garbage (a model that is down must not freeze the summary while
  older messages leave the prompt);
* the LLM is sent at most ``LLM_INPUT_CHARS`` of new messages, the newest:
  older ones in a long backlog are folded in extractively first;
* if even the extractive merge fails, the previous summary stays.

The text and the index it covers are stored with the session and restored on
resume; an index beyond the history (after messages were forgotten) is clamped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arbormem.errors import LLMError
from arbormem.models import Message
from arbormem.text import analyze
from arbormem.tree.summarize import digest_messages

log = logging.getLogger(__name__)

MAX_WORDS = 400
#: Characters of new messages one LLM summary call is sent (about 3,000 tokens).
LLM_INPUT_CHARS = 12_000

LLM_PROMPT = (
    "You keep a running summary of a conversation for an assistant's memory. Merge the new "
    "messages into the existing summary. Keep facts, numbers, dates, decisions, preferences "
    "and open tasks; drop greetings, small talk and tool chatter. Write short bullet points "
    f"in the third person, present tense, at most {MAX_WORDS} words in all. "
    'Answer with JSON only: {"summary": "<the merged summary>"}.'
)


@dataclass(frozen=True)
class SummaryState:
    """A session's summary and the message index it covers (exclusive)."""

    text: str = ""
    upto: int = 0


@dataclass(frozen=True)
class SummaryPolicy:
    batch: int = 10
    min_messages: int = 4
    min_chars: int = 5000
    max_words: int = MAX_WORDS


def meaningful(messages: Sequence[Message]) -> list[Message]:
    return [
        m
        for m in messages
        if m.role in ("user", "assistant")
        and len(m.content.split()) >= 3
        and not m.metadata.get("tool_calls")
    ]


def gate(batch: Sequence[Message], policy: SummaryPolicy) -> bool:
    """True when the batch is worth summarising (either threshold is enough)."""
    useful = meaningful(batch)
    return (
        len(useful) >= policy.min_messages
        or sum(len(m.content) for m in useful) >= policy.min_chars
    )


#: Characters a summary may take per word of its limit: words alone do not bound its
#: size (a key, a base64 blob or minified code is one "word").
CHARS_PER_WORD = 8


def _cap_words(text: str, max_words: int) -> str:
    """Keep the newest lines within ``max_words`` words and ``CHARS_PER_WORD`` times as
    many characters (older bullets drop off first; a newest line that alone is too
    long keeps its beginning)."""
    max_chars = max_words * CHARS_PER_WORD
    lines = [ln for ln in text.splitlines() if ln.strip()]
    kept: list[str] = []
    words = chars = 0
    for line in reversed(lines):
        n, c = len(line.split()), len(line) + 1
        if words + n > max_words or chars + c > max_chars:
            if not kept:
                cut = " ".join(line.split()[:max_words])[: max_chars - 1]
                kept.append(cut.rstrip() + "…")
            break
        kept.append(line)
        words, chars = words + n, chars + c
    return "\n".join(reversed(kept))


def extractive_merge(previous: str, batch: Sequence[Message], policy: SummaryPolicy) -> str:
    """The no-LLM summary: one bullet per batch, its key sentences, appended."""
    useful = meaningful(batch)
    if not useful:
        return previous
    terms = {t for m in useful for t in analyze(m.content)}
    digest = digest_messages(useful, {t: 1 for t in terms}, max(2, len(useful)), max_words=60)
    when = useful[0].timestamp.date().isoformat()
    bullet = f"- [{when}] {digest.name}: {digest.summary}"
    merged = f"{previous}\n{bullet}" if previous else bullet
    return _cap_words(merged, policy.max_words)


def _validate(value: Any) -> str:
    if not isinstance(value, Mapping) or not isinstance(value.get("summary"), str):
        raise ValueError('expected {"summary": "..."}')
    text = value["summary"].strip()
    if not text:
        raise ValueError("the summary is empty")
    return text


def llm_merge(llm: Any, previous: str, batch: Sequence[Message], policy: SummaryPolicy) -> str:
    useful = meaningful(batch)
    # The newest messages that fit the call; a backlog (a bulk import followed by live
    # chat) sent whole grew every prompt until the model refused them all.
    newest: list[str] = []
    size = 0
    for m in reversed(useful):
        line = f"{m.speaker or m.role}: {m.content}"
        if newest and size + len(line) > LLM_INPUT_CHARS:
            break
        newest.append(line[:LLM_INPUT_CHARS])
        size += len(line) + 1
    older = useful[: len(useful) - len(newest)]
    if older:
        previous = extractive_merge(previous, older, policy)
    lines = "\n".join(reversed(newest))
    prompt = [
        {"role": "system", "content": LLM_PROMPT},
        {
            "role": "user",
            "content": f"Existing summary:\n{previous or '(none)'}\n\nNew messages:\n{lines}",
        },
    ]
    text: str = llm.complete_json(
        prompt, validate=_validate, feature="rolling_summary", max_tokens=700
    )
    return _cap_words(text, policy.max_words)


def update(
    state: SummaryState,
    left_window: Sequence[Message],
    *,
    policy: SummaryPolicy = SummaryPolicy(),
    llm: Any = None,
    force: bool = False,
) -> SummaryState:
    """Fold the messages that left the window into the summary, if the rules allow.

    ``left_window`` holds the messages after ``state.upto`` that are no longer
    in the window, in order. ``force`` skips the batch-size and meaningfulness
    gates (used when the context is close to full); so does a batch four times
    the policy's size.
    """
    batch = [m for m in left_window if m.index >= state.upto]
    if not batch:
        return state
    # A stretch four batches long is folded in whatever it holds: otherwise a session
    # of small talk would make every later batch, and every upkeep, longer.
    long = len(batch) >= 4 * policy.batch
    if not force and not long and (len(batch) < policy.batch or not gate(batch, policy)):
        return state
    upto = batch[-1].index + 1
    if llm is not None:
        try:
            return SummaryState(llm_merge(llm, state.text, batch, policy), upto)
        except LLMError as exc:
            log.info("LLM summary failed, summarising without it: %s", exc)
    try:
        return SummaryState(extractive_merge(state.text, batch, policy), upto)
    except Exception as exc:  # a summary is a convenience: never lose the previous one
        log.warning("extractive summary failed, keeping the previous one: %s", exc)
        return state


def clamp(state: SummaryState, next_index: int) -> SummaryState:
    """A restored summary never claims to cover messages that no longer exist."""
    return state if state.upto <= next_index else SummaryState(state.text, next_index)
