"""Every setting of a :class:`~arbormem.Memory`, resolved once, in one frozen object.

:meth:`Settings.resolve` reads each setting from the first source that gives it
(see :mod:`arbormem.config` for the order): the argument, the ``ARBORMEM_*``
environment variable, the config file, the default. A ``Memory`` resolves its
settings when it is made and reads nothing from the environment afterwards, so
one process can hold many memories configured differently (a server with a
memory per store, a test next to a user's configuration)::

    base = Settings.resolve(db="team.db")
    strict = base.replace(max_message_bytes=16_384, memory_mode="reasoning")
    with Memory(settings=strict) as mem:
        ...

Settings are checked as they are resolved: a bad value from an argument is an
:class:`~arbormem.errors.InputError` naming the field, one from the environment or
the config file a :class:`~arbormem.errors.ConfigError` naming the variable or file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from arbormem.arguments import MAX_MESSAGE_BYTES, MAX_METADATA_BYTES, MAX_NAME_BYTES, Limits
from arbormem.config import (
    UNSET,
    default_db_path,
    resolve,
    scope_name,
    to_bool,
    to_whole,
    whole_at_least,
)
from arbormem.context.assemble import MIN_BUDGET, REPLY_PRIMER
from arbormem.context.modes import DEFAULT_MODE, mode_name
from arbormem.embed import DEFAULT_DEEP, DEFAULT_EMBEDDER
from arbormem.errors import InputError
from arbormem.llm import LLMConfig, resolve_llm_config
from arbormem.models import DEFAULT_AGENT, DEFAULT_USER
from arbormem.recall.rerank import parse_reranker

#: A message arriving more than this long after the previous one opens a new
#: session, unless the caller names the session.
DEFAULT_SESSION_GAP = timedelta(minutes=30)
#: Vectors per thread above which dense search is approximate (an HNSW index).
DEFAULT_ANN_THRESHOLD = 50_000
DEFAULT_CONTEXT_BUDGET = 4000
DEFAULT_CONTEXT_WINDOW = 8192


def session_gap(value: Any) -> timedelta:
    """A session gap from a ``timedelta`` or a number of seconds: not negative, at
    most ten years (``inf`` or ``1e20`` seconds overflowed every command)."""
    try:
        gap = value if isinstance(value, timedelta) else timedelta(seconds=float(value))
    except OverflowError:
        raise ValueError(f"a session gap is 0 seconds to 10 years, not {value}") from None
    if not timedelta(0) <= gap <= timedelta(days=3653):
        raise ValueError(f"a session gap is 0 seconds to 10 years, not {value}")
    return gap


def budget_tokens(value: Any) -> int:
    """A context budget: enough tokens to hold a prompt at all."""
    tokens = to_whole(value)
    if tokens < MIN_BUDGET:
        raise ValueError(f"must be at least {MIN_BUDGET} tokens to hold a prompt, got {tokens}")
    return tokens


def window_tokens(value: Any) -> int:
    """A model's context window: a budget plus the primer of its reply."""
    tokens = to_whole(value)
    if tokens < MIN_BUDGET + REPLY_PRIMER + 1:
        raise ValueError(f"must be at least {MIN_BUDGET + REPLY_PRIMER + 1} tokens, got {tokens}")
    return tokens


def seconds(value: Any) -> float:
    """A timeout: more than 0 and at most an hour."""
    number = float(value)
    if not 0 < number <= 3600:  # also refuses NaN
        raise ValueError("must be more than 0 and at most 3600 seconds")
    return number


def retries(value: Any) -> int:
    """How many times to try a call again: 0 to 10."""
    number = to_whole(value)
    if not 0 <= number <= 10:
        raise ValueError("must be 0 to 10")
    return number


def spec(value: Any) -> str:
    """A spec string (an embedder or reranker): text, stripped."""
    if not isinstance(value, str):
        raise TypeError(f"must be a spec string, got {type(value).__name__}")
    return value.strip()


def reranker_spec(value: Any) -> str:
    """A reranker spec that parses: ``none``, ``cross-encoder`` or ``onnx:FOLDER``."""
    kind, arg = parse_reranker(value)
    return f"{kind}:{arg}" if arg else kind


def days(value: Any) -> float:
    """A span in days: more than 0 and at most a hundred years."""
    number = float(value)
    if not 0 < number <= 36_525:  # also refuses NaN
        raise ValueError("must be more than 0 and at most 36525 days")
    return number


def share(value: Any) -> float:
    """A number from 0 to 1."""
    number = float(value)
    if not 0 <= number <= 1:
        raise ValueError("must be from 0 to 1")
    return number


def boost(value: Any) -> float:
    """How much each recall lengthens a half-life: 0 (not at all) to 10 (elevenfold)."""
    number = float(value)
    if not 0 <= number <= 10:
        raise ValueError("must be from 0 to 10")
    return number


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"must be a string, got {type(value).__name__}")
    return value.strip()


#: Each plain setting: (environment variable, config-file key, default, converter).
_SOURCES: dict[str, tuple[str, str, Any, Any]] = {
    "db": ("ARBORMEM_DB", "db", "", str),
    "user": ("ARBORMEM_USER", "user", DEFAULT_USER, scope_name),
    "agent": ("ARBORMEM_AGENT", "agent", DEFAULT_AGENT, scope_name),
    "embedder": ("ARBORMEM_EMBEDDER", "embedder", DEFAULT_EMBEDDER, spec),
    "embedder_timeout": ("ARBORMEM_EMBEDDER_TIMEOUT", "embedder_timeout", 30.0, seconds),
    "lock_wait": ("ARBORMEM_LOCK_WAIT", "lock_wait", 30.0, seconds),
    "embedder_max_retries": ("ARBORMEM_EMBEDDER_MAX_RETRIES", "embedder_max_retries", 2, retries),
    "reranker": ("ARBORMEM_RERANKER", "reranker", "none", reranker_spec),
    "deep_embedder": ("ARBORMEM_DEEP_EMBEDDER", "deep_embedder", DEFAULT_DEEP, spec),
    "session_gap": ("ARBORMEM_SESSION_GAP", "session_gap", DEFAULT_SESSION_GAP, session_gap),
    "max_message_bytes": (
        "ARBORMEM_MAX_MESSAGE_BYTES",
        "max_message_bytes",
        MAX_MESSAGE_BYTES,
        whole_at_least(1),
    ),
    "max_name_bytes": (
        "ARBORMEM_MAX_NAME_BYTES",
        "max_name_bytes",
        MAX_NAME_BYTES,
        whole_at_least(1),
    ),
    "max_metadata_bytes": (
        "ARBORMEM_MAX_METADATA_BYTES",
        "max_metadata_bytes",
        MAX_METADATA_BYTES,
        whole_at_least(2),  # "{}"
    ),
    "ann_threshold": (
        "ARBORMEM_ANN_THRESHOLD",
        "ann_threshold",
        DEFAULT_ANN_THRESHOLD,
        whole_at_least(0),
    ),
    "memory_mode": ("ARBORMEM_MEMORY_MODE", "memory_mode", DEFAULT_MODE, mode_name),
    "context_budget": (
        "ARBORMEM_CONTEXT_BUDGET",
        "context_budget",
        DEFAULT_CONTEXT_BUDGET,
        budget_tokens,
    ),
    "context_window": (
        "ARBORMEM_CONTEXT_WINDOW",
        "context_window",
        DEFAULT_CONTEXT_WINDOW,
        window_tokens,
    ),
    # Image memories (see docs/images.md).
    "image_max_bytes": (
        "ARBORMEM_IMAGE_MAX_BYTES",
        "image_max_bytes",
        20 * 1024 * 1024,
        whole_at_least(1),
    ),
    "image_fetch_remote": ("ARBORMEM_IMAGE_FETCH_REMOTE", "image_fetch_remote", False, to_bool),
    "image_half_life_days": ("ARBORMEM_IMAGE_HALF_LIFE_DAYS", "image_half_life_days", 7.0, days),
    "image_half_life_max_days": (
        "ARBORMEM_IMAGE_HALF_LIFE_MAX_DAYS",
        "image_half_life_max_days",
        30.0,
        days,
    ),
    "image_recall_boost": ("ARBORMEM_IMAGE_RECALL_BOOST", "image_recall_boost", 0.5, boost),
    "image_expire_below": ("ARBORMEM_IMAGE_EXPIRE_BELOW", "image_expire_below", 0.1, share),
    "image_max_age_days": ("ARBORMEM_IMAGE_MAX_AGE_DAYS", "image_max_age_days", 90.0, days),
    "vision_model": ("ARBORMEM_VISION_MODEL", "vision_model", "", text),
    "vision_base_url": ("ARBORMEM_VISION_BASE_URL", "vision_base_url", "", text),
    "vision_timeout": ("ARBORMEM_VISION_TIMEOUT", "vision_timeout", 30.0, seconds),
}


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one :class:`~arbormem.Memory` (see the module docs).

    Make them with :meth:`resolve`; derive variants with :meth:`replace`, which
    checks the new values the same way.
    """

    #: The store: a SQLite file path, ``":memory:"``, or a URL (``sqlite:///path``).
    db: str
    #: The default scope of every call.
    user: str = DEFAULT_USER
    agent: str = DEFAULT_AGENT
    #: The embedder spec (``wordllama``, ``hash:64``, ``openai:MODEL``...).
    embedder: str = DEFAULT_EMBEDDER
    #: A remote embedder's wait per attempt, and its extra attempts.
    embedder_timeout: float = 30.0
    embedder_max_retries: int = 2
    #: Seconds a write waits for another process's write to the same store to end
    #: (several servers or stdio MCP processes on one file) before it fails.
    lock_wait: float = 30.0
    #: The reranker spec: ``none``, ``cross-encoder`` or ``onnx:FOLDER``.
    reranker: str = "none"
    #: The background embedder recall reads once it has indexed a thread: ``none``,
    #: ``auto`` (bge-small when installed) or an embedder spec (see :mod:`arbormem.deep`).
    deep_embedder: str = DEFAULT_DEEP
    #: Quiet time after which a message opens a new session.
    session_gap: timedelta = DEFAULT_SESSION_GAP
    #: The largest message content (and query, and system prompt) accepted, in
    #: UTF-8 bytes.
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: The largest id, session, speaker, user or agent name, in UTF-8 bytes.
    max_name_bytes: int = MAX_NAME_BYTES
    #: The largest metadata of a message, as JSON, in UTF-8 bytes.
    max_metadata_bytes: int = MAX_METADATA_BYTES
    #: Vectors per thread above which dense search is approximate.
    ann_threshold: int = DEFAULT_ANN_THRESHOLD
    #: The memory mode of a session that has not chosen one.
    memory_mode: str = DEFAULT_MODE
    #: Tokens :meth:`Memory.context` fills when no budget is given.
    context_budget: int = DEFAULT_CONTEXT_BUDGET
    #: The model's context window when no LLM says what its own is.
    context_window: int = DEFAULT_CONTEXT_WINDOW
    #: The largest image :meth:`~arbormem.Memory.add_image` accepts, in bytes.
    image_max_bytes: int = 20 * 1024 * 1024
    #: Whether a remote ``image_url`` met on ingest is downloaded (else only recorded).
    image_fetch_remote: bool = False
    #: An image memory's half-life at importance 0, and at importance 1, in days.
    image_half_life_days: float = 7.0
    image_half_life_max_days: float = 30.0
    #: Each recall multiplies the half-life by (1 + this).
    image_recall_boost: float = 0.5
    #: Strength below which an image is soft-expired (out of recall, restorable).
    image_expire_below: float = 0.1
    #: Age in days past which ``arbormem images expire --purge`` may delete an image.
    image_max_age_days: float = 90.0
    #: The vision model that captions images ("" for none: captions come from the
    #: file and the conversation), its OpenAI-compatible endpoint ("" for the chat
    #: LLM's, else ``OPENAI_BASE_URL``) and its wait per attempt.
    vision_model: str = ""
    vision_base_url: str = ""
    vision_timeout: float = 30.0
    #: The chat LLM, or None for none (every LLM feature falls back to its heuristic).
    llm: LLMConfig | None = None

    @classmethod
    def resolve(cls, *, llm: LLMConfig | Any | None = UNSET, **given: Any) -> Settings:
        """Settings from the arguments given, then ``ARBORMEM_*`` variables, then the
        config file, then the defaults. ``llm`` is an :class:`~arbormem.llm.LLMConfig`,
        None for no LLM, or left out for the configured one (``ARBORMEM_LLM_MODEL``,
        ``OPENAI_BASE_URL``... see :func:`arbormem.llm.resolve_llm_config`)."""
        unknown = sorted(set(given) - set(_SOURCES))
        if unknown:
            raise InputError(
                f"unknown setting; the settings are {', '.join(sorted([*_SOURCES, 'llm']))}",
                field=unknown[0],
            )
        values: dict[str, Any] = {}
        for name, (env, key, default, convert) in _SOURCES.items():
            if name == "db":
                default = str(default_db_path())  # per platform, read when resolved
            explicit = given.get(name, UNSET)
            if explicit is None and name != "db":
                explicit = UNSET  # None means "not given" for a setting that cannot be off
            values[name] = resolve(explicit, env, key, default, convert, field=name)
        if llm is UNSET:
            llm = resolve_llm_config()
        elif llm is not None and not isinstance(llm, LLMConfig):
            raise InputError(f"must be an LLMConfig or None, got {type(llm).__name__}", field="llm")
        return cls(llm=llm, **values)

    @property
    def limits(self) -> Limits:
        """The size limits, as the argument checks take them."""
        return Limits(self.max_message_bytes, self.max_name_bytes, self.max_metadata_bytes)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``, each checked as :meth:`resolve` checks an argument."""
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            if name == "llm":
                if value is not None and not isinstance(value, LLMConfig):
                    raise InputError(
                        f"must be an LLMConfig or None, got {type(value).__name__}", field="llm"
                    )
                checked[name] = value
                continue
            if name not in _SOURCES:
                raise InputError(
                    f"unknown setting; the settings are {', '.join(sorted([*_SOURCES, 'llm']))}",
                    field=name,
                )
            convert = _SOURCES[name][3]
            try:
                checked[name] = convert(value)
            except (TypeError, ValueError, OverflowError) as exc:
                raise InputError(str(exc), field=name) from None
        return dataclasses.replace(self, **checked)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (the LLM's key left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                value = value.total_seconds()
            elif isinstance(value, LLMConfig):
                value = {
                    "model": value.model,
                    "base_url": value.base_url,
                    "timeout": value.timeout,
                    "max_retries": value.max_retries,
                    "context_window": value.context_window,
                }
            out[f.name] = value
        return out


def resolve_store(db: Any = UNSET) -> str:
    """Where the store is, resolved alone (the argument, ``ARBORMEM_DB``, the config
    file's ``db``, the per-user default): for front ends that look at the file before
    opening it."""
    return str(resolve(db, "ARBORMEM_DB", "db", str(default_db_path()), str, field="db"))
