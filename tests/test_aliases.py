"""Names people call each other by: learnt from vocatives, used to read questions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from arbormem import Memory
from arbormem.aliases import Aliases, in_own_words, replace_aliases, vocatives
from arbormem.embed import HashingEmbedder


def test_vocatives_find_the_names_a_message_addresses() -> None:
    assert vocatives("Hey Kate! How was the class?") == {"Kate"}
    assert vocatives("It was fun, thanks Emily. And you, Kate?") == {"Emily", "Kate"}
    assert vocatives("That sounds lovely, Bella.") == {"Bella"}
    assert vocatives("Liza, have you seen it?") == {"Liza"}
    assert vocatives("hi kate") == set()  # a name is capitalised
    assert vocatives("We went to a bar in Miami!") == set()


def chat(lines: list[tuple[str, str]]) -> Aliases:
    aliases = Aliases()
    aliases.read(lines)
    return aliases


def test_a_handle_is_learnt_from_what_the_other_speaker_calls_them() -> None:
    lines = [
        ("elise", "Hi Kate! How are you?"),
        ("Emi", "Good, thanks Emily. I went skiing."),
        ("elise", "Wow, what do you think, Kate?"),
        ("Emi", "Oh, it was great. Plus, the snow was perfect."),
        ("elise", "Sounds fun, Kate!"),
        ("Emi", "Oh, and we met Julio. Hello Emily!"),
        ("elise", "Julio? Good night Kate!"),
        ("Emi", "Julio says hi. Thank you Emily."),
    ]
    assert chat(lines).names() == {"kate": "Emi", "emily": "elise"}


def test_interjections_and_other_people_are_not_aliases() -> None:
    lines = []
    for _ in range(5):
        lines += [
            ("Ana", "Oh, nice. Wow, really?"),  # sentence openers, never inside one
            ("Ben", "Yes, Tom! Tom came too."),  # Tom is written by both, often
            ("Ana", "Great, Tom is fun. I told Tom, Ben."),
        ]
    assert chat(lines).names() == {}


def test_aliases_replace_names_in_text() -> None:
    aliases = {"kate": "Emi"}
    assert replace_aliases("What are Kate's hobbies?", aliases) == "What are Emi's hobbies?"
    assert replace_aliases("Where is Kateland?", aliases) == "Where is Kateland?"


#: elise calls Emi "Kate"; only Emi says she skis.
KATE_LINES = [
    ("elise", "Hi Kate! Do you ski?"),
    ("Emi", "I love skiing, I go every winter."),
    ("elise", "Skiing is scary, Kate!"),
    ("Emi", "You should try it, it is fun."),
    ("elise", "Maybe. Thanks Kate, talk soon!"),
    ("Emi", "Talk soon."),
    ("elise", "Good night Kate!"),
]
KATE_START = datetime(2024, 1, 1, 10, tzinfo=timezone.utc)


def add_lines(memory: Memory, lines: Sequence[tuple[str, str]], start: int = 0) -> None:
    """Add ``(speaker, text)`` lines a minute apart, elise as the user."""
    for n, (speaker, text) in enumerate(lines, start):
        role = "user" if speaker == "elise" else "assistant"
        memory.add(text, role=role, speaker=speaker, timestamp=KATE_START + timedelta(minutes=n))


def test_a_question_by_nickname_finds_the_handles_turns(memory: Memory) -> None:
    """The question says "Kate"; only elise ever writes it (to Emi). The answer is
    Emi's own message, which the name alone ranked below elise's to Kate."""
    add_lines(memory, KATE_LINES)
    (hit,) = memory.search("Does Kate ski?", k=1)
    assert hit.message.content == "I love skiing, I go every winter."


def test_a_question_about_one_speaker_is_put_in_their_first_person() -> None:
    emi = ["Emi"]
    assert in_own_words("What are Emi's hobbies?", emi) == "What are my hobbies?"
    assert in_own_words("Where does Emi work?", emi) == "Where do I work?"
    assert in_own_words("Is Emi happy with her salary?", emi) == "am I happy with my salary?"
    assert in_own_words("When did emi get sick?", emi) == "When did I get sick?"
    assert in_own_words("Who is Emily?", emi) == "Who is Emily?"  # another name: untouched
    # About two speakers: without their names, which draw their greetings.
    both = in_own_words("What do elise and Emi have in common?", ["elise", "Emi"])
    assert both == "What do have in common?"
    assert in_own_words("What did they eat?", []) == "What did they eat?"


def test_recall_embeds_the_question_in_the_speakers_words(tmp_path: Path) -> None:
    seen: list[str] = []

    class Spy(HashingEmbedder):
        def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
            seen.extend(texts)
            return super().embed_batch(texts)

    with Memory(tmp_path / "spy.db", embedder=Spy(32)) as memory:
        start = datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
        memory.add("I love skiing.", role="user", speaker="Emi", timestamp=start)
        memory.add("Nice!", role="assistant", speaker="Ben", timestamp=start)
        seen.clear()
        memory.search("What are Emi's hobbies?", k=1)
    assert "What are my hobbies?" in seen
