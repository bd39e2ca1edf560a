"""``arbormem ui``: the web view of a local store, in the browser."""

from __future__ import annotations

import socket
import sys
import urllib.request

import click

from arbormem.cli.common import StoreOptions, handle_errors
from arbormem.errors import ConfigError
from arbormem.warmup import warm_in_background

#: The only hosts the local view answers for (a page elsewhere that points a name
#: of its own at 127.0.0.1 gets nothing).
LOCAL_HOSTS = ["127.0.0.1", "localhost"]


@click.command()
@click.option(
    "--port", "-p", type=click.IntRange(0, 65535), default=8421, show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)  # fmt: skip
@click.option("--no-browser", is_flag=True, help="Do not open a browser; print the address only.")
@click.option(
    "--no-warm-up", is_flag=True,
    help="Do not load what the first search needs in the background as the server starts.",
)  # fmt: skip
@click.pass_obj
@handle_errors
def ui(opts: StoreOptions, port: int, no_browser: bool, no_warm_up: bool) -> None:
    """Look at the store in a browser: scopes, sessions, topic tree, search, context.

    Serves the store on 127.0.0.1 only, without keys, until Ctrl-C; prints the
    address on the first line. Meanwhile it loads what the first search needs (the
    embedder, the recall caches of the largest scopes) and says on stderr when that
    is done. Needs the web extra: pip install 'arbormem[web]'.

    \b
    Examples:
      arbormem ui
      arbormem ui --db ~/notes/memory.db --port 0 --no-browser
    """
    try:
        import uvicorn

        from arbormem.web import create_app
    except ImportError as exc:
        raise ConfigError(
            f"the web view needs its extra ({exc.name} is missing): pip install 'arbormem[web]'"
        ) from None

    with opts.open(existing=True) as mem:
        app = create_app(mem, allowed_hosts=LOCAL_HOSTS)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)  # connections wait in the backlog until the server is up
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): "
                "pick another with --port, or --port 0 for any free one"
            ) from None
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        app.state.prepared.join(30)  # templates compiled before the browser asks for one
        click.echo(f"arbormem ui: {url} (Ctrl-C to stop)", nl=True)
        sys.stdout.flush()
        if not no_warm_up:
            # Its own first page too, as the browser will ask for it: the first request
            # of a process sets up the server's event loop machinery and worker threads
            # (a few hundred ms on a loaded machine), whoever sends it.
            warm_in_background(
                mem,
                lambda s: click.echo(f"arbormem ui: warmed up in {1000 * s:.0f} ms", err=True),
                first=lambda: urllib.request.urlopen(url, timeout=60).read(),
            )
        if not no_browser:
            import webbrowser

            webbrowser.open(url)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        server.run(sockets=[sock])
