"""The shape of the house: layers import downwards only, modules stay readable, and
storage details stay inside the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import arbormem

ROOT = Path(arbormem.__file__).resolve().parent

#: A module past this many lines holds more than one concept: split it.
MAX_LINES = 1000


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The arbormem modules ``name`` imports anywhere in its body (inside functions
    too: a function-level import only hides a cycle), except under TYPE_CHECKING."""
    tree = ast.parse(path.read_text("utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            # The longest known module the name starts with: `from a.b import c` is an
            # import of a.b.c when c is a module, else of a.b.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the edges a package's __init__ has to its own submodules
    (re-exports), which are not cycles of meaning."""
    return {
        name: {t for t in targets if not t.startswith(name + ".")}
        for name, targets in graph.items()
    }


def test_no_import_cycles() -> None:
    cycles = _cycles(_parents(_graph()))
    assert cycles == [], "\n".join(" <-> ".join(c) for c in cycles)


def test_no_module_is_too_long_to_read() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules by concept: {long}"


def test_storage_details_stay_inside_the_store() -> None:
    leaks = []
    pattern = re.compile(r"\bsqlite3\b|[\"']-wal[\"']|\.ann\b")
    for name, path in _modules().items():
        if name.startswith("arbormem.store"):
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if pattern.search(line):
                leaks.append(f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}")
    assert leaks == [], "\n".join(leaks)


def _within(name: str, *packages: str) -> bool:
    """Whether module ``name`` is one of ``packages`` or inside one (``arbormem.client``
    is not inside ``arbormem.cli``)."""
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_benchmarks_and_front_ends_do_not_reach_into_each_other() -> None:
    graph = _graph()
    for name, targets in graph.items():
        if _within(name, "arbormem.bench"):
            assert not any(_within(t, "arbormem.cli") for t in targets), (name, targets)
        if not _within(name, "arbormem.cli", "arbormem.bench", "arbormem.__main__"):
            # The library never imports a front end.
            assert not any(_within(t, "arbormem.cli") for t in targets), (name, targets)
