import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from arbormem.text import (
    _TOKEN,
    _informal,
    analyze,
    analyze_message,
    fts_query,
    query_terms,
    term_of,
    words,
)


def test_analysis_stems_drops_stop_words_and_possessives() -> None:
    assert analyze("Caroline's painting classes were amazing!") == [
        "carolin",
        "paint",
        "class",
        "amaz",
    ]


def test_numbers_and_unicode_survive() -> None:
    terms = analyze("Flight LH 2049 to Zürich at 7")
    assert "2049" in terms and "7" in terms and "zürich" in terms


def test_chat_is_evened_out() -> None:
    # Stretched letters shrink: to one at a word's end, to two inside where English
    # doubles the letter, else to one.
    assert words("sooooo goooood, I love himmm") == ["so", "good", "i", "love", "him"]
    assert words("waaay too coool") == ["way", "too", "cool"]
    # Shorthand is spelt out; fillers and apostrophe-less contractions are stop words.
    assert analyze("my bf cant come rn lol") == ["boyfriend", "come", "right"]
    assert analyze("happy bday!! yeah ok") == analyze("happy birthday")
    assert term_of("Bday") == "birthday" and term_of("lol") is None
    # Ordinary words stay as they are.
    assert analyze("Lisbon marathon in October") == ["lisbon", "marathon", "octob"]


def test_query_terms_are_distinct_and_ordered() -> None:
    assert query_terms("paint painting painted sunrise") == ["paint", "sunris"]


def test_fts_query_quotes_every_term() -> None:
    assert fts_query(["a", 'b"c']) == '"a" OR "b""c"'


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("abcXYZ '’ﬁÉé-\u00a0.1ur"), max_size=40))
def test_word_splitting_takes_shortcuts_without_changing_the_result(text: str) -> None:
    # The general path: fold (NFKC, lower case), split, drop possessives and apostrophes,
    # shrink stretched letters and spell out shorthand.
    expected = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
        if token.endswith(("'s", "’s")):
            token = token[:-2]
        expected.extend(_informal(token.replace("'", "").replace("’", "")))
    assert words(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("abXY '’ﬁÉe\u0301-.1_"), max_size=12),
    st.text(alphabet=st.sampled_from("abcXYZ '’ﬁÉe\u0301-\u00a0.1_s"), max_size=40),
)
def test_a_message_is_analysed_as_its_indexed_text(speaker: str, content: str) -> None:
    indexed = f"{speaker}: {content}" if speaker else content
    assert analyze_message(content, speaker or None) == analyze(indexed)
