"""The ``arbormem`` command: the Python API with a terminal skin.

The store is ``--db``, else ``ARBORMEM_DB``, else the config file's ``db``,
else a per-user default path; the scope is ``--user`` and ``--agent``
(``ARBORMEM_USER`` / ``ARBORMEM_AGENT``), ``default``/``default`` when none is
given. These global options go before or after the command name. Commands
that return data take ``--json``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from arbormem.cli.common import (
    StoreOptions,
    echo_json,
    echo_jsonl,
    handle_errors,
    progress_bar,
    status,
)
from arbormem.cli.group import StoreGroup
from arbormem.cli.scopes import hint_if_empty
from arbormem.errors import ArbormemError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=StoreGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--db",
    envvar="ARBORMEM_DB",
    help="Store file, or a postgresql:// URL (default: a file in the per-user data folder).",
)
@click.option(
    "--user", "-u", envvar="ARBORMEM_USER", help="User id of the scope [default: default]."
)
@click.option(
    "--agent", "-a", envvar="ARBORMEM_AGENT", help="Agent id of the scope [default: default]."
)
@click.option(
    "--embedder",
    envvar="ARBORMEM_EMBEDDER",
    help="wordllama (default), minilm, st:NAME_OR_PATH, openai:MODEL or hash.",
)
@click.option(
    "--deep-embedder",
    envvar="ARBORMEM_DEEP_EMBEDDER",
    help="Background embedder recall reads once it has indexed the store: auto "
    "(default: bge-small when installed), none or an embedder spec.",
)
@click.option(
    "--reranker",
    envvar="ARBORMEM_RERANKER",
    help="Reorder each search's best turns: none (default), cross-encoder or onnx:FOLDER.",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Open the store for reading only (a store that cannot be written opens so anyway).",
)
@click.version_option(package_name="arbormem")
@click.pass_context
def cli(
    ctx: click.Context,
    db: str | None,
    user: str | None,
    agent: str | None,
    embedder: str | None,
    deep_embedder: str | None,
    reranker: str | None,
    read_only: bool,
) -> None:
    """Long-term memory for LLM agents: store conversations, recall what matters.

    The options below go before or after the command: 'arbormem --user alice
    sessions' and 'arbormem sessions --user alice' are the same.

    \b
    Examples:
      arbormem example && arbormem ingest conversation.json
      arbormem add "Sarah is allergic to peanuts." --speaker Tom
      arbormem search "what is Sarah allergic to?"
      arbormem --user alice sessions
      arbormem search "tea" --user alice --agent support
      arbormem bench locomo locomo10.json
    """
    ctx.obj = StoreOptions(
        db,
        user,
        agent,
        embedder,
        read_only=read_only,
        reranker=reranker,
        deep_embedder=deep_embedder,
    )


def main() -> None:
    """Entry point of the ``arbormem`` console script."""
    # Stored content is any Unicode; a terminal that cannot show a character gets a
    # replacement for it, not a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    cli(prog_name="arbormem")


# -- ingest --------------------------------------------------------------------------


def _named(value: str | None, option: str) -> str | None:
    """An option naming something (a session): blank is a usage error, not the file's."""
    if value is not None and not value.strip():
        raise click.BadParameter("must not be blank", param_hint=option)
    return value


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--session",
    "-s",
    callback=lambda ctx, param, value: _named(value, "--session"),
    help="Session for messages that do not name one [default: by the idle gap; a file "
    "without timestamps gets a new one].",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.pass_obj
@handle_errors
def ingest(opts: StoreOptions, files: tuple[str, ...], session: str | None, as_json: bool) -> None:
    """Add what is new in conversation files: JSON, JSONL, OpenAI chat or LoCoMo
    (a FILES of - is standard input).

    Messages already stored are skipped, so a file can be ingested again, or a
    log that has grown: by id, else by time, role, speaker and content (and
    session, when they name one). A file without timestamps becomes a session
    of its own; name one with --session to add to it later.

    Every file is checked completely, then all of them are stored in one
    transaction: a bad record in any file stores nothing from any file. Then
    the search indexes the first search would build are built and saved
    (minutes for a million turns; see Memory.prepare_search).

    \b
    Examples:
      arbormem ingest chat.json
      arbormem ingest --session standup notes.jsonl
      arbormem --user bob ingest conv-26.json
      tail -n 50 chat.jsonl | arbormem ingest -
    """
    from arbormem.cli.common import read_conversations

    parsed = read_conversations(files)
    records = [r for conv in parsed for r in conv.records]
    label = parsed[0].path.name if len(parsed) == 1 else f"{len(parsed)} files"
    # One call: a record that fails a check (or clashes with the store) in the last
    # file must not leave the earlier files stored.
    with opts.removed_if_failed(), opts.open() as mem:
        with progress_bar(len(records), f"ingesting {label}") as advance:
            result = mem.ingest(records, session=session, progress=advance)
        stored = result.added
        # What the first search would build on the spot (minutes for a big import).
        # The messages are stored by now: a failure here only costs the first search.
        prepared = None
        with status("preparing the search indexes"):
            try:
                prepared = mem.prepare_search()
            except ArbormemError as exc:
                click.echo(f"warning: search indexes not prepared: {exc}", err=True)
            except KeyboardInterrupt:
                # Not a failed ingest: "Aborted!" here made people run it again, and
                # every message was stored twice.
                click.echo(
                    f"interrupted: the {len(stored):,} messages are stored; the search "
                    "indexes were not prepared, so the first search builds them",
                    err=True,
                )
        if prepared is not None and not prepared.saved:
            click.echo(
                "warning: the vector index could not be saved beside the database "
                "(see the log); the next process to search builds it again",
                err=True,
            )
    summary = []
    skipped = set(result.skipped)
    start = 0
    for conv in parsed:
        span = range(start, start + len(conv.records))
        start = span.stop
        mine = [result.messages[i] for i in span if i not in skipped]
        summary.append(
            {
                "file": str(conv.path),
                "format": conv.format,
                "messages": len(mine),
                "sessions": len({m.session for m in mine}),
                "skipped": sum(i in skipped for i in span),
            }
        )
        undated = all(r.timestamp is None and r.session is None for r in conv.records)
        if mine and undated and session is None:
            names = list(dict.fromkeys(m.session for m in mine))
            click.echo(
                f"note: {conv.path} has no timestamps: its messages are dated now, in a "
                f"session of their own ({', '.join(names)}). To add to that session later "
                f"without duplicates: arbormem ingest --session {names[0]} FILE",
                err=True,
            )
    if as_json:
        echo_json({"files": summary, "search_index": prepared})
    else:
        for s in summary:
            line = (
                f"{s['file']}: {s['messages']} messages in {s['sessions']} session(s) "
                f"({s['format']})"
            )
            if s["skipped"]:
                line += f", {s['skipped']} already stored (skipped)"
            click.echo(line)


@cli.command()
@click.argument("text")
@click.option(
    "--role",
    "-r",
    default="user",
    show_default=True,
    help="user, assistant, system or tool (human, ai... are read as those).",
)
@click.option("--speaker", help="Who said it, when the role is not enough (a group chat).")
@click.option(
    "--session",
    "-s",
    callback=lambda ctx, param, value: _named(value, "--session"),
    help="Session to add it to [default: the current one, or a new one after an idle gap].",
)
@click.option(
    "--timestamp",
    "-t",
    help="When it was said: ISO 8601, Unix seconds, '1:56 pm on 8 May, 2023' [default: now].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the stored message as JSON.")
@click.pass_obj
@handle_errors
def add(
    opts: StoreOptions,
    text: str,
    role: str,
    speaker: str | None,
    session: str | None,
    timestamp: str | None,
    as_json: bool,
) -> None:
    """Store one message: TEXT, or - to read it from standard input.

    \b
    Examples:
      arbormem add "Leo is allergic to peanuts." --speaker Maya
      arbormem add "Noted: a nut-free menu." --role assistant
      arbormem add "Deployed 2.4 to production." -s deploys -t 2026-03-02T18:05:00Z --json
      git log -1 --format=%B | arbormem add - --session commits
    """
    if text == "-":
        from arbormem.cli.common import STDIN
        from arbormem.ingest.formats import decode_text

        # Without the newline echo or a here-string ends it with: it is the shell's.
        text = decode_text(sys.stdin.buffer.read(), STDIN).rstrip("\r\n")
    with opts.removed_if_failed(), opts.open() as mem:
        message = mem.add(text, role=role, speaker=speaker, session=session, timestamp=timestamp)
    if as_json:
        echo_json(message.to_dict())
    else:
        click.echo(f"Stored {message.id} in {message.session} (#{message.index}).")


# -- search ------------------------------------------------------------------------------


@cli.command()
@click.argument("query")
@click.option("-k", "--limit", "k", default=10, show_default=True, help="How many hits.")
@click.option("--session", "-s", multiple=True, help="Only these sessions (repeatable).")
@click.option("--since", help="Only messages at or after this time (ISO 8601).")
@click.option("--until", help="Only messages before this time (ISO 8601).")
@click.option("--role", multiple=True, help="Only these roles (repeatable).")
@click.option(
    "--neighbors",
    "-n",
    default=0,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Attach this many turns before and after each hit (at most 100).",
)
@click.option("--all-agents", is_flag=True, help="Search every agent of the user.")
@click.option(
    "--records",
    "with_records",
    is_flag=True,
    help="Also show the current typed records for QUERY (the turns are ranked as without).",
)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@click.pass_obj
@handle_errors
def search(
    opts: StoreOptions,
    query: str,
    k: int,
    session: tuple[str, ...],
    since: str | None,
    until: str | None,
    role: tuple[str, ...],
    neighbors: int,
    all_agents: bool,
    with_records: bool,
    as_json: bool,
) -> None:
    """Recall the messages that best answer QUERY.

    Messages archived by 'reorganize --prune-trivial' are never hits; a note
    on stderr names those that hold the query's words. With --records, up to
    the same number of current typed records follow the turns, each with the
    ids of the messages it was read from; --json then prints one object,
    {"hits": [...], "records": [...], "archived": [...], "archived_count": N},
    instead of the list of hits.

    \b
    Examples:
      arbormem search "when is the party?"
      arbormem search "peanut allergy" -k 3 --neighbors 1 --json
      arbormem search "deploy" --since 2026-01-01 --role assistant
      arbormem search "where does Sam live" --records --json
    """
    with opts.open(existing=True) as mem:
        hits = mem.search(
            query,
            k=k,
            session=list(session) or None,
            since=since,
            until=until,
            role=list(role) or None,
            neighbors=neighbors,
            all_agents=all_agents,
            records=with_records,
        )
        if not hits and not hits.records:
            hint_if_empty(mem, all_agents=all_agents)
    if hits.archived_count:
        # On stderr: stdout may be --json for a program, and stays a list of hits.
        shown = ", ".join(hits.archived) + (
            f" and {hits.archived_count - len(hits.archived)} more"
            if hits.archived_count > len(hits.archived)
            else ""
        )
        click.echo(
            f"note: {hits.archived_count} archived message(s) also hold these words and are "
            f"left out of search: {shown} ('arbormem show ID' reads one; "
            "'arbormem reorganize --undo LOG_ID' brings a run's back)",
            err=True,
        )
    if as_json:
        echo_json(hits.to_dict() if with_records else [h.to_dict() for h in hits])
        return
    if not hits and not hits.records:
        click.echo("No matches.")
        return
    from arbormem.timeutil import display

    for rank, hit in enumerate(hits, 1):
        m = hit.message
        who = m.speaker or m.role
        click.echo(
            f"{rank:>2}. [{display(m.timestamp, seconds=False)}] {m.session} #{m.index} "
            f"score {hit.score:.3f}"
        )
        for n in hit.neighbors:
            if n.index < m.index:
                click.echo(f"      {n.speaker or n.role}: {n.content}")
        click.echo(f"    > {who}: {m.content}")
        for n in hit.neighbors:
            if n.index > m.index:
                click.echo(f"      {n.speaker or n.role}: {n.content}")
    if with_records:
        click.echo("Records:" if hits.records else "Records: none.")
        for rank, found in enumerate(hits.records, 1):
            r = found.record
            cited = ", ".join(found.message_ids) or "stated with remember"
            click.echo(f"{rank:>2}. [{r.kind}] {r.text} score {found.score:.3f}")
            click.echo(f"    from: {cited}")


# -- sessions and show ---------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print sessions as JSON.")
@click.pass_obj
@handle_errors
def sessions(opts: StoreOptions, as_json: bool) -> None:
    """List the sessions of the scope.

    \b
    Examples:
      arbormem sessions
      arbormem --user alice --agent support sessions --json
    """
    with opts.open(existing=True) as mem:
        found = mem.sessions()
        if not found:
            hint_if_empty(mem)
    if as_json:
        echo_json([s.to_dict() for s in found])
        return
    if not found:
        click.echo("No sessions.")
        return
    from arbormem.timeutil import display

    for s in found:
        click.echo(
            f"{s.id}\t{s.message_count} messages\t{display(s.started_at, seconds=False)}"
            f" .. {display(s.last_at, seconds=False)}"
        )


@cli.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON (one object per line).")
@click.pass_obj
@handle_errors
def show(opts: StoreOptions, target: str, as_json: bool) -> None:
    """Show a session's messages, or one message, by id.

    \b
    Examples:
      arbormem show session-3
      arbormem show 01J2Z8Q4... --json
    """
    from arbormem.errors import NotFound
    from arbormem.timeutil import display

    with opts.open(existing=True) as mem:
        messages = mem.messages(session=target)
        if not messages:
            try:
                messages = [mem.get(target)]
            except NotFound:
                hint_if_empty(mem)
                raise NotFound(
                    f"no session or message {target!r} in scope {mem.scope}"
                    " (list sessions with 'arbormem sessions')"
                ) from None
    for m in messages:
        if as_json:
            echo_jsonl(m.to_dict())
        else:
            click.echo(f"#{m.index} [{display(m.timestamp)}] {m.speaker or m.role}: {m.content}")


# -- forget -------------------------------------------------------------------------------


@cli.command()
@click.argument("message_id", required=False)
@click.option("--session", "-s", help="Forget this whole session.")
@click.option(
    "--thread", "whole_thread", is_flag=True, help="Forget everything of this user with this agent."
)
@click.option(
    "--everything-of-user",
    "whole_user",
    is_flag=True,
    help="Forget everything of this user, across agents.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, max=86400),
    default=2.0,
    show_default=True,
    help="Seconds to wait at most for other processes reading the store, whose snapshots "
    "keep old copies of the text in its files.",
)
@click.option("--json", "as_json", is_flag=True, help="Print counts as JSON.")
@click.pass_obj
@handle_errors
def forget(
    opts: StoreOptions,
    message_id: str | None,
    session: str | None,
    whole_thread: bool,
    whole_user: bool,
    yes: bool,
    wait: float,
    as_json: bool,
) -> None:
    """Delete a message, a session, a thread or a user, with all derived data.

    \b
    Examples:
      arbormem forget 01J2Z8Q4...
      arbormem forget --session session-2 --yes
      arbormem --user alice forget --everything-of-user --yes
    """
    from arbormem.errors import NotFound

    chosen = sum([message_id is not None, session is not None, whole_thread, whole_user])
    if chosen != 1:
        raise click.UsageError(
            "give exactly one of MESSAGE_ID, --session, --thread, --everything-of-user"
        )
    with opts.open(existing=True) as mem:
        what = (
            f"message {message_id}"
            if message_id
            else f"session {session}"
            if session
            else f"thread {mem.scope}"
            if whole_thread
            else f"user {mem.scope.user}"
        )
        # The question and its answer go to stderr: stdout may be --json for a program.
        if not yes and not click.confirm(f"Forget {what} for good?", default=False, err=True):
            click.echo("Nothing forgotten.", err=True)
            return
        try:
            if whole_user:
                counts = mem.forget(user=mem.scope.user, wait=wait)
            elif whole_thread:
                counts = mem.forget(user=mem.scope.user, agent=mem.scope.agent, wait=wait)
            else:
                counts = mem.forget(message_id, session=session, wait=wait)
        except NotFound:
            hint_if_empty(mem, all_agents=whole_user)
            raise
    if as_json:
        echo_json(counts)
    else:
        click.echo(
            f"Forgot {counts.messages} message(s), {counts.sessions} session(s), "
            f"{counts.threads} thread(s)."
        )
    _say_pending(counts.purge_pending)


def _say_pending(pending: str | None) -> None:
    """Say on stderr what keeps forgotten text in the files, and what to run."""
    if pending == "readers":
        click.echo(
            "Deleted, but old copies of the text stay in the store's files while another "
            "process reads an older snapshot of it: run 'arbormem purge' once it is done.",
            err=True,
        )
    elif pending == "rewrite":
        click.echo(
            "Deleted, but fragments of the text may stay in unused space of the store file "
            "until it is rewritten (it is over 64 MiB, so forget does not): run 'arbormem purge'.",
            err=True,
        )


@cli.command()
@click.option(
    "--wait",
    type=click.FloatRange(min=0, max=86400),
    default=30.0,
    show_default=True,
    help="Seconds to wait at most for other processes reading an older snapshot.",
)
@click.option(
    "--no-rewrite", is_flag=True, help="Do not rewrite the file (it takes a while when large)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@handle_errors
def purge(opts: StoreOptions, wait: float, no_rewrite: bool, as_json: bool) -> None:
    """Finish taking forgotten text out of the store's files.

    Merges the indexes of a forget a crash cut short, rewrites the file if rows were
    deleted since it last was, and empties the write-ahead log.

    \b
    Examples:
      arbormem purge
      arbormem purge --wait 300 --json
    """
    with opts.open(existing=True) as mem:
        result = mem.purge(wait=wait, rewrite=not no_rewrite)
    if as_json:
        echo_json(result)
    elif result.purged:
        click.echo("Purged: no copy of forgotten text is left in the store's files.")
    _say_pending(result.purge_pending)


# -- export, import, reembed ----------------------------------------------------------------


@cli.command("export")
@click.argument("dest", required=False, default="-")
@click.option("--everything", is_flag=True, help="Every user and agent in the store.")
@click.option("--all-agents", is_flag=True, help="Every agent of the user.")
@click.pass_obj
@handle_errors
def export_cmd(opts: StoreOptions, dest: str, everything: bool, all_agents: bool) -> None:
    """Write the scope (or the whole store) as JSON to DEST, or stdout.

    \b
    Examples:
      arbormem export backup.json
      arbormem export --everything > all.json
    """
    with opts.open(existing=True) as mem:
        user = mem.scope.user
        kwargs: dict[str, Any] = {"everything": everything}
        if all_agents:
            kwargs["user"] = user
        exported = mem.export(None if dest == "-" else dest, **kwargs)
        if not exported.threads:
            hint_if_empty(mem, all_agents=all_agents)
        if dest == "-":
            echo_json(exported.document)
        else:
            click.echo(
                f"Exported {exported.messages} messages in {exported.threads} thread(s) to {dest}",
                err=True,
            )


@cli.command("import")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print counts as JSON.")
@click.pass_obj
@handle_errors
def import_cmd(opts: StoreOptions, source: str, as_json: bool) -> None:
    """Restore an export (SOURCE, or - for standard input). All or nothing;
    already-present identical messages are skipped.

    \b
    Examples:
      arbormem --db new.db import backup.json
      arbormem --db old.db export - | arbormem --db new.db import -
    """
    from arbormem.errors import InputError
    from arbormem.ingest.formats import parse_json

    data: Any = source
    if source == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8-sig")  # as a file is read
        except UnicodeDecodeError as exc:
            raise InputError(f"is not UTF-8 text ({exc.reason})", source="<stdin>") from None
        data = parse_json(text, "<stdin>")
    with opts.removed_if_failed(), opts.open() as mem:
        counts = mem.import_(data)
    if as_json:
        echo_json(counts)
    else:
        click.echo(
            f"Imported {counts.messages} message(s) into {counts.threads} thread(s)"
            f" ({counts.skipped} already present)"
            + (f", and {counts.images} image(s)." if counts.images else ".")
        )
        if counts.not_archived:
            click.echo(
                f"{counts.not_archived} message(s) marked archived could not be archived"
                " again and are back in recall.",
                err=True,
            )


@cli.command()
@click.option(
    "--keep-other-models",
    is_flag=True,
    help="Keep vectors of other embedding models instead of deleting them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print counts as JSON.")
@click.pass_obj
@handle_errors
def reembed(opts: StoreOptions, keep_other_models: bool, as_json: bool) -> None:
    """Embed every message with the current embedder (after changing it).

    \b
    Examples:
      arbormem --embedder minilm reembed
      arbormem reembed --keep-other-models
    """
    with opts.open(existing=True) as mem, progress_bar(None, "embedding") as advance:
        counts = mem.reembed(prune=not keep_other_models, progress=advance)
    if as_json:
        echo_json(counts)
    else:
        click.echo(
            f"Embedded {counts.embedded} message(s); "
            f"deleted {counts.pruned} vector(s) of other models."
        )


@cli.command("migrate")
@click.argument("source")
@click.argument("destination")
@click.option(
    "--batch",
    default=2000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Messages per transaction.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was copied and checked as JSON.")
@handle_errors
def migrate_store(source: str, destination: str, batch: int, as_json: bool) -> None:
    """Copy a store to another: a file or a postgresql:// URL, either way.

    Every thread's messages (positions, sessions, times, metadata, vectors), topic
    tree, archived messages and session states are copied; the copy resumes where
    an interrupted one stopped, and is verified at the end (counts, and a SHA-256
    of each store's export). Exit code 1 when it does not verify.

    \b
    Examples:
      arbormem migrate ~/memory.db postgresql://me@db.internal/arbormem
      arbormem migrate postgresql://me@db.internal/arbormem backup.db --json
    """
    from arbormem.errors import StoreError
    from arbormem.store import open_store
    from arbormem.store.migrate import migrate, total_messages

    if _same_store(source, destination):
        raise StoreError(f"{destination} is the source itself: copy to another store")
    src = open_store(source, read_only=True)
    try:
        dst = open_store(destination)
        try:
            with status("counting"):
                total = total_messages(src)
            with progress_bar(total, "copying messages") as advance:
                done = migrate(src, dst, batch=batch, progress=advance)
        finally:
            dst.close()
    finally:
        src.close()
    if as_json:
        echo_json(done.to_dict())
    else:
        click.echo(
            f"Copied {done.copied} message(s) of {done.threads} thread(s)"
            + (f" ({done.already} were there already)" if done.already else "")
            + f"; {done.trees} tree(s) and their states"
            + (f"; {done.images} image(s) with their bytes." if done.images else ".")
        )
        click.echo(
            f"Verified: {done.destination.messages} messages, {done.destination.nodes} tree"
            f" nodes, export SHA-256 {done.destination_sha256[:16]}..."
            if done.verified
            else "NOT verified: the copy differs from the source (see --json)"
        )
    if not done.verified:
        sys.exit(1)


def _same_store(a: str, b: str) -> bool:
    """Whether two store names name one store (the same file, or the same URL)."""
    from pathlib import Path

    if "://" in a or "://" in b:
        return a.strip() == b.strip()
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def stats(opts: StoreOptions, as_json: bool) -> None:
    """Counts for the scope and the embedding models stored.

    \b
    Example:
      arbormem stats --json
    """
    with opts.open(existing=True) as mem:
        found = mem.stats()
        info = {**found.to_dict(), "db": str(mem.path)}
        if not found.messages:
            hint_if_empty(mem)
    if as_json:
        echo_json(info)
    else:
        for key, value in info.items():
            click.echo(f"{key}: {value}")


from arbormem.cli.bench import bench  # noqa: E402  (registered below)
from arbormem.cli.chat import chat  # noqa: E402
from arbormem.cli.context import context  # noqa: E402
from arbormem.cli.example import example  # noqa: E402
from arbormem.cli.images import images  # noqa: E402
from arbormem.cli.integrations import integrations  # noqa: E402
from arbormem.cli.records import records  # noqa: E402
from arbormem.cli.serve import keys, mcp_cmd, serve  # noqa: E402
from arbormem.cli.tree import reorganize, tree  # noqa: E402
from arbormem.cli.ui import ui  # noqa: E402

cli.add_command(bench)
cli.add_command(chat)
cli.add_command(context)
cli.add_command(example)
cli.add_command(integrations)
cli.add_command(records)
cli.add_command(images)
cli.add_command(tree)
cli.add_command(reorganize)
cli.add_command(ui)
cli.add_command(serve)
cli.add_command(mcp_cmd)
cli.add_command(keys)

if __name__ == "__main__":  # pragma: no cover
    main()
