from arbormem.text import analyze, fts_query, query_terms


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


def test_query_terms_are_distinct_and_ordered() -> None:
    assert query_terms("paint painting painted sunrise") == ["paint", "sunris"]


def test_fts_query_quotes_every_term() -> None:
    assert fts_query(["a", 'b"c']) == '"a" OR "b""c"'
