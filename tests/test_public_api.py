"""The package exports exactly the names we mean to support."""

from pathlib import Path

import arbormem


def test_exported_names_are_deliberate() -> None:
    assert set(arbormem.__all__) == {
        "ArbormemError",
        "AsyncClient",
        "AsyncMemory",
        "Client",
        "ConfigError",
        "Context",
        "Embedder",
        "EmbedderError",
        "Exported",
        "Forgotten",
        "Hit",
        "Hits",
        "ImageHit",
        "ImageMemory",
        "ImageRef",
        "ImagesExpired",
        "Imported",
        "Ingested",
        "InputError",
        "LLMError",
        "Memory",
        "Message",
        "MessageTooLarge",
        "NotFound",
        "PathNode",
        "PendingJob",
        "PreparedSearch",
        "Record",
        "RecordHit",
        "RecordsForgotten",
        "Remembered",
        "Purged",
        "RankingFeatures",
        "RecallConfig",
        "Reembedded",
        "RemoteError",
        "Reorganized",
        "Reranker",
        "RerankerError",
        "SchemaError",
        "Scope",
        "Section",
        "Session",
        "Settings",
        "Stats",
        "StoreError",
        "TopicNode",
        "TopicPath",
        "TreeError",
        "TreeLogEntry",
        "TreeNavigator",
        "TreeProblem",
        "Undone",
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


def test_async_memory_offers_every_public_method_of_memory() -> None:
    import inspect

    from arbormem import AsyncMemory, Memory

    public = {
        name
        for name, member in inspect.getmembers(Memory)
        if not name.startswith("_") and (callable(member) or isinstance(member, property))
    }
    offered = {name for name in dir(AsyncMemory) if not name.startswith("_")}
    # Parts for tests and tools that look inside are reached through .memory.
    inside = {"backend", "embedder", "engine", "llm", "limits", "working", "path"}
    inside |= {"max_message_bytes", "session_gap", "tree_config", "recall_config"}
    inside |= {"check_writable", "ranking_features"}
    assert public - inside - offered == set()
    for name in public - inside:
        member = getattr(AsyncMemory, name)
        if callable(member) and name not in ("for_tenant",):
            assert inspect.iscoroutinefunction(member), name


def test_every_public_result_is_a_dataclass_with_to_dict() -> None:
    import dataclasses
    import inspect
    import typing

    from arbormem import Memory

    hints = {
        name: typing.get_type_hints(member).get("return")
        for name, member in inspect.getmembers(Memory, inspect.isfunction)
        if not name.startswith("_")
    }
    for name, returned in hints.items():
        assert returned is not None, name
        assert returned is not dict and typing.get_origin(returned) is not dict, name
    for cls in (
        arbormem.Forgotten,
        arbormem.Stats,
        arbormem.Reorganized,
        arbormem.Imported,
        arbormem.Exported,
        arbormem.PreparedSearch,
        arbormem.Reembedded,
        arbormem.TreeLogEntry,
        arbormem.Undone,
        arbormem.Purged,
    ):
        assert dataclasses.is_dataclass(cls) and hasattr(cls, "to_dict"), cls
