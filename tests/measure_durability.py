"""Figures for forgetting and crashes, measured with real processes and real files.

Not a test (it takes minutes and its kills land at random points); run it as::

    python -m tests.measure_durability residues [--forgets 60] [--seed 1]
    python -m tests.measure_durability kills [--kills 50] [--seed 1]
    python -m tests.measure_durability forget-once STORE [--user NAME]

``residues``: a store of messages that each carry a word of their own; forgets of
messages, sessions and threads while another process (a) does nothing, (b) searches
in a loop, (c) holds read snapshots of random length. After each forget returns, every
file of the store (``.db``, ``-wal``, ``-shm``, ``<db>.ann/*``) is read for the words
of everything forgotten so far. A forget that returned ``purged: True`` with any of
them in a file is a violation; ``purged: False`` must say why.

``kills``: writer processes SIGKILLed at random moments while adding (one message or
a batch) or forgetting, each printing what was acknowledged. After each kill the store
is opened again: every acknowledged message must be there, every message whose forget
returned must be gone, and once the next open has finished any purge the killed one
owed, no word of a forgotten message may be left in the files.

``forget-once``: the time one forget takes in a copy of a given store (for
``farm-bench``, against another version of the code on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

from arbormem import Memory
from arbormem.embed import HashingEmbedder

FILLER = [
    "the",
    "a",
    "garden",
    "tomato",
    "car",
    "engine",
    "trip",
    "lisbon",
    "hotel",
    "flights",
    "weather",
    "lunch",
    "notes",
    "about",
    "with",
    "from",
    "plan",
    "call",
    "later",
    "today",
    "tomorrow",
    "week",
]


def word(rng: random.Random) -> str:
    """A word no other message has (letters only, so the analyser keeps it whole)."""
    return "zq" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(9))


def files_of(db: Path) -> dict[Path, bytes]:
    out = {
        p: p.read_bytes() for p in db.parent.iterdir() if p.is_file() and p.name.startswith(db.name)
    }
    ann = db.with_name(db.name + ".ann")
    if ann.is_dir():
        out.update({p: p.read_bytes() for p in ann.iterdir() if p.is_file()})
    return out


def found(db: Path, words: list[str]) -> dict[str, int]:
    """Occurrences, per file, of any of the words (a prefix-compressed index keeps the
    tail of a word: the last eight letters are looked for)."""
    out: dict[str, int] = {}
    for path, data in files_of(db).items():
        n = sum(data.count(w[-8:].encode()) for w in words)
        if n:
            out[path.name] = n
    return out


# -- residues ---------------------------------------------------------------------------

SEARCHER = textwrap.dedent(
    """
    import sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder
    mem = Memory(sys.argv[1], embedder=HashingEmbedder(32), llm=None)
    print("ready", flush=True)
    while True:
        mem.search("garden trip weather plan", k=20)
    """
)

SNAPSHOTS = textwrap.dedent(
    """
    import random, sqlite3, sys, time
    rng = random.Random(int(sys.argv[2]))
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    print("ready", flush=True)
    while True:
        conn.execute("BEGIN")
        conn.execute("SELECT COUNT(*) FROM messages").fetchone()
        time.sleep(rng.uniform(0.0, 4.0))  # a long read: an export, a slow search
        conn.execute("COMMIT")
        time.sleep(rng.uniform(0.0, 0.5))
    """
)


def residues(forgets: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    figures: dict[str, Any] = {}
    for other in ("none", "searching", "snapshots"):
        folder = Path(tempfile.mkdtemp(prefix="arbormem-residues-"))
        db = folder / "m.db"
        words: dict[str, str] = {}
        with Memory(db, embedder=HashingEmbedder(32), llm=None, ann_threshold=200) as mem:
            for user in ("ann", "bob", "cy"):
                for s in range(12):
                    batch = []
                    for i in range(30):
                        w = word(rng)
                        text = " ".join(rng.choice(FILLER) for _ in range(12))
                        batch.append(
                            {"content": f"{text} {w} end", "role": ("user", "assistant")[i % 2]}
                        )
                    for m in mem.add_many(batch, session=f"s{s}", user=user):
                        words[m.id] = m.content.split()[-2]
                mem.prepare_search(user=user)  # an approximate index saved beside the store
            proc = None
            if other != "none":
                script, args = (SEARCHER, []) if other == "searching" else (SNAPSHOTS, [str(seed)])
                proc = subprocess.Popen(
                    [sys.executable, "-c", script, str(db), *args],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            gone: list[str] = []
            counts: Counter[str] = Counter()
            violations = []
            took = []
            try:
                for n in range(forgets):
                    kind = rng.choices(["message", "session", "thread"], [0.8, 0.17, 0.03])[0]
                    users = [s.user for s in mem.scopes()]
                    if not users:
                        break
                    user = rng.choice(users)
                    msgs = mem.messages(user=user)
                    start = time.perf_counter()
                    if kind == "message":
                        target = rng.choice(msgs)
                        result = mem.forget(target.id, user=user)
                        doomed = [target.id]
                    elif kind == "session":
                        s = rng.choice(sorted({m.session for m in msgs}))
                        doomed = [m.id for m in msgs if m.session == s]
                        result = mem.forget(session=s, user=user)
                    else:
                        doomed = [m.id for m in msgs]
                        result = mem.forget(user=user, agent="default")
                    took.append(time.perf_counter() - start)
                    gone += [words[i] for i in doomed]
                    counts[f"{kind}s"] += 1
                    # Versions before the flag said nothing: they claimed the text was gone.
                    purged = result.get("purged", True)
                    counts["purged" if purged else f"pending {result['purge_pending']}"] += 1
                    left = found(db, gone)
                    if purged and left:
                        violations.append({"forget": n, "kind": kind, "files": left})
                    elif not purged and left:
                        counts["pending with text still in the files"] += 1
            finally:
                if proc is not None:
                    proc.kill()
                    proc.wait()
            final = mem.purge(wait=60) if hasattr(mem, "purge") else None
            figures[other] = {
                "forgets": dict(counts),
                "violations (purged: True, text in a file)": len(violations),
                "first violations": violations[:3],
                "after purge(wait=60)": final,
                "residues after that purge": found(db, gone),
                "forget seconds p50": round(sorted(took)[len(took) // 2], 3),
                "forget seconds max": round(max(took), 3),
                "store bytes": os.path.getsize(db),
            }
        figures[other]["residues after close"] = found(db, gone)
        shutil.rmtree(folder)
    return figures


# -- kills ------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import random, sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder
    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    letters = "bcdfghjklmnpqrstvwxz"
    mem = Memory(path, embedder=HashingEmbedder(32), llm=None)
    print("open", flush=True)
    n = 0
    while True:
        n += 1
        op = rng.random()
        mine = [m for m in mem.messages(limit=400)]
        if op < 0.25 and len(mine) > 20:
            victim = rng.choice(mine)
            print("forgetting", victim.id, flush=True)
            mem.forget(victim.id)
            print("forgot", victim.id, flush=True)
        elif op < 0.55:
            batch = [
                {"content": "batch note zq" + "".join(rng.choice(letters) for _ in range(9)) + " end",
                 "session": f"s{n % 7}"}
                for _ in range(rng.randint(2, 20))
            ]
            for m in mem.add_many(batch):
                print("added", m.id, m.content.split()[2], flush=True)
        else:
            m = mem.add("single note zq" + "".join(rng.choice(letters) for _ in range(9)) + " end",
                        session=f"s{n % 7}")
            print("added", m.id, m.content.split()[2], flush=True)
    """
)


def kills(n_kills: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="arbormem-kills-"))
    db = folder / "k.db"
    acknowledged: dict[str, str] = {}  # id -> its word
    forgotten: set[str] = set()
    started_forgets: set[str] = set()
    tallies: Counter[str] = Counter()
    lost: list[str] = []
    residue_runs = 0

    def note(line: str) -> str:
        if not line.endswith("\n"):
            return ""  # cut by the kill: not an acknowledgement
        parts = line.split()
        if parts[0] == "added":
            acknowledged[parts[1]] = parts[2]
        elif parts[0] == "forgetting":
            started_forgets.add(parts[1])
        elif parts[0] == "forgot":
            forgotten.add(parts[1])
        return parts[0]

    for k in range(n_kills):
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(seed * 1000 + k)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "open"
        # Half the kills aim at a forget (between its delete and the end of its purge),
        # the others at whatever is under way after a random number of acknowledgements.
        aim = "forget" if k % 2 else "write"
        lines = rng.randint(5, 120)
        for n, line in enumerate(proc.stdout):
            what = note(line)
            if (aim == "forget" and n >= lines and what == "forgetting") or (
                aim == "write" and n >= lines
            ):
                break
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        last = ""
        for line in proc.stdout:  # what it printed before it died was acknowledged too
            last = note(line) or last
        tallies[f"aimed at a {aim}, last line '{last or 'none after the aim'}'"] += 1
        with Memory(db, embedder=HashingEmbedder(32), llm=None) as mem:
            stored = {m.id for m in mem.messages(limit=1_000_000)}
            if getattr(mem.backend, "purged_on_open", None) is not None:
                tallies["opens that finished a purge a kill cut short"] += 1
        lost += [m for m in acknowledged if m not in stored and m not in started_forgets]
        back = forgotten & stored
        tallies["forgotten messages back"] += len(back)
        # A forget the kill cut short may or may not have committed: the store says which.
        gone = [w for m, w in acknowledged.items() if m in started_forgets and m not in stored]
        if found(db, gone):
            residue_runs += 1
    shutil.rmtree(folder)
    return {
        "kills": n_kills,
        "acknowledged messages": len(acknowledged),
        "acknowledged messages lost": len(set(lost)),
        "forgets started": len(started_forgets),
        "forgets acknowledged": len(forgotten),
        "kills after which a forgotten word was in a file (store reopened and closed)": residue_runs,
        "tallies": dict(tallies),
    }


# -- the cost of one forget -------------------------------------------------------------


def forget_once(store: Path, user: str) -> dict[str, Any]:
    """Copy a store, open the copy, forget one message of ``user``; time the forget."""
    folder = Path(tempfile.mkdtemp(prefix="arbormem-forget-"))
    try:
        db = folder / "m.db"
        shutil.copy(store, db)
        with Memory(db) as mem:
            target = mem.messages(user=user, limit=50)[17]
            start = time.perf_counter()
            result = mem.forget(target.id, user=user)
            took = time.perf_counter() - start
        return {"store bytes": os.path.getsize(store), "forget seconds": round(took, 3), **result}
    finally:
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("residues")
    r.add_argument("--forgets", type=int, default=60)
    r.add_argument("--seed", type=int, default=1)
    k = sub.add_parser("kills")
    k.add_argument("--kills", type=int, default=50)
    k.add_argument("--seed", type=int, default=1)
    f = sub.add_parser("forget-once")
    f.add_argument("store", type=Path, help="a store to copy (it is left as it is)")
    f.add_argument("--user", default="default")
    args = parser.parse_args()
    if args.what == "residues":
        out = residues(args.forgets, args.seed)
    elif args.what == "kills":
        out = kills(args.kills, args.seed)
    else:
        out = forget_once(args.store, args.user)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
