"""The web view served by `arbormem serve` at /, behind the same keys as the API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.serving import Served, serve


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path) as s:
        yield s


def _browser(s: Served) -> httpx2.Client:
    # A browser: no Authorization header, the key kept in the login cookie.
    return httpx2.Client(base_url=s.url, timeout=30, headers={"origin": s.url})


def _login(http: httpx2.Client, key: str) -> httpx2.Response:
    return http.post("/login", data={"key": key, "next": "/"}, follow_redirects=False)


def test_pages_need_a_key_and_show_only_the_keys_tenant(served: Served) -> None:
    with httpx2.Client(base_url=served.url, headers=served.headers(served.acme)) as api:
        api.post("/v1/messages", json={"user": "alice", "messages": [{"content": "acme tea"}]})
    with httpx2.Client(base_url=served.url, headers=served.headers(served.beta)) as api:
        api.post("/v1/messages", json={"user": "bob", "messages": [{"content": "beta coffee"}]})
    with _browser(served) as http:
        first = http.get("/", follow_redirects=True)
        assert "login" in str(first.url) or 'name="key"' in first.text  # asked for a key
        assert "alice" not in first.text
        assert _login(http, "amk_00000000_wrong").status_code == 401
        assert _login(http, served.beta).status_code == 303
        page = http.get("/")
        assert page.status_code == 200 and "bob" in page.text and "alice" not in page.text
        found = http.get("/search", params={"user": "bob", "q": "coffee"})
        assert "beta coffee" in found.text
        other = http.get("/search", params={"user": "alice", "q": "tea"})
        assert "acme tea" not in other.text  # another tenant's alice is out of reach
    # The API routes are still the API's: JSON, not pages.
    with httpx2.Client(base_url=served.url) as anon:
        assert anon.get("/v1/health").json()["status"] == "ok"


def test_a_read_only_key_can_look_but_not_post(served: Served) -> None:
    with _browser(served) as http:
        assert _login(http, served.acme_ro).status_code == 303
        assert http.get("/log", params={"user": "alice"}).status_code == 200
        refused = http.post("/log/reorganize", data={"user": "alice"}, follow_redirects=False)
        assert refused.status_code == 403
