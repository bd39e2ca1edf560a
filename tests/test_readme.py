"""The README's set-up commands are the ones CI runs, and its quickstart works."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    install, test = blocks[0], blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"# README: install\n{install}\n" in ci
    assert f"# README: tests\n{test}\n" in ci


def test_readme_main_job_runs_offline(tmp_path: Path) -> None:
    main_job = _bash_blocks((ROOT / "README.md").read_text())[2]
    ingest, search = (part.strip() for part in main_job.split("&&"))
    assert ingest.startswith("arbormem ingest ") and search.startswith("arbormem search ")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {"ARBORMEM_DB": str(tmp_path / "m.db")}
    out = run_cli(*ingest.split()[1:], env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    query = re.search(r'"(.*)"', search)
    assert query
    found = run_cli("search", query.group(1), env=env, cwd=tmp_path)
    assert found.returncode == 0 and "peanut" in found.stdout
