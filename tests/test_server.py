"""The REST API on a real uvicorn: keys and tenants, durable adds, errors, origins."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from arbormem import Memory
from arbormem.embed import HashingEmbedder
from arbormem.server.auth import JWTConfig
from tests.conftest import run_cli
from tests.serving import Served, serve


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path) as s:
        yield s


def _client(s: Served, key: str | None) -> httpx2.Client:
    return httpx2.Client(base_url=s.url, headers=s.headers(key), timeout=30)


def _add(http: httpx2.Client, user: str, *contents: str, **extra: object) -> httpx2.Response:
    body = {"user": user, "messages": [{"content": c} for c in contents], **extra}
    return http.post("/v1/messages", json=body)


def test_health_and_readiness_need_no_key(served: Served) -> None:
    with _client(served, None) as http:
        assert http.get("/v1/health").json()["status"] == "ok"
        assert http.get("/v1/ready").json() == {"ready": True, "read_only": False}
        assert http.post("/v1/search", json={"user": "a", "query": "x"}).status_code == 401


def test_an_unknown_or_revoked_key_is_refused(served: Served) -> None:
    with _client(served, "amk_00000000_not-a-key") as http:
        r = http.get("/v1/sessions", params={"user": "alice"})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["type"] == "unauthorized"
    with _client(served, served.beta) as http:
        assert http.get("/v1/sessions", params={"user": "alice"}).status_code == 200
        served.ring.revoke(served.beta.split("_")[1])  # the running server rereads the file
        assert http.get("/v1/sessions", params={"user": "alice"}).status_code == 401


def test_an_add_answers_201_once_it_is_on_disk(served: Served) -> None:
    with _client(served, served.acme) as http:
        r = _add(http, "alice", "I moved to Lisbon in May.", "My sister lives in Porto.")
    assert r.status_code == 201
    ids = r.json()["ids"]
    assert len(ids) == 2
    # Another connection to the file (another process would be the same) sees them.
    with Memory(served.db, embedder=HashingEmbedder(64), read_only=True) as other:
        stored = other.for_tenant("acme").messages(user="alice")
    assert [m.id for m in stored] == ids


def test_search_answers_hits_shaped_like_search_json(served: Served) -> None:
    with _client(served, served.acme) as http:
        _add(http, "alice", "I moved to Lisbon in May.", "The cat is called Miso.")
        hits = http.post("/v1/search", json={"user": "alice", "query": "cat name"}).json()["hits"]
    assert hits[0]["content"] == "The cat is called Miso."
    expected = {"id", "index", "session", "role", "speaker", "content", "timestamp", "user"}
    expected |= {"agent", "metadata", "score", "signals", "message_ids", "superseded_by"}
    assert set(hits[0]) == expected | {"neighbors", "image"}
    assert hits[0]["image"] is None  # not an image's caption


def test_two_tenants_alice_are_two_people(served: Served) -> None:
    with _client(served, served.acme) as acme, _client(served, served.beta) as beta:
        mine = _add(acme, "alice", "acme alice likes green tea").json()["ids"][0]
        _add(beta, "alice", "beta alice likes black coffee")
        found = beta.post("/v1/search", json={"user": "alice", "query": "green tea"}).json()
        assert all("acme" not in h["content"] for h in found["hits"])
        assert beta.get(f"/v1/messages/{mine}", params={"user": "alice"}).status_code == 404
        assert beta.delete(f"/v1/messages/{mine}", params={"user": "alice"}).status_code == 404
        beta.delete("/v1/users/alice")  # erases beta's alice only
        assert acme.get(f"/v1/messages/{mine}", params={"user": "alice"}).status_code == 200
        texts = [
            m["content"]
            for m in beta.get("/v1/messages", params={"user": "alice"}).json()["messages"]
        ]
        assert texts == []


def test_a_read_only_key_reads_but_cannot_write(served: Served) -> None:
    with _client(served, served.acme) as acme:
        mid = _add(acme, "bob", "remember the milk").json()["ids"][0]
    with _client(served, served.acme_ro) as ro:
        assert ro.post("/v1/search", json={"user": "bob", "query": "milk"}).json()["hits"]
        r = _add(ro, "bob", "sneaky")
        assert r.status_code == 403
        assert r.json()["error"]["type"] == "forbidden"
        assert ro.delete(f"/v1/messages/{mid}", params={"user": "bob"}).status_code == 403
        assert ro.delete("/v1/users/bob").status_code == 403
        r = ro.post("/v1/context", json={"user": "bob", "query": "milk", "mode": "code"})
        assert r.status_code == 403
    assert len(served.memory.for_tenant("acme").messages(user="bob")) == 1


def test_errors_name_the_field(served: Served) -> None:
    with _client(served, served.acme) as http:
        r = http.post("/v1/search", json={"user": "alice", "query": "x", "k": 0})
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "k"
        r = http.post("/v1/search", json={"user": "alice", "query": "   "})
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "query"  # the library's own InputError
        r = http.post("/v1/search", json={"user": "alice", "query": "x", "sesion": "s"})
        assert r.json()["error"]["field"] == "sesion"
        r = http.post(
            "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code in (400, 422)
        assert r.json()["error"]["type"] == "input"
        r = http.get("/v1/messages/nope", params={"user": "alice"})
        assert r.status_code == 404
        assert r.json()["error"]["type"] == "not_found"


def test_sessions_forget_session_stats_and_the_tree(served: Served) -> None:
    with _client(served, served.acme) as http:
        _add(http, "carol", "first session talk about hiking boots", session="s1")
        _add(http, "carol", "second session about sourdough bread", session="s2")
        sessions = http.get("/v1/sessions", params={"user": "carol"}).json()["sessions"]
        assert [s["id"] for s in sessions] == ["s1", "s2"]
        gone = http.delete("/v1/sessions/s1", params={"user": "carol"}).json()
        assert gone["messages"] == 1
        stats = http.get("/v1/stats", params={"user": "carol"}).json()
        assert (stats["messages"], stats["sessions"]) == (1, 1)
        root = http.get("/v1/tree", params={"user": "carol"}).json()
        assert root["kind"] == "root" and root["children"]
        child = root["children"][0]
        by_id = http.get("/v1/tree", params={"user": "carol", "node": child["id"]}).json()
        by_path = http.get("/v1/tree", params={"user": "carol", "path": "0"}).json()
        assert by_id["id"] == by_path["id"] == child["id"]
        assert http.get("/v1/tree", params={"user": "carol", "node": 99999}).status_code == 404
        paths = http.post("/v1/topics", json={"user": "carol", "query": "sourdough"}).json()
        assert "paths" in paths


def test_export_then_import_as_a_background_job(served: Served) -> None:
    with _client(served, served.acme) as acme, _client(served, served.beta) as beta:
        _add(acme, "dan", "dan plays the cello", "dan lives by the sea")
        document = acme.get("/v1/export", params={"user": "dan"}).json()
        assert acme.delete("/v1/users/dan").json()["messages"] == 2
        r = acme.post("/v1/import", params={"background": "true"}, json=document)
        assert r.status_code == 202
        job = r.json()["id"]
        assert beta.get(f"/v1/jobs/{job}").status_code == 404  # another tenant's job
        deadline = time.monotonic() + 60
        while (status := acme.get(f"/v1/jobs/{job}").json())["status"] == "running":
            assert time.monotonic() < deadline, "the import job never ended"
            time.sleep(0.05)
        assert status["status"] == "done", status["error"]
        assert status["result"]["messages"] == 2
        listed = acme.get("/v1/messages", params={"user": "dan"}).json()["messages"]
        assert [m["content"] for m in listed] == ["dan plays the cello", "dan lives by the sea"]
        assert beta.get("/v1/messages", params={"user": "dan"}).json()["messages"] == []


def test_a_foreign_origin_is_refused_and_loopback_is_not(served: Served) -> None:
    with _client(served, served.acme) as http:
        r = http.get(
            "/v1/sessions", params={"user": "a"}, headers={"Origin": "http://evil.example"}
        )
        assert r.status_code == 403
        r = http.post("/mcp", json={}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        r = http.get(
            "/v1/sessions", params={"user": "a"}, headers={"Origin": "http://localhost:5173"}
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "http://localhost:5173"


def test_a_jwt_from_the_configured_issuer_is_a_tenant(tmp_path: Path) -> None:
    import jwt

    secret = "s" * 32
    config = JWTConfig(
        issuer="https://idp.test", audience="arbormem", key=secret, algorithms=("HS256",)
    )

    def token(**claims: object) -> str:
        base = {"iss": "https://idp.test", "aud": "arbormem", "sub": "u1", "tenant": "acme"}
        base |= {"exp": int(time.time()) + 300, "scope": "memory:read memory:write"}
        return jwt.encode({**base, **claims}, secret, algorithm="HS256")

    with serve(tmp_path, jwt=config) as s:
        with _client(s, token()) as http:
            assert _add(http, "erin", "erin's note").status_code == 201
        with _client(s, s.acme) as http:  # the same tenant through an API key
            assert http.get("/v1/messages", params={"user": "erin"}).json()["messages"]
        for bad in (
            token(exp=int(time.time()) - 60),
            token(aud="other"),
            token(iss="https://evil.test"),
            jwt.encode(
                {"iss": "https://idp.test", "aud": "arbormem", "sub": "u", "tenant": "acme"},
                secret,
                algorithm="HS256",
            ),
            token()[:-2] + "xx",
        ):
            with _client(s, bad) as http:
                assert http.get("/v1/sessions", params={"user": "erin"}).status_code == 401
        with _client(s, token(scope="memory:read")) as http:
            assert _add(http, "erin", "no").status_code == 403


def test_a_verified_jwt_is_trusted_a_minute_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jwt

    from arbormem.server import auth as auth_module
    from arbormem.server.auth import Authenticator

    config = JWTConfig(
        issuer="https://idp.test", audience="arbormem", key="a" * 32, algorithms=("HS256",)
    )
    checker = Authenticator(ring=None, jwt=config)
    claims = {"iss": "https://idp.test", "aud": "arbormem", "sub": "u1", "tenant": "acme"}
    long_lived = jwt.encode({**claims, "exp": int(time.time()) + 3600}, "a" * 32, "HS256")
    assert checker.may_block(long_lived)  # not verified yet: a thread's work
    first = checker.principal(long_lived)
    assert first is not None and first.tenant == "acme"
    assert not checker.may_block(long_lived)
    # The issuer rotates its key: the verified token still counts for a while...
    checker._jwt_key = "b" * 32
    assert checker.principal(long_lived) == first
    # ...and is checked against the new key once the minute is over.
    clock = time.monotonic() + auth_module.JWT_TRUST_SECONDS + 1
    monkeypatch.setattr(auth_module.time, "monotonic", lambda: clock)
    assert checker.may_block(long_lived)
    assert checker.principal(long_lived) is None


def test_keys_commands_and_serve_refuses_an_open_network_port(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    out = run_cli("--db", db, "keys", "create", "--tenant", "acme", "--read-only", "--json")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["key"].startswith("amk_") and made["read_only"] is True
    stored = Path(f"{db}.keys.json").read_text()
    assert made["key"] not in stored  # only its hash
    listed = json.loads(run_cli("--db", db, "keys", "list", "--json").stdout)
    assert [k["id"] for k in listed] == [made["id"]]
    assert run_cli("--db", db, "keys", "revoke", made["id"]).returncode == 0
    assert json.loads(run_cli("--db", db, "keys", "list", "--json").stdout) == []
    refused = run_cli("--db", db, "serve", "--host", "0.0.0.0", "--no-auth")
    assert refused.returncode == 2
    assert "--no-auth" in refused.stderr


def _mcp_search(url: str, key: str, query: str, scope: str) -> int:
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> int:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            counts = []
            for _ in range(3):  # several calls: with two workers they reach both
                result = await session.call_tool(
                    "search_memories", {"query": query, "scope": scope, "k": 10}
                )
                assert not result.is_error, result.content
                counts.append(len(result.structured_content["hits"]))
            assert len(set(counts)) == 1
            return counts[0]

    return asyncio.run(run())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_serve_command_serves_until_stopped(tmp_path: Path, workers: str) -> None:
    import os
    import subprocess
    import sys

    db = str(tmp_path / "m.db")
    key = json.loads(run_cli("--db", db, "keys", "create", "--tenant", "t", "--json").stdout)["key"]
    cmd = [sys.executable, "-m", "arbormem", "--db", db, "--embedder", "hash", "serve"]
    proc = subprocess.Popen(
        [*cmd, "--port", "0", "--workers", workers],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.rsplit(" on ", 1)[1].strip()
        # Listening from the moment the URL is printed: no retry loop needed.
        with httpx2.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as http:
            ids = [_add(http, "u", f"note {i} about tea").json()["ids"][0] for i in range(4)]
            hits = http.post("/v1/search", json={"user": "u", "query": "tea", "k": 10}).json()
        assert {h["id"] for h in hits["hits"]} == set(ids)
        # MCP too: with several workers it is stateless, and still answers.
        assert _mcp_search(url, key, "tea", "u") == 4
    finally:
        proc.terminate()
        proc.wait(60)
    with Memory(db, embedder=HashingEmbedder(64), read_only=True) as mem:
        assert [m.id for m in mem.for_tenant("t").messages(user="u")] == ids


def test_jwts_signed_with_a_key_from_the_issuers_jwks_url(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(jwks)))
            self.end_headers()
            self.wfile.write(jwks)

        def log_message(self, *args: object) -> None:
            pass

    idp = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{idp.server_address[1]}/jwks.json"
    config = JWTConfig(issuer="https://idp.test", audience="arbormem", key=url)
    claims = {"iss": "https://idp.test", "aud": "arbormem", "sub": "u1", "tenant": "beta"}
    claims |= {"exp": int(time.time()) + 300, "scope": "memory:write"}
    try:
        with serve(tmp_path, jwt=config) as s:
            good = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
            with _client(s, good) as http:
                assert _add(http, "fay", "fay's note").status_code == 201
            assert s.memory.for_tenant("beta").messages(user="fay")
            other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
            unknown = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k9"})
            for bad in (forged, unknown):
                with _client(s, bad) as http:
                    assert http.get("/v1/sessions", params={"user": "fay"}).status_code == 401
    finally:
        idp.shutdown()
        idp.server_close()


def test_a_worker_process_builds_its_app_and_sets_up_its_collector(tmp_path: Path) -> None:
    """What ``serve --workers N`` runs in each worker: the app from the environment's
    spec, in a process whose collector is set up for serving."""
    import subprocess
    import sys

    from arbormem.server.worker import SPEC_VARIABLE, YOUNG_GC_THRESHOLD, ServeSpec

    spec = ServeSpec(db=str(tmp_path / "m.db"), auth=False, mcp=False)
    probe = (
        "import gc\n"
        "from arbormem.server.worker import app_from_environment\n"
        "app = app_from_environment()\n"
        "print(gc.get_threshold()[0], gc.get_freeze_count() > 0,"
        " '/v1/search' in app.openapi()['paths'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, SPEC_VARIABLE: spec.to_environment()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(YOUNG_GC_THRESHOLD), "True", "True"]


def test_serving_gc_freezes_what_is_loaded_and_collects_the_young_less_often() -> None:
    import gc

    from arbormem.server.worker import YOUNG_GC_THRESHOLD, serving_gc

    before = gc.get_threshold()
    try:
        serving_gc()
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
        # Cycles made afterwards are still collected.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
