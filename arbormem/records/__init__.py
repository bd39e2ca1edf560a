"""Typed memory records with history, distilled from the lossless log.

The pieces, each usable on its own (docs/records.md has the whole picture):

* :mod:`~arbormem.records.model`: :class:`Record` (kinds, idempotent ids, JSON form)
  and :class:`Composite`;
* :mod:`~arbormem.records.vocab`: the canonical attributes (home, employer, phone...);
* :mod:`~arbormem.records.extract`: candidate records from an exchange, no LLM, with
  :mod:`~arbormem.records.reading` (messages into statements),
  :mod:`~arbormem.records.people` (who "I", "you", "she" are),
  :mod:`~arbormem.records.matching` and the frames of
  :mod:`~arbormem.records.frames_where` and :mod:`~arbormem.records.frames_life`,
  :mod:`~arbormem.records.values` and :mod:`~arbormem.records.rewrite`;
* :mod:`~arbormem.records.llm_extract`: the same with one LLM call per batch, checked,
  falling back to the patterns;
* :mod:`~arbormem.records.resolve`: what a candidate does to the records kept
  (merge, supersede, close), as pure functions;
* :mod:`~arbormem.records.fuse`: composites from embeddings, no LLM;
* :mod:`~arbormem.records.skills`: procedures found through a HyDE draft;
* :mod:`~arbormem.records.engine`: :class:`RecordBook`, the in-memory reference
  implementation of the operations a store will carry.
"""

from arbormem.records.engine import RecordBook, RecordHit, as_of_from_query
from arbormem.records.extract import Candidate, Context, Turn, extract
from arbormem.records.model import KINDS, Composite, Record, record_id
from arbormem.records.resolve import Plan, RecordView, resolve

__all__ = [
    "KINDS",
    "Candidate",
    "Composite",
    "Context",
    "Plan",
    "Record",
    "RecordBook",
    "RecordHit",
    "RecordView",
    "Turn",
    "as_of_from_query",
    "extract",
    "record_id",
    "resolve",
]
