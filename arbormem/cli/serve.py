"""``arbormem serve``, ``arbormem mcp`` and ``arbormem keys``: memory as a service.

They need the ``server`` extra (``pip install 'arbormem[server]'``).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from arbormem.cli.common import StoreOptions, echo_json, handle_errors
from arbormem.warmup import warm_in_background

MISSING_EXTRA = "the server needs its extra: pip install 'arbormem[server]'"


def _need_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise click.ClickException(MISSING_EXTRA) from None


def _keys_path(opts: StoreOptions, keys: str | None) -> Path:
    from arbormem.config import UNSET
    from arbormem.server.keys import default_keys_path
    from arbormem.settings import resolve_store

    if keys:
        return Path(keys).expanduser()
    return default_keys_path(resolve_store(opts.db if opts.db is not None else UNSET))


KEYS_OPTION = click.option(
    "--keys",
    envvar="ARBORMEM_KEYS",
    type=click.Path(dir_okay=False),
    help="API key file [default: the store's path + .keys.json].",
)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8420, show_default=True, type=click.IntRange(0, 65535), help="0: any free."
)
@KEYS_OPTION
@click.option(
    "--no-auth",
    is_flag=True,
    help="Accept requests without a key (one tenant); refused off loopback.",
)
@click.option(
    "--allow-origin",
    "origins",
    multiple=True,
    help="A browser origin allowed to call (repeatable); loopback origins always are.",
)
@click.option("--jwt-issuer", envvar="ARBORMEM_JWT_ISSUER", help="Accept JWTs from this issuer.")
@click.option(
    "--jwt-audience", envvar="ARBORMEM_JWT_AUDIENCE", default="arbormem", show_default=True
)
@click.option(
    "--jwt-key",
    envvar="ARBORMEM_JWT_KEY",
    help="The issuer's JWKS URL, PEM public key file (RS256...) or HMAC secret (HS256).",
)
@click.option(
    "--jwt-algorithm", "jwt_algorithms", multiple=True, help="Allowed algorithm [default: RS256]."
)
@click.option("--jwt-tenant-claim", default="tenant", show_default=True, help="The tenant's claim.")
@click.option(
    "--llm-base-url",
    envvar="ARBORMEM_PROXY_BASE_URL",
    help="Turn on POST /v1/chat/completions, forwarding to this OpenAI-compatible endpoint.",
)
@click.option("--llm-api-key", envvar="ARBORMEM_PROXY_API_KEY", default="none", help="Its key.")
@click.option("--llm-model", envvar="ARBORMEM_PROXY_MODEL", help="Model for requests naming none.")
@click.option(
    "--llm-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="Seconds.",
)
@click.option("--no-mcp", is_flag=True, help="Do not serve MCP at /mcp.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Processes serving requests (one per core; MCP is then stateless).",
)
@click.pass_obj
@handle_errors
def serve(
    opts: StoreOptions,
    host: str,
    port: int,
    keys: str | None,
    no_auth: bool,
    origins: tuple[str, ...],
    jwt_issuer: str | None,
    jwt_audience: str,
    jwt_key: str | None,
    jwt_algorithms: tuple[str, ...],
    jwt_tenant_claim: str,
    llm_base_url: str | None,
    llm_api_key: str,
    llm_model: str | None,
    llm_timeout: float,
    no_mcp: bool,
    workers: int,
) -> None:
    """Serve the store over HTTP: REST under /v1 (OpenAPI at /docs), MCP at /mcp.

    Requests carry 'Authorization: Bearer KEY' (see 'arbormem keys create') and
    act in the key's tenant only. Prints the URL it listens on, then serves until
    interrupted.

    \b
    Examples:
      arbormem keys create --tenant acme
      arbormem serve --port 8420
      arbormem serve --no-auth                       # this machine only
      arbormem serve --llm-base-url http://127.0.0.1:11434/v1   # + the memory proxy
    """
    _need_extra()
    import uvicorn

    from arbormem.server.auth import is_loopback
    from arbormem.server.keys import KeyRing
    from arbormem.server.worker import SPEC_VARIABLE, ServeSpec, serving_gc

    loopback = is_loopback(host)
    if no_auth and not loopback:
        raise click.UsageError(
            f"--no-auth on {host} would let anyone on the network read and erase memory: "
            "listen on 127.0.0.1, or use keys"
        )
    if jwt_issuer and not jwt_key:
        raise click.UsageError("--jwt-issuer needs --jwt-key (the issuer's public key or secret)")
    ring = None if no_auth else KeyRing(_keys_path(opts, keys))
    spec = ServeSpec(
        db=opts.db,
        user=opts.user,
        agent=opts.agent,
        embedder=opts.embedder,
        reranker=opts.reranker,
        read_only=opts.read_only,
        keys=None if ring is None else str(ring.path),
        auth=not no_auth,
        origins=list(origins),
        jwt=None
        if not jwt_issuer
        else {
            "issuer": jwt_issuer,
            "audience": jwt_audience,
            "key": jwt_key or "",
            "algorithms": list(jwt_algorithms or ("RS256",)),
            "tenant_claim": jwt_tenant_claim,
        },
        proxy=None
        if not llm_base_url
        else {
            "base_url": llm_base_url,
            "api_key": llm_api_key,
            "model": llm_model,
            "timeout": llm_timeout,
        },
        mcp=not no_mcp,
        loopback_only=loopback,
        stateless_mcp=workers > 1,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    # Listening before the URL is printed: a client that reads it and connects at
    # once waits in the backlog until the server accepts, instead of being refused.
    sock.listen(2048)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    # Opened here in every case: a store that cannot be opened is this command's
    # error, said once, not each worker's.
    memory = spec.open_memory()
    if ring is not None and not ring.list() and spec.jwt is None:
        click.echo(
            f"No API key yet in {ring.path}: create one with 'arbormem keys create --tenant NAME'",
            err=True,
        )
    click.echo(f"arbormem serving {memory.path} on http://{shown}:{bound}")
    sys.stdout.flush()
    if workers == 1:
        app = spec.build_app(memory)  # closes the memory when the server stops
        serving_gc()
        # The first search's loading (embedder, recall caches) happens now, not in
        # the first request: see arbormem.warmup.
        warm_in_background(memory, done=serving_gc)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
        )
        uvicorn.Server(config).run(sockets=[sock])
        return
    from uvicorn.supervisors import Multiprocess

    memory.close()
    os.environ[SPEC_VARIABLE] = spec.to_environment()  # the workers inherit it
    config = uvicorn.Config(
        "arbormem.server.worker:app_from_environment",
        factory=True,
        workers=workers,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    Multiprocess(config, sockets=[sock]).run()


@click.command("mcp")
@click.option("--tenant", default="", help="Work in this tenant of a shared store.")
@click.pass_obj
@handle_errors
def mcp_cmd(opts: StoreOptions, tenant: str) -> None:
    """Serve the store's memory to an agent over MCP on standard input and output.

    Agent clients start it themselves; several may run on one store at once.

    \b
    Examples:
      claude mcp add arbormem -- arbormem mcp --db ~/memory.db
      arbormem --user alice mcp
    """
    _need_extra()
    from arbormem.server.mcp import build_stdio_mcp

    with opts.open() as mem:
        view = mem.for_tenant(tenant) if tenant else mem
        build_stdio_mcp(view).run()


@click.group()
def keys() -> None:
    """API keys of 'arbormem serve': one tenant each, stored hashed.

    \b
    Examples:
      arbormem keys create --tenant acme
      arbormem keys create --tenant acme --read-only --json
      arbormem keys list
      arbormem keys revoke 1a2b3c4d
    """


@keys.command("create")
@click.option("--tenant", required=True, help="The tenant the key acts in.")
@click.option("--read-only", "key_read_only", is_flag=True, help="The key may only read.")
@click.option("--name", help="A note to tell keys apart.")
@KEYS_OPTION
@click.option("--json", "as_json", is_flag=True, help='Print {"key": ..., "id": ...}.')
@click.pass_obj
@handle_errors
def keys_create(
    opts: StoreOptions,
    tenant: str,
    key_read_only: bool,
    name: str | None,
    keys: str | None,
    as_json: bool,
) -> None:
    """Create a key and print it (the only time it is shown)."""
    from arbormem.server.keys import KeyRing

    ring = KeyRing(_keys_path(opts, keys))
    key = ring.create(tenant, read_only=key_read_only, name=name)
    key_id = key.split("_")[1]
    if as_json:
        echo_json({"key": key, "id": key_id, "tenant": tenant, "read_only": key_read_only})
        return
    click.echo(key)
    click.echo(
        f"Key {key_id} for tenant {tenant}{' (read-only)' if key_read_only else ''}, "
        f"in {ring.path}. It is not shown again.",
        err=True,
    )


@keys.command("list")
@KEYS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
@handle_errors
def keys_list(opts: StoreOptions, keys: str | None, as_json: bool) -> None:
    """The keys (ids, tenants, read-only), never their secrets."""
    from arbormem.server.keys import KeyRing

    found = KeyRing(_keys_path(opts, keys)).list()
    if as_json:
        echo_json([k.to_dict() for k in found])
        return
    if not found:
        click.echo("No keys.", err=True)
    for k in found:
        extra = " read-only" if k.read_only else ""
        click.echo(f"{k.id}  {k.tenant}{extra}  {k.created_at}{'  ' + k.name if k.name else ''}")


@keys.command("revoke")
@click.argument("key_id")
@KEYS_OPTION
@click.pass_obj
@handle_errors
def keys_revoke(opts: StoreOptions, key_id: str, keys: str | None) -> None:
    """Revoke a key by its id (a running server stops accepting it at once)."""
    from arbormem.server.keys import KeyRing

    gone = KeyRing(_keys_path(opts, keys)).revoke(key_id)
    click.echo(f"Revoked key {gone.id} of tenant {gone.tenant}.", err=True)
