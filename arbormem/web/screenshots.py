"""Screenshots of every page of the web view, for the docs.

``python -m arbormem.web.screenshots docs/images/web [--locomo FILE]`` fills a
temporary store (a LoCoMo conversation file when given, else generated
conversation), serves the web view on 127.0.0.1 and saves one PNG per page,
taken with Playwright driving Debian's chromium (never a downloaded browser).
"""

from __future__ import annotations

import argparse
import re
import socket
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


def _fill(mem: object, locomo: Path | None) -> None:
    if locomo is not None:
        from arbormem.bench.locomo import ingest_conversation, load_paths

        ingest_conversation(mem, load_paths([locomo])[0][1])  # type: ignore[arg-type]
        return
    from arbormem.bench.synth import generate_turns

    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    turns = generate_turns(600, seed=3, start=start, end=start + timedelta(days=90))
    mem.add_many(  # type: ignore[attr-defined]
        {"content": t.content, "role": t.role, "speaker": t.speaker,
         "timestamp": t.timestamp, "session": t.session}
        for t in turns
    )  # fmt: skip
    mem.wait()  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--locomo", type=Path, help="a LoCoMo conversation file to show")
    args = parser.parse_args(argv)

    import uvicorn
    from playwright.sync_api import sync_playwright

    from arbormem import Memory
    from arbormem.web import create_app

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "m.db", user="demo") as mem:
        _fill(mem, args.locomo)
        mem.reorganize()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        server = uvicorn.Server(uvicorn.Config(create_app(mem), log_level="warning"))
        threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        q = "user=demo&agent=default"
        sample = mem.messages(start=40, end=41)[0]
        word = max(re.findall(r"[A-Za-z]{5,}", sample.content), key=len)
        hit = mem.search(word)[0].message.id
        shots = {
            "scopes": "/",
            "sessions": f"/sessions?{q}",
            "tree": f"/tree?{q}",
            "tree-message": f"/tree?{q}&message={hit}",
            "search": f"/search?{q}&q={word}",
            "context": f"/context?{q}&q={word}&budget=1500",
            "log": f"/log?{q}",
            "records": f"/records?{q}",
        }
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            for name, path in shots.items():
                page.goto(base + path)
                if name == "tree":
                    page.get_by_role("region", name="Topic tree").get_by_role(
                        "button"
                    ).first.click()
                    page.wait_for_selector("[data-loaded]")
                page.screenshot(path=str(args.out / f"{name}.png"))
                print(args.out / f"{name}.png")
            browser.close()
        server.should_exit = True


if __name__ == "__main__":
    main()
