"""The README's set-up commands are the ones CI runs, and its quickstart works."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from .conftest import run_cli, tiny_locomo, write_json

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    install, test = blocks[0], blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"# README: install\n{install}\n" in ci
    assert f"# README: tests\n{test}\n" in ci


def _blocks_under(heading: str, lang: str) -> list[str]:
    """The code blocks of one README section."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)]


def _commands(block: str) -> list[list[str]]:
    """The arbormem commands of a bash block, one a line or joined by &&, comments dropped."""
    out = []
    for line in block.splitlines():
        for part in line.split(" #", 1)[0].split("&&"):
            words = shlex.split(part)
            assert words[0] == "arbormem", part
            out.append(words[1:])
    return out


def test_readme_main_job_runs_offline_in_any_folder(tmp_path: Path) -> None:
    # An empty folder outside the clone: the sample conversation comes with the package.
    main_job = _bash_blocks((ROOT / "README.md").read_text())[2]
    env = {"ARBORMEM_DB": str(tmp_path / "m.db")}
    here = tmp_path / "elsewhere"
    here.mkdir()
    outputs = []
    for args in _commands(main_job):
        out = run_cli(*args, env=env, cwd=here)
        assert out.returncode == 0, (args, out.stderr)
        outputs.append(out.stdout)
    assert [args[0] for args in _commands(main_job)] == ["example", "ingest", "search"]
    assert "peanut" in outputs[-1]


def test_readme_cli_quickstart_runs_in_any_folder(tmp_path: Path) -> None:
    (block,) = _blocks_under("Quickstart (CLI)", "bash")
    env = {"ARBORMEM_DB": str(tmp_path / "m.db"), "ARBORMEM_EMBEDDER": "hash"}
    here = tmp_path / "elsewhere"
    here.mkdir()
    for args in _commands(block):
        out = run_cli(*args, env=env, cwd=here)
        assert out.returncode == 0, (args, out.stderr)
    assert (here / "conversation.json").is_file() and (here / "backup.json").is_file()


def test_readme_python_quickstart_runs_in_any_folder(tmp_path: Path) -> None:
    (code,) = _blocks_under("Quickstart (Python)", "python")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "Leo is allergic to peanuts." in out.stdout and (tmp_path / "notes.db").exists()


def test_readme_names_where_locomo_comes_from_and_the_bench_reads_that_file(
    tmp_path: Path,
) -> None:
    text = (ROOT / "README.md").read_text()
    assert "https://github.com/snap-research/locomo" in text and "../shared" not in text
    (block,) = _blocks_under("Measuring recall", "bash")
    ((*args, name),) = _commands(block)
    # The published file: a list of {"sample_id", "conversation", "qa"}.
    write_json(
        tmp_path / name,
        [{"sample_id": "conv-x", "conversation": tiny_locomo(), "qa": tiny_locomo()["qa"]}],
    )
    env = {"ARBORMEM_EMBEDDER": "hash"}
    out = run_cli(*args, name, "--systems", "arbormem", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "R@10" in out.stdout


def test_the_sample_conversation_is_package_data(tmp_path: Path) -> None:
    from arbormem.cli.example import SAMPLE

    # What pyproject ships is what 'arbormem example' reads.
    pyproject = (ROOT / "pyproject.toml").read_text()
    patterns = re.search(r"^arbormem = \[(.*)\]$", pyproject, flags=re.M)
    assert patterns
    assert any(fnmatch.fnmatch(SAMPLE, p.strip(' "')) for p in patterns.group(1).split(","))
    out = run_cli("example", "-")
    assert out.returncode == 0 and json.loads(out.stdout)[0]["speaker"] == "Maya"
    # Written again it is left alone; another file of that name is not replaced.
    assert run_cli("example", cwd=tmp_path).returncode == 0
    assert "already" in run_cli("example", cwd=tmp_path).stdout
    (tmp_path / "mine.json").write_text("[]")
    refused = run_cli("example", "mine.json", cwd=tmp_path)
    assert refused.returncode == 1 and "exists already" in refused.stderr
    assert (tmp_path / "mine.json").read_text() == "[]"
