"""What goes into the next prompt.

:mod:`~arbormem.context.assemble` packs the sections of a prompt within a token
budget; :mod:`~arbormem.context.working` keeps each session's working memory (its
mode, tracked state and rolling summary) and builds a context from it;
:mod:`~arbormem.context.modes` defines the memory modes, whose state trackers live in
:mod:`~arbormem.context.trackers`; :mod:`~arbormem.context.summary` writes the
rolling summary.
"""
