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
* ``topic_length``: log of the messages the topic holds;
* ``after_short``: the previous message was a short statement (at most three
  content words, no question), which this one most likely takes up ("The
  east, please." before the restaurant it asks for);
* ``request``: the message opens with a request ("I need...", "can you help
  me find...", "is there a...", or a command or plain question to an assistant:
  "remind me to...", "what's the forecast for...").

A fitted logistic model turns them into the probability that the message
opens a new topic; its complement, the *continuity*, is compared with
``TreeConfig.split_threshold``. ``dense_weight`` scales the two embedding
features against the three word features (0.5 leaves the fitted model as it
is). The weights come from ``python -m arbormem.bench.segment_fit`` on the
development dialogues (see ``docs/benchmarks.md``).

Rules around the model: a message with no content word beyond chat filler
(greetings, thanks, "ok", "lol") never opens a topic, nor does a farewell; a
topic holds at least :data:`MIN_TOPIC_MESSAGES` messages before it can end.
Then a message opens a topic whatever the model says when it has content and
follows a farewell ("thanks, that's all, bye"); when it has two content words
or more and follows a closing (a bare "thanks", "you're welcome", "anything
else?"); when it asks for something *more* ("I also need a taxi") with no word
in common with the last messages; when it opens a request with no word in
common with the topic; and when it has at least three content words, none of
them in the topic, its vector points away from the topic's, and it does not
follow a question. Last, a topic that opened with a request is a *task*: the
turns that serve it (slot filling, offers, confirmations, short questions about
the offer) stay in it, and only a message whose questions hold four content
words or more is left to the model (the rules above still apply).
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
#: Content words in the questions of a message the model may judge inside a task topic.
TASK_QUESTION_WORDS = 4
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
    "after_short",
    "request",
)
DENSE_FEATURES = ("cos_window", "cos_topic")
WORD_FEATURES = ("words_window", "words_topic", "new_question")

#: Fitted by ``python -m arbormem.bench.segment_fit`` (see docs/benchmarks.md).
BIAS = -1.4
WEIGHTS: Mapping[str, float] = {
    "cos_window": -2.48,
    "cos_topic": 0.84,
    "words_window": -0.22,
    "words_topic": -0.26,
    "question": 1.56,
    "after_question": -1.62,
    "new_question": 0.73,
    "content_words": 0.57,
    "topic_length": -0.54,
    "after_short": -0.62,
    "request": 0.66,
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
# A sentence's text and its "?". Tried only where a sentence starts (the look-behind):
# from inside a sentence with no "?" at its end the plain pattern scanned to the end of
# the sentence again from each character, which made every message cost its square.
_QUESTION = re.compile(r"(?<![^.!?\n])[^.!?\n]*\?")
#: Short thanks and welcomes, and offers of more help, that close an exchange.
_THANKS = re.compile(
    r"\b(?:thanks|thank you|thx|you'?re welcome|you are welcome|appreciate it|happy to help"
    r"|glad to help|my pleasure|no problem)\b",
    re.IGNORECASE,
)
_ELSE = re.compile(r"\b(?:anything else|something else|anything more)\b", re.IGNORECASE)
# Words that may come before a request without changing it: greetings, thanks, assent.
_LEAD = (
    r"^(?:(?:hi|hello|hey|good (?:morning|afternoon|evening)|great|perfect|thanks|thank you"
    r"|ok|okay|alright|also|and|yes|yeah|no)(?: there)?[\s,.!]+)*"
)
_REQUEST = re.compile(
    _LEAD + r"(?:please )?(?:(?:i|we)(?:'m|'re| am| are)? (?:now )?(?:need|want|would like"
    r"|'d like|looking for|am looking for|was wondering|wonder|planning|trying to (?:find|book"
    r"|get))|i'd like|we'd like|(?:can|could|would) you (?:please )?(?:help|find|recommend"
    r"|tell me about|look up|book|reserve|check|get me|show me|set up|schedule|remind"
    r"|give me directions|navigate)|help me find|find me|(?:where|what)(?: is|'s) the"
    r" (?:nearest|closest)|is there an? |are there any "
    # In-car and calendar assistants are mostly spoken to in commands and plain
    # questions ("remind me to...", "what's the forecast for...").
    r"|(?:book|reserve|find|get|show|give) (?:me|us) |(?:book|reserve) (?:a|an|the) "
    r"|remind me |schedule (?:a|an|my) |set (?:up )?(?:a|an|my) (?:reminder|meeting"
    r"|appointment|alarm)|navigate |take me to |directions to "
    r"|(?:what(?:'s| is| will)|how(?:'s| is)) the (?:weather|forecast|temperature)"
    r"|(?:will|is) it (?:going to |gonna )?(?:rain|snow|be (?:hot|cold|warm|sunny|windy"
    r"|cloudy|foggy|rainy|dry))|what(?:'s| is) on my |(?:when|what time|where)(?: is|'s)"
    r" my |do i have (?:any|anything) )",
    re.IGNORECASE,
)
_MORE = re.compile(
    r"\b(?:i(?:'d| would| will)? also (?:need|want|like)|i'?m also (?:looking|interested)"
    r"|i am also (?:looking|interested)|can you also|could you also|also,? (?:i|can|could)"
    r"|one more thing)\b",
    re.IGNORECASE,
)


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
    # The count first: the words are already read (and cached), the pattern is not.
    return len(content_words(text)) <= 6 and bool(_FAREWELL.search(text))


@lru_cache(maxsize=4096)
def is_closing(text: str) -> bool:
    """A message that closes an exchange: a farewell, a short thanks or welcome, or an
    offer of more help ("Is there anything else I can help you with?")."""
    if is_farewell(text):
        return True
    if len(content_words(text)) <= 3 and _THANKS.search(text):
        return True
    return text.rstrip().endswith("?") and bool(_ELSE.search(text))


@lru_cache(maxsize=4096)
def is_request(text: str) -> bool:
    """A message that opens with a request ("Hi, I'm looking for a cheap hotel")."""
    return bool(_REQUEST.search(text))


@lru_cache(maxsize=4096)
def asks_more(text: str) -> bool:
    """A message that asks for something more ("I also need a taxi")."""
    return bool(_MORE.search(text))


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
    #: The topic opened with a request (see :func:`is_request`).
    task: bool = False

    def add(self, text: str, vec: np.ndarray | None) -> None:
        """Take a message into the topic."""
        words = content_words(text)
        if not self.messages:
            self.task = is_request(text)
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


def _norm(vec: np.ndarray) -> float:
    # np.linalg.norm of a vector is this very sum and root, behind a dozen checks that
    # cost more than the arithmetic on a 256-float vector, twice per message.
    return float(np.sqrt(vec.dot(vec)))


def _cosine(vec: np.ndarray, other: np.ndarray | None, vec_norm: float | None = None) -> float:
    """Cosine of two vectors (0 if one is missing or of another shape); ``vec_norm``:
    ``vec``'s norm, when the caller compares it with several."""
    if other is None or other.shape != vec.shape:
        return 0.0
    norm = (_norm(vec) if vec_norm is None else vec_norm) * _norm(other)
    return float(np.dot(vec, other)) / norm if norm else 0.0


def features(state: TopicState, text: str, vec: np.ndarray | None) -> dict[str, float]:
    """The features of a message against the active topic (see the module docs)."""
    words = content_words(text)
    window_words: set[str] = set().union(*(w for _, w in state.window))
    window_vecs = [v for v, _ in state.window if v is not None]
    cos_window = cos_topic = 0.0
    if vec is not None:
        vec_norm = _norm(vec)
        if window_vecs and all(v.shape == vec.shape for v in window_vecs):
            # Added in order: the sums np.sum(window_vecs, axis=0) gives, bit for bit,
            # without stacking the vectors into a new array first.
            window_sum = window_vecs[0]
            for v in window_vecs[1:]:
                window_sum = window_sum + v
            cos_window = _cosine(vec, window_sum, vec_norm)
        cos_topic = _cosine(vec, state.vector_sum, vec_norm)
    asked = question_words(text)
    previous = (state.previous or "").rstrip()
    short = bool(previous) and not previous.endswith("?") and len(content_words(previous)) <= 3
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
        "after_short": float(short),
        "request": float(is_request(text)),
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
    words = content_words(text)
    if not words or is_farewell(text):
        return False  # greetings, thanks and goodbyes do not open topics
    previous = state.previous
    if previous is not None and is_farewell(previous):
        return True
    if len(words) >= 2 and previous is not None and is_closing(previous):
        return True  # "Thanks." "You're welcome." then a new request
    if len(words) >= 2 and values["words_window"] == 0 and asks_more(text):
        return True
    if len(words) >= 2 and values["words_topic"] == 0 and values["request"]:
        return True
    if (
        values["cos_topic"] < 0
        and values["words_topic"] == 0
        and values["content_words"] >= ABRUPT_WORDS
        and not values["after_question"]
    ):
        return True  # nothing in common with the topic, not even its direction
    if state.task and len(question_words(text)) < TASK_QUESTION_WORDS:
        return False  # slot filling, offers and confirmations serve the task
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
