"""Recall: finding the turns that answer a query.

:mod:`~arbormem.recall.retriever` gathers candidates from every index and ranks
them; :mod:`~arbormem.recall.features` computes the evidence for each candidate,
:mod:`~arbormem.recall.ranker` weighs it, :mod:`~arbormem.recall.termstats` keeps the
term counts BM25 needs, and :mod:`~arbormem.recall.rerank` optionally reorders the
best turns with a cross-encoder.
"""
