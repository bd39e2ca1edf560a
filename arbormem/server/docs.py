"""Generate ``docs/http-api.md`` from the app's OpenAPI schema, so it cannot drift.

Run ``python -m arbormem.server.docs`` after changing a route; a test fails while
the file is stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HEADER = """# HTTP API reference

Generated from the code by `python -m arbormem.server.docs`; do not edit by hand.
The live schema is at `/openapi.json` (and browsable at `/docs`) on a running
`arbormem serve`.

Every route but `/v1/health` and `/v1/ready` needs `Authorization: Bearer <key>`: an
API key from `arbormem keys create --tenant NAME`, or a JWT from the issuer given to
`serve --jwt-issuer`. A request acts in its key's tenant only, whatever user ids it
sends: two tenants' `alice` are two people. A read-only key gets 403 from every route
that writes. Errors answer `{"error": {"type", "message", "field", "hint"}}`: 422 for
invalid input (`field` names it), 400 for a body that is not JSON, 401 for a missing or
unknown key, 403 for a read-only key or a foreign `Origin`, 404 for what is not in the
scope, 503 when the store stayed locked past its wait. MCP is served at `/mcp` with the
same keys (see [mcp.md](mcp.md)).
"""


def _ref(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return "`" + schema["$ref"].rsplit("/", 1)[-1] + "`"
    if "anyOf" in schema:
        return " or ".join(_ref(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_ref(schema.get('items', {}))}"
    return f"`{schema.get('type', 'object')}`"


def render(spec: dict[str, Any]) -> str:
    parts = [HEADER]
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            parts.append(f"## {method.upper()} {path}\n")
            if op.get("description"):
                parts.append(op["description"].strip() + "\n")
            params = op.get("parameters", [])
            if params:
                parts.append("| parameter | in | type | required |\n|---|---|---|---|")
                for p in params:
                    parts.append(
                        f"| `{p['name']}` | {p['in']} | {_ref(p.get('schema', {}))} | "
                        f"{'yes' if p.get('required') else 'no'} |"
                    )
                parts.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                parts.append(f"Body: {_ref(body.get('schema', {}))}\n")
            answers = []
            for status, r in op.get("responses", {}).items():
                schema = r.get("content", {}).get("application/json", {}).get("schema")
                shown = _ref(schema) if schema else "(no JSON)"
                answers.append(f"| {status} | {r.get('description', '')} | {shown} |")
            parts.append("| status | meaning | body |\n|---|---|---|\n" + "\n".join(answers) + "\n")
    parts.append("## Schemas\n")
    for name, schema in sorted(spec.get("components", {}).get("schemas", {}).items()):
        parts.append(
            f"### {name}\n\n```json\n{json.dumps(schema, indent=2, sort_keys=True)}\n```\n"
        )
    return "\n".join(parts)


def openapi_spec() -> dict[str, Any]:
    from arbormem.embed import HashingEmbedder
    from arbormem.memory import Memory
    from arbormem.server.app import create_app
    from arbormem.server.auth import Authenticator

    with Memory(":memory:", embedder=HashingEmbedder(16)) as mem:
        spec: dict[str, Any] = create_app(mem, Authenticator(ring=None), mcp=False).openapi()
    return spec


def render_http_reference() -> str:
    return render(openapi_spec())


def main() -> None:
    target = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
    target.write_text(render_http_reference(), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
