"""The web view in a real headless browser (Debian's chromium) against a real uvicorn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("playwright")

from playwright.sync_api import Browser, Page, expect, sync_playwright

from arbormem import Memory
from arbormem.web import create_app
from tests.conftest import LOCOMO_DIR
from tests.live_server import live_server

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]


def fill(mem: Memory) -> None:
    """A LoCoMo conversation when the data sets are here, else a generated one."""
    path = LOCOMO_DIR / "conv-26.json"
    if path.exists():
        from arbormem.bench.locomo import ingest_conversation, load_paths

        ingest_conversation(mem, load_paths([path])[0][1])
        return
    from arbormem.bench.synth import generate_turns

    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    turns = generate_turns(400, seed=3, start=start, end=start + timedelta(days=60))
    mem.add_many(
        {"content": t.content, "role": t.role, "speaker": t.speaker, "timestamp": t.timestamp,
         "session": t.session}
        for t in turns
    )  # fmt: skip
    mem.wait()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    db = tmp_path_factory.mktemp("web") / "memory.db"
    with Memory(db, embedder="hash", user="caroline") as mem:
        fill(mem)
        yield mem


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking"],
        )  # fmt: skip
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    yield context.new_page()
    context.close()


def test_tree_search_context_and_log(store: Memory, page: Page) -> None:
    with live_server(create_app(store)) as base:
        page.goto(base + "/")
        row = page.get_by_role("row").filter(has_text="caroline")
        expect(row).to_contain_text(str(store.stats().messages))
        row.get_by_role("link", name="tree").click()
        expect(page.get_by_role("heading", name="Topic tree")).to_be_visible()

        # Expand the first topic with the keyboard, then an exchange with a click.
        tree = page.get_by_role("region", name="Topic tree")
        first = tree.get_by_role("button").first
        expect(first).to_have_attribute("aria-expanded", "false")
        first.focus()
        page.keyboard.press("Enter")
        expect(first).to_have_attribute("aria-expanded", "true")
        panel = page.locator(f"#{first.get_attribute('aria-controls')}")
        expect(panel).to_be_visible()
        # Down through the levels (topics, groups) to the first exchange.
        level = panel
        for _ in range(8):
            expect(level.get_by_role("button").first).to_be_visible()  # loaded
            exchange = level.get_by_role("button", name=re.compile(r"^Exchange")).first
            if exchange.count():
                break
            inner = level.get_by_role("button").first
            inner.click()
            level = page.locator(f"#{inner.get_attribute('aria-controls')}")
        exchange.click()
        messages = page.locator(f"#{exchange.get_attribute('aria-controls')} ol.messages li")
        expect(messages.first).to_be_visible()
        # Collapsing hides it again.
        first.click()
        expect(first).to_have_attribute("aria-expanded", "false")
        expect(panel).to_be_hidden()

        # Search: hits with their signals, and from a hit to its place in the tree.
        sample = store.messages(start=40, end=41)[0]
        word = max(re.findall(r"[A-Za-z]{5,}", sample.content), key=len)
        page.get_by_role("navigation", name="Pages").get_by_role("link", name="Search").click()
        page.get_by_label("Search query").fill(word)
        page.get_by_label("Search query").press("Enter")
        hits = page.locator("li.hit")
        expect(hits.first).to_be_visible()
        expect(hits.first.get_by_role("list", name="Ranking signals")).to_contain_text("bm_t")
        text = hits.first.locator("strong").inner_text()
        hits.first.get_by_role("link", name="Show in topic tree").click()
        target = page.locator("li.target")
        expect(target).to_be_visible()
        expect(target).to_contain_text(text.split(": ", 1)[-1][:40])
        expect(target).to_be_focused()
        opened = page.locator("button.node[aria-expanded='true']")
        assert opened.count() >= 2  # the topics on the way down, and the exchange

        # Context: each section's tokens, as bars against the budget.
        page.get_by_role("navigation", name="Pages").get_by_role("link", name="Context").click()
        page.get_by_label("Next message").fill(word)
        page.get_by_label("Budget (tokens)").fill("1500")
        page.get_by_role("button", name="Build context").click()
        chart = page.get_by_role("figure", name="Tokens per section, against the budget")
        expect(chart).to_be_visible()
        recall = chart.locator(".tokens[data-section='recall']")
        tokens = int(recall.inner_text().split()[0])
        ctx = store.context(word, budget_tokens=1500)
        assert tokens == ctx.section("recall").tokens > 0
        width = chart.locator(".bar-row").filter(has_text="recall").locator(".bar > span")
        assert width.get_attribute("style") == f"width: {100 * tokens / 1500:.1f}%"

        # Reorganise, then undo it from the log.
        page.get_by_role("navigation", name="Pages").get_by_role(
            "link", name="Reorganisations"
        ).click()
        page.get_by_role("button", name="Reorganize now").click()
        expect(page.get_by_role("status")).to_contain_text("Reorganised")
        log_id = store.tree_log()[0].id
        page.get_by_role("button", name=f"Undo reorganisation {log_id}").click()
        expect(page.get_by_role("status")).to_contain_text(f"Reorganisation {log_id} undone")
        assert store.tree_log()[0].undone_at is not None


def test_records_show_current_and_earlier_values_with_dates_and_sources(
    tmp_path: Path, page: Page
) -> None:
    with Memory(tmp_path / "records.db", embedder="hash", user="caroline") as mem:
        said = [
            ("I live in Paris.", "Caroline", "2024-01-05T10:00:00Z", "s1"),
            ("Nice! How do you like it there?", None, "2024-01-05T10:01:00Z", "s1"),
            ("I moved to Lyon last week.", "Caroline", "2024-06-05T10:00:00Z", "s2"),
            ("Congratulations on the move.", None, "2024-06-05T10:01:00Z", "s2"),
        ]
        for text, speaker, at, session in said:
            mem.add(text, speaker=speaker, role="user" if speaker else "assistant",
                    timestamp=at, session=session)  # fmt: skip
        mem.wait()
        (now,) = [r for r in mem.records() if r.attribute == "home"]
        before = [h for h in mem.record_history(now.id) if h.id != now.id]
        assert [h.value for h in before] == ["Paris"] and now.value == "Lyon"
        moved, lived = now.sources[0], before[0].sources[0]

        with live_server(create_app(mem)) as base:
            page.goto(base + "/sessions?user=caroline&agent=default")
            # Reached with the keyboard, like every other page.
            link = page.get_by_role("navigation", name="Pages").get_by_role("link", name="Records")
            link.focus()
            page.keyboard.press("Enter")
            expect(page.get_by_role("heading", name="Records")).to_be_visible()
            table = page.get_by_role("table", name="Records of caroline/default")
            row = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name=now.text))
            expect(row).to_contain_text("home: Lyon")
            expect(row).to_contain_text(now.valid_from.date().isoformat())
            earlier = row.get_by_role("list", name=f"Earlier values of: {now.text}")
            expect(earlier.get_by_role("listitem").first).to_contain_text(
                f"Paris {before[0].valid_from.date().isoformat()} – "
                f"{before[0].valid_to.date().isoformat()}"
            )
            # Each value names the message it came from; a source opens it in its topic.
            source = row.get_by_role("list", name=f"Sources of: {now.text}").get_by_role("link")
            expect(source).to_have_text("Caroline, 2024-06-05")
            old = earlier.get_by_role("list", name=f"Sources of: {before[0].text}")
            expect(old.get_by_role("link")).to_have_text("Caroline, 2024-01-05")
            assert old.get_by_role("link").get_attribute("href").endswith(f"#m-{lived}")
            source.focus()
            page.keyboard.press("Enter")
            target = page.locator("li.target")
            expect(target).to_contain_text("I moved to Lyon last week.")
            assert target.get_attribute("id") == f"m-{moved}"


def test_login_refuses_a_wrong_key(store: Memory, page: Page) -> None:
    app = create_app(lambda request: store, check_key=lambda key: key == "k-right")
    with live_server(app) as base:
        page.goto(base + "/tree?user=caroline")
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
        page.get_by_label("API key").fill("k-wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_have_text("Wrong key")
        page.get_by_label("API key").fill("k-right")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Topic tree")).to_be_visible()
        page.get_by_role("button", name="Log out").click()
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
        # Without the cookie a fragment is refused too.
        try:
            urllib.request.urlopen(base + "/tree/leaf?first=0&last=1&fragment=1")
            raise AssertionError("a fragment was served without a key")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401


def test_a_form_posted_from_another_site_is_refused(store: Memory) -> None:
    with live_server(create_app(store)) as base:
        before = len(store.tree_log())
        request = urllib.request.Request(
            base + "/log/reorganize", data=b"user=caroline", method="POST",
            headers={"Origin": "http://evil.example",
                     "Content-Type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)
        assert refused.value.code == 403
        assert len(store.tree_log()) == before


def test_ui_command_serves_the_store_on_loopback(store: Memory) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "arbormem", "--db", store.path, "--embedder", "hash",
         "--user", "caroline", "ui", "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + (proc.stderr.read() if proc.stderr else "")
        with urllib.request.urlopen(url.group(0) + "sessions") as answer:
            body = answer.read().decode()
        assert answer.status == 200
        assert "session_1" in body or "synth-1" in body
        # Another host name pointed at 127.0.0.1 (DNS rebinding) gets nothing.
        evil = urllib.request.Request(url.group(0), headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(evil)
        assert refused.value.code == 400
        # Meanwhile it loaded what the first search needs, and said so.
        assert proc.stderr is not None
        said = proc.stderr.readline()
        assert re.fullmatch(r"arbormem ui: warmed up in \d+ ms\n", said), said
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ui_refuses_a_missing_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "arbormem", "--db", str(tmp_path / "none.db"), "ui",
         "--no-browser"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no store at" in done.stderr


def test_bench_web_times_every_page(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "arbormem", "bench", "web", "--turns", "120", "--repeat", "2",
         "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    result = json.loads(done.stdout)
    assert result["messages"] == 120
    assert set(result["pages"]) >= {"tree", "search", "context", "reorganisation log"}
    for name, row in result["pages"].items():
        assert row["cold_ms"] > 0 and row["p50_ms"] > 0 and row["p95_ms"] >= row["p50_ms"]
        # Each page in a server of its own, timed once that server's warm-up is done
        # (the scopes page, which the browser opens at once, without waiting).
        assert row["ready_ms"] > 0
        assert (row["warm_ms"] is None) == (name == "scopes")
        assert name == "scopes" or row["warm_ms"] >= row["ready_ms"]
