"""Rows and neighbourhoods that searches read, kept while the store is unchanged.

A search ranks a hundred or so candidate turns and reads each one's row and its
session neighbourhood (:meth:`~arbormem.store.messages.MessageStore.rows`,
:meth:`~arbormem.store.lexical.LexicalIndex.around`): a few milliseconds of
SQL and row decoding that the next question, asked of the same store, mostly
repeats. :class:`SearchReads` keeps what was read under the searched threads'
mark (their :class:`~arbormem.store.types.ThreadState`, which moves with every
message of theirs added, forgotten, archived or rewritten, in this process or
any other): a search that finds another mark starts from what an append cannot
have changed (after a forget, an archive or a rewrite, from empty).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from arbormem.models import Message
from arbormem.store.base import Backend
from arbormem.store.types import Row, Thread, ThreadState

_T = TypeVar("_T")

#: Neighbourhoods are (row id, position, terms) per turn, as ``around`` gives them.
#: Kept as tuples: a tuple of numbers and strings leaves the garbage collector's view
#: (a list never does), and with it the entries that hold it. At a million turns the
#: rows, neighbourhoods and shapes searches keep were two thirds of the objects a full
#: collection walked (docs/postgres.md, "The collector after a million turns").
Near = Sequence[tuple[int, int, str]]


#: A kept row as plain tuples: its row id, content hash, message's fields but its
#: metadata, and its metadata (None when empty). A tuple of strings, numbers and
#: times leaves the garbage collector's view; a Row and its Message (dataclasses)
#: never do, nor does a tuple holding a dict (even an empty one): see ``Near``.
_Packed = tuple[int, str, tuple[tuple[str, Any], ...], Any]


def _pack(row: Row) -> _Packed:
    fields = row.message.__dict__
    meta = fields.get("metadata") or None
    return (row.rowid, row.chash, tuple(x for x in fields.items() if x[0] != "metadata"), meta)


def _unpack(packed: _Packed) -> Row:
    """The Row again (as :func:`_copy_with` makes one: no ``__init__`` to run)."""
    message = object.__new__(Message)
    message.__dict__.update(packed[2])
    message.__dict__["metadata"] = {} if packed[3] is None else packed[3]
    row = object.__new__(Row)
    row.__dict__.update(rowid=packed[0], message=message, chash=packed[1])
    return row


class _Part:
    """What was read for one set of threads, under one mark."""

    __slots__ = ("around", "mark", "rows")

    def __init__(self, mark: object) -> None:
        self.mark: object = mark
        self.rows: dict[int, _Packed] = {}
        self.around: dict[tuple[int, int], Near] = {}


class SearchReads:
    """What searches read of rows and neighbourhoods, kept per set of searched
    threads while their marks hold.

    Call :meth:`begin` at the start of each search; it returns a token that the
    reads of that search pass back, so that rows read before a change are never
    stored under the mark that follows it.

    Given the searched threads and their states, the mark is theirs alone
    (generation, newest row id, next position: what moves when one of their
    messages is added, forgotten, archived or rewritten): a server's many
    tenants do not wipe each other's reads with every add, as one store-wide
    mark did. Without threads, the store's change mark is used."""

    def __init__(self, backend: Backend, max_rows: int = 100_000) -> None:
        self.backend = backend
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._parts: dict[object, _Part] = {}
        self._size = 0  # entries over every part

    def begin(
        self, threads: Sequence[Thread] | None = None, states: Sequence[ThreadState] | None = None
    ) -> object:
        """The token of one search: its threads' mark (read now unless ``states``
        is given), or the store's change mark without ``threads``. Whatever was
        kept for these threads under another mark is forgotten."""
        if threads is None:
            key: object = None
            mark: object = self.backend.change_mark()
        else:
            if states is None:
                states = [self.backend.state(t) for t in threads]
            key = tuple(t.id for t in threads)
            mark = tuple((st.generation, st.max_rowid, st.next_index) for st in states)
        with self._lock:
            part = self._parts.get(key)
            if part is None or part.mark != mark:
                if part is not None:
                    self._size -= len(part.rows) + len(part.around)
                if len(self._parts) >= 4_096:  # many users searched: start again
                    self._parts.clear()
                    self._size = 0
                fresh = self._parts[key] = _Part(mark)
                if part is not None:
                    _carry(part, fresh)
                    self._size += len(fresh.rows) + len(fresh.around)
        return (key, mark)

    def _part(self, token: object) -> _Part | None:
        key, mark = cast(tuple[object, object], token)
        part: _Part | None = self._parts.get(key)
        return part if part is not None and part.mark == mark else None

    def rows(self, token: object, rowids: Sequence[int]) -> dict[int, Row]:
        """The rows of ``rowids`` that exist (as :meth:`Backend.rows`)."""
        part = self._part(token)
        kept = part.rows if part is not None else {}
        out = {r: _unpack(kept[r]) for r in rowids if r in kept}
        missing = [r for r in rowids if r not in out]
        if missing:
            read = self.backend.rows(missing)
            out.update(read)
            self._keep(token, "rows", {r: _pack(row) for r, row in read.items()})
        return out

    @staticmethod
    def detached(row: Row) -> Row:
        """The row to hand out of a search: a kept row's metadata is a copy, so a
        caller who edits it changes nothing that the next search returns."""
        meta = row.message.metadata
        if not meta:
            return row
        message = _copy_with(row.message, metadata=_copied(dict(meta)))
        return _copy_with(row, message=message)

    def around(self, token: object, rowids: Sequence[int], radius: int) -> dict[int, Near]:
        """Each row's neighbourhood (as :meth:`Backend.around`)."""
        part = self._part(token)
        kept = part.around if part is not None else {}
        out: dict[int, Near] = {}
        missing: list[int] = []
        for r in rowids:
            found = kept.get((r, radius))
            if found is None:
                missing.append(r)
            else:
                out[r] = found
        if missing:
            read = {r: tuple(v) for r, v in self.backend.around(missing, radius).items()}
            out.update(read)
            self._keep(token, "around", {(r, radius): v for r, v in read.items()})
        return out

    def _keep(self, token: object, kind: str, entries: Mapping[Any, Any]) -> None:
        with self._lock:
            # Read under an older mark (a write came in meanwhile): not kept.
            part = self._part(token)
            if part is None:
                return
            if self._size + len(entries) > self.max_rows:
                for other in self._parts.values():
                    other.rows, other.around = {}, {}
                self._size = 0
            table: dict[Any, Any] = part.rows if kind == "rows" else part.around
            before = len(table)
            table.update(entries)
            self._size += len(table) - before


def _carry(old: _Part, new: _Part) -> None:
    """Keep in ``new`` what ``old`` read that the change between their marks left
    alone, when that change only appended messages (every thread's generation the
    same, its newest row and next position not behind): the rows read, which an
    append does not touch, and the neighbourhoods that end before the first
    position an appended message can take (appends take the next positions)."""
    was, now = old.mark, new.mark
    if not isinstance(was, tuple) or not isinstance(now, tuple) or len(was) != len(now):
        return  # the store's change mark, or other threads: nothing is known
    for (gen, rowid, nxt), (gen2, rowid2, nxt2) in zip(was, now):
        if gen != gen2 or rowid2 < rowid or nxt2 < nxt:
            return
    first_new = min((nxt for _, _, nxt in was), default=0)
    new.rows = dict(old.rows)
    for (anchor, radius), near in old.around.items():
        at = next((idx for rid, idx, _ in near if rid == anchor), None)
        if at is not None and at + radius < first_new:
            new.around[(anchor, radius)] = near


def _copy_with(obj: _T, **changes: Any) -> _T:
    """A copy of a frozen dataclass instance with some fields changed, as
    :func:`dataclasses.replace` makes it but without running ``__init__`` again
    (which checked nothing here and cost most of handing out a search's hits). Only
    for classes with a ``__dict__`` and no ``__post_init__``: Row and Message."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


#: Values a copy may share: nothing can change them.
_ATOMS = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of ``value``; JSON's dicts and lists are copied here, a tenth of
    :func:`copy.deepcopy`'s time (metadata is JSON), and anything else by it."""
    if isinstance(value, _ATOMS):
        return value
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    return copy.deepcopy(value)
