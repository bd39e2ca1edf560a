"""The package exports exactly the names we mean to support."""

from pathlib import Path

import arbormem


def test_exported_names_are_deliberate() -> None:
    assert set(arbormem.__all__) == {
        "ArbormemError",
        "AsyncMemory",
        "ConfigError",
        "Embedder",
        "EmbedderError",
        "Hit",
        "Hits",
        "Ingested",
        "InputError",
        "LLMError",
        "TreeError",
        "Memory",
        "Message",
        "MessageTooLarge",
        "NotFound",
        "RecallConfig",
        "Reranker",
        "RerankerError",
        "SchemaError",
        "Scope",
        "Session",
        "StoreError",
        "__version__",
        "get_embedder",
    }
    for name in arbormem.__all__:
        assert hasattr(arbormem, name), name


def test_errors_share_one_base_and_do_not_shadow_builtins() -> None:
    for name in (
        "ConfigError",
        "InputError",
        "NotFound",
        "StoreError",
        "SchemaError",
        "EmbedderError",
        "LLMError",
        "TreeError",
        "RerankerError",
        "MessageTooLarge",
    ):
        assert issubclass(getattr(arbormem, name), arbormem.ArbormemError)
    assert not hasattr(arbormem, "MemoryError")


def test_base_install_pulls_no_torch() -> None:
    """Walk the installed dependency tree of arbormem's base requirements."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = ["arbormem"]
    while todo:
        name = todo.pop()
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" in req:
                continue
            dep = re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    assert "numpy" in seen and "wordllama" in seen
    assert "torch" not in seen and "sentence-transformers" not in seen


def test_every_source_folder_is_a_package() -> None:
    # setuptools' find only ships folders with an __init__.py: a missing one works in
    # an editable install and breaks in a wheel.
    import arbormem

    root = Path(arbormem.__file__).parent
    folders = [p for p in root.rglob("*") if p.is_dir() and any(p.glob("*.py"))]
    assert folders and all((p / "__init__.py").exists() for p in folders), folders
