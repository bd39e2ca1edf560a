"""Reading conversation files: JSON, JSONL, OpenAI chat lists and LoCoMo.

:func:`read_conversation_file` turns a file into :class:`Record` objects, each
remembering the file and line it came from, so a bad value is reported as
``chat.jsonl line 12: 'content': must be a string (got null)``. Shapes
understood (``docs/formats.md`` describes each with an example):

* a JSON list of message objects (``role``, ``content``, optional ``speaker``
  or ``name``, ``timestamp``, ``metadata``, ``session``, ``id``), or one such
  object alone;
* an OpenAI chat object ``{"messages": [...]}``; content given as a list of
  parts keeps its text parts (others go to ``metadata.parts``), and an
  assistant message with only ``tool_calls`` stores the calls as JSON text;
* conversations ``{"messages": [...]}`` in a JSON list or one a line in JSONL
  (the fine-tuning layout), each a session of its own, beside single messages;
* JSONL: one message object per line;
* LoCoMo files, in both the per-conversation and the ``locomo10.json`` shape.

An empty file (or one of blanks) holds no message. Keys a message object has
beyond the known ones are kept in its metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from arbormem.errors import InputError
from arbormem.ingest.validate import KNOWN_FIELDS, Where, check_metadata
from arbormem.timeutil import parse_timestamp

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")
#: An evidence range, ``D12:3-D12:5`` (or ``D12:3-5``): every turn from the first to
#: the last, inclusive. Dashes of any kind, spaces around them allowed.
_DIA_RANGE = re.compile(r"D(\d+):(\d+)\s*[-\u2013\u2014]\s*(?:D(\d+):)?(\d+)")


@dataclass
class Record:
    """One message as read from a file, not yet validated."""

    content: Any
    role: Any = "user"
    speaker: Any = None
    timestamp: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    id: Any = None
    where: Where = field(default_factory=Where)


def read_bytes_as_text(path: Path) -> str:
    """File contents as text, or an error naming the line with invalid UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", source=str(path)) from None
    return decode_text(data, str(path))


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 bytes (a byte-order mark allowed) as text, or an error naming the line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"invalid UTF-8 at byte {exc.start}",
            source=source,
            line=line,
            hint="re-encode the text as UTF-8",
        ) from None


def parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = "fix the JSON syntax at that position"
        if exc.msg == "Extra data" and _one_object_a_line(text):
            hint = "it looks like JSON Lines (one object a line): name the file .jsonl"
        raise InputError(
            f"malformed JSON: {exc.msg} (column {exc.colno})",
            source=source,
            line=exc.lineno,
            hint=hint,
        ) from None
    except RecursionError:
        raise _too_deep(source) from None


def _one_object_a_line(text: str) -> bool:
    """Whether the first two non-blank lines are each a JSON object."""
    lines = [line for line in text.split("\n", 20)[:20] if line.strip()][:2]
    try:
        return len(lines) == 2 and all(isinstance(json.loads(x), dict) for x in lines)
    except (ValueError, RecursionError):
        return False


def _too_deep(source: str, line: int | None = None) -> InputError:
    return InputError(
        "nested too deeply to read (arrays or objects inside one another thousands of times)",
        source=source,
        line=line,
        hint="this is not a conversation file; check it is the file you meant",
    )


# -- chat messages ------------------------------------------------------------------


def _content_of(obj: Mapping[str, Any], where: Where, extra: dict[str, Any]) -> Any:
    content = obj.get("content")
    if isinstance(content, list):
        texts, others = [], []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                texts.append(part)
            else:
                others.append(part)
        if others:
            extra["parts"] = others
        text = "\n".join(t for t in texts if t)
        if not text.strip() and obj.get("tool_calls"):
            return _calls(obj)
        if not text.strip() and others:
            # An image or audio part alone: kept whole in the metadata, named in the text
            # so the message is stored (and found) rather than refused as empty.
            kinds = [
                str(p.get("type", "part")) if isinstance(p, Mapping) else "part" for p in others
            ]
            return " ".join(f"[{kind}]" for kind in kinds)
        return text
    blank = content is None or (isinstance(content, str) and not content.strip())
    if blank and obj.get("tool_calls"):
        # Assistant messages that only call tools: "content" is null or "" depending on
        # the serialiser; the calls are the message.
        return _calls(obj)
    return content


def _calls(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj["tool_calls"], ensure_ascii=False, sort_keys=True)


def record_from_object(obj: Any, where: Where, session: str | None = None) -> Record:
    """A :class:`Record` from one message object, keeping unknown keys as metadata."""
    if not isinstance(obj, Mapping):
        raise InputError(
            f"a message must be a JSON object, got {type(obj).__name__}",
            source=where.source,
            line=where.line,
            field=where.prefix.rstrip(".") or None,
        )
    if "content" not in obj and "text" not in obj:
        raise InputError(
            "missing",
            source=where.source,
            line=where.line,
            field=where.field("content"),
            hint="each message needs 'role' and 'content'",
        )
    metadata = check_metadata(obj.get("metadata"), where)
    extra = {k: v for k, v in obj.items() if k not in KNOWN_FIELDS and k != "text"}
    content = _content_of(obj, where, extra) if "content" in obj else obj.get("text")
    for key, value in extra.items():
        metadata.setdefault(key, value)
    record_session = obj.get("session", session)
    if record_session is not None and not isinstance(record_session, (str, int)):
        raise InputError(
            f"must be a string, got {type(record_session).__name__}",
            source=where.source,
            line=where.line,
            field=where.field("session"),
        )
    return Record(
        content=content,
        role=obj.get("role", "user"),
        speaker=obj.get("speaker", obj.get("name")),
        timestamp=obj.get("timestamp"),
        metadata=metadata,
        session=None if record_session is None else str(record_session),
        id=obj.get("id"),
        where=where,
    )


def _records_from_list(
    items: Sequence[Any],
    source: str,
    session: str | None,
    line: int | None = None,
    prefix: str = "",
) -> list[Record]:
    return [
        record_from_object(item, Where(source, line, f"{prefix}[{i}]."), session)
        for i, item in enumerate(items)
    ]


def _is_conversation(obj: Any) -> bool:
    """``{"messages": [...]}`` without a ``content`` of its own: a whole conversation."""
    return (
        isinstance(obj, Mapping) and isinstance(obj.get("messages"), list) and "content" not in obj
    )


def _records_from_items(items: Sequence[Any], source: str, stem: str) -> list[Record]:
    """A JSON list's items: messages, or conversations (each a session of its own,
    named ``<stem>-<position>`` as JSONL names them by line)."""
    out: list[Record] = []
    for i, item in enumerate(items):
        if _is_conversation(item):
            out.extend(
                _records_from_list(
                    item["messages"], source, f"{stem}-{i + 1}", prefix=f"[{i}].messages"
                )
            )
        else:
            out.append(record_from_object(item, Where(source, None, f"[{i}]."), None))
    return out


# -- LoCoMo -----------------------------------------------------------------------------


@dataclass
class LocomoTurn:
    dia_id: str
    speaker: str
    #: The turn's text plus `` [shares <caption>]`` when a picture was shared.
    content: str
    session: int
    timestamp: datetime
    metadata: dict[str, Any]

    @property
    def text(self) -> str:
        """``"<speaker>: <text>"``, the benchmark's definition of a turn's text."""
        return f"{self.speaker}: {self.content}"


@dataclass
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[LocomoTurn]
    qa: list[dict[str, Any]]
    session_dates: dict[int, datetime]


def is_locomo(obj: Any) -> bool:
    if isinstance(obj, list):
        return bool(obj) and all(is_locomo(item) for item in obj)
    if not isinstance(obj, Mapping):
        return False
    body = obj.get("conversation", obj)
    return isinstance(body, Mapping) and "speaker_a" in body and "session_1" in body


def evidence_ids(evidence: Any, order: Sequence[str] = ()) -> list[str]:
    """Valid ``D<n>:<m>`` ids from a LoCoMo evidence list (packed entries split).

    A range ``D12:3-D12:5`` names every turn from the first to the last: within a
    session, every number in between; across sessions, every turn between the two
    in ``order`` (the conversation's turn ids in order; without it only the two
    ends are known).

    >>> evidence_ids(["D12:3-D12:5", "D1:2; D1:4"])
    ['D12:3', 'D12:4', 'D12:5', 'D1:2', 'D1:4']
    """
    out: list[str] = []
    items = evidence if isinstance(evidence, list) else [evidence]
    position = {dia: i for i, dia in enumerate(order)}
    for item in items:
        if not isinstance(item, str):
            continue
        at = 0
        for m in _DIA_RANGE.finditer(item):
            out.extend(_DIA_ID.findall(item[at : m.start()]))
            out.extend(_expand(m, order, position))
            at = m.end()
        out.extend(_DIA_ID.findall(item[at:]))
    return list(dict.fromkeys(out))


def _expand(m: re.Match[str], order: Sequence[str], position: Mapping[str, int]) -> list[str]:
    """The turn ids a matched range names (see :func:`evidence_ids`)."""
    session, first = int(m.group(1)), int(m.group(2))
    last_session = int(m.group(3)) if m.group(3) else session
    last = int(m.group(4))
    start, end = f"D{session}:{first}", f"D{last_session}:{last}"
    if last_session == session:
        low, high = min(first, last), max(first, last)
        return [f"D{session}:{n}" for n in range(low, high + 1)]
    if start in position and end in position:
        i, j = sorted((position[start], position[end]))
        return list(order[i : j + 1])
    return [start, end]


def parse_locomo(obj: Any, source: str) -> list[LocomoConversation]:
    """Conversations of a LoCoMo file in either published shape."""
    items = obj if isinstance(obj, list) else [obj]
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InputError("a conversation must be an object", source=source, field=f"[{n}]")
        body = item.get("conversation", item)
        sample_id = str(item.get("sample_id") or Path(source).stem)
        try:
            out.append(
                _parse_locomo_conversation(
                    body, item.get("qa", body.get("qa", [])), sample_id, source
                )
            )
        except InputError as exc:
            if not isinstance(obj, list):
                raise
            # In a list of conversations, "session_3[4].text" alone named no conversation.
            path = f"[{n}].conversation." if "conversation" in item else f"[{n}]."
            raise InputError(
                f"{exc.problem} (conversation {sample_id!r})",
                source=source,
                field=path + exc.field if exc.field else path.rstrip("."),
                hint=exc.hint,
            ) from None
    return out


def _speaker(value: Any, source: str, field: str) -> str:
    """A speaker's name, stripped: null was stored as the speaker "None" (its turns
    given to the other speaker), and "Mel " was not "Mel" when roles were assigned."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"must be the speaker's name, got {value!r}", source=source, field=field)
    return value.strip()


def _parse_locomo_conversation(
    body: Mapping[str, Any], qa: Any, sample_id: str, source: str
) -> LocomoConversation:
    speaker_a = _speaker(body.get("speaker_a", "A"), source, "speaker_a")
    speaker_b = _speaker(body.get("speaker_b", "B"), source, "speaker_b")
    sessions = sorted(
        int(m.group(1))
        for key in body
        if (m := _SESSION_KEY.match(key)) and isinstance(body[key], list)
    )
    turns: list[LocomoTurn] = []
    dates: dict[int, datetime] = {}
    for number in sessions:
        key = f"session_{number}"
        raw_date = body.get(f"{key}_date_time")
        if raw_date is None:
            raise InputError(
                "missing",
                source=source,
                field=f"{key}_date_time",
                hint="every LoCoMo session needs its date",
            )
        when = parse_timestamp(raw_date, field=f"{key}_date_time", source=source)
        dates[number] = when
        for i, turn in enumerate(body[key]):
            where = f"{key}[{i}]"
            if not isinstance(turn, Mapping):
                raise InputError("a turn must be an object", source=source, field=where)
            text = turn.get("text")
            if not isinstance(text, str):
                raise InputError(
                    f"must be a string (got {type(text).__name__})",
                    source=source,
                    field=f"{where}.text",
                )
            caption = turn.get("blip_caption")
            content = f"{text} [shares {caption}]" if caption else text
            meta = {"dia_id": turn.get("dia_id")}
            for extra in ("img_url", "query", "blip_caption"):
                if extra in turn:
                    meta[extra] = turn[extra]
            speaker = _speaker(turn.get("speaker", speaker_a), source, f"{where}.speaker")
            turns.append(
                LocomoTurn(
                    dia_id=str(turn.get("dia_id", f"D{number}:{i + 1}")),
                    speaker=speaker,
                    content=content,
                    session=number,
                    timestamp=when,
                    metadata=meta,
                )
            )
    return LocomoConversation(
        sample_id=sample_id,
        speaker_a=speaker_a,
        speaker_b=speaker_b,
        turns=turns,
        qa=list(qa) if isinstance(qa, list) else [],
        session_dates=dates,
    )


def locomo_records(conversations: Sequence[LocomoConversation], source: str) -> list[Record]:
    """LoCoMo turns as records: speaker A as ``user``, speaker B as ``assistant``."""
    out = []
    many = len(conversations) > 1
    for conv in conversations:
        for turn in conv.turns:
            session = f"session_{turn.session}"
            if many:
                session = f"{conv.sample_id}/{session}"
            out.append(
                Record(
                    content=turn.content,
                    role="user" if turn.speaker == conv.speaker_a else "assistant",
                    speaker=turn.speaker,
                    timestamp=turn.timestamp,
                    metadata=dict(turn.metadata),
                    session=session,
                    where=Where(source, None, f"{session}.{turn.dia_id}."),
                )
            )
    return out


# -- entry point ------------------------------------------------------------------------


@dataclass
class ConversationFile:
    path: Path
    format: str
    records: list[Record]


def _iter_jsonl(text: str, source: str, stem: str) -> Iterator[Record]:
    # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+2029 and U+0085,
    # which json.dumps(ensure_ascii=False) leaves raw inside strings.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON: {exc.msg} (column {exc.colno})",
                source=source,
                line=lineno,
                hint="each line must be one complete JSON object",
            ) from None
        except RecursionError:
            raise _too_deep(source, lineno) from None
        if _is_conversation(obj):
            yield from _records_from_list(
                obj["messages"], source, f"{stem}-{lineno}", line=lineno, prefix="messages"
            )
        else:
            yield record_from_object(obj, Where(source, lineno), None)


def _looks_like_jsonl(text: str) -> bool:
    """For text with no file name (standard input): JSON Lines when it starts with an
    object and is not one JSON value as a whole."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return True
    return False


def read_conversation_text(
    text: str, source: str, *, stem: str | None = None, jsonl: bool | None = None
) -> ConversationFile:
    """Shape-check conversation text read from ``source`` (nothing is stored yet).

    ``jsonl`` says whether the text is JSON Lines; ``None`` tells from the text
    itself (for standard input, which has no file name to go by). ``stem`` names
    the sessions of the conversations a file lists (``<stem>-<n>``).
    """
    stem = stem or Path(source).stem
    path = Path(source)
    if not text.strip():
        # An empty log (a .jsonl just created, a .json not yet written) holds nothing.
        return ConversationFile(path, "empty", [])
    if jsonl is None:
        jsonl = _looks_like_jsonl(text)
    if jsonl:
        return ConversationFile(path, "jsonl", list(_iter_jsonl(text, source, stem)))
    obj = parse_json(text, source)
    if isinstance(obj, Mapping) and obj.get("format") == "arbormem-export":
        raise InputError(
            "is an arbormem export",
            source=source,
            hint="restore it with 'arbormem import' instead of 'ingest'",
        )
    if is_locomo(obj):
        return ConversationFile(path, "locomo", locomo_records(parse_locomo(obj, source), source))
    if _is_conversation(obj):
        return ConversationFile(
            path, "openai", _records_from_list(obj["messages"], source, None, prefix="messages")
        )
    if isinstance(obj, list):
        shape = "conversations" if obj and all(_is_conversation(x) for x in obj) else "messages"
        return ConversationFile(path, shape, _records_from_items(obj, source, stem))
    if isinstance(obj, Mapping) and ("content" in obj or "text" in obj):
        return ConversationFile(path, "message", [record_from_object(obj, Where(source), None)])
    raise InputError(
        "unrecognised layout",
        source=source,
        hint="expected a list of messages, one message object, {'messages': [...]}, JSONL, "
        "or a LoCoMo file",
    )


def read_conversation_file(path: str | Path) -> ConversationFile:
    """Read and shape-check a conversation file (nothing is stored yet)."""
    p = Path(path)
    suffix = p.suffix.lower()
    # The name decides for .json and .jsonl; any other (chat.log) is told from the text.
    jsonl = True if suffix in (".jsonl", ".ndjson") else False if suffix == ".json" else None
    return read_conversation_text(read_bytes_as_text(p), str(p), stem=p.stem, jsonl=jsonl)
