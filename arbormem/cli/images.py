"""``arbormem images``: images as memories (see docs/images.md)."""

from __future__ import annotations

from datetime import datetime

import click

from arbormem.cli.common import StoreOptions, echo_json, handle_errors


def _line(image: object, score: float | None = None) -> str:
    from arbormem.results import ImageMemory

    assert isinstance(image, ImageMemory)
    where = image.file or image.url or "(bytes in the store)"
    head = f"{image.id}  {image.timestamp[:10]}  {image.session}"
    if score is not None:
        head = f"{score:7.3f}  {head}"
    faded = "  [expired]" if image.expired else ""
    return f"{head}{faded}\n    {image.caption}\n    {where}"


@click.group()
def images() -> None:
    """Images as memories: store them, find them by text, let them fade.

    \b
    Examples:
      arbormem images add receipt.png --caption "lunch receipt, 14.20 EUR"
      arbormem images search "receipt" --json
      arbormem images show 01J9Z3...
      arbormem images expire --purge
    """


@images.command("add")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--caption",
    "-c",
    help="What the image shows [default: the vision model's, "
    "else what the file and the conversation say].",
)
@click.option("--session", "-s", help="Session it belongs to [default: by time].")
@click.option("--speaker", help="Who shared it.")
@click.option("--timestamp", "-t", help="When it was shared (ISO 8601) [default: now].")
@click.option("--json", "as_json", is_flag=True, help="Print the stored images as JSON.")
@click.pass_obj
@handle_errors
def add_images(
    opts: StoreOptions,
    paths: tuple[str, ...],
    caption: str | None,
    session: str | None,
    speaker: str | None,
    timestamp: str | None,
    as_json: bool,
) -> None:
    """Store image files (PNG, JPEG, WebP, GIF) as memories of the scope.

    The same file added twice is stored once (reported as a duplicate).

    \b
    Examples:
      arbormem images add screenshot.png
      arbormem images add photo.jpg --caption "Ann's new bike" --session trip
    """
    with opts.open() as mem:
        stored = [
            mem.add_image(
                path, caption=caption, session=session, speaker=speaker, timestamp=timestamp
            )
            for path in paths
        ]
    if as_json:
        echo_json([s.to_dict() for s in stored])
        return
    for path, image in zip(paths, stored):
        note = " (already stored)" if image.duplicate else ""
        click.echo(f"{path}: {image.id}{note}\n    {image.caption}")


@images.command("search")
@click.argument("query")
@click.option("-k", "--limit", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@click.pass_obj
@handle_errors
def search_images(opts: StoreOptions, query: str, k: int, as_json: bool) -> None:
    """Find images by what their captions say (the hybrid recall of turns).

    \b
    Examples:
      arbormem images search "whiteboard plan"
      arbormem images search "receipt" -k 3 --json
    """
    with opts.open(existing=True) as mem:
        hits = mem.search_images(query, k=k)
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    if not hits:
        click.echo("No images found.")
    for hit in hits:
        click.echo(_line(hit.image, hit.score))


@images.command("show")
@click.argument("image_id")
@click.option("--json", "as_json", is_flag=True, help="Print the image memory as JSON.")
@click.pass_obj
@handle_errors
def show_image(opts: StoreOptions, image_id: str, as_json: bool) -> None:
    """Show one image memory: caption, date, session, strength and where its file is.

    \b
    Example:
      arbormem images show 01J9Z3... --json
    """
    with opts.open(existing=True) as mem:
        image = mem.get_image(image_id)
    if as_json:
        echo_json(image.to_dict())
        return
    click.echo(_line(image))
    click.echo(
        f"    {image.mime or 'remote'} {image.width or '?'}x{image.height or '?'}, "
        f"{image.size:,} bytes, strength {image.strength:.2f}, recalled {image.recalls} times"
    )


@images.command("list")
@click.option("--expired/--live", default=None, help="Only soft-expired, or only live, images.")
@click.option("--json", "as_json", is_flag=True, help="Print the images as JSON.")
@click.pass_obj
@handle_errors
def list_images(opts: StoreOptions, expired: bool | None, as_json: bool) -> None:
    """List the scope's images in the order they were stored.

    \b
    Example:
      arbormem images list --expired
    """
    with opts.open(existing=True) as mem:
        found = mem.list_images(expired=expired)
    if as_json:
        echo_json([i.to_dict() for i in found])
        return
    if not found:
        click.echo("No images.")
    for image in found:
        click.echo(_line(image))


@images.command("expire")
@click.option("--purge", is_flag=True, help="Also delete soft-expired images past the maximum age.")
@click.option("--now", help="The moment to judge by (ISO 8601) [default: now].")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_obj
@handle_errors
def expire_images(opts: StoreOptions, purge: bool, now: str | None, as_json: bool) -> None:
    """Soft-expire faded images (out of recall, restorable); with --purge, delete
    the expired ones older than image_max_age_days, files included.

    \b
    Examples:
      arbormem images expire
      arbormem images expire --purge --json
    """
    moment: datetime | str | None = now
    with opts.open(existing=True) as mem:
        done = mem.expire_images(now=moment, purge=purge)
    if as_json:
        echo_json(done.to_dict())
        return
    click.echo(
        f"{len(done.expired)} image(s) expired, {len(done.purged)} purged, {done.live} live."
    )


@images.command("restore")
@click.argument("image_id")
@click.option("--json", "as_json", is_flag=True, help="Print the restored image as JSON.")
@click.pass_obj
@handle_errors
def restore_image(opts: StoreOptions, image_id: str, as_json: bool) -> None:
    """Bring a soft-expired image back into recall.

    \b
    Example:
      arbormem images restore 01J9Z3...
    """
    with opts.open(existing=True) as mem:
        image = mem.restore_image(image_id)
    if as_json:
        echo_json(image.to_dict())
        return
    click.echo(_line(image))


@images.command("forget")
@click.argument("image_id")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@click.pass_obj
@handle_errors
def forget_image(opts: StoreOptions, image_id: str, as_json: bool) -> None:
    """Delete an image for good: its row, its caption and its file.

    \b
    Example:
      arbormem images forget 01J9Z3...
    """
    with opts.open(existing=True) as mem:
        done = mem.forget_image(image_id)
    if as_json:
        echo_json(done.to_dict())
        return
    click.echo("Forgotten." if done.purged else f"Forgotten; purge pending ({done.purge_pending}).")
