"""Skills: procedure records found by what they do, with HyDE when an LLM is there.

A question about how to do something rarely shares words with the steps that
answer it ("my laptop won't see the printer" against "1. Open Settings > Devices
..."). With an LLM configured, :func:`hypothetical_answer` has it write a short
draft of the procedure that would answer, and that draft is embedded instead
of the question (HyDE: hypothetical document embeddings); without one, or when
the call fails, the question itself is embedded. :func:`rank_procedures` scores
each procedure by the cosine of that vector with its intent and body.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from arbormem.embed import Embedder
from arbormem.errors import LLMError
from arbormem.llm import LLMClient
from arbormem.records.model import Record

__all__ = ["HYDE_FEATURE", "hypothetical_answer", "procedure_text", "rank_procedures"]

log = logging.getLogger("arbormem.records")

#: The usage meter's name for HyDE calls.
HYDE_FEATURE = "records-hyde"
HYDE_MAX_TOKENS = 250
#: Longest draft kept: a draft is a probe, not an answer.
HYDE_CHARS = 1200

_HYDE_PROMPT = (
    "Someone asks how to do something. Write the short procedure that would answer "
    "them: a one-line goal, then three to six numbered steps. No preamble, no caveats; "
    "if you are unsure of details, write plausible steps anyway, they are only used to "
    "find similar notes."
)


def hypothetical_answer(query: str, llm: LLMClient | None) -> str:
    """A draft procedure answering ``query`` written by ``llm``; ``query`` itself
    when there is no LLM or the call fails (never raises)."""
    if llm is None or not query.strip():
        return query
    try:
        result = llm.chat(
            [{"role": "system", "content": _HYDE_PROMPT}, {"role": "user", "content": query}],
            max_tokens=HYDE_MAX_TOKENS,
            feature=HYDE_FEATURE,
        )
    except LLMError as exc:
        log.info("records: HyDE draft failed, embedding the question: %s", exc)
        return query
    except Exception as exc:  # a client breaking its contract
        log.warning("records: LLM client raised %r; embedding the question", exc)
        return query
    draft = result.text.strip()[:HYDE_CHARS]
    # the question stays in the probe: a draft gone astray still carries its words
    return f"{query}\n{draft}" if draft else query


def procedure_text(record: Record) -> str:
    """What a procedure is embedded as: its intent (or text) and its steps."""
    head = record.intent or record.text
    return f"{head}\n{record.body}" if record.body else head


def rank_procedures(
    query: str,
    procedures: Sequence[Record],
    embedder: Embedder,
    *,
    llm: LLMClient | None = None,
    k: int = 5,
) -> list[tuple[Record, float]]:
    """The ``k`` procedures closest to ``query`` (through a HyDE draft when ``llm``
    is given), best first, with their cosine."""
    pool = [r for r in procedures if r.kind == "procedure"]
    if not pool or k <= 0:
        return []
    probe = hypothetical_answer(query, llm)
    vectors = np.asarray(
        embedder.embed_batch([probe, *(procedure_text(r) for r in pool)]), dtype=np.float32
    )
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    vectors = vectors / norms[:, None]
    scores = vectors[1:] @ vectors[0]
    order = np.argsort(-scores, kind="stable")[:k]
    return [(pool[i], float(scores[i])) for i in order]
