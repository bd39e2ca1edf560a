"""Where a topic ends: the boundary decision of the topic tree, without an LLM.

Every message of a session (user or assistant) may open a new topic; the
decision is made when the message arrives and never revised. It weighs the
message against the *active topic*: the last :data:`WINDOW` messages of the
topic and the topic as a whole, in embedding space and in content words, with
the shape of the dialogue around it:

* ``cos_window`` / ``cos_topic``: cosine of the message's vector with the sum
  of the vectors of the window and of the whole topic;
* ``words_window`` / ``words_topic``: the share of the message's content words
  (stemmed, no stop words, no numbers, no chat filler) already in them;
* ``question``: the message asks about something (a question with a content
  word: "anything else?" does not count); ``new_question``: the share of
  the words of its questions that are new to the window (a question about
  something new is how people change the subject; "and you?" is not);
* ``after_question``: the previous message ended on a question, so this one
  most likely answers it (questions and their answers belong together);
* ``content_words``: log(1 + number of content words);
* ``topic_length``: log of the messages the topic holds.

A fitted logistic model turns them into the probability that the message
opens a new topic; its complement, the *continuity*, is compared with
``TreeConfig.split_threshold``. ``dense_weight`` scales the two embedding
features against the three word features (0.5 leaves the fitted model as it
is). The weights come from ``python -m arbormem.bench.segment_fit`` on the
development dialogues (see ``docs/benchmarks.md``).

Rules around the model: a message with no content word beyond chat filler
(greetings, thanks, "ok", "lol") never opens a topic, nor does a farewell; a
topic holds at least :data:`MIN_TOPIC_MESSAGES` messages before it can end;
a message with content after a farewell ("thanks, that's all, bye") opens a
topic whatever the model says; and so does a message of at least three content
words that shares none with the topic, whose vector points away from the
topic's, and that does not follow a question.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from arbormem.text import analyze

#: Messages of the active topic the new one is compared with, besides the whole topic.
WINDOW = 3
#: Messages a topic holds before a message may open the next one.
MIN_TOPIC_MESSAGES = 2
#: ``content_words`` (log(1 + n)) of a message the abrupt-change rule judges: 3 words.
ABRUPT_WORDS = math.log1p(3)

FEATURES = (
    "cos_window",
    "cos_topic",
    "words_window",
    "words_topic",
    "question",
    "after_question",
    "new_question",
    "content_words",
    "topic_length",
)
DENSE_FEATURES = ("cos_window", "cos_topic")
WORD_FEATURES = ("words_window", "words_topic", "new_question")

#: Fitted by ``python -m arbormem.bench.segment_fit`` (see docs/benchmarks.md).
BIAS = -1.42
WEIGHTS: Mapping[str, float] = {
    "cos_window": -1.57,
    "cos_topic": 0.41,
    "words_window": -0.14,
    "words_topic": -0.38,
    "question": 1.74,
    "after_question": -1.74,
    "new_question": 0.6,
    "content_words": 0.47,
    "topic_length": -0.54,
}

#: Words that carry no subject: greetings, thanks, agreement, laughter, offers of help.
FILLER: frozenset[str] = frozenset(
    analyze(
        "yeah yes yep no nope ok okay sure right lol haha hahaha wow cool nice great "
        "awesome thanks thank hi hello hey good bye goodbye welcome oh ah hmm well "
        "really agree fine alright please anything else something everything help"
    )
)

_FAREWELL = re.compile(
    r"\b(?:bye|goodbye|good night|that'?s all|that is all|you'?re welcome|you are welcome"
    r"|have a (?:nice|great|good|wonderful|lovely) (?:day|night|evening|weekend|one))\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(r"[^.!?\n]*\?")


# A message is read by several features and rules, and once more as it joins its topic:
# the readings are cached (pure functions of the text).
@lru_cache(maxsize=4096)
def content_words(text: str) -> frozenset[str]:
    """The stemmed content words of a text, numbers and chat filler left out."""
    return frozenset(t for t in analyze(text) if not t.isdigit() and t not in FILLER)


@lru_cache(maxsize=4096)
def question_words(text: str) -> frozenset[str]:
    """The content words of the text's questions (sentences ending in "?")."""
    return frozenset(w for q in _QUESTION.findall(text) for w in content_words(q))


@lru_cache(maxsize=4096)
def is_farewell(text: str) -> bool:
    """A message that closes a conversation ("thanks, that's all, goodbye")."""
    return bool(_FAREWELL.search(text)) and len(content_words(text)) <= 6


@dataclass
class TopicState:
    """What the decision knows of the active topic (kept by the grower's cursor)."""

    #: The last WINDOW messages' vectors (None when a message had none) and words.
    window: deque[tuple[np.ndarray | None, frozenset[str]]] = field(
        default_factory=lambda: deque(maxlen=WINDOW)
    )
    #: Sum of the topic's message vectors and how many were summed.
    vector_sum: np.ndarray | None = None
    vectors: int = 0
    words: set[str] = field(default_factory=set)
    messages: int = 0
    previous: str | None = None

    def add(self, text: str, vec: np.ndarray | None) -> None:
        """Take a message into the topic."""
        words = content_words(text)
        self.window.append((vec, words))
        self.words |= words
        if vec is not None:
            if self.vector_sum is None or self.vector_sum.shape != vec.shape:
                self.vector_sum, self.vectors = np.array(vec, dtype=np.float64), 1
            else:
                self.vector_sum += vec
                self.vectors += 1
        self.messages += 1
        self.previous = text

    def reset(self) -> None:
        """Empty it for a new topic; the previous message stays known."""
        previous = self.previous
        self.__init__()  # type: ignore[misc]
        self.previous = previous

    @classmethod
    def of(cls, messages: Iterable[tuple[str, np.ndarray | None]]) -> TopicState:
        state = cls()
        for text, vec in messages:
            state.add(text, vec)
        return state


def _cosine(vec: np.ndarray, other: np.ndarray | None) -> float:
    if other is None or other.shape != vec.shape:
        return 0.0
    norm = float(np.linalg.norm(vec)) * float(np.linalg.norm(other))
    return float(np.dot(vec, other)) / norm if norm else 0.0


def features(state: TopicState, text: str, vec: np.ndarray | None) -> dict[str, float]:
    """The features of a message against the active topic (see the module docs)."""
    words = content_words(text)
    window_words: set[str] = set().union(*(w for _, w in state.window))
    window_vecs = [v for v, _ in state.window if v is not None]
    cos_window = cos_topic = 0.0
    if vec is not None:
        if window_vecs and all(v.shape == vec.shape for v in window_vecs):
            cos_window = _cosine(vec, np.sum(window_vecs, axis=0))
        cos_topic = _cosine(vec, state.vector_sum)
    asked = question_words(text)
    previous = (state.previous or "").rstrip()
    return {
        "cos_window": cos_window,
        "cos_topic": cos_topic,
        "words_window": len(words & window_words) / len(words) if words else 1.0,
        "words_topic": len(words & state.words) / len(words) if words else 1.0,
        "question": float(bool(asked)),
        "after_question": float(previous.endswith("?")),
        "new_question": len(asked - window_words) / len(asked) if asked else 0.0,
        "content_words": math.log1p(len(words)),
        "topic_length": math.log(max(state.messages, 1)),
    }


def boundary_probability(
    values: Mapping[str, float],
    *,
    dense_weight: float = 0.5,
    weights: Mapping[str, float] = WEIGHTS,
    bias: float = BIAS,
) -> float:
    """The fitted model's probability that the message opens a new topic."""
    dense, lexical = 2 * dense_weight, 2 * (1 - dense_weight)
    score = bias
    for name, value in values.items():
        scale = dense if name in DENSE_FEATURES else lexical if name in WORD_FEATURES else 1.0
        score += weights[name] * scale * value
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, score))))


def by_rule(state: TopicState, text: str, values: Mapping[str, float]) -> bool | None:
    """True or False where a rule settles whether the message opens a topic, None
    where the model decides. ``values``: the message's :func:`features`."""
    if state.messages < MIN_TOPIC_MESSAGES:
        return False
    if not content_words(text) or is_farewell(text):
        return False  # greetings, thanks and goodbyes do not open topics
    if state.previous is not None and is_farewell(state.previous):
        return True
    if (
        values["cos_topic"] < 0
        and values["words_topic"] == 0
        and values["content_words"] >= ABRUPT_WORDS
        and not values["after_question"]
    ):
        return True  # nothing in common with the topic, not even its direction
    return None


def opens_topic(
    state: TopicState,
    text: str,
    vec: np.ndarray | None,
    *,
    split_threshold: float,
    dense_weight: float = 0.5,
) -> bool:
    """Whether this message starts a new topic (the rules, then the model)."""
    values = features(state, text, vec)
    ruled = by_rule(state, text, values)
    if ruled is not None:
        return ruled
    continuity = 1 - boundary_probability(values, dense_weight=dense_weight)
    return continuity < split_threshold


def feature_matrix(rows: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Rows of features in :data:`FEATURES` order (for fitting)."""
    return np.array([[r[name] for name in FEATURES] for r in rows], dtype=np.float64)
