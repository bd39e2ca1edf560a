"""The package exports exactly the names we mean to support."""

import arbormem


def test_exported_names_are_deliberate() -> None:
    assert set(arbormem.__all__) == {
        "ArbormemError",
        "AsyncMemory",
        "ConfigError",
        "Embedder",
        "EmbedderError",
        "Hit",
        "InputError",
        "LLMError",
        "Memory",
        "Message",
        "MessageTooLarge",
        "NotFound",
        "RecallConfig",
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
        "MessageTooLarge",
    ):
        assert issubclass(getattr(arbormem, name), arbormem.ArbormemError)
    assert not hasattr(arbormem, "MemoryError")
