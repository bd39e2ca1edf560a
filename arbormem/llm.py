"""The one place where arbormem talks to a chat LLM.

Every feature that can use an LLM calls an :class:`LLMClient` and falls back to
its no-LLM heuristic when the call raises :class:`~arbormem.errors.LLMError`.
The contract those features rely on:

* every failure (HTTP error, timeout, dropped connection, unusable answer, a bug
  in a client implementation) surfaces as ``LLMError`` and as nothing else;
* no wait on the network lasts longer than the configured timeout;
* the caller's messages are never modified, and every call is counted in
  :attr:`LLMClient.usage`, failed or not.

:func:`resolve_llm_config` finds the endpoint, :func:`get_llm` makes the client.
"""

from __future__ import annotations

import abc
import email.utils
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from arbormem.config import UNSET, resolve
from arbormem.errors import ConfigError, LLMError

__all__ = [
    "ChatRequest",
    "ChatResult",
    "Chunk",
    "LLMClient",
    "LLMConfig",
    "OpenAIChatClient",
    "TokenUsage",
    "UsageMeter",
    "estimate_usage",
    "get_llm",
    "parse_json_answer",
    "resolve_llm_config",
]

log = logging.getLogger("arbormem.llm")

T = TypeVar("T")
Messages = str | Sequence[Mapping[str, Any]]

#: The longest a server's ``Retry-After`` (or our own backoff) can make us wait.
MAX_RETRY_AFTER = 10.0
#: Sent as the key when none is configured; local servers ignore it.
PLACEHOLDER_API_KEY = "not-needed"
JSON_INSTRUCTION = "Reply with one JSON value only: no prose before or after it, no code fences."


# --------------------------------------------------------------------------- configuration


def _number(kind: type, low: float, *, strict: bool) -> Callable[[Any], Any]:
    """A converter to ``kind`` that rejects values below ``low`` (or equal, if ``strict``)."""

    def convert(value: Any) -> Any:
        from arbormem.config import is_flag, to_whole

        if is_flag(value):
            raise TypeError(f"must be a number, got {value}")
        number = to_whole(value) if kind is int else kind(value)
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError("must be a finite number")
        if not (number > low if strict else number >= low):
            raise ValueError(f"must be {'greater than' if strict else 'at least'} {low:g}")
        return number

    return convert


def _text(value: Any) -> str | None:
    return str(value).strip() or None


# name -> (environment variable, converter); the config file key is ``llm.<name>``.
_SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "model": ("ARBORMEM_LLM_MODEL", _text),
    "base_url": ("OPENAI_BASE_URL", _text),
    "api_key": ("OPENAI_API_KEY", _text),
    "timeout": ("ARBORMEM_LLM_TIMEOUT", _number(float, 0, strict=True)),
    "max_retries": ("ARBORMEM_LLM_MAX_RETRIES", _number(int, 0, strict=False)),
    "backoff": ("ARBORMEM_LLM_BACKOFF", _number(float, 0, strict=False)),
    "temperature": ("ARBORMEM_LLM_TEMPERATURE", _number(float, 0, strict=False)),
    # The smallest window a prompt fits in (see arbormem.context.assemble.MIN_BUDGET).
    "context_window": ("ARBORMEM_LLM_CONTEXT_WINDOW", _number(int, 36, strict=False)),
}


@dataclass(frozen=True)
class LLMConfig:
    """Where the chat LLM is and how patiently to call it.

    ``base_url=None`` is the openai client's default (api.openai.com);
    ``api_key=None`` sends a placeholder, which local servers accept.
    ``timeout`` bounds each wait on the network, per attempt; ``max_retries``
    extra attempts follow a 429, 5xx, timeout or connection error.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    max_retries: int = 2
    backoff: float = 0.5
    temperature: float = 0.0
    context_window: int = 8192

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"LLM model must be a non-empty string (got {self.model!r})")
        for name in ("timeout", "max_retries", "backoff", "temperature", "context_window"):
            try:
                value = _SETTINGS[name][1](getattr(self, name))
            except (TypeError, ValueError, OverflowError) as exc:
                raise ConfigError(f"LLM {name}={getattr(self, name)!r}: {exc}") from None
            object.__setattr__(self, name, value)  # 2.0 retries kept as 2, numpy as Python


def _read_dotenv(env_file: str | Path | None) -> tuple[dict[str, str], Path | None]:
    path = Path(env_file) if env_file is not None else None
    try:
        found = path is not None and path.is_file()
    except OSError:  # a working folder this process may not look into: no .env of its own
        found = False
    if path is None or not found:
        return {}, None
    from dotenv import dotenv_values  # only when there is a file to read

    try:
        raw = dotenv_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return {key: value for key, value in raw.items() if value}, path


def resolve_llm_config(
    model: Any = UNSET,
    base_url: Any = UNSET,
    api_key: Any = UNSET,
    *,
    timeout: Any = UNSET,
    max_retries: Any = UNSET,
    backoff: Any = UNSET,
    temperature: Any = UNSET,
    context_window: Any = UNSET,
    env_file: str | Path | None = ".env",
) -> LLMConfig | None:
    """The LLM settings, or ``None`` when no model is configured (the LLM is off).

    Each setting comes from the first of: the argument; the environment
    (``ARBORMEM_LLM_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
    ``ARBORMEM_LLM_TIMEOUT``, ``ARBORMEM_LLM_CONTEXT_WINDOW``...); ``env_file``
    (read, never copied into ``os.environ``); the config file's ``[llm]``
    table; the default. ``model=None`` switches the LLM off whatever the rest say.

    >>> resolve_llm_config(model=None) is None
    True
    """
    given = dict(locals())  # the arguments by name, before any other local exists
    if model is None:
        return None
    dotenv, dotenv_path = _read_dotenv(env_file)
    values: dict[str, Any] = {}
    for name, (env, convert) in _SETTINGS.items():
        explicit = given[name]
        if explicit is not UNSET:
            try:
                value = None if explicit is None else convert(explicit)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ConfigError(f"LLM setting {name}={explicit!r}: {exc}") from None
        elif os.environ.get(env) or env not in dotenv:
            # the environment first, else (no .env value either) the config file
            value = resolve(UNSET, env, f"llm.{name}", None, convert)
        else:
            try:
                value = convert(dotenv[env])
            except (TypeError, ValueError, OverflowError) as exc:
                raise ConfigError(f"{dotenv_path}: {env}={dotenv[env]!r}: {exc}") from None
        if value is not None:  # None for a number means "the default"
            values[name] = value
    return LLMConfig(**values) if values.get("model") else None


# --------------------------------------------------------------------------- results and usage


@dataclass(frozen=True)
class TokenUsage:
    """Tokens one call cost; ``estimated`` when the server sent no figures and we counted."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """One call as a client implementation receives it (messages already validated copies)."""

    messages: list[dict[str, Any]]
    max_tokens: int | None
    temperature: float
    stream: bool
    feature: str


@dataclass(frozen=True)
class Chunk:
    """A piece of an answer, as a client implementation produces it.

    A whole answer is one chunk with everything; a stream is many chunks of
    ``text`` with ``finish_reason`` and ``usage`` on whichever chunk carries them.
    """

    text: str = ""
    finish_reason: str | None = None
    usage: TokenUsage | None = None


@dataclass(frozen=True)
class ChatResult:
    """A complete answer: its text, why it stopped, and what it cost."""

    text: str
    model: str
    finish_reason: str | None
    usage: TokenUsage


_COUNTERS = ("calls", "failures", "retries", "prompt_tokens", "completion_tokens", "estimated")


class UsageMeter:
    """Thread-safe usage counters, per feature and in total.

    ``calls`` counts ``chat``/``stream``/``complete_json`` calls; ``failures``
    those that raised :class:`LLMError`; ``retries`` the extra HTTP attempts;
    ``estimated`` the calls whose token figures were counted locally because
    the server sent none.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._features: dict[str, dict[str, int]] = {}

    def record(self, feature: str, **counts: int) -> None:
        """Add ``counts`` (counter name -> amount) to ``feature``'s counters."""
        with self._lock:
            row = self._features.setdefault(feature, dict.fromkeys(_COUNTERS, 0))
            for name, amount in counts.items():
                row[name] += amount

    def snapshot(self) -> dict[str, Any]:
        """``{"total": {counter: n}, "features": {feature: {counter: n}}}``, a copy."""
        with self._lock:
            features = {name: dict(row) for name, row in sorted(self._features.items())}
        total = {name: sum(row[name] for row in features.values()) for name in _COUNTERS}
        return {"total": total, "features": features}

    def reset(self) -> None:
        with self._lock:
            self._features.clear()


def estimate_usage(messages: Sequence[Mapping[str, Any]], text: str) -> TokenUsage:
    """Token figures counted locally, for a server that reported none."""
    from arbormem.tokens import default_counter

    counter = default_counter()
    # Chat templates spend a few tokens per message on the role and separators.
    prompt = sum(counter.count(str(m.get("content") or "")) + 4 for m in messages) + 2
    return TokenUsage(prompt, counter.count(text), estimated=True)


# --------------------------------------------------------------------------- JSON answers

_FENCE = re.compile(r"```[ \t]*([\w-]*)[ \t]*\n?(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_MAX_EMBEDDED_STARTS = 64  # bounds the work on a long answer full of brackets


def parse_json_answer(text: str) -> Any:
    """The JSON value in a model's answer.

    Takes a bare value, a fenced block (```json ... ```), or an object or array
    with prose around it; ``<think>...</think>`` is ignored. An empty answer or
    one with no JSON in it raises :class:`LLMError`.

    >>> parse_json_answer('Sure! ```json\\n{"name": "cooking"}\\n``` Hope it helps.')
    {'name': 'cooking'}
    """
    if not isinstance(text, str):
        raise LLMError(f"expected the answer as text, got {type(text).__name__}")
    body = _THINK.sub("", text).strip()
    if not body:
        raise LLMError("the model gave an empty answer where JSON was expected")
    candidates = [body]
    candidates += [m.group(2) for m in _FENCE.finditer(body) if m.group(1).lower() in ("", "json")]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
            continue
    # JSON inside prose: the longest object or array that decodes wins, so a
    # stray "[1]" in a sentence does not beat the real answer after it.
    decoder, best, best_len, end = json.JSONDecoder(), None, 0, 0
    for match in list(re.finditer(r"[\[{]", body))[:_MAX_EMBEDDED_STARTS]:
        if match.start() < end:
            continue  # inside a value already decoded
        try:
            value, end = decoder.raw_decode(body, match.start())
        except (ValueError, RecursionError):
            continue
        if end - match.start() > best_len:
            best, best_len = value, end - match.start()
    if best_len:
        return best
    excerpt = body if len(body) <= 80 else body[:77] + "..."
    raise LLMError(f"the model's answer is not JSON: {excerpt!r}")


# --------------------------------------------------------------------------- the interface


def _normalise_messages(messages: Messages) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence) or not messages:
        raise LLMError("messages must be a prompt string or a non-empty list of messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise LLMError(f"messages[{i}] must be a mapping with a string 'role'")
        if not isinstance(message.get("content"), (str, list)):
            raise LLMError(f"messages[{i}]: 'content' must be a string or a list of parts")
        out.append(dict(message))  # a copy: the caller's messages are never changed
    return out


def _with_json_instruction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = messages[0]
    if first["role"] == "system" and isinstance(first["content"], str):
        return [{**first, "content": f"{first['content']}\n\n{JSON_INSTRUCTION}"}, *messages[1:]]
    return [{"role": "system", "content": JSON_INSTRUCTION}, *messages]


class LLMClient(abc.ABC):
    """A chat LLM. Subclasses implement :meth:`_complete`; the rest comes with it.

    ``chat``, ``stream`` and ``complete_json`` raise :class:`LLMError` on any
    failure and count every call in :attr:`usage` under its ``feature``.
    """

    model: str
    usage: UsageMeter
    temperature: float
    context_window: int

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.0,
        context_window: int = 8192,
        usage: UsageMeter | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.context_window = context_window
        self.usage = usage if usage is not None else UsageMeter()

    @abc.abstractmethod
    def _complete(self, request: ChatRequest) -> Iterator[Chunk]:
        """The answer to ``request`` as chunks (usually one unless ``request.stream``).

        Raise :class:`LLMError` with an actionable message on failure (any other
        exception is wrapped by the caller); record retries in ``self.usage``.
        """

    def close(self) -> None:  # noqa: B027 - an optional hook; most clients hold nothing
        """Release network resources, if any."""

    def chat(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        feature: str = "chat",
    ) -> ChatResult:
        """The whole answer to ``messages`` (a prompt string or chat messages).

        An empty answer is an :class:`LLMError`, like any transport failure.
        """
        result: list[ChatResult] = []
        for _ in self._run(messages, max_tokens, temperature, feature, False, result):
            pass  # chat() wants the whole answer, which _run appends to result
        return result[0]

    def stream(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        feature: str = "chat",
    ) -> Generator[str, None, None]:
        """The answer as text deltas, as they arrive.

        Usage is recorded when the stream ends, or when the consumer stops
        early. A failure at any point, mid-stream included, raises
        :class:`LLMError` from the iterator; an empty answer is one too.
        """
        yield from self._run(messages, max_tokens, temperature, feature, True, [])

    def complete_json(
        self,
        messages_or_prompt: Messages,
        *,
        validate: Callable[[Any], T],
        feature: str,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> T:
        """Ask for JSON, parse it with :func:`parse_json_answer`, return ``validate(value)``.

        ``validate`` raises ``ValueError``, ``TypeError`` or ``KeyError`` on a
        bad shape; that, an empty answer or an answer with no JSON in it
        become :class:`LLMError` naming ``feature``::

            def names(value):
                if not isinstance(value, list):
                    raise TypeError("expected a JSON array")
                return [str(item) for item in value]

            llm.complete_json("Three fruits, as a JSON array.", validate=names, feature="demo")
        """
        try:
            messages = _with_json_instruction(_normalise_messages(messages_or_prompt))
        except LLMError:
            self.usage.record(feature, calls=1, failures=1)
            raise
        answer = self.chat(
            messages, max_tokens=max_tokens, temperature=temperature, feature=feature
        )
        try:
            return validate(parse_json_answer(answer.text))
        except LLMError as exc:
            problem = str(exc)
        except (ValueError, TypeError, LookupError, AttributeError) as exc:
            problem = f"the model's JSON has the wrong shape: {exc or type(exc).__name__}"
        except Exception as exc:  # a validator bug must not escape as another type either
            problem = f"validating the answer failed: {exc!r}"
        # the call itself was counted by chat(); only its outcome changes
        self.usage.record(feature, failures=1)
        raise LLMError(f"{feature}: {problem}")

    def _run(
        self,
        messages: Messages,
        max_tokens: int | None,
        temperature: float | None,
        feature: str,
        stream: bool,
        result: list[ChatResult],
    ) -> Iterator[str]:
        """Drive :meth:`_complete`, yield its text, count usage, append the ChatResult."""
        parts: list[str] = []
        finish: str | None = None
        usage: TokenUsage | None = None
        msgs: list[dict[str, Any]] = []
        inner: Iterator[Chunk] | None = None
        ended = False
        try:
            msgs = _normalise_messages(messages)
            temp = self.temperature if temperature is None else temperature
            inner = self._complete(ChatRequest(msgs, max_tokens, temp, stream, feature))
            for chunk in inner:
                finish = chunk.finish_reason or finish
                usage = chunk.usage or usage
                if not isinstance(chunk.text, str):  # a custom client's mistake
                    raise LLMError(f"{feature}: the LLM client gave {chunk.text!r:.60}, not text")
                if chunk.text:
                    parts.append(chunk.text)
                    yield chunk.text
            ended = True
        except Exception as exc:
            ended = True
            self.usage.record(feature, calls=1, failures=1)
            if isinstance(exc, LLMError):
                log.info("LLM call for %s failed: %s", feature, exc)
                raise
            log.warning("LLM client %r raised %r", self, exc)
            raise LLMError(f"{feature}: the LLM client failed: {exc!r}") from exc
        finally:
            if inner is not None and hasattr(inner, "close"):
                try:
                    inner.close()
                except Exception as exc:  # cleanup must not replace the real outcome
                    log.debug("closing an LLM stream failed: %r", exc)
            if not ended:  # the consumer stopped reading: still count what was spent
                self._count(feature, usage or estimate_usage(msgs, "".join(parts)), failed=False)
        text = "".join(parts)
        usage = usage or estimate_usage(msgs, text)
        if not text.strip():
            self._count(feature, usage, failed=True)
            raise LLMError(
                f"{feature}: model {self.model!r} gave an empty answer "
                f"(finish_reason={finish!r}); a larger max_tokens may help"
            )
        self._count(feature, usage, failed=False)
        result.append(ChatResult(text, self.model, finish, usage))

    def _count(self, feature: str, usage: TokenUsage, *, failed: bool) -> None:
        self.usage.record(
            feature,
            calls=1,
            failures=int(failed),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            estimated=int(usage.estimated),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


# --------------------------------------------------------------------------- OpenAI-compatible


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The wait a server asked for (``retry-after-ms`` or ``retry-after``), capped."""
    if not headers:
        return None
    raw_ms, raw = headers.get("retry-after-ms"), headers.get("retry-after")
    try:
        seconds = float(raw_ms) / 1000 if raw_ms else float(raw) if raw else None
    except ValueError:
        try:  # the HTTP-date form
            seconds = email.utils.parsedate_to_datetime(str(raw)).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    if seconds is None or seconds != seconds:  # absent, or NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class OpenAIChatClient(LLMClient):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint, through the ``openai`` SDK.

    Retries (429, 408, 409, 5xx, timeouts, connection errors) happen here, not
    in the SDK: before retry ``n`` (from 0) it waits the server's
    ``Retry-After`` if given, else ``backoff * 2**n``, never more than
    :data:`MAX_RETRY_AFTER`, by calling ``sleep`` (tests pass a recorder). A
    stream is retried until its response starts; a failure after that ends it.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        usage: UsageMeter | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(
            config.model,
            temperature=config.temperature,
            context_window=config.context_window,
            usage=usage,
        )
        self.config = config
        self.endpoint = config.base_url or "api.openai.com"
        self._sleep = sleep
        self._client: Any = None
        self._lock = threading.Lock()
        # Some models reject a parameter: OpenAI's reasoning models want
        # max_completion_tokens and their default temperature, some local servers
        # refuse stream_options. Their 400 names it; we adapt once and remember.
        self._max_tokens_param = "max_tokens"
        self._omit: set[str] = set()

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai  # lazily: importing arbormem must stay fast

                self._client = openai.OpenAI(
                    base_url=self.config.base_url,
                    api_key=self.config.api_key or PLACEHOLDER_API_KEY,
                    timeout=self.config.timeout,
                    max_retries=0,
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _request(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages}
        kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs[self._max_tokens_param] = request.max_tokens
        if request.stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        return {k: v for k, v in kwargs.items() if k not in self._omit}

    def _adapt(self, exc: Exception, sent: Mapping[str, Any]) -> bool:
        """Rename or drop the parameter a 400 names; True if there was one to change."""
        param = getattr(exc, "param", None)
        if getattr(exc, "status_code", None) != 400 or param not in sent:
            return False
        if param == "max_tokens":
            self._max_tokens_param = "max_completion_tokens"
        elif param in ("temperature", "stream_options"):
            self._omit.add(param)
        else:
            return False
        log.info(
            "%s rejected %r for model %r; resending without it", self.endpoint, param, self.model
        )
        return True

    def _describe(self, exc: Exception) -> tuple[str, bool, float | None]:
        """An actionable message, whether a retry may help, and the server's Retry-After."""
        import openai

        where = f"{self.endpoint} (model {self.model!r})"
        if isinstance(exc, openai.APITimeoutError):
            message = f"{where} sent nothing for {self.config.timeout:g} s"
            return message + "; raise ARBORMEM_LLM_TIMEOUT if the model is just slow", True, None
        if isinstance(exc, openai.APIConnectionError):
            message = f"cannot reach {where}: {exc.__cause__ or exc}"
            return message + "; is the server up and OPENAI_BASE_URL right?", True, None
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            hint = {
                401: "; set OPENAI_API_KEY to a key this server accepts",
                403: "; this key may not use this model",
                404: "; check the model name, and that the base URL ends in /v1",
            }.get(code, "")
            retry = code in (408, 409, 429) or code >= 500
            body = exc.body if isinstance(exc.body, dict) else {}
            message = f"{where} answered HTTP {code}: {body.get('message') or exc.message}{hint}"
            return message, retry, _retry_after(exc.response.headers)
        if isinstance(exc, openai.OpenAIError):
            return f"{where}: {exc}", False, None
        if isinstance(exc, ValueError):  # the SDK's JSON decoding of a garbled body
            return f"{where} sent a reply that is not a chat completion: {exc}", False, None
        return f"{where}: the call failed: {exc!r}", False, None

    def _complete(self, request: ChatRequest) -> Iterator[Chunk]:
        client = self._sdk()
        attempt = 0
        while True:
            kwargs = self._request(request)
            try:
                response = client.chat.completions.create(**kwargs)
                break
            except Exception as exc:  # the SDK lets some parsing errors through unwrapped
                if self._adapt(exc, kwargs):
                    continue
                message, retryable, retry_after = self._describe(exc)
                if not retryable or attempt >= self.config.max_retries:
                    tries = f" (gave up after {attempt + 1} attempts)" if attempt else ""
                    raise LLMError(message + tries) from exc
            delay = retry_after if retry_after is not None else self.config.backoff * 2**attempt
            attempt += 1
            self.usage.record(request.feature, retries=1)
            log.debug("retry %d for %s in %.2f s: %s", attempt, request.feature, delay, message)
            self._sleep(min(delay, MAX_RETRY_AFTER))
        if not request.stream:
            yield self._read_completion(response)
            return
        finished = False
        try:
            with response:  # closes the connection however the stream ends
                for event in response:
                    chunk = self._read_event(event)
                    finished = finished or chunk.finish_reason is not None
                    yield chunk
        except Exception as exc:
            raise LLMError(f"the stream broke: {self._describe(exc)[0]}") from exc
        if not finished:
            raise LLMError(f"the stream from {self.endpoint} ended before the model finished")

    def _read_completion(self, completion: Any) -> Chunk:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError(f"{self.endpoint} sent a reply with no choices: {completion!r:.120}")
        text = _content_text(getattr(choices[0].message, "content", None), self.endpoint)
        return Chunk(text, choices[0].finish_reason, _token_usage(completion))

    def _read_event(self, event: Any) -> Chunk:
        for choice in getattr(event, "choices", None) or []:
            if getattr(choice, "index", 0) == 0:
                text = _content_text(getattr(choice.delta, "content", None), self.endpoint)
                return Chunk(text, choice.finish_reason, _token_usage(event))
        return Chunk(usage=_token_usage(event))  # the usage-only chunk at the end


def _content_text(content: Any, endpoint: str) -> str:
    """A reply's ``content`` as text: a string, or the text of a list of content
    parts (``[{"type": "text", "text": ...}]``, as some servers send)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(
        isinstance(part, dict) and isinstance(part.get("text", ""), str) for part in content
    ):
        return "".join(part.get("text", "") for part in content)
    raise LLMError(f"{endpoint} sent content that is not text: {content!r:.120}")


def _token_usage(reply: Any) -> TokenUsage | None:
    usage = getattr(reply, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return TokenUsage(prompt, completion)


def get_llm(config: LLMConfig | None) -> LLMClient | None:
    """The client for ``config``, or ``None`` when the LLM is off.

    >>> get_llm(resolve_llm_config(model=None)) is None
    True
    """
    return None if config is None else OpenAIChatClient(config)
