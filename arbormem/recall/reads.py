"""Rows and neighbourhoods that searches read, kept while the store is unchanged.

A search ranks a hundred or so candidate turns and reads each one's row and its
session neighbourhood (:meth:`~arbormem.store.messages.MessageStore.rows`,
:meth:`~arbormem.store.lexical.LexicalIndex.around`): a few milliseconds of
SQL and row decoding that the next question, asked of the same store, mostly
repeats. :class:`SearchReads` keeps what was read under the store's change
mark (:meth:`~arbormem.store.core.StoreCore.change_mark`, which moves with
every message added, forgotten, archived or rewritten, in this process or any
other): a search that finds another mark starts from empty.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from arbormem.store.base import Backend
from arbormem.store.types import Row

#: Neighbourhoods are (row id, position, terms) per turn, as ``around`` gives them.
Near = list[tuple[int, int, str]]


class SearchReads:
    """What searches read of rows and neighbourhoods, valid for one change mark.

    Call :meth:`begin` at the start of each search; it returns a token that the
    reads of that search pass back, so that rows read before a change are never
    stored under the mark that follows it."""

    def __init__(self, backend: Backend, max_rows: int = 100_000) -> None:
        self.backend = backend
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._mark: object = None
        self._rows: dict[int, Row] = {}
        self._around: dict[tuple[int, int], Near] = {}

    def begin(self) -> object:
        """Read the store's change mark; forget everything kept under another."""
        mark = self.backend.change_mark()
        with self._lock:
            if mark != self._mark:
                self._mark = mark
                self._rows = {}
                self._around = {}
        return mark

    def rows(self, mark: object, rowids: Sequence[int]) -> dict[int, Row]:
        """The rows of ``rowids`` that exist (as :meth:`Backend.rows`)."""
        kept = self._rows
        out = {r: kept[r] for r in rowids if r in kept}
        missing = [r for r in rowids if r not in out]
        if missing:
            read = self.backend.rows(missing)
            out.update(read)
            self._keep(mark, "rows", read)
        return out

    @staticmethod
    def detached(row: Row) -> Row:
        """The row to hand out of a search: a kept row's metadata is a copy, so a
        caller who edits it changes nothing that the next search returns."""
        meta = row.message.metadata
        if not meta:
            return row
        return replace(row, message=replace(row.message, metadata=_copied(dict(meta))))

    def around(self, mark: object, rowids: Sequence[int], radius: int) -> dict[int, Near]:
        """Each row's neighbourhood (as :meth:`Backend.around`)."""
        kept = self._around
        out: dict[int, Near] = {}
        missing: list[int] = []
        for r in rowids:
            found = kept.get((r, radius))
            if found is None:
                missing.append(r)
            else:
                out[r] = found
        if missing:
            read = self.backend.around(missing, radius)
            out.update(read)
            self._keep(mark, "around", {(r, radius): v for r, v in read.items()})
        return out

    def _keep(self, mark: object, kind: str, entries: Mapping[Any, Any]) -> None:
        with self._lock:
            # Read under an older mark (a write came in meanwhile): not kept.
            if mark != self._mark:
                return
            table: dict[Any, Any] = self._rows if kind == "rows" else self._around
            if len(table) + len(entries) > self.max_rows:
                table.clear()
            table.update(entries)


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
