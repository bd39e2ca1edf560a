"""``arbormem records``: the typed records distilled from the conversation.

Each subcommand calls one public method of :class:`~arbormem.Memory`
(``records``, ``search_records``, ``record_history``, ``remember``,
``forget_record``) and prints its result, as JSON with ``--json``.
"""

from __future__ import annotations

from typing import Any

import click

from arbormem.cli.common import StoreOptions, echo_json, handle_errors

KINDS = (
    "fact",
    "preference",
    "event",
    "constraint",
    "procedure",
    "failure_pattern",
    "tool_affordance",
)


def _day(value: Any) -> str:
    return value.date().isoformat() if value is not None else "..."


def _line(record: Any, score: float | None = None) -> str:
    """One record as a terminal line: interval, kind, text, id."""
    held = f"{_day(record.valid_from)} to {_day(record.valid_to) if record.valid_to else 'now'}"
    scored = f"  {score:.2f}" if score is not None else ""
    return f"{record.id}  [{record.kind}] {record.text}  ({held}){scored}"


@click.group()
def records() -> None:
    """Typed records with history (facts, preferences, events...), extracted from
    every message in the background.

    \b
    Examples:
      arbormem records list
      arbormem records search "Which city does Sam live in now?" --json
      arbormem records history rec-0a1b2c...
      arbormem records remember "Sam lives in Lyon." --subject Sam --attribute home --value Lyon
      arbormem records forget rec-0a1b2c... --yes
    """


@records.command("list")
@click.option("--kind", "-k", type=click.Choice(KINDS), help="Only records of this kind.")
@click.option("--subject", help="Only records about this subject.")
@click.option("--attribute", help="Only records stating this attribute (home, employer...).")
@click.option("--all", "every", is_flag=True, help="Every version, closed ones too.")
@click.option("--as-of", help="What held at this time (ISO 8601 or a date).")
@click.option("--limit", "-n", type=click.IntRange(min=1), help="Show at most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of records.")
@click.pass_obj
@handle_errors
def list_records(
    opts: StoreOptions,
    kind: str | None,
    subject: str | None,
    attribute: str | None,
    every: bool,
    as_of: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List the scope's records, newest first: those that hold now by default."""
    with opts.open(existing=True) as mem:
        found = mem.records(
            kind=kind,
            subject=subject,
            attribute=attribute,
            current=not every,
            as_of=as_of,
            limit=limit,
        )
    if as_json:
        echo_json([r.to_dict() for r in found])
        return
    if not found:
        click.echo("No records.", err=True)
    for r in found:
        click.echo(_line(r))


@records.command("search")
@click.argument("query")
@click.option("--k", "-k", "k", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--all", "every", is_flag=True, help="Closed records too.")
@click.option("--as-of", help="What held at this time (ISO 8601 or a date).")
@click.option("--kind", type=click.Choice(KINDS), help="Only records of this kind.")
@click.option("--speaker", help="Who 'I' and 'my' in the query are.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, best first.")
@click.pass_obj
@handle_errors
def search_records(
    opts: StoreOptions,
    query: str,
    k: int,
    every: bool,
    as_of: str | None,
    kind: str | None,
    speaker: str | None,
    as_json: bool,
) -> None:
    """Records for QUERY, best first: those that hold now unless --all."""
    with opts.open(existing=True) as mem:
        hits = mem.search_records(
            query, k=k, current=not every, as_of=as_of, kind=kind, speaker=speaker
        )
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    if not hits:
        click.echo("No records found.", err=True)
    for h in hits:
        click.echo(_line(h.record, h.score))


@records.command("history")
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, oldest first.")
@click.pass_obj
@handle_errors
def history(opts: StoreOptions, record_id: str, as_json: bool) -> None:
    """Every version of what RECORD_ID states, oldest first."""
    with opts.open(existing=True) as mem:
        found = mem.record_history(record_id)
    if as_json:
        echo_json([r.to_dict() for r in found])
        return
    for r in found:
        click.echo(_line(r))


@records.command("remember")
@click.argument("text")
@click.option("--kind", "-k", type=click.Choice(KINDS), default="fact", show_default=True)
@click.option("--subject", help="Who or what it is about.")
@click.option("--attribute", help="What changeable thing it states (home, employer, phone...).")
@click.option("--value", help="The attribute's value.")
@click.option("--negated", is_flag=True, help="It says the value no longer holds.")
@click.option("--when", help="When it became true [default: now].")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_obj
@handle_errors
def remember(
    opts: StoreOptions,
    text: str,
    kind: str,
    subject: str | None,
    attribute: str | None,
    value: str | None,
    negated: bool,
    when: str | None,
    as_json: bool,
) -> None:
    """Store TEXT as a record, with no extraction (it updates the records as an
    extracted one would)."""
    with opts.open() as mem:
        done = mem.remember(
            text,
            kind=kind,
            subject=subject,
            attribute=attribute,
            value=value,
            negated=negated,
            when=when,
        )
    if as_json:
        echo_json(done.to_dict())
        return
    click.echo(f"{done.action}: {_line(done.record) if done.record else text}")
    for closed in done.closed:
        click.echo(f"closed: {closed}")


@records.command("forget")
@click.argument("record_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, max=86400),
    default=2.0,
    show_default=True,
    help="Seconds to wait at most for other processes reading the store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@click.pass_obj
@handle_errors
def forget(opts: StoreOptions, record_id: str, yes: bool, wait: float, as_json: bool) -> None:
    """Delete the record RECORD_ID for good (the messages stay); what it had
    replaced holds again."""
    with opts.open(existing=True) as mem:
        if not yes and not click.confirm(
            f"Forget record {record_id} for good?", default=False, err=True
        ):
            click.echo("Nothing forgotten.", err=True)
            return
        done = mem.forget_record(record_id, wait=wait)
    if as_json:
        echo_json(done.to_dict())
        return
    click.echo(f"Forgot {len(done.records)} record(s).")
    if not done.purged:
        click.echo(
            f"Copies may remain in the store's files ({done.purge_pending}): "
            "'arbormem purge' finishes.",
            err=True,
        )


@records.command("rebuild")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--end", type=click.IntRange(min=0), help="First position not read [default: none].")
@click.option("--json", "as_json", is_flag=True, help="Print the count as JSON.")
@click.pass_obj
@handle_errors
def rebuild(opts: StoreOptions, start: int, end: int | None, as_json: bool) -> None:
    """Extract the records of the messages at positions START to END again (all of
    them by default): records are derived from the messages."""
    with opts.open(existing=True) as mem:
        read = mem.rebuild_records(start=start, end=end)
    if as_json:
        echo_json({"messages_read": read})
        return
    click.echo(f"Read {read} message(s) again.")
