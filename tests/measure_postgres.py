"""Several processes on one store, measured with real processes (not a test: it takes
minutes and its interleavings differ from run to run). Run it as::

    python -m tests.measure_postgres processes --db postgresql://... [--writers 4]
        [--messages 300] [--readers 1] [--embedder hash]

``--db`` may also be a SQLite file, to compare (it must not exist yet). On PostgreSQL
the store is a schema of its own, ``measure_processes``, replaced if there and
dropped after. Every writer process adds ``--messages``
messages to one shared thread (two in three alone, one in three as a user/assistant
exchange in one ``add_many``) and as many to a thread of its own, all starting at
once, while each reader process searches the shared thread in a loop. Then the store
is checked: every acknowledged message stored exactly once (none lost, none doubled),
positions gap-free, each writer's messages in the order it wrote them, the topic tree
consistent (``check_tree``: every message in one leaf, counts agree) with no node
twice. It prints one JSON object: those counts, the writers' wall time and combined
rate, and the readers' search latencies under the writes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.store import open_store

WRITER = textwrap.dedent(
    """
    import json, sys, time
    from arbormem import Memory
    from arbormem.embed import get_embedder

    db, name, count, start, embedder = sys.argv[1:6]
    emb = get_embedder(embedder)
    shared = Memory(db, user="team", agent="bot", embedder=emb, llm=None)
    own = Memory(db, user=name, agent="bot", embedder=emb, llm=None)
    while time.time() < float(start):
        time.sleep(0.005)
    t0 = time.perf_counter()
    ids = []
    for i in range(int(count)):
        if i % 3 == 2:
            out = shared.add_many([
                {"role": "user", "content": f"{name} asks about the kite number {i}"},
                {"role": "assistant", "content": f"{name} hears about the lake {i}"},
            ])
            ids += [m.id for m in out]
        else:
            ids.append(shared.add(f"{name} says hello from the harbour, turn {i}").id)
        own.add(f"{name} keeps a private note {i} about the garden")
    shared.wait()
    own.wait()
    seconds = time.perf_counter() - t0
    shared.close()
    own.close()
    print(json.dumps({"ids": ids, "seconds": seconds}))
    """
)

READER = textwrap.dedent(
    """
    import json, sys, time
    from arbormem import Memory
    from arbormem.embed import get_embedder

    db, start, stop_file, embedder = sys.argv[1:5]
    import os
    mem = Memory(db, user="team", agent="bot", embedder=get_embedder(embedder), llm=None)
    while time.time() < float(start):
        time.sleep(0.005)
    words = ["kite", "lake", "harbour hello", "kite number lake", "turn", "asks about"]
    ms = []
    while not os.path.exists(stop_file):
        t0 = time.perf_counter()
        mem.search(words[len(ms) % len(words)], k=10)
        ms.append((time.perf_counter() - t0) * 1000)
    mem.close()
    print(json.dumps({"ms": ms}))
    """
)


def processes(db: str, writers: int, messages: int, readers: int, embedder: str) -> dict[str, Any]:
    """Run the writers and readers on a fresh store at ``db`` and check what they left
    (module docstring)."""
    if "://" in db:
        from arbormem.store.postgres.admin import drop_store, with_schema

        db = with_schema(db, "measure_processes")
        drop_store(db)
        try:
            return _processes(db, writers, messages, readers, embedder)
        finally:
            drop_store(db)
    if Path(db).exists():
        raise SystemExit(f"{db} exists: give the name of a store to make")
    return _processes(db, writers, messages, readers, embedder)


def _processes(db: str, writers: int, messages: int, readers: int, embedder: str) -> dict[str, Any]:
    names = [f"w{i}" for i in range(writers)]
    start = time.time() + 4  # after every interpreter has started and opened the store
    with tempfile.TemporaryDirectory(prefix="arbormem-measure-") as tmp:
        stop_file = f"{tmp}/stop"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, db, name, str(messages), str(start), embedder],
                stdout=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        reading = [
            subprocess.Popen(
                [sys.executable, "-c", READER, db, str(start), stop_file, embedder],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(readers)
        ]
        done = []
        for proc in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"a writer failed with exit code {proc.returncode}")
            done.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.time() - start
        open(stop_file, "w").close()
        latencies: list[float] = []
        for proc in reading:
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"a reader failed with exit code {proc.returncode}")
            latencies += json.loads(out.strip().splitlines()[-1])["ms"]
    acknowledged = [uid for d in done for uid in d["ids"]]
    store = open_store(db, read_only=True)
    try:
        shared = store.thread("team", "bot")
        assert shared is not None
        rows = store.messages(shared)
        stored = Counter(r.message.id for r in rows)
        position = {r.message.id: r.message.index for r in rows}
        in_order = all(
            [position[i] for i in d["ids"] if i in position]
            == sorted(position[i] for i in d["ids"] if i in position)
            for d in done
        )
        nodes = store.tree_nodes(shared)
        twice = sum(
            n - 1
            for n in Counter(
                (n.parent_id, n.kind, n.first_index, n.last_index) for n in nodes
            ).values()
            if n > 1
        )
        own_counts = []
        for name in names:
            own = store.thread(name, "bot")
            own_counts.append(0 if own is None else store.count(own))
        issues = store.check_tree(shared, 100)
    finally:
        store.close()
    ms = np.asarray(latencies or [0.0])
    return {
        "db": "postgres" if "://" in db else "sqlite",
        "writers": writers,
        "readers": readers,
        "embedder": embedder,
        "acknowledged": len(acknowledged),
        "stored": sum(stored.values()),
        "lost": len(set(acknowledged) - set(stored)),
        "doubled": sum(n - 1 for n in stored.values() if n > 1),
        "unacknowledged_stored": len(set(stored) - set(acknowledged)),
        "positions_gap_free": [r.message.index for r in rows] == list(range(len(rows))),
        "each_writer_in_order": in_order,
        "own_threads_complete": all(n == messages for n in own_counts),
        "tree_nodes": len(nodes),
        "tree_issues": len(issues),
        "nodes_twice": twice,
        "writers_wall_s": round(wall, 1),
        "messages_per_s": round((len(acknowledged) + writers * messages) / wall, 1),
        "searches": len(latencies),
        "search_ms_p50": round(float(np.percentile(ms, 50)), 1),
        "search_ms_p95": round(float(np.percentile(ms, 95)), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.measure_postgres")
    parser.add_argument("what", choices=("processes",))
    parser.add_argument("--db", required=True, help="a postgresql:// URL or a SQLite file")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--embedder", default="hash")
    args = parser.parse_args(argv)
    print(json.dumps(processes(args.db, args.writers, args.messages, args.readers, args.embedder)))


if __name__ == "__main__":
    main()
