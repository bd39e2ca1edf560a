"""The state trackers of the memory modes: what each mode keeps across turns.

Each tracker reads the new messages of a turn and merges what it finds into a
bounded state, most recent first. Without an LLM it uses patterns written for
precision: a wrong decision or task in the prompt misleads the model more than
a missed one, so anything hypothetical, negated, conditional or asked as a
question is left out. With an LLM (see :class:`arbormem.context.modes.Tracker`) one
JSON call per update extracts the same structure, checked strictly.

* :class:`ConversationTracker`: topics (keyphrases) and entities (names,
  places, organisations, amounts, dates).
* :class:`CodeTracker`: the current task, its progress, files touched, recent
  errors with file and line (Python tracebacks, pytest, compilers, JS/Java stacks).
* :class:`ReasoningTracker`: objective and sub-goals, decisions with rationale,
  rejected alternatives, constraints, assumptions.

Make them with :func:`arbormem.context.modes.new_tracker`.
"""

from arbormem.context.trackers.code import CodeError, CodeTracker
from arbormem.context.trackers.conversation import ConversationTracker
from arbormem.context.trackers.reasoning import Constraint, Decision, ReasoningTracker, Rejected

__all__ = [
    "CodeError",
    "CodeTracker",
    "Constraint",
    "ConversationTracker",
    "Decision",
    "ReasoningTracker",
    "Rejected",
]
