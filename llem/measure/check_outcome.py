"""What one validity check found (``llem.measure.validity``): a status and its sentences, and for a
check judged GPU by GPU each GPU's own outcome and how they combine into the check's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum


class Check(Enum):
    passed = "passed"
    failed = "failed"
    condition = "condition"  # found something recorded, not judged (validity.conditions)
    not_checked = "not checked"


#: a check's status and its problems, one sentence each
CheckOutcome = tuple[Check, list[str]]
PASSED: CheckOutcome = (Check.passed, [])
NOT_CHECKED: CheckOutcome = (Check.not_checked, [])

#: a per-GPU check's outcome on each GPU it could judge (the others: not checked)
PerDevice = dict[str, CheckOutcome]


def outcome(problems: list[str]) -> CheckOutcome:
    """Failed with ``problems``, or passed when there are none."""
    return (Check.failed, problems) if problems else PASSED


def combined(per_device: PerDevice) -> CheckOutcome:
    """A per-GPU check over all GPUs: failed when any GPU failed (their problems), else a
    condition when any GPU had one, else passed; not checked when no GPU could be judged."""
    if not per_device:
        return NOT_CHECKED
    for status in (Check.failed, Check.condition):
        found = [ps for st, ps in per_device.values() if st is status]
        if found:
            return status, [p for ps in found for p in ps]
    return PASSED


def by_device(
    uuids: Sequence[str], per_device: Mapping[str, PerDevice]
) -> dict[str, dict[str, str]]:
    """``{uuid: {check: status}}`` for every measured GPU (``uuids``, then any other GPU a check
    judged) and every per-GPU check; a GPU a check could not judge is "not checked" in it."""
    every = list(uuids)
    for found in per_device.values():
        every += [u for u in found if u not in every]
    return {
        u: {name: found.get(u, NOT_CHECKED)[0].value for name, found in per_device.items()}
        for u in every
    }
