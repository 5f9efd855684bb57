"""Scorers (llem.quality.scorers) where mutation testing found no test (scripts/mutation.py):
what each reads from an answer, a choice reference that is no bare letter, a unicode minus, a
reference of 0, and the references a scorer refuses."""

from __future__ import annotations

from llem.quality.scorers import Score, choice, exact, number, reference_problem


def test_exact_reports_the_answer_as_it_compared_it() -> None:
    assert exact("  New   York. ", "new york") == Score(True, "new york")
    assert exact("...", "Paris") == Score(False, None)  # nothing left to read


def test_a_quoted_choice_reference_is_its_letter() -> None:
    assert choice("B", '"B"') == Score(True, "B")
    assert choice("C", '"B"') == Score(False, "C")
    assert choice("Paris", "paris") == Score(False, None)  # no letter read: not correct


def test_a_unicode_minus_is_a_minus() -> None:
    assert number("\u221212", "-12") == Score(True, "-12")
    assert number("-3", "\u22123") == Score(True, "-3")


def test_a_reference_of_zero_accepts_what_rounds_to_it() -> None:
    assert number("0.0000000000001", "0").correct
    assert not number("0.001", "0").correct


def test_the_references_a_scorer_cannot_judge_are_named() -> None:
    assert reference_problem("number", "eighty") == (
        "reference 'eighty' holds no number (dataset.scorer=number)"
    )
    assert reference_problem("number", "85") is None
    assert reference_problem("exact", "eighty") is None
    problem = reference_problem("regex", "([")
    assert problem is not None and problem.startswith(
        "reference '([' is not a regular expression ("
    )
    assert reference_problem("regex", r"\d+") is None
    assert reference_problem("exact", "([") is None
