"""The folder of caches saved beside a store (``<db>.ann/``), shared by processes.

Two caches live there, each file named after its thread:

* approximate vector indexes (:mod:`arbormem.store.sqlite.dense`): ``thread-<id>.json``
  describes the index in ``thread-<id>-<random>.usearch`` (or, before the JSON
  named its file, ``thread-<id>.usearch``); a save writes a new index file, then
  replaces the JSON through ``thread-<id>.json.<random>.tmp``;
* the topics' summary vectors (:mod:`arbormem.tree.recall`): ``topics-<id>.npz``,
  written through ``topics-<id>.<random>.tmp.npz``.

A process killed between writing an index file and publishing it, or before it
deleted the file it replaced, leaves files no description names: one store held
nine of them (263 MB) for one live index. :meth:`Sidecar.sweep` deletes them on
open, with the files of threads that no longer exist and descriptions of an
earlier generation of their thread (rows were forgotten or archived since: the
index may hold their vectors, and is rebuilt anyway).

It must never delete a file another process is writing and about to publish, nor
one it has just read a description of and is about to open. So every process holds
a shared lock on ``<folder>/.lock`` (``flock``) while it writes and publishes a file
and while it reads a description and opens the file it names; files are deleted
only under the exclusive lock, which is never waited for: when another process holds
the shared one, the sweep is left to the next open. A file that is already open (a
memory-mapped index) stays readable after it is deleted. Files younger than
:data:`GRACE_SECONDS` are left alone as well, for processes of earlier versions,
which do not take the lock. Where ``flock`` is missing (Windows), nothing is swept.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

#: Files modified more recently than this are never swept (see the module's docstring).
GRACE_SECONDS = 60.0

_DESCRIPTION = re.compile(r"thread-(\d+)\.json")
_INDEX = re.compile(r"thread-(\d+)(?:-[0-9a-f]+)?\.usearch")
_TOPICS = re.compile(r"topics-(\d+)\.npz")
_TEMPORARY = re.compile(
    r"(?:thread-\d+\.json\.[0-9a-f]+\.tmp|topics-\d+(?:\.[0-9a-f]+)?\.tmp\.npz)"
)


class Sidecar:
    """The folder of saved caches of one store (None: an in-memory store has none)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the shared lock: no file is swept from the folder meanwhile. Creates
        the folder (its caller is about to write into it or read from it)."""
        handle = self._lock_file(create=True)
        try:
            if handle is not None and fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_SH)
            yield
        finally:
            if handle is not None:
                handle.close()  # closing the file releases its lock

    @contextmanager
    def _exclusive(self) -> Iterator[bool]:
        """Take the exclusive lock if nobody holds the shared one; yields whether it did."""
        handle = self._lock_file(create=False)
        if handle is None or fcntl is None:
            yield False
            return
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            yield True
        finally:
            handle.close()

    def _lock_file(self, *, create: bool) -> IO[bytes] | None:
        if self.folder is None:
            return None
        try:
            if create:
                self.folder.mkdir(parents=True, exist_ok=True)
            elif not self.folder.is_dir():
                return None
            return open(self.folder / ".lock", "ab")
        except OSError as exc:  # a read-only folder: nothing is written or swept there
            log.debug("no lock on %s: %s", self.folder, exc)
            return None

    def sweep(
        self, generation: Callable[[int], int | None] | None, thread_id: int | None = None
    ) -> list[Path]:
        """Delete what no live process needs: files no description names, leftovers of
        interrupted saves and, when ``generation`` gives each thread's current
        generation (None: the thread is gone), the files of threads that are gone and
        descriptions of an earlier generation. ``thread_id``: that thread's files only.
        Returns the files deleted (none when another process holds the lock)."""
        removed: list[Path] = []
        with self._exclusive() as mine:
            if not mine:
                return removed
            assert self.folder is not None
            now = time.time()
            entries: dict[str, float] = {}
            try:
                for entry in os.scandir(self.folder):
                    try:
                        if entry.is_file(follow_symlinks=False):
                            entries[entry.name] = entry.stat().st_mtime
                    except FileNotFoundError:  # deleted meanwhile (a forget)
                        continue
            except OSError as exc:  # a cache folder: opening the store goes on regardless
                log.warning("could not sweep %s: %s", self.folder, exc)
                return removed

            def ours(match: re.Match[str] | None) -> bool:
                return match is not None and (thread_id is None or int(match.group(1)) == thread_id)

            named: set[str] = set()
            doomed: list[str] = []
            for name in entries:
                found = _DESCRIPTION.fullmatch(name)
                if not ours(found):
                    continue
                assert found is not None
                keep, file = self._described(name, int(found.group(1)), generation)
                if keep:
                    named.add(file)
                else:
                    doomed.append(name)  # its index goes too, being named by nothing now
            for name, mtime in entries.items():
                if now - mtime < GRACE_SECONDS:
                    continue
                index, topics = _INDEX.fullmatch(name), _TOPICS.fullmatch(name)
                if ours(index) and name not in named:
                    doomed.append(name)
                elif ours(topics) and generation is not None:
                    assert topics is not None
                    if generation(int(topics.group(1))) is None:
                        doomed.append(name)
                elif thread_id is None and _TEMPORARY.fullmatch(name):
                    doomed.append(name)
            for name in dict.fromkeys(doomed):
                path = self.folder / name
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("could not delete %s: %s", path, exc)
                    continue
                removed.append(path)
        if removed:
            log.info("deleted %d unused file(s) from %s", len(removed), self.folder)
        return removed

    def _described(
        self, name: str, thread_id: int, generation: Callable[[int], int | None] | None
    ) -> tuple[bool, str]:
        """Whether a description is kept, and the index file it names."""
        assert self.folder is not None
        legacy = f"thread-{thread_id}.usearch"
        try:
            meta = json.loads((self.folder / name).read_text())
        except (OSError, ValueError):
            return False, legacy  # unreadable: every reader rebuilds instead
        if not isinstance(meta, dict):
            return False, legacy
        file = str(meta.get("file") or legacy)
        if generation is not None:
            current = generation(thread_id)
            if current is None or meta.get("generation") != current:
                return False, file
        return True, file
