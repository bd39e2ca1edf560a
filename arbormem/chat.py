"""A chat with memory on: one :class:`ChatSession` per conversation, no terminal inside.

Each turn builds the prompt with :meth:`Memory.context`, streams the model's
reply, and stores the exchange in one :meth:`Memory.add_many` call: the user's
message stamped with the time it was typed, the reply with the time it
finished. A failing LLM never loses the user's message: it is stored alone and
the turn carries the error. Slash commands (``/tree``, ``/search``, ``/mode``,
``/forget``, ``/stats``...) are answered as text, so ``arbormem chat`` and
``arbormem bench chat`` share this class::

    with Memory("notes.db") as mem:
        chat = ChatSession(mem, llm)
        turn = chat.turn("Where did we leave the kitchen plans?", on_delta=print)
        print(turn.prompt_tokens, "sent instead of", turn.full_history_tokens)
        print(chat.command("/stats").text)

The saving is measured against sending the whole history of the thread (every
stored message of the scope, whatever its session) with the same system
prompt and input; each message costs its text plus
:data:`arbormem.context.assemble.MESSAGE_OVERHEAD`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arbormem.config import UNSET
from arbormem.context.assemble import MESSAGE_OVERHEAD, REPLY_PRIMER
from arbormem.context.modes import MODES
from arbormem.errors import InputError, LLMError, NotFound
from arbormem.ingest.validate import check_content, check_name
from arbormem.llm import LLMClient
from arbormem.models import Message
from arbormem.timeutil import display, utcnow
from arbormem.tokens import default_counter

__all__ = ["ChatSession", "CommandResult", "Turn", "describe_saving"]

#: The ``feature`` chat replies are counted under in ``llm.usage``.
CHAT_FEATURE = "chat"
SEARCH_HITS = 5
#: Search hits and forgotten messages are shown cut to this many characters.
SHOWN_CHARS = 160

HELP = """\
Commands:
  /help                     this list
  /tree                     the topic tree of this memory, with summaries
  /search QUERY             the stored messages that best match QUERY
  /mode [MODE]              show or switch the memory mode: conversation, code, reasoning
  /forget last              forget the last exchange (your message and the reply)
  /forget MESSAGE_ID        forget one message for good
  /stats                    tokens sent so far against the full history, LLM usage
  /quit, /exit              leave (Ctrl-D and Ctrl-C too)
A message that starts with "/" is sent as text if you double the slash: //etc/hosts..."""


@dataclass
class Turn:
    """One exchange: what was sent, what came back, what was stored and what it cost."""

    input: str
    reply: str
    #: Why the reply failed (one line), ``None`` when it arrived whole.
    error: str | None
    user_message: Message
    #: ``None`` when the reply failed or was interrupted: then only the input is stored.
    assistant_message: Message | None
    mode: str
    #: The prompt's token budget, as applied (``Context.budget``).
    budget: int
    #: Tokens of the prompt actually sent (``Context.prompt_tokens``).
    prompt_tokens: int
    #: Tokens the prompt would have cost carrying the whole stored history instead.
    full_history_tokens: int
    recalled: int
    context_ms: float
    reply_ms: float
    store_ms: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "reply": self.reply,
            "error": self.error,
            "user_message_id": self.user_message.id,
            "assistant_message_id": self.assistant_message.id if self.assistant_message else None,
            "mode": self.mode,
            "budget": self.budget,
            "prompt_tokens": self.prompt_tokens,
            "full_history_tokens": self.full_history_tokens,
            "recalled": self.recalled,
            "context_ms": self.context_ms,
            "reply_ms": self.reply_ms,
            "store_ms": self.store_ms,
        }


@dataclass(frozen=True)
class CommandResult:
    """What a slash command answered; ``quit`` asks the caller to end the chat."""

    text: str
    quit: bool = False


@dataclass
class _Totals:
    turns: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    full_history_tokens: int = 0
    last: Turn | None = None
    #: Ids of the exchanges stored by this chat, oldest first (for ``/forget last``).
    exchanges: list[list[str]] = field(default_factory=list)


def describe_saving(sent: int, full: int) -> str:
    """``"62% saved"``, or why there is no saving yet (a short history costs less)."""
    if full > sent:
        return f"{100 * (1 - sent / full):.1f}% saved"
    return "no saving yet: the history is still shorter than a recalled prompt"


def _clip(text: str, limit: int = SHOWN_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ChatSession:
    """A conversation with an LLM whose memory is a :class:`~arbormem.Memory`.

    ``session`` is the session key every turn is stored under (default: the
    memory's current session, fixed for the life of this object). ``mode``
    switches the session's memory mode now; ``None`` keeps the mode stored for
    the session (or the configured default). ``budget`` is the prompt's token
    budget (``None``: ``ARBORMEM_CONTEXT_BUDGET`` or the default). ``clock``
    gives the timestamps stored with each message.
    """

    def __init__(
        self,
        memory: Any,
        llm: LLMClient,
        *,
        session: str | None = None,
        mode: str | None = None,
        budget: int | None = None,
        system_prompt: str | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        memory.check_writable()  # a chat stores every turn: refused before any LLM call
        self.memory = memory
        self.llm = llm
        self.budget = budget
        self.system_prompt = system_prompt
        self.clock = clock
        # Named as add stores it (stripped): " trip " used to start with no history.
        named = check_name(session, "session") if session is not None else None
        self.session: str = named or memory.current_session()
        self.counter = default_counter()
        self._totals = _Totals()
        self._history: int | None = None  # tokens of every stored message, counted lazily
        self.mode: str = self.set_mode(mode) if mode is not None else self._stored_mode()

    # -- a turn ----------------------------------------------------------------------------

    def turn(self, text: str, on_delta: Callable[[str], None] | None = None) -> Turn:
        """Answer ``text``: build the prompt, stream the reply, store the exchange.

        ``on_delta`` receives the reply's text as it arrives. An
        :class:`~arbormem.errors.LLMError` does not escape: the turn comes back
        with ``error`` set and only the input stored. An interruption
        (``KeyboardInterrupt`` while the prompt is built, from the network wait
        or from ``on_delta``) stores the input the same way, then propagates.
        Input the store would refuse raises its :class:`~arbormem.errors.InputError`
        before anything is sent.
        """
        # Input the store would refuse (too large, empty, not text) is refused before the
        # model is asked: it used to answer, and then nothing of the turn was stored.
        check_content(text, max_bytes=self.memory.max_message_bytes)
        typed_at = self.clock()
        started = time.perf_counter()
        try:
            ctx = self.memory.context(
                text,
                budget_tokens=self.budget if self.budget is not None else UNSET,
                # None: the session's stored mode. set_mode() stores a switch at once;
                # passing the mode every turn would rewrite the session state each time.
                mode=None,
                session=self.session,
                system_prompt=self.system_prompt,
                context_window=self.llm.context_window,
            )
            context_ms = (time.perf_counter() - started) * 1000
            self.mode = ctx.mode
            full = self._full_history_cost(ctx.section("system").text, text)
        except KeyboardInterrupt:
            # Nothing was sent, so the turn is not counted; the message is kept all the same.
            self._store([{"role": "user", "content": text, "timestamp": typed_at}])
            raise
        parts: list[str] = []
        error: str | None = None
        interrupted: BaseException | None = None
        started = time.perf_counter()
        stream = self.llm.stream(ctx.messages, max_tokens=ctx.max_tokens, feature=CHAT_FEATURE)
        try:
            for delta in stream:
                parts.append(delta)
                if on_delta is not None:
                    on_delta(delta)
        except LLMError as exc:
            error = str(exc)
        except KeyboardInterrupt as exc:
            error, interrupted = "the reply was interrupted", exc
        finally:
            stream.close()
        reply_ms = (time.perf_counter() - started) * 1000
        reply = "".join(parts)
        records: list[Mapping[str, Any]] = [
            {"role": "user", "content": text, "timestamp": typed_at}
        ]
        if error is None:
            records.append(
                {
                    "role": "assistant",
                    "content": reply,
                    "timestamp": self.clock(),
                    "metadata": {"model": self.llm.model},
                }
            )
        started = time.perf_counter()
        try:
            stored = self._store(records)
        except InputError as exc:
            if len(records) == 1:
                raise
            # The store refused the reply (a NUL character, past the size limit): keep
            # the user's message and count the turn as failed, as for any unusable answer.
            stored = self._store(records[:1])
            error = f"the reply could not be stored: {exc}"
        store_ms = (time.perf_counter() - started) * 1000
        turn = Turn(
            input=text,
            reply=reply if error is None else "",
            error=error,
            user_message=stored[0],
            assistant_message=stored[1] if len(stored) > 1 else None,
            mode=ctx.mode,
            budget=ctx.budget,
            prompt_tokens=ctx.prompt_tokens,
            full_history_tokens=full,
            recalled=ctx.section("recall").items,
            context_ms=context_ms,
            reply_ms=reply_ms,
            store_ms=store_ms,
        )
        totals = self._totals
        totals.turns += 1
        totals.failed += int(error is not None)
        totals.prompt_tokens += turn.prompt_tokens
        totals.full_history_tokens += turn.full_history_tokens
        totals.last = turn
        if interrupted is not None:
            raise interrupted
        return turn

    def _store(self, records: list[Mapping[str, Any]]) -> list[Message]:
        """Store one exchange in one call, and keep the running history count."""
        stored: list[Message] = self.memory.add_many(records, session=self.session)
        if self._history is not None:
            self._history += sum(self._message_cost(m.content) for m in stored)
        self._totals.exchanges.append([m.id for m in stored])
        return stored

    # -- statistics ------------------------------------------------------------------------

    def _message_cost(self, content: str) -> int:
        return self.counter.count(content) + MESSAGE_OVERHEAD

    def _full_history_cost(self, system: str, text: str) -> int:
        """The prompt's cost if it carried every stored message instead of a context."""
        if self._history is None:
            self._history = sum(self._message_cost(m.content) for m in self.memory.messages())
        return REPLY_PRIMER + self._message_cost(system) + self._history + self._message_cost(text)

    def stats(self) -> dict[str, Any]:
        """Totals over the turns of this chat, the saving in percent, and LLM usage.

        ``saving_percent`` is ``100 * (1 - prompt_tokens / full_history_tokens)``.
        """
        t = self._totals
        ratio = t.prompt_tokens / t.full_history_tokens if t.full_history_tokens else 0.0
        last = t.last
        return {
            "turns": t.turns,
            "failed_turns": t.failed,
            "prompt_tokens": t.prompt_tokens,
            "full_history_tokens": t.full_history_tokens,
            "ratio": ratio,
            "saving_percent": round(100 * (1 - ratio), 1) if t.full_history_tokens else 0.0,
            "last_turn": (
                {
                    "prompt_tokens": last.prompt_tokens,
                    "full_history_tokens": last.full_history_tokens,
                    "context_ms": round(last.context_ms, 2),
                }
                if last
                else None
            ),
            "session": self.session,
            "mode": self.mode,
            "token_counter": self.counter.name,
            "llm": self.llm.usage.snapshot(),
        }

    # -- modes -----------------------------------------------------------------------------

    def _stored_mode(self) -> str:
        """The mode stored for this session, else the configured default (read only)."""
        return str(self.memory.session_mode(session=self.session))

    def set_mode(self, mode: str) -> str:
        """Switch the session's memory mode; its messages, summary and window are kept."""
        self.memory.set_mode(mode, session=self.session)
        self.mode = mode
        return mode

    # -- slash commands --------------------------------------------------------------------

    @staticmethod
    def is_command(line: str) -> bool:
        """True for ``/word ...``; ``//...`` is a message that starts with a slash."""
        return line.startswith("/") and not line.startswith("//")

    @staticmethod
    def as_message(line: str) -> str:
        """The text to send for a non-command line (``//x`` becomes ``/x``)."""
        return line[1:] if line.startswith("//") else line

    def command(self, line: str) -> CommandResult:
        """Answer a slash command as text. Unknown commands say how to list them."""
        name, _, arg = line.strip().partition(" ")
        name, arg = name.lower(), arg.strip()
        if name in ("/quit", "/exit", "/q"):
            return CommandResult("", quit=True)
        if name in ("/help", "/?", "/h"):
            return CommandResult(HELP)
        if name == "/tree":
            return CommandResult(self._tree())
        if name == "/search":
            return CommandResult(self._search(arg))
        if name == "/mode":
            return CommandResult(self._mode(arg))
        if name == "/forget":
            return CommandResult(self._forget(arg))
        if name == "/stats":
            return CommandResult(self.render_stats())
        return CommandResult(f"Unknown command {name}; /help lists the commands.")

    def _tree(self) -> str:
        text: str = self.memory.render_tree("text", leaves=False, summaries=True)
        return text.rstrip() if text.strip() else "No topics yet: the tree grows as you chat."

    def _search(self, query: str) -> str:
        if not query:
            return "Usage: /search QUERY"
        hits = self.memory.search(query, k=SEARCH_HITS)
        if not hits:
            return "No matches."
        lines = []
        for rank, hit in enumerate(hits, 1):
            m = hit.message
            lines.append(
                f"{rank}. [{display(m.timestamp, seconds=False)}] {m.session} "
                f"{m.speaker or m.role}: {_clip(m.content)}  (score {hit.score:.3f}, id {m.id})"
            )
        return "\n".join(lines)

    def _mode(self, arg: str) -> str:
        if not arg:
            return f"Mode: {self.mode} (choose one of {', '.join(MODES)} with /mode MODE)"
        mode = arg.lower()
        if mode not in MODES:
            return f"Unknown mode {arg!r}: choose one of {', '.join(MODES)}."
        if mode == self.mode:
            return f"Already in {mode} mode."
        self.set_mode(mode)
        return f"Mode: {mode}. Session {self.session} goes on with its messages and summary."

    def _forget(self, arg: str) -> str:
        if not arg:
            return "Usage: /forget last, or /forget MESSAGE_ID"
        if arg.lower() == "last":
            ids = self._last_exchange()
            if not ids:
                return "Nothing to forget in this session yet."
        else:
            ids = [arg]
        forgotten = []
        for message_id in ids:
            try:
                message = self.memory.get(message_id)
                self.memory.forget(message_id)
            except NotFound:
                if arg.lower() != "last":
                    return f"No message {message_id!r} in this memory (ids show in /search)."
                continue
            forgotten.append(message)
        for exchange in self._totals.exchanges:
            exchange[:] = [i for i in exchange if i not in ids]
        self._totals.exchanges = [e for e in self._totals.exchanges if e]
        self._history = None  # recounted on the next turn
        if not forgotten:
            return "Nothing forgotten: those messages were already gone."
        shown = "; ".join(f"{m.role}: {_clip(m.content, 60)}" for m in forgotten)
        return f"Forgot {len(forgotten)} message(s) for good: {shown}"

    def _last_exchange(self) -> list[str]:
        """Ids of the last exchange: this chat's, else the session's last user+reply."""
        if self._totals.exchanges:
            return self._totals.exchanges.pop()
        messages = self.memory.messages(session=self.session)
        if not messages:
            return []
        last = messages[-1]
        if last.role == "assistant" and len(messages) > 1 and messages[-2].role == "user":
            return [messages[-2].id, last.id]
        return [last.id]

    def render_stats(self) -> str:
        """``/stats`` as text."""
        s = self.stats()
        if not s["turns"]:
            lines = ["No turns yet."]
        else:
            failed = f" ({s['failed_turns']} without a reply)" if s["failed_turns"] else ""
            lines = [
                f"Turns: {s['turns']}{failed}, session {s['session']}, mode {s['mode']}",
                f"Prompt tokens sent: {s['prompt_tokens']:,}; with the full history: "
                f"{s['full_history_tokens']:,}; "
                + describe_saving(s["prompt_tokens"], s["full_history_tokens"]),
            ]
            last = s["last_turn"]
            lines.append(
                f"Last turn: {last['prompt_tokens']:,} sent, {last['full_history_tokens']:,} "
                f"with the full history; context built in {last['context_ms']:.0f} ms"
            )
        usage = s["llm"]
        total = usage["total"]
        failures = f", {total['failures']} failed" if total["failures"] else ""
        lines.append(
            f"LLM ({self.llm.model}): {total['calls']} call(s){failures}, "
            f"{total['prompt_tokens']:,} prompt + {total['completion_tokens']:,} completion tokens"
        )
        for feature, row in usage["features"].items():
            lines.append(
                f"  {feature}: {row['calls']} call(s), {row['prompt_tokens']:,} + "
                f"{row['completion_tokens']:,} tokens"
            )
        lines.append(f"Token counter: {s['token_counter']}")
        return "\n".join(lines)
