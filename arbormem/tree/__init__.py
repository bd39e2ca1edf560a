"""The topic tree of each thread: grown on every exchange, summarised, searched,
reorganised at rest. :mod:`arbormem.tree.service` is what :class:`~arbormem.Memory`
calls; the other modules each hold one part (growth, summaries, recall, checks,
reorganisation, navigation tools, views, background runs).
"""
