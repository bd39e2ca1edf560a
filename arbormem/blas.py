"""How many threads the linear algebra library under numpy may use.

arbormem's matrix products are small: a question's vector against a thread's
few thousand, a few hundred candidates' features against the ranker's weights.
OpenBLAS, which numpy's wheels ship, splits even those over every core, and its
helper threads then spin for a while waiting for the next product. On the
two-core reference machine that took a core from what runs beside a search
(the query's embedding, the background embedder, other requests): a REALTALK
search cost twice the CPU it needs (docs/benchmarks.md, "Threads of numpy's
linear algebra").

So the first memory a process opens limits BLAS to one thread, process-wide,
unless the process chose for itself: any of ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` set leaves the library as it is, and so
does ``ARBORMEM_BLAS_THREADS=0``; ``ARBORMEM_BLAS_THREADS=N`` allows N threads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

from arbormem.errors import ConfigError

log = logging.getLogger(__name__)

#: The environment variable that sets the limit (0: leave BLAS as it is).
VARIABLE = "ARBORMEM_BLAS_THREADS"
#: Variables through which a process sets its BLAS threads itself.
OWN_CHOICE = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
DEFAULT_THREADS = 1

_lock = threading.Lock()
_done = False


def wanted_threads(environ: Mapping[str, str] | None = None) -> int | None:
    """The limit the environment asks for: None to leave BLAS as it is."""
    env = os.environ if environ is None else environ
    raw = env.get(VARIABLE, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = -1
        if n < 0:
            raise ConfigError(
                f"{VARIABLE}={raw!r}: expected a whole number of threads, "
                "or 0 to leave numpy's linear algebra as it is"
            )
        return n or None
    if any(env.get(name) for name in OWN_CHOICE):
        return None
    return DEFAULT_THREADS


def limit_blas_threads() -> None:
    """Apply the limit the environment asks for, once per process."""
    global _done
    with _lock:
        if _done:
            return
        n = wanted_threads()
        _done = True
        if n is None:
            return
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=n, user_api="blas")
        except Exception as exc:  # only speed is at stake: run as the library is
            log.debug("BLAS threads not limited: %r", exc)
