"""Configuration with a visible order of precedence.

For every setting the first of these that gives a value wins:

1. the explicit argument (Python keyword or CLI flag);
2. the environment variable ``ARBORMEM_<NAME>`` (and the standard
   ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` for LLM endpoints);
3. the config file: ``$ARBORMEM_CONFIG``, else ``<config dir>/arbormem/config.toml``;
4. the built-in default.

``UNSET`` marks "not given, use the next source"; ``None`` given explicitly
means "off" where a setting can be switched off (an LLM, for instance).
"""

from __future__ import annotations

import decimal
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, TypeVar

from arbormem.errors import ConfigError, InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class _Unset:
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()

T = TypeVar("T")


def _home_dir(kind: str) -> Path:
    """Per-user folder for 'data' or 'config', following each platform's convention."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "arbormem"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "arbormem"
    if kind == "config":
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    else:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "arbormem"


def default_db_path() -> Path:
    """Where the store lives when no ``--db`` or ``ARBORMEM_DB`` is given."""
    return _home_dir("data") / "memory.db"


def config_file_path() -> Path:
    explicit = os.environ.get("ARBORMEM_CONFIG")
    return Path(explicit).expanduser() if explicit else _home_dir("config") / "config.toml"


#: The keys a config file may hold (``llm`` is the table of :data:`LLM_KEYS`).
FILE_KEYS: Final = frozenset(
    [
        "db",
        "user",
        "agent",
        "embedder",
        "embedder_timeout",
        "embedder_max_retries",
        "deep_embedder",
        "reranker",
        "session_gap",
        "max_message_bytes",
        "max_name_bytes",
        "max_metadata_bytes",
        "ann_threshold",
        "memory_mode",
        "context_budget",
        "context_window",
        "image_max_bytes",
        "image_fetch_remote",
        "image_half_life_days",
        "image_half_life_max_days",
        "image_recall_boost",
        "image_expire_below",
        "image_max_age_days",
        "vision_model",
        "vision_base_url",
        "vision_timeout",
        "llm",
    ]
)
LLM_KEYS: Final = frozenset(
    [
        "model",
        "base_url",
        "api_key",
        "timeout",
        "max_retries",
        "backoff",
        "temperature",
        "context_window",
    ]
)


@lru_cache(maxsize=8)
def _read_config(path: str, mtime: float) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    _check_keys(path, data)
    return data


def _check_keys(path: str, data: Mapping[str, Any]) -> None:
    """A misspelt key would be ignored without a word: refuse it, naming it."""
    unknown = sorted(k for k in data if k not in FILE_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {unknown[0]!r}; the settings are "
            f"{', '.join(sorted(FILE_KEYS - {'llm'}))} and the [llm] table"
        )
    llm = data.get("llm", {})
    if not isinstance(llm, Mapping):
        raise ConfigError(f"{path}: 'llm' must be a table ([llm]), got {llm!r}")
    stray = sorted(k for k in llm if k not in LLM_KEYS)
    if stray:
        hint = (
            " (top-level settings must come before the [llm] table: after it they belong to it)"
            if stray[0] in FILE_KEYS
            else ""
        )
        raise ConfigError(
            f"{path}: unknown setting 'llm.{stray[0]}'{hint}; the [llm] settings are "
            f"{', '.join(sorted(LLM_KEYS))}"
        )


def config_file() -> dict[str, Any]:
    """The parsed config file, or ``{}`` when there is none."""
    path = config_file_path()
    try:
        mtime = path.stat().st_mtime
    except OSError:
        if os.environ.get("ARBORMEM_CONFIG"):
            raise ConfigError(f"ARBORMEM_CONFIG points at {path}, which does not exist") from None
        return {}
    return _read_config(str(path), mtime)


def _lookup(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return UNSET
        node = node[part]
    return node


def resolve(
    explicit: Any,
    env: str | None,
    file_key: str | None,
    default: T,
    convert: Callable[[Any], T] | None = None,
    field: str | None = None,
) -> T:
    """The first value given by: argument, environment variable, config file, default.

    A value the converter refuses is a :class:`ConfigError` naming the variable or
    file it came from; from the argument, an :class:`InputError` naming ``field``
    when one is given (else the converter's own error)."""
    convert = convert or (lambda v: v)
    if explicit is not UNSET:
        if explicit is None:
            return explicit  # type: ignore[return-value]
        try:
            return convert(explicit)
        except (TypeError, ValueError, OverflowError) as exc:
            if field is None:
                raise
            raise InputError(str(exc), field=field) from None
    if env and os.environ.get(env) not in (None, ""):
        try:
            return convert(os.environ[env])
        except (TypeError, ValueError, OverflowError) as exc:
            raise ConfigError(f"environment variable {env}={os.environ[env]!r}: {exc}") from None
    if file_key:
        value = _lookup(config_file(), file_key)
        if value is not UNSET:
            try:
                return convert(value)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ConfigError(f"{config_file_path()}: {file_key} = {value!r}: {exc}") from None
    return default


#: The largest whole number a setting may be written as in decimal or exponent form.
_WHOLE_LIMIT = 10**18


def to_whole(value: Any) -> int:
    """A whole number from a setting: ``"12"``, ``12``, ``12.0`` or a numpy number
    holding one, of at most 10**18 either way. ``12.5`` and ``True`` are refused
    rather than cut down to 12 and 1."""
    number = _whole(value)
    if abs(number) > _WHOLE_LIMIT:
        raise ValueError(f"must be a whole number of at most {_WHOLE_LIMIT}, got {value!r}")
    return number


def _whole(value: Any) -> int:
    if is_flag(value):
        raise TypeError(f"must be a whole number, got {value}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if not number.is_integer():  # NaN and infinities are not either
            raise ValueError(f"must be a whole number, got {value}")
        return int(number)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        # "12.0" and "1e3", as 12.0 from TOML; read exactly, so "12.0000000000000001"
        # is refused rather than rounded.
        try:
            exact = decimal.Decimal(text)
        except decimal.InvalidOperation:
            raise ValueError(f"must be a whole number, got {value!r}") from None
        # The size first, with no arithmetic: a huge exponent would overflow the
        # default decimal context when rounded.
        if not exact.is_finite() or exact.copy_abs() > _WHOLE_LIMIT:
            raise ValueError(f"must be a whole number of at most {_WHOLE_LIMIT}, got {value!r}")
        if exact != exact.to_integral_value():
            raise ValueError(f"must be a whole number, got {value!r}")
        return int(exact)
    raise TypeError(f"must be a whole number, got {type(value).__name__}")


def is_flag(value: Any) -> bool:
    """True for booleans, Python's or numpy's (numbers that must not pass as 0 and 1)."""
    import numpy as np

    return isinstance(value, (bool, np.bool_))


def whole_at_least(low: int) -> Callable[[Any], int]:
    """A converter for :func:`resolve`: a whole number of at least ``low``."""

    def convert(value: Any) -> int:
        number = to_whole(value)
        if number < low:
            raise ValueError(f"must be at least {low}, got {number}")
        return number

    return convert


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def scope_name(value: Any) -> str:
    """A user or agent id: text that is not blank and has no surrounding spaces (an
    empty id was stored as given, and `agent = true` in a file became "True")."""
    from arbormem.arguments import shown

    if not isinstance(value, str):
        raise ValueError(f"must be text, got {type(value).__name__}")
    if not value.strip():
        raise ValueError("must not be blank")
    if value != value.strip():
        raise ValueError(f"must have no spaces around it, got {shown(value)}")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        # From a command line with bytes that are not UTF-8 (Python reads them as
        # lone surrogates); stored, it failed deep in SQLite.
        raise ValueError(
            f"is not valid UTF-8 (unpaired surrogate at character {exc.start})"
        ) from None
    return value
