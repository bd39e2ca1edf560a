"""Names people call each other by: learnt from vocatives, used to read questions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from arbormem import Memory
from arbormem.aliases import Aliases, replace_aliases, vocatives


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


def test_a_question_by_nickname_finds_the_handles_turns(memory: Memory) -> None:
    """The question says "Kate"; only elise ever writes it (to Emi). The answer is
    Emi's own message, which the name alone ranked below elise's to Kate."""
    start = datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
    lines = [
        ("elise", "Hi Kate! Do you ski?"),
        ("Emi", "I love skiing, I go every winter."),
        ("elise", "Skiing is scary, Kate!"),
        ("Emi", "You should try it, it is fun."),
        ("elise", "Maybe. Thanks Kate, talk soon!"),
        ("Emi", "Talk soon."),
        ("elise", "Good night Kate!"),
    ]
    for n, (speaker, text) in enumerate(lines):
        role = "user" if speaker == "elise" else "assistant"
        memory.add(text, role=role, speaker=speaker, timestamp=start + timedelta(minutes=n))
    (hit,) = memory.search("Does Kate ski?", k=1)
    assert hit.message.content == "I love skiing, I go every winter."
