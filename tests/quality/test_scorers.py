"""Each scorer on planted outputs: right, wrong, and unreadable answers."""

from __future__ import annotations

import pytest

from llem.quality.scorers import SCORERS, Score, choice, exact, number, regex


@pytest.mark.parametrize(
    "answer,reference,correct",
    [
        ("  Paris. ", "paris", True),
        ("PARIS", "Paris", True),
        ("New   York", "new york", True),
        ("Paris, France", "Paris", False),
        ("", "Paris", False),
    ],
)
def test_exact_match_ignores_case_spacing_and_end_punctuation(answer, reference, correct) -> None:
    assert exact(answer, reference).correct is correct


@pytest.mark.parametrize(
    "answer,reference,correct,extracted",
    [
        ("85", "85", True, "85"),
        ("The answer is 85.", "85", True, "85"),
        ("37 + 48 = 85", "85", True, "85"),  # the last number written
        ("1,234", "1234", True, "1234"),
        ("-12", "-12", True, "-12"),
        ("12.0", "12", True, "12"),
        ("0.5", "0.50", True, "0.5"),
        ("84", "85", False, "84"),
        ("eighty-five", "85", False, None),
    ],
)
def test_number_reads_the_last_number_of_the_answer(answer, reference, correct, extracted) -> None:
    assert number(answer, reference) == Score(correct, extracted)


def test_a_number_reference_without_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="no number"):
        number("85", "eighty-five")


@pytest.mark.parametrize(
    "answer,reference,correct,extracted",
    [
        ("B", "B", True, "B"),
        ("(b)", "B", True, "B"),
        ("B) because ...", "B", True, "B"),
        ("The answer is C.", "B", False, "C"),
        ("Answer: D", "D", True, "D"),
        ("I am not sure", "B", False, None),
        ("The answer is a prime number", "B", False, None),
        ("the answer is (c)", "C", False, None),  # a lower-case letter in a sentence is a word
    ],
)
def test_choice_reads_the_letter_the_answer_gives(answer, reference, correct, extracted) -> None:
    assert choice(answer, reference) == Score(correct, extracted)


def test_regex_matches_anywhere_in_the_answer() -> None:
    assert regex("it is 42 of them", r"\b42\b") == Score(True, "42")
    assert regex("it is 420", r"\b42\b") == Score(False, None)


def test_every_scorer_is_registered_by_name() -> None:
    assert set(SCORERS) == {"exact", "number", "choice", "regex"}
