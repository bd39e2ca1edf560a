"""``arbormem chat``: a terminal chat with memory on (a skin over :class:`ChatSession`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from arbormem.cli.common import StoreOptions, handle_errors

NO_LLM = """\
arbormem chat needs a chat model, and none is configured. Nothing was stored.

Name the model in ARBORMEM_LLM_MODEL. OPENAI_BASE_URL is the address of any
OpenAI-compatible server (leave it unset for api.openai.com), and OPENAI_API_KEY
holds the key, if the server wants one.

With Ollama, on this machine, no key needed:

    ollama pull qwen2.5:7b-instruct
    export ARBORMEM_LLM_MODEL=qwen2.5:7b-instruct
    export OPENAI_BASE_URL=http://localhost:11434/v1

With OpenAI:

    export ARBORMEM_LLM_MODEL=gpt-4o-mini
    export OPENAI_API_KEY=sk-...

Or write the same settings, without "export", in a .env file in the folder you
run arbormem from:

    ARBORMEM_LLM_MODEL=qwen2.5:7b-instruct
    OPENAI_BASE_URL=http://localhost:11434/v1

or give them to this command: arbormem chat --model gpt-4o-mini
Then run arbormem chat again. More in {docs}/chat.md and {docs}/llm.md."""

#: Where the documentation is published, when the installed package does not say.
DOCS_URL = "https://github.com/arbormem/arbormem/tree/main/docs"


def docs_url() -> str:
    """The published documentation's address, from the package's ``project.urls``: a
    pip-installed user has no docs folder to be pointed at."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        urls = metadata("arbormem").get_all("Project-URL") or []
    except PackageNotFoundError:  # run from a source tree that was never installed
        return DOCS_URL
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/")
    return DOCS_URL


PROMPT = "you> "


def _open(opts: StoreOptions, llm: Any) -> Any:
    """The store named by the global options, with ``llm`` for memory's own upkeep."""
    from arbormem.config import UNSET
    from arbormem.memory import Memory

    return Memory(
        opts.db if opts.db is not None else UNSET,
        user=opts.user if opts.user is not None else UNSET,
        agent=opts.agent if opts.agent is not None else UNSET,
        embedder=opts.embedder if opts.embedder is not None else UNSET,
        llm=llm,
        read_only=opts.read_only,
        reranker=opts.reranker if opts.reranker is not None else UNSET,
        deep_embedder=opts.deep_embedder if opts.deep_embedder is not None else UNSET,
    )


class Terminal:
    """The read-reply loop. Colours and spinners only when stdout is a terminal."""

    def __init__(self, chat: Any) -> None:
        self.chat = chat
        self.tty = sys.stdout.isatty()
        self.echo_input = not sys.stdin.isatty()
        self._console: Any = None
        if self.tty:
            from rich.console import Console

            self._console = Console(highlight=False)
        if sys.stdin.isatty():
            try:
                import readline  # noqa: F401  (line editing and history for input())
            except ImportError:
                pass

    def _spinner(self, text: str) -> Any:
        """A started rich status line, or ``None`` when output is not a terminal."""
        if self._console is None:
            return None
        status = self._console.status(text, spinner="dots")
        status.start()
        return status

    @contextmanager
    def spinning(self, text: str) -> Iterator[None]:
        status = self._spinner(text)
        try:
            yield
        finally:
            if status is not None:
                status.stop()

    def say(self, text: str, **style: Any) -> None:
        click.echo(click.style(text, **style) if style else text)

    def run(self) -> None:
        chat = self.chat
        mem = chat.memory
        if chat.budget is None:
            budget = f"{mem.settings.context_budget} tokens (default)"
        else:
            budget = f"{chat.budget} tokens"
        self.say(
            f"arbormem chat: {chat.llm.model} at {getattr(chat.llm, 'endpoint', 'a local client')}"
            f"; session {chat.session}, {chat.mode} mode, prompt budget {budget}",
            bold=True,
        )
        self.say(
            f"Memory: {mem.path} ({mem.scope}). /help lists the commands, /quit leaves.", dim=True
        )
        while True:
            try:
                line = input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                click.echo()
                break
            if self.echo_input:
                click.echo(line)
            line = line.strip()
            if not line:
                continue
            if chat.is_command(line):
                from arbormem.errors import ArbormemError

                try:
                    result = chat.command(line)
                except ArbormemError as exc:  # a failing command does not end the chat
                    self.say(f"Error: {exc}", fg="red")
                    continue
                except KeyboardInterrupt:
                    click.echo()
                    continue
                if result.quit:
                    break
                self.say(result.text)
                continue
            self.reply(chat.as_message(line))
        self.leave()

    def reply(self, text: str) -> None:
        """One turn: a spinner until the first words, the reply as it streams, a cost line."""
        from arbormem.errors import ArbormemError

        status = self._spinner("thinking")
        started = False

        def on_delta(delta: str) -> None:
            nonlocal started
            if not started:
                started = True
                if status is not None:
                    status.stop()
                click.echo(click.style("assistant> ", fg="cyan", bold=True), nl=False)
            click.echo(delta, nl=False)
            sys.stdout.flush()

        try:
            turn = self.chat.turn(text, on_delta=on_delta)
        except KeyboardInterrupt:
            if status is not None:
                status.stop()
            click.echo()
            self.say("(reply interrupted; your message is saved)", fg="yellow")
            return
        except ArbormemError as exc:
            if status is not None:
                status.stop()
            if started:
                click.echo()
            self.say(f"Error: {exc}", fg="red")
            return
        if status is not None:
            status.stop()
        if started:
            click.echo()
        if turn.error is not None:
            click.echo(
                click.style(
                    f"Error: no reply ({turn.error}). Your message is saved; go on.", fg="red"
                ),
                err=True,
            )
        from arbormem.chat import describe_saving

        self.say(
            f"  {turn.prompt_tokens:,} tokens sent; the full history would be "
            f"{turn.full_history_tokens:,} "
            f"({describe_saving(turn.prompt_tokens, turn.full_history_tokens)}); "
            f"context {turn.context_ms:.0f} ms",
            dim=True,
        )
        self.wait_for_upkeep()

    def wait_for_upkeep(self) -> None:
        """Let the session's tracked state and summary catch up, showing that it runs."""
        memory = self.chat.memory
        if not any(job.kind == "upkeep" for job in memory.pending()):
            return
        try:
            with self.spinning("updating memory: tracked state and summary"):
                memory.wait()
        except KeyboardInterrupt:
            click.echo()

    def leave(self) -> None:
        from arbormem.chat import describe_saving

        s = self.chat.stats()
        if s["turns"]:
            self.say(
                f"{s['turns']} turn(s): {s['prompt_tokens']:,} tokens sent instead of "
                f"{s['full_history_tokens']:,} with the full history "
                f"({describe_saving(s['prompt_tokens'], s['full_history_tokens'])}).",
                dim=True,
            )
        self.wait_for_upkeep()


@click.command()
@click.option(
    "--mode",
    "-M",
    type=click.Choice(["conversation", "code", "reasoning"]),
    help="Memory mode for the session [default: the session's, else conversation].",
)
@click.option(
    "--session", "-s", help="Session to chat in [default: the current one, else a new one]."
)
@click.option(
    "--budget",
    "-b",
    type=click.IntRange(min=32),
    help="Token budget of each prompt [default: 4000, or ARBORMEM_CONTEXT_BUDGET].",
)
@click.option("--model", "-m", help="Chat model [default: ARBORMEM_LLM_MODEL].")
@click.option(
    "--base-url", help="OpenAI-compatible endpoint [default: OPENAI_BASE_URL, else OpenAI]."
)
@click.pass_obj
@handle_errors
def chat(
    opts: StoreOptions,
    mode: str | None,
    session: str | None,
    budget: int | None,
    model: str | None,
    base_url: str | None,
) -> None:
    """Chat with an LLM that remembers: every turn is stored and recalled later.

    Each prompt carries what arbormem recalls for the turn instead of the whole
    history; the reply streams in, and the exchange is stored. Commands: /help,
    /tree, /search QUERY, /mode MODE, /forget last, /forget ID, /stats, /quit.
    Without a configured model this prints how to configure one.

    \b
    Examples:
      arbormem chat
      arbormem chat --mode code --session refactor
      arbormem --user alice chat --model qwen2.5:7b-instruct --base-url http://localhost:11434/v1
    """
    from arbormem.chat import ChatSession
    from arbormem.config import UNSET
    from arbormem.llm import get_llm, resolve_llm_config

    config = resolve_llm_config(model=model or UNSET, base_url=base_url or UNSET)
    llm = get_llm(config)
    if llm is None:
        # A chat cannot run without a model: scripts must see it failed.
        click.echo(NO_LLM.format(docs=docs_url()), err=True)
        raise SystemExit(1)
    with _open(opts, llm) as mem:
        Terminal(ChatSession(mem, llm, session=session, mode=mode, budget=budget)).run()
