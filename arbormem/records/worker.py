"""Pattern extraction of large batches in a helper process, off the writer's GIL.

Extraction with no LLM is a pure function of a batch's turns and their context
(:func:`extract_batch`), and pure Python: run on a background thread, it takes
the interpreter lock from the thread that is adding messages, so a bulk ingest
pays for it twice. A batch of at least :data:`MIN_TURNS` turns is therefore sent
to one helper process shared by every memory of this process
(:func:`main`, in a new interpreter), which runs the same function on another
core and sends the candidates back; once the helper runs, smaller batches go to it
too. A process confined to one core never starts it.

The helper is started the first time a batch that size comes (or a bulk add that
will give one begins, see :func:`start_for`); until it is ready (it imports the
patterns first) a batch waits for it while messages are still being written, and
runs in the calling thread once they pause. It compiles each pattern the first time
a sentence holds one of its trigger words, as the calling thread does.
Whenever it cannot be used (no interpreter to start, it died, it did not get
ready or answer within :data:`TIMEOUT` seconds) the batch runs in the calling thread, so a
result is never lost and batches keep their order (the caller waits for each).
After :data:`MAX_FAILURES` failures the process stops starting it. The helper
exits when its input closes: when this process exits or :func:`shutdown` is called.

Frames are a 4-byte length and a pickle, both ways, over the helper's own pipes.
The helper answers with each turn's candidates by the turn's position in the batch,
not with whole exchanges: the turns and their contexts are the caller's already, and
pickling them back (four turns' text per exchange) was a sixth of the helper's time.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from arbormem.records.extract import Candidate, Context, Turn, extract

__all__ = [
    "CONTEXT_TURNS",
    "ENABLED",
    "MIN_TURNS",
    "START_WAIT",
    "Exchange",
    "ExtractionWorker",
    "extract_batch",
    "main",
    "run_batch",
    "running",
    "shared",
    "shutdown",
    "start_for",
]

log = logging.getLogger("arbormem.records")

#: Messages before a turn that the patterns read as its context ("she", "it").
CONTEXT_TURNS = 3
#: Batches smaller than this do not start the helper: a program that only ever adds a
#: message or two never pays for one. Once it runs, every batch goes to it.
MIN_TURNS = 16
#: Whether large batches go to the helper process at all (tests turn it off and on).
ENABLED = True
#: Seconds a batch may take in the helper before it is given up and run here.
TIMEOUT = 60.0
#: While messages are being written, seconds between looks at whether they still are,
#: as a batch waits for the helper to start (see :func:`run_batch`).
START_WAIT = 0.1
#: Failures after which the helper is not started again in this process.
MAX_FAILURES = 3

#: One exchange with its candidates: the turns, their context, what they gave.
Exchange = tuple[list[Turn], Context, list[Candidate]]
_HEADER = struct.Struct("!I")
# The helper needs the patterns only: ``arbormem`` and ``arbormem.records`` stand in
# as bare packages, whose ``__init__`` would import the whole library (numpy, SQLite,
# the embedders), which doubled its start-up. Not ``-m``, which would import this
# module twice.
_ENTRY = """
import importlib.util, sys
for name in ("arbormem", "arbormem.records"):
    spec = importlib.util.find_spec(name)
    if spec is not None and name not in sys.modules:
        sys.modules[name] = importlib.util.module_from_spec(spec)
from arbormem.records.worker import main
main()
"""


#: What a batch gave: each turn's candidates by its position in the batch (turns that
#: gave none left out), and the turns whose extraction failed (id, error).
Found = tuple[list[tuple[int, list[Candidate]]], list[tuple[str, str]]]


def _recents(turns: Sequence[Turn], recent: Sequence[Turn]) -> list[tuple[Turn, ...]]:
    """The turns each turn of a batch is read with: the last :data:`CONTEXT_TURNS`
    conversation turns before it."""
    out = []
    seen = list(recent)
    for turn in turns:
        out.append(tuple(seen[-CONTEXT_TURNS:]))
        if turn.role in ("user", "assistant"):
            seen.append(turn)
    return out


def _find(turns: Sequence[Turn], recent: Sequence[Turn], context: Context) -> Found:
    """The candidates of each turn of a batch (see :data:`Found`); a turn whose
    extraction fails gives nothing: a pattern bug must not stop every later message."""
    found: list[tuple[int, list[Candidate]]] = []
    failed: list[tuple[str, str]] = []
    for i, (turn, before) in enumerate(zip(turns, _recents(turns, recent))):
        try:
            candidates = extract([turn], replace(context, recent=before))
        except Exception as exc:
            failed.append((turn.id, f"{type(exc).__name__}: {exc}"))
            continue
        if candidates:
            found.append((i, candidates))
    return found, failed


def _exchanges(
    turns: Sequence[Turn], recent: Sequence[Turn], context: Context, found: Found
) -> tuple[list[Exchange], list[tuple[str, str]]]:
    """:func:`extract_batch`'s answer from what :func:`_find` gave."""
    recents = _recents(turns, recent)
    exchanges: list[Exchange] = [
        ([turns[i]], replace(context, recent=recents[i]), candidates) for i, candidates in found[0]
    ]
    return exchanges, found[1]


def extract_batch(
    turns: Sequence[Turn], recent: Sequence[Turn], context: Context
) -> tuple[list[Exchange], list[tuple[str, str]]]:
    """The candidates of each turn of a batch, read as ``bench updates`` reads them
    (one exchange per turn, the last :data:`CONTEXT_TURNS` conversation turns before
    it as context), and the turns whose extraction failed (id, error), which give
    nothing: a pattern bug must not stop every later message."""
    return _exchanges(turns, recent, context, _find(turns, recent, context))


class WorkerUnavailable(Exception):
    """The helper cannot take a batch now; run it in the calling thread."""


class ExtractionWorker:
    """One helper process running :func:`extract_batch` (see the module docs)."""

    def __init__(self, timeout: float = TIMEOUT, command: Sequence[str] | None = None) -> None:
        self.timeout = timeout
        #: Batches the helper answered.
        self.served = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._dead = threading.Event()
        #: Frames read from the helper, handed from the reader thread to the caller.
        self._replies: list[Any] = []
        self._replied = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = time.monotonic()
        #: The process that started the helper (a forked child must not use it).
        self.pid = os.getpid()
        self._start(command)

    def _start(self, command: Sequence[str] | None) -> None:
        if not sys.executable and command is None:
            raise WorkerUnavailable("no Python interpreter to start")
        env = dict(os.environ)
        # The helper imports arbormem from where this process did, installed or not
        # (from there as its working folder too, which ``-c`` puts first on its path).
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                list(command or [sys.executable, "-c", _ENTRY]),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=here,
            )
        except OSError as exc:
            raise WorkerUnavailable(f"cannot start the helper: {exc}") from exc
        assert self._proc.stdout is not None
        # Not named "arbormem-...", the prefix of the threads a Memory owns and stops
        # on close: this one belongs to the process-wide helper and outlives memories.
        threading.Thread(
            target=self._read, args=(self._proc.stdout,), name="records-helper-reader", daemon=True
        ).start()

    def _read(self, stream: IO[bytes]) -> None:
        """Read the helper's frames until it closes its output; the first says ready."""
        try:
            while True:
                frame = _read_frame(stream)
                if frame is None:
                    break
                with self._replied:
                    if self._ready.is_set():
                        self._replies.append(frame)
                    else:
                        self._ready.set()
                    self._replied.notify_all()
        except Exception:  # a broken pipe or frame: the helper is gone either way
            pass
        finally:
            self._dead.set()
            with self._replied:
                self._replied.notify_all()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the helper is ready (True) or gone, or ``timeout`` passes."""
        with self._replied:
            self._replied.wait_for(
                lambda: self._ready.is_set() or self._dead.is_set(), timeout=timeout
            )
        return self.ready

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self._dead.is_set()

    @property
    def alive(self) -> bool:
        return not self._dead.is_set()

    def run(
        self, turns: Sequence[Turn], recent: Sequence[Turn], context: Context
    ) -> tuple[list[Exchange], list[tuple[str, str]]]:
        """:func:`extract_batch` in the helper; :class:`WorkerUnavailable` when it
        is not ready yet, is gone, or did not get ready or answer in time (it is
        then stopped)."""
        if not self._ready.is_set():
            # Until it is ready the batch runs in the calling thread: waiting would hold
            # records back by the helper's start-up, which a short ingest then waits for.
            if self._dead.is_set() or time.monotonic() - self._started > self.timeout:
                self.stop()
                raise WorkerUnavailable("the helper did not start")
            raise WorkerUnavailable("the helper is not ready yet")
        if self._dead.is_set():
            raise WorkerUnavailable("the helper is gone")
        with self._lock:
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            try:
                _write_frame(proc.stdin, (list(turns), list(recent), context))
            except (OSError, ValueError) as exc:
                self.stop()
                raise WorkerUnavailable(f"the helper is gone: {exc}") from exc
            with self._replied:
                answered = self._replied.wait_for(
                    lambda: bool(self._replies) or self._dead.is_set(), timeout=self.timeout
                )
                reply = self._replies.pop(0) if self._replies else None
            if reply is None:
                self.stop()
                raise WorkerUnavailable(
                    "the helper did not answer" if not answered else "the helper is gone"
                )
            kind, value = reply
            if kind != "ok":
                # Extraction itself catches each turn's errors; anything else (a frame
                # that did not unpickle) is the helper's fault, not the batch's.
                raise WorkerUnavailable(f"the helper failed: {value}")
            self.served += 1
        return _exchanges(turns, recent, context, value)

    def stop(self) -> None:
        """Close the helper's input (it exits) and make sure it is gone."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        self._dead.set()


# -- the process-wide helper ---------------------------------------------------------

_shared: ExtractionWorker | None = None
_failures = 0
_exiting = False
_shared_lock = threading.Lock()


def shared() -> ExtractionWorker | None:
    """The helper of this process, started on the first call (None when it cannot be
    started, or failed too often)."""
    global _shared, _failures
    with _shared_lock:
        if _exiting:
            return None  # a batch at interpreter exit does not start a helper
        if _shared is not None and _shared.pid != os.getpid():
            # A forked child: the helper and its pipes are its parent's, and frames
            # written by both would interleave. The child starts its own.
            _shared, _failures = None, 0
        if _shared is not None and _shared.alive:
            return _shared
        if _shared is not None:  # it died: count it, perhaps start another
            _shared.stop()
            _shared = None
            _failures += 1
        if _failures >= MAX_FAILURES:
            return None
        try:
            _shared = ExtractionWorker()
        except WorkerUnavailable as exc:
            log.info("records: extraction stays in this process: %s", exc)
            _failures = MAX_FAILURES
            return None
        return _shared


def _spare_core() -> bool:
    """Whether this process may run on more than one core: on one, the helper would
    only add its start-up and the pickling to the same core's work."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # no affinity on this platform (macOS, Windows)
        return (os.cpu_count() or 1) > 1


def start_for(turns: int) -> None:
    """Start the helper for ``turns`` messages about to be written, if a batch of them
    would start it: a bulk add starts it as its writes begin rather than once the first
    is committed, so that it is ready sooner (it takes most of a second to start, which
    the first bulk load of a process waited for at its end)."""
    if ENABLED and turns >= MIN_TURNS and _spare_core():
        shared()


def running() -> bool:
    """Whether this process's helper is started (any batch is then worth sending)."""
    worker = _shared
    return worker is not None and worker.alive


def shutdown() -> None:
    """Stop the helper (it is started again when a large batch comes) and forget its
    failures."""
    global _shared, _failures
    with _shared_lock:
        worker, _shared = _shared, None
        _failures = 0
    if worker is not None:
        worker.stop()


def _at_exit() -> None:
    global _exiting
    _exiting = True
    shutdown()


atexit.register(_at_exit)


def run_batch(
    turns: Sequence[Turn],
    recent: Sequence[Turn],
    context: Context,
    *,
    writing: Callable[[], bool] | None = None,
) -> list[Exchange]:
    """:func:`extract_batch` in the helper when the batch is large and the helper
    ready, here otherwise; failed turns are logged.

    ``writing`` says whether messages are still arriving: while they are, a helper
    still starting is waited for, :data:`START_WAIT` seconds at a time. Run here, the
    batch would take the interpreter lock from the thread writing them, and compiling
    the patterns alone holds it for 0.2 s (once per process), near a tenth of the
    writer's time in a bulk ingest of LoCoMo's five conversations. Once writes pause
    (a short ingest waiting for its records), the batch runs here rather than wait
    for the helper's start-up."""
    result = None
    if ENABLED and (len(turns) >= MIN_TURNS or running()) and _spare_core():
        worker = shared()
        if worker is not None:
            if writing is not None:
                while not worker.ready and worker.alive and writing():
                    worker.wait_ready(START_WAIT)
            try:
                result = worker.run(turns, recent, context)
            except WorkerUnavailable as exc:
                if worker.alive:
                    log.debug("records: batch extracted here: %s", exc)
                else:
                    log.warning("records: batch extracted here: %s", exc)
    if result is None:
        result = extract_batch(turns, recent, context)
    exchanges, failed = result
    for turn_id, error in failed:
        log.warning("records: extraction failed on message %s: %s", turn_id, error)
    return exchanges


# -- the helper's side -----------------------------------------------------------------


def _write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: IO[bytes], n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream: IO[bytes]) -> Any:
    """The next frame's value, None at the end of the stream."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    data = _read_exact(stream, _HEADER.unpack(header)[0])
    if data is None:
        return None
    return pickle.loads(data)


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The helper's loop: say ready, then answer each batch until the input ends."""
    # Ready once imported: the patterns compile as batches first need them. Compiled
    # all before saying ready, they held the first batches back for half a second,
    # which the first bulk load of a process then waited for at its end (a LoCoMo
    # conversation needs 56 of the 86, its first 64 turns 37).
    _write_frame(out, ("ready", None))
    while True:
        try:
            request = _read_frame(inp)
        except Exception as exc:
            _write_frame(out, ("error", f"{type(exc).__name__}: {exc}"))
            continue
        if request is None:
            return
        turns, recent, context = request
        try:
            _write_frame(out, ("ok", _find(turns, recent, context)))
        except Exception as exc:
            _write_frame(out, ("error", f"{type(exc).__name__}: {exc}"))


def main() -> None:
    """The helper process's entry point."""
    # Frames go to the output this process was given; anything else that writes to
    # standard output (a print in an import) goes to standard error, not into a frame.
    frames = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, frames)
