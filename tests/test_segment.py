"""Where topics end: the tree's boundary decision on small hand-written dialogues."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from arbormem import Memory
from arbormem.bench.segment import innermost_topics
from arbormem.embed import WordLlamaEmbedder
from arbormem.embed.base import CachedEmbedder
from arbormem.tree.segment import (
    FEATURES,
    WEIGHTS,
    TopicState,
    asks_more,
    boundary_probability,
    by_rule,
    content_words,
    features,
    is_closing,
    is_farewell,
    is_request,
    opens_topic,
    question_words,
)

from .conftest import write_json
from .fake_openai import FakeOpenAI, Reply

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=timezone.utc)

TRIP = [
    ("user", "I'm planning a trip to Lisbon in May with my sister Maya."),
    ("assistant", "Lisbon in May is lovely. How many days will you stay?"),
    ("user", "Five days. We want to see Sintra and eat seafood in Alfama."),
    ("assistant", "Take the train to Sintra early; book a seafood place in Alfama ahead."),
]
LAPTOP = [
    ("user", "My laptop fan is screaming whenever I compile the Rust project."),
    ("assistant", "Check the fan for dust and limit cargo's parallel build jobs."),
    ("user", "Setting cargo build jobs to two made the laptop fan quiet again."),
    ("assistant", "Good: fewer jobs means less heat from the compiler."),
]
FOLLOW_UPS = [
    ("user", "Which part of Lisbon should we stay in for those five days?"),
    ("assistant", "Stay in Baixa or Chiado: both are central and close to the Sintra trains."),
    ("user", "Is Chiado quieter at night than Baixa?"),
    ("assistant", "Yes, Chiado is calmer once the shops close."),
]
SMALL_TALK = [
    ("user", "Thanks!"),
    ("assistant", "You're welcome, enjoy!"),
    ("user", "Hi again!"),
    ("assistant", "Hello! Great to see you."),
    ("user", "ok cool"),
]
#: Chit-chat where the second speaker (stored as the assistant) changes the subject.
DOGS_THEN_MUSIC = [
    ("user", "hi ! how are you doing today ?"),
    ("assistant", "i am good , just got back from walking my two dogs ."),
    ("user", "nice , what kind of dogs do you have ?"),
    ("assistant", "a beagle and a husky , they love the snow ."),
    ("user", "huskies are beautiful , my neighbour has one ."),
    ("assistant", "do you play any musical instruments ? i am learning the violin ."),
    ("user", "i play the piano , i have had lessons since i was six ."),
    ("assistant", "the violin is hard , my teacher says my bowing is bad ."),
]
HOTEL_THEN_TRAIN = [
    ("user", "I need a cheap hotel in the north of town for two nights."),
    ("assistant", "The Acorn Guest House is cheap and in the north. Shall I book it?"),
    ("user", "Yes please, for two people from Friday."),
    ("assistant", "Booked. Your reference is ZX81. Anything else?"),
    ("user", "No, that's all. Thank you, goodbye!"),
    ("assistant", "You're welcome, have a nice day!"),
    ("user", "I need a train to Cambridge on Tuesday morning."),
    ("assistant", "There is a train at 9:15 arriving at 10:05. Shall I book a seat?"),
]
#: A task: the slots it fills, the offer and the booking stay in one topic.
TABLE_FOR_FOUR = [
    ("user", "Hello, I'm looking for an expensive restaurant in the city centre."),
    ("assistant", "There are several. What kind of food would you like?"),
    ("user", "Korean, please."),
    ("assistant", "Seoul Garden serves Korean food in the centre. Shall I reserve a table?"),
    ("user", "Yes, for four people at 19:30 on Saturday."),
    ("assistant", "Your table is reserved, reference K7Q2."),
    ("user", "What is the address?"),
    ("assistant", "It is at 12 Market Street."),
]
#: A bare thanks closes the task; the next request opens another one.
THANKS_THEN_TAXI = [
    ("user", "Thanks."),
    ("assistant", "You're welcome."),
    ("user", "I also need a taxi from my hotel to get there by 19:15."),
    ("assistant", "A grey Skoda will pick you up at 18:50; the driver's phone is 0770 123456."),
]
#: No closing at all: a request that shares nothing with the task opens a topic.
THEN_A_TRAIN = [
    ("user", "I need a train to Leeds leaving on Friday after ten."),
    ("assistant", "The 10:24 arrives at 12:58. How many tickets?"),
]

#: An in-car assistant: a plain question, its follow-up, then a command with no closing.
FORECAST_THEN_REMINDER = [
    ("user", "what's the forecast for Leeds tomorrow?"),
    ("assistant", "Tomorrow in Leeds: rain in the morning, dry later, a high of 12."),
    ("user", "and on sunday?"),
    ("assistant", "Sunday is dry and sunny, with a high of 15."),
    ("user", "remind me to collect my parcel at five"),
    ("assistant", "Reminder set for 5 pm: collect your parcel."),
]


@pytest.fixture(scope="module")
def wordllama() -> CachedEmbedder:
    """The default embedder, shared by the tests of this module."""
    return CachedEmbedder(WordLlamaEmbedder())


def topics_of(chat: Sequence[tuple[str, str]], embedder: object, **options: object) -> list[int]:
    """Feed a dialogue one message per add() and return each message's innermost topic."""
    with Memory(":memory:", embedder=embedder, llm=None, reranker=None, **options) as mem:
        for i, (role, text) in enumerate(chat):
            mem.add(text, role=role, session="s", timestamp=T0 + timedelta(seconds=30 * i))
        return innermost_topics(mem.tree(), len(chat))


def starts(owner: Sequence[int]) -> list[int]:
    """Positions where a new topic starts (the first message excluded)."""
    return [i for i in range(1, len(owner)) if owner[i] != owner[i - 1]]


# -- through Memory.add, with the default embedder --------------------------------------------


def test_a_clear_change_of_subject_opens_a_topic(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TRIP + LAPTOP, wordllama)) == [4]


def test_follow_up_questions_stay_in_their_topic(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TRIP + FOLLOW_UPS, wordllama)) == []


def test_greetings_and_acknowledgements_do_not_open_topics(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TRIP + SMALL_TALK, wordllama)) == []


def test_a_reply_can_change_the_subject_and_starts_a_leaf(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(DOGS_THEN_MUSIC, wordllama)) == [5]
    with Memory(":memory:", embedder=wordllama, llm=None) as mem:
        for i, (role, text) in enumerate(DOGS_THEN_MUSIC):
            mem.add(text, role=role, session="s", timestamp=T0 + timedelta(seconds=30 * i))
        music = mem.tree().children[0].children[-1]
        # The question of message 4 stays in its exchange; the reply opens the new topic.
        assert [[m.index for m in leaf.messages] for leaf in music.children] == [[5], [6, 7]]
        assert mem.backend.check_tree(mem.backend.thread("default", "default"), 10) == []


def test_a_request_after_a_farewell_opens_a_topic(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(HOTEL_THEN_TRAIN, wordllama)) == [6]


def test_slot_filling_stays_in_its_task(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TABLE_FOR_FOUR, wordllama)) == []


def test_a_closed_task_then_a_new_request_opens_a_topic(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TABLE_FOR_FOUR + THANKS_THEN_TAXI, wordllama)) == [10]


def test_a_new_request_opens_a_topic_without_a_closing(wordllama: CachedEmbedder) -> None:
    assert starts(topics_of(TABLE_FOR_FOUR + THEN_A_TRAIN, wordllama)) == [8]


def test_commands_and_plain_questions_open_tasks_too(wordllama: CachedEmbedder) -> None:
    # The follow-up stays with the forecast it asks about; the command opens a topic.
    assert starts(topics_of(FORECAST_THEN_REMINDER, wordllama)) == [4]


def test_the_threshold_is_the_tree_setting(wordllama: CachedEmbedder) -> None:
    from arbormem.tree.config import TreeConfig

    eager = TreeConfig(split_threshold=1.0)  # every continuity is below 1
    assert starts(topics_of(TRIP + FOLLOW_UPS, wordllama, tree=eager)) != []
    # The model never splits under 0; the rules still do (nothing in common, here).
    never = TreeConfig(split_threshold=0.0)
    assert starts(topics_of(TRIP + FOLLOW_UPS, wordllama, tree=never)) == []
    assert starts(topics_of(DOGS_THEN_MUSIC, wordllama, tree=never)) == [5]


def test_with_an_llm_deciding_replies_stay_with_their_exchange(
    tmp_path: Path, wordllama: CachedEmbedder
) -> None:
    from arbormem.llm import LLMConfig, get_llm

    with FakeOpenAI() as server:
        server.default = Reply(json.dumps({"decision": "continue"}))
        llm = get_llm(LLMConfig(model="fake", base_url=server.base_url, api_key="k", timeout=5))
        with Memory(tmp_path / "llm.db", embedder=wordllama, llm=llm) as mem:
            for i, (role, text) in enumerate(DOGS_THEN_MUSIC):
                mem.add(text, role=role, session="s", timestamp=T0 + timedelta(seconds=30 * i))
            owner = innermost_topics(mem.tree(), len(DOGS_THEN_MUSIC))
            asked = [
                r for r in server.chat_requests() if "organise a conversation" in json.dumps(r)
            ]
    assert starts(owner) == []  # the LLM said "continue" at every exchange
    assert len(asked) == 3  # asked where each exchange after the first opens


# -- the decision itself ----------------------------------------------------------------------


def test_filler_farewells_and_young_topics_are_settled_by_rule() -> None:
    assert content_words("Hi! Thanks, ok cool, lol") == frozenset()
    assert is_farewell("No, that's all. Thank you, goodbye!")
    assert not is_farewell("Goodbye to the old boiler: the new one heats the whole flat.")
    young = TopicState.of([("I'm planning a trip to Lisbon", None)])
    assert by_rule(young, "My laptop fan is screaming", features(young, "x", None)) is False
    state = TopicState.of([("Lisbon in May", None), ("Five days in Alfama", None)])
    for text in ("Thanks!", "Hello again!", "Bye, have a nice day!"):
        assert by_rule(state, text, features(state, text, None)) is False
    closed = TopicState.of([("Lisbon in May", None), ("Thanks, that's all, goodbye!", None)])
    text = "I need a train to Cambridge"
    assert by_rule(closed, text, features(closed, text, None)) is True


def test_question_words_are_the_words_of_the_questions_only() -> None:
    text = "We went to Lisbon. Did you see the tram? And the castle!\nWhat about Porto?"
    assert question_words(text) == content_words("Did you see the tram? What about Porto?")
    assert question_words("We went to Lisbon. The tram was full.") == frozenset()
    assert question_words("??Tram? castle") == content_words("tram")
    # The pattern is tried only where a sentence starts: the same questions as trying
    # it from every character, on texts made of the characters that matter to it.
    every = re.compile(r"[^.!?\n]*\?")
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(["tram ", "castle", " ", ".", "!", "?", "\n"]) for _ in range(12))
        expected = frozenset(w for q in every.findall(text) for w in content_words(q))
        assert question_words(text) == expected, text


def test_closings_requests_and_asking_for_more_are_read_from_the_text() -> None:
    for text in ("Thanks.", "You're welcome!", "Is there anything else I can help with?"):
        assert is_closing(text), text
    assert not is_closing("Thanks, and what is the phone number of the museum on King Street?")
    assert not is_closing("Anything else on the menu I should try.")
    for text in ("Hi, I'm looking for a cheap hotel.", "Can you help me find a train?"):
        assert is_request(text), text
    assert not is_request("The hotel I need is cheap.")
    # How people talk to in-car and calendar assistants: commands and plain questions.
    for text in (
        "We're looking for somewhere to stay near the river.",
        "remind me to call the garage at 4",
        "Book me a table for two tonight.",
        "What's the forecast for Glasgow on Monday?",
        "will it snow in Oslo this weekend",
        "what time is my haircut on friday",
        "Could you check the weather in Rome?",
    ):
        assert is_request(text), text
    for text in ("what is your favourite film?", "do you like dogs?", "It rained all day."):
        assert not is_request(text), text
    assert asks_more("Great. I also need a taxi.") and not asks_more("I need a taxi.")


def test_a_task_keeps_its_short_turns_and_leaves_real_questions_to_the_model() -> None:
    task = TopicState.of([("I'm looking for a cheap hotel", None), ("Which area?", None)])
    assert task.task
    for text in ("The north, with free parking.", "Does it have wifi?"):
        assert by_rule(task, text, features(task, text, None)) is False, text
    text = "Do you play the violin in an orchestra on weekends?"
    assert by_rule(task, text, features(task, text, None)) is None
    chat = TopicState.of([("Lisbon in May", None), ("Five days in Alfama", None)])
    assert not chat.task
    text = "The north, with free parking."
    assert by_rule(chat, text, features(chat, text, None)) is None


def test_features_read_the_dialogues_shape() -> None:
    vec = np.array([1.0, 0.0], dtype=np.float32)
    state = TopicState.of([("Where should we eat seafood in Alfama?", vec)])
    state.add("Try the grilled sardines near the castle.", vec)
    answer = features(state, "The sardines near the castle were perfect.", vec)
    assert answer["cos_window"] == pytest.approx(1.0) and answer["words_window"] > 0.5
    assert answer["question"] == 0.0 and answer["after_question"] == 0.0
    asked = features(state, "Anything else?", -vec)
    assert asked["question"] == 0.0  # a question about nothing in particular
    new = features(state, "Do you play the violin in an orchestra?", -vec)
    assert new["question"] == 1.0 and new["new_question"] == 1.0
    assert new["cos_window"] == pytest.approx(-1.0)
    assert set(new) == set(FEATURES) == set(WEIGHTS)


def test_less_cohesion_means_a_likelier_boundary() -> None:
    state = TopicState.of([("Lisbon in May", None), ("Five days in Alfama", None)])
    base = features(state, "Which tram goes to the castle?", None)
    near = boundary_probability({**base, "cos_window": 0.8, "words_topic": 0.8})
    far = boundary_probability({**base, "cos_window": 0.0, "words_topic": 0.0})
    assert far > near
    # dense_weight 0 ignores the embedding features entirely.
    assert boundary_probability({**base, "cos_window": 0.8}, dense_weight=0.0) == pytest.approx(
        boundary_probability({**base, "cos_window": 0.0}, dense_weight=0.0)
    )


def test_a_message_unlike_anything_in_the_topic_opens_one() -> None:
    east, west = np.array([1.0, 0.0], np.float32), np.array([-1.0, 0.1], np.float32)
    state = TopicState.of([("Lisbon trip in May", east), ("Sintra by train early", east)])
    text = "My laptop fan screams when compiling Rust"
    assert opens_topic(state, text, west, split_threshold=0.0)  # by rule, whatever the model
    assert not opens_topic(state, "Sintra trains leave early", east, split_threshold=0.0)


# -- the fit ----------------------------------------------------------------------------------


def test_the_fit_reports_weights_a_threshold_and_held_out_figures(tmp_path: Path) -> None:
    from arbormem.bench.segment_fit import THRESHOLDS, run

    dialogues = [
        {
            "dial_id": str(i),
            "utterances": [t for _, t in TRIP + LAPTOP + FOLLOW_UPS],
            "segments": [4, 4, 4],
        }
        for i in range(8)
    ]
    path = write_json(tmp_path / "d.json", dialogues)
    result = run([str(path)], [str(path)], embedder="hash")
    assert set(result["weights"]) == set(FEATURES)
    assert result["split_threshold"] in THRESHOLDS
    table = result["by_threshold"][str(result["split_threshold"])]
    assert {f"{path} (even)", f"{path} (odd)", f"{path} (even, joined)", str(path)} <= set(table)
    assert all(0.0 <= row["pk"] <= 1.0 for row in table.values())
