"""A message whose add() returned survives the process being killed right after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from arbormem import Memory
from arbormem.embed import HashingEmbedder

WRITER = textwrap.dedent(
    """
    import sys
    from arbormem import Memory
    from arbormem.embed import HashingEmbedder

    mem = Memory(sys.argv[1], embedder=HashingEmbedder(16))
    for i in range(int(sys.argv[2])):
        m = mem.add(f"durable message {i}")
        print(m.id, flush=True)
    print("DONE", flush=True)
    sys.stdin.read()  # wait to be killed, with the store still open
    """
)


def test_messages_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "durable.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "25"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = []
    for line in proc.stdout:
        if line.strip() == "DONE":
            break
        acknowledged.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(acknowledged) == 25
    with Memory(db, embedder=HashingEmbedder(16)) as mem:
        for message_id in acknowledged:
            assert mem.get(message_id).content.startswith("durable message")
        assert len(mem.search("durable message", k=50)) == 25


def test_kill_in_the_middle_of_a_stream_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    db = tmp_path / "stream.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "100000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = []
    for line in proc.stdout:
        acknowledged.append(line.strip())
        if len(acknowledged) == 40:
            os.kill(proc.pid, signal.SIGKILL)  # the writer is mid-stream here
            break
    proc.wait(timeout=30)
    with Memory(db, embedder=HashingEmbedder(16)) as mem:
        stored = {m.id for m in mem.messages()}
        assert set(acknowledged) <= stored
