"""Scorers: each judges one generated text against its reference, after normalising both.

- ``exact``: the whole answer equals the reference (case, surrounding whitespace and punctuation,
  runs of spaces and a trailing full stop ignored).
- ``number``: the last number in the answer equals the reference's number (thousands separators
  and a trailing ``.0`` ignored; compared within 1e-9 relative).
- ``choice``: the choice letter the answer gives (``B``, ``(B)``, ``B)``, ``B.``, ``Answer: B``,
  ``the answer is B``) equals the reference's.
- ``regex``: the reference is a regular expression that must match somewhere in the answer.

Each returns a :class:`Score`: whether it was correct and what was read from the answer (None when
nothing could be read), so a wrong answer can be told from an unreadable one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    correct: bool
    extracted: str | None  # what the scorer read from the answer; None: nothing readable


Scorer = Callable[[str, str], Score]

_NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?|[-−]?\.\d+")
# (pattern, whether it reads the answer upper-cased), tried in order
_CHOICE_PATTERNS = (
    (re.compile(r"^\(?([A-J])\)?[.:)]?$"), True),  # the whole answer is the letter
    (re.compile(r"(?i:answer)\s*(?i:is)?\s*[:=]?\s*\(?([A-J])\b"), False),  # "answer is B"
    (re.compile(r"^\(([A-J])\)|^([A-J])[.:)](?:\s|$)"), True),  # "(B)", "B)", "B." or "B:"
)


def normalise(text: str) -> str:
    """Case-folded, runs of whitespace made one space, surrounding quotes and punctuation gone."""
    folded = " ".join(text.split()).casefold()
    return folded.strip(" \t\"'`.,;:!?")


def exact(answer: str, reference: str) -> Score:
    got = normalise(answer)
    return Score(got == normalise(reference), got or None)


def read_number(text: str) -> float | None:
    """The last number written in ``text`` (None when there is none)."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    raw = found[-1].replace(",", "").replace("−", "-")
    try:
        return float(raw)
    except ValueError:  # pragma: no cover - the pattern admits only numbers
        return None


def number(answer: str, reference: str) -> Score:
    want = read_number(reference)
    if want is None:
        raise ValueError(f"reference {reference!r} holds no number")
    got = read_number(answer)
    if got is None:
        return Score(False, None)
    shown = str(int(got)) if got.is_integer() else str(got)
    return Score(math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), shown)


def read_choice(text: str) -> str | None:
    """The choice letter ``text`` gives, upper case: the whole answer, or "answer is B", or a
    leading "(B)", "B)", "B." or "B:" (None when it gives none: a word such as "I" or "A" in a
    sentence is not a choice)."""
    stripped = text.strip()
    for pattern, upper in _CHOICE_PATTERNS:
        match = pattern.search(stripped.upper() if upper else stripped)
        if match is not None:
            return next(g for g in match.groups() if g).upper()
    return None


def choice(answer: str, reference: str) -> Score:
    want = read_choice(reference) or normalise(reference).upper()
    got = read_choice(answer)
    return Score(got == want, got)


def regex(answer: str, reference: str) -> Score:
    match = re.search(reference, answer)
    return Score(match is not None, match.group(0) if match else None)


SCORERS: dict[str, Scorer] = {"exact": exact, "number": number, "choice": choice, "regex": regex}


def reference_problem(scorer: str, reference: str) -> str | None:
    """Why ``reference`` cannot be judged by ``scorer`` (None: it can): ``number`` needs a number
    in it, ``regex`` a valid pattern."""
    if scorer == "number" and read_number(reference) is None:
        return f"reference {reference!r} holds no number (dataset.scorer=number)"
    if scorer == "regex":
        try:
            re.compile(reference)
        except re.error as exc:
            return f"reference {reference!r} is not a regular expression ({exc})"
    return None
