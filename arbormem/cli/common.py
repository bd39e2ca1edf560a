"""What every CLI command shares: opening the store, printing, errors, progress."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from arbormem.errors import ArbormemError
from arbormem.store.sqlite import files as store_files

F = TypeVar("F", bound=Callable[..., Any])


class StoreOptions:
    """Global options (``--db``, ``--user``...), given before or after the command."""

    def __init__(
        self,
        db: str | None,
        user: str | None,
        agent: str | None,
        embedder: str | None,
        *,
        read_only: bool = False,
        reranker: str | None = None,
        deep_embedder: str | None = None,
    ):
        self.db = db
        self.user = user
        self.agent = agent
        self.embedder = embedder
        #: ``--reranker``: a spec, else None (the configured one, else none).
        self.reranker = reranker
        #: ``--deep-embedder``: a spec, else None (the configured one).
        self.deep_embedder = deep_embedder
        #: ``--read-only``: True, else None (read-only only when it cannot be written).
        self.read_only: bool | None = True if read_only else None

    def given_after_command(self, name: str, value: Any) -> None:
        """A global option given after the command name (see :mod:`arbormem.cli.group`)."""
        if name == "read_only":
            self.read_only = True if value else None
        elif name in ("db", "user", "agent", "embedder", "reranker", "deep_embedder"):
            setattr(self, name, value)
        else:  # a new global option must be taught here
            raise AssertionError(f"unknown global option {name!r}")

    def open(self, *, existing: bool = False) -> Any:
        """The store; with ``existing`` (commands that only read) an error when there
        is none yet, instead of creating an empty one (and its folders) at a mistyped
        ``--db``."""
        from arbormem.config import UNSET
        from arbormem.errors import StoreError
        from arbormem.settings import resolve_store

        db = resolve_store(self.db if self.db is not None else UNSET)
        if _server_url(db):
            if existing:
                from arbormem.store.postgres.admin import store_exists
                from arbormem.store.postgres.connection import redact

                if not store_exists(db):
                    raise StoreError(
                        f"no store at {redact(db)}: nothing has been stored there yet"
                        " ('arbormem ingest' or 'import' creates it; check --db or ARBORMEM_DB)"
                    )
            return self._memory()
        path = Path(db).expanduser()
        if db != ":memory:" and path.is_dir():
            raise StoreError(
                f"{db} is a folder: --db (or ARBORMEM_DB) names the store's file, "
                f"for example {Path(db) / 'memory.db'}"
            )
        if existing and db != ":memory:":
            if not path.exists():
                raise StoreError(
                    f"no store at {db}: nothing has been stored there yet "
                    "('arbormem ingest' or 'import' creates it; check --db or ARBORMEM_DB)"
                )
            if _empty_file(path):
                # SQLite takes an empty file for an empty database: opened to be read,
                # it silently became an empty store (often a mistyped --db, or a file
                # made by `touch` or a failed copy).
                raise StoreError(
                    f"{db} is an empty file (0 bytes), not an arbormem store "
                    "('arbormem ingest' or 'import' makes a store of it; check --db or "
                    "ARBORMEM_DB)"
                )
        return self._memory()

    def _memory(self) -> Any:
        from arbormem.config import UNSET
        from arbormem.memory import Memory

        return Memory(
            self.db if self.db is not None else UNSET,
            user=self.user if self.user is not None else UNSET,
            agent=self.agent if self.agent is not None else UNSET,
            embedder=self.embedder if self.embedder is not None else UNSET,
            read_only=self.read_only,
            reranker=self.reranker if self.reranker is not None else UNSET,
            deep_embedder=self.deep_embedder if self.deep_embedder is not None else UNSET,
        )

    @contextmanager
    def removed_if_failed(self) -> Iterator[None]:
        """Around a command that may create the store (ingest, import): if it fails and
        the store it created holds no message, the store's files and the folders made
        for it go again. A failed ingest at a mistyped --db left an empty store there,
        and later read commands on that path found it instead of saying "no store"."""
        from arbormem.config import UNSET
        from arbormem.settings import resolve_store

        db = resolve_store(self.db if self.db is not None else UNSET)
        path = Path(db).expanduser()
        # lexists: a link to a store not made yet is the user's, and so is its target.
        # (A database server's store is left as it is: its tables are not a stray file.)
        if db == ":memory:" or _server_url(db) or os.path.lexists(path):
            yield
            return
        made = [p for p in path.parents if not p.exists()]  # nearest first
        try:
            yield
        except BaseException:
            if path.exists() and store_files.holds_no_message(path):
                store_files.remove_store(path)
                for folder in made:
                    try:
                        folder.rmdir()
                    except OSError:  # not empty: something else is in it now
                        break
            raise


def _server_url(db: str) -> bool:
    """Whether ``--db`` names a database server's store (``postgresql://...``)."""
    return "://" in db and db.split("://", 1)[0].lower() in ("postgresql", "postgres")


def _empty_file(path: Path) -> bool:
    """A 0-byte file with no write-ahead log holding pages for it."""
    try:
        if not path.is_file() or path.stat().st_size:
            return False
        return not store_files.log_holds_pages(path)
    except OSError:  # unreadable: opening it says why
        return False


#: The name standard input goes by in messages and summaries.
STDIN = "<stdin>"


def read_conversations(files: Sequence[str]) -> list[Any]:
    """The :class:`~arbormem.ingest.formats.ConversationFile` of each file, ``-`` being
    standard input (told JSON or JSON Lines from its text)."""
    from arbormem.ingest.formats import decode_text, read_conversation_file, read_conversation_text

    if list(files).count("-") > 1:
        raise click.UsageError("'-' (standard input) can be read once")
    return [
        read_conversation_text(
            decode_text(sys.stdin.buffer.read(), STDIN), STDIN, stem="stdin", jsonl=None
        )
        if f == "-"
        else read_conversation_file(f)
        for f in files
    ]


def handle_errors(fn: F) -> F:
    """Turn library errors into one clean line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ArbormemError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _jsonable(value: Any) -> Any:
    """A result of the library as JSON: its ``to_dict()``, else its text."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else str(value)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=_jsonable))


def echo_jsonl(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


@contextmanager
def status(label: str) -> Iterator[None]:
    """A spinner with a label on a terminal, for work with no count to show."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(label):
        yield


@contextmanager
def progress_bar(total: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on a terminal; silent when stderr is not one."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
