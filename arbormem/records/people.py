"""Who is who in a message: the speaker, the person spoken to, and whom "she" means."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from arbormem.context.trackers.common import words as word_set
from arbormem.text import STOPWORDS

if TYPE_CHECKING:
    from arbormem.records.extract import Context, Turn

__all__ = ["FAMILY", "NOT_NAMES", "PRONOUNS", "People", "is_person"]

#: Capitalised words that are not people: sentence openers, days, months, languages.
NOT_NAMES = (
    frozenset(
        w.lower()
        for w in word_set("""Also Then Finally Yesterday Today Tonight Tomorrow Now Sure Well Oh Yeah Yes No Hey
    Hi Hello Thanks Guess Good Great Wow Anyway Anyways So Just Actually Honestly Plus Speaking Lol
    Omg Btw Okay Ok God Christmas Easter Halloween Thanksgiving Covid Internet Last Next This
    That These Those Our Your My His Her Their Its Everyone Everybody Someone Somebody Nobody
    Maybe Perhaps Luckily Sadly Unfortunately Apparently Recently Lately Meanwhile Besides
    Congrats Congratulations Cool Nice Awesome Amazing Totally Definitely Absolutely Really
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May
    June July August September October November December Mondays Tuesdays Wednesdays Thursdays
    Fridays Saturdays Sundays Spring Summer Autumn Fall Winter Dear Love Cheers Bye See Agreed
    Wait Remember Look Listen Please Sorry Haha Hmm Ugh Yay Aww Whoa Woah Glad Happy Exactly True
    English Spanish French German Italian Mandarin Chinese Japanese""")
    )
    | STOPWORDS
)
FAMILY = word_set("mom mum dad mother father grandma grandpa granny nana papa")
PRONOUNS = word_set("i me we us you he she him her they them")
_REL_WORDS = (
    "best friend|friend|sister|brother|mom|mum|mother|dad|father|wife|husband|partner|girlfriend|"
    "boyfriend|cousin|aunt|uncle|son|daughter|boss|manager|colleague|coworker|co-worker|roommate|"
    "flatmate|neighbour|neighbor|grandma|grandmother|grandpa|grandfather|niece|nephew|fiance|fiancee|"
    "stepmom|stepdad|sibling|kid|teammate|classmate|mentor"
)
_PERSON_CUE = re.compile(
    rf"\b(?:my|our|your|his|her|their)\s+(?:{_REL_WORDS}),?\s+(?P<a>[A-Z][a-z]+)\b"
    r"|\b(?P<b>[A-Z][a-z]+)(?='s\b|\s+(?:said|told|says|mentioned|just|has|had|is|was|will|moved|"
    r"lives|works|started|got|quit|left|broke|texted|called|thinks|wants|loves|finally|recently|"
    r"rang|phoned|wrote|came|went|sent|asked|\w+ed)\b)"
)


class People:
    """Who is who in one message: the speaker, the addressee, the last person named."""

    def __init__(self, turn: Turn, context: Context, earlier: Sequence[Turn]) -> None:
        self.turn = turn
        self.context = context
        self.earlier = earlier
        role = turn.role
        self.speaker = turn.speaker or (
            context.assistant_name if role == "assistant" else context.user_name
        )
        others = [s for s in dict.fromkeys(context.speakers) if s != self.speaker]
        if len(others) == 1:
            self.addressee: str | None = others[0]
        elif role == "assistant" and not turn.speaker:
            self.addressee = context.user_name
        else:
            self.addressee = None
        self._third: list[tuple[str, int]] | None = None

    def known(self) -> set[str]:
        return {self.speaker, *(self.context.speakers)}

    def third(self, sentence: str, before: int) -> str | None:
        """The person "he", "she" or "they" most likely is: the last one named."""
        inside = [
            m.group("a") or m.group("b")
            for m in _PERSON_CUE.finditer(sentence, 0, before)
            if is_person(m.group("a") or m.group("b"), self)
        ]
        if inside:
            return inside[-1]
        if self._third is None:
            found: list[tuple[str, int]] = []
            for n, turn in enumerate([*self.context.recent, *self.earlier, self.turn]):
                for m in _PERSON_CUE.finditer(turn.text):
                    name = m.group("a") or m.group("b")
                    if is_person(name, self):
                        found.append((name, n))
            self._third = found
        return self._third[-1][0] if self._third else None

    def named(self, raw: str, sentence: str, at: int) -> str | None:
        """The subject a pronoun, a relation ("my sister") or a name stands for."""
        text = raw.strip()
        low = text.lower()
        if low in ("i", "me", "we", "us", "myself"):
            return self.speaker
        if low in ("you", "yourself"):
            return self.addressee
        if low in ("he", "she", "they", "him", "her", "them"):
            return self.third(sentence, at)
        owner, _, rest = text.partition(" ")
        owner_low = owner.lower()
        if rest and (
            owner_low in ("my", "our", "your", "his", "her", "their") or owner.endswith("'s")
        ):
            words = rest.split()
            if len(words) >= 2 and words[-1][:1].isupper() and words[-1].lower() not in NOT_NAMES:
                return words[-1]  # "my sister Ana" is Ana
            whose = self.owner(owner, sentence, at)
            return f"{whose}'s {rest}" if whose else None
        words = text.split()
        while words and words[0].lower() in NOT_NAMES:
            words = words[1:]  # "Finally Sam" at the start of a sentence is Sam
        if not words:
            return None
        if words[0].lower() in FAMILY:
            return f"{self.speaker}'s {words[0].lower()}"
        return " ".join(words)

    def owner(self, word: str, sentence: str, at: int) -> str | None:
        """The person a possessive ("my", "her", "Ana's") stands for."""
        low = word.lower()
        if low in ("my", "our"):
            return self.speaker
        if low == "your":
            return self.addressee
        if low in ("his", "her", "their"):
            return self.third(sentence, at)
        if low.endswith("'s"):
            return self.named(word[:-2], sentence, at)
        return None


def is_person(name: str | None, people: People) -> bool:
    if not name or name.lower() in NOT_NAMES:
        return False
    return name not in (people.speaker, people.addressee)
