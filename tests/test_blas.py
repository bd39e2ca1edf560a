"""numpy's BLAS held to one thread when a memory opens, unless the process chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbormem import Memory, blas
from arbormem.embed import HashingEmbedder
from arbormem.errors import ConfigError

PROBE = """
import json, sys
import numpy  # loads its BLAS
from threadpoolctl import threadpool_info
def blas_threads():
    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
before = blas_threads()
from arbormem import Memory
from arbormem.embed import HashingEmbedder
imported = blas_threads()
with Memory(sys.argv[1], embedder=HashingEmbedder(16), deep_embedder=None) as m:
    m.add("hello", role="user")
    opened = blas_threads()
print(json.dumps({"before": before, "imported": imported, "opened": opened}))
"""


def probe(tmp_path: Path, **env: str) -> dict[str, list[int]]:
    clean = {k: v for k, v in os.environ.items() if k not in (blas.VARIABLE, *blas.OWN_CHOICE)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "m.db")],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_environment_chooses_the_limit() -> None:
    assert blas.wanted_threads({}) == 1
    assert blas.wanted_threads({"ARBORMEM_BLAS_THREADS": "3"}) == 3
    assert blas.wanted_threads({"ARBORMEM_BLAS_THREADS": "0"}) is None
    assert blas.wanted_threads({"OPENBLAS_NUM_THREADS": "4"}) is None
    assert blas.wanted_threads({"OMP_NUM_THREADS": "2"}) is None
    # Ours wins when both are set: it names arbormem's choice.
    both = {"OMP_NUM_THREADS": "2", "ARBORMEM_BLAS_THREADS": "1"}
    assert blas.wanted_threads(both) == 1
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(ConfigError, match="ARBORMEM_BLAS_THREADS"):
            blas.wanted_threads({"ARBORMEM_BLAS_THREADS": bad})


def test_opening_a_memory_holds_blas_to_one_thread(tmp_path: Path) -> None:
    seen = probe(tmp_path)
    if seen["before"] in ([], [1]):
        pytest.skip(f"numpy's BLAS here runs {seen['before']} threads already")
    # Importing arbormem changes nothing; opening a memory does.
    assert seen["imported"] == seen["before"]
    assert seen["opened"] == [1]


def test_a_process_that_chose_its_threads_is_left_as_it_is(tmp_path: Path) -> None:
    seen = probe(tmp_path, ARBORMEM_BLAS_THREADS="0")
    if seen["before"] in ([], [1]):
        pytest.skip(f"numpy's BLAS here runs {seen['before']} threads already")
    assert seen["opened"] == seen["before"]
    seen = probe(tmp_path, OPENBLAS_NUM_THREADS="2")
    assert seen["opened"] == seen["before"] == [2]


def test_a_bad_limit_is_refused_before_the_store_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blas, "_done", False)
    monkeypatch.setenv("ARBORMEM_BLAS_THREADS", "many")
    with pytest.raises(ConfigError, match="ARBORMEM_BLAS_THREADS='many'"):
        Memory(tmp_path / "m.db", embedder=HashingEmbedder(16), deep_embedder=None)
    assert not (tmp_path / "m.db").exists()
