"""A point re-run into the W&B run of its earlier attempt, and what that run's history then holds.
Pure: no wandb imported.

W&B keeps a run's history rows only at steps past the last one the run holds: a resumed run
(``resume="allow"``) starts at the step after its last, and a row logged at a step below that is
dropped (wandb 0.31 warns "Tried to log to step 0 that is less than the current step"; offline,
``wandb sync`` sends a resumed run's files in order of their start, as a resume, which no test
here can check against a server). A re-run point's timeline starts at step 0 again, so its
run's history up to the earlier attempt's last step stays the earlier attempt's, and the new
timeline shows only past it.

W&B has no way to replace the history that works offline. ``wandb.init(resume_from="<id>?_step=
N")`` (rewind) keeps the steps up to N and starts the new history at N + 1, so it cannot drop the
reading at step 0 either; it is a preview feature of W&B's cloud (not in its self-managed
server), and offline wandb-core does not rewind (``core/internal/runbranch/rewind.go``: "When
offline, we assume the run exists and we don't pull its past data"; the offline record only
carries the branch point). ``fork_from`` makes a new run that keeps the source's steps up to N.

So the run says it: ``tracking.json`` keeps, per point, the last history step its run holds, and
a run resumed over an earlier attempt's history gets the tag ``history:earlier-attempt``, a note
naming the step and the earlier attempt, and the same in its config (``llem.history_earlier_to_
step_ms``, ``llem.history_earlier_started_at``). An earlier attempt that logged no history (a
failed point without a timeline) leaves nothing to say: the new timeline arrives whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TAG = "history:earlier-attempt"
# tracking.json written before the last step was kept: a run whose history length is unknown
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Earlier:
    """What a point's run holds before this attempt is logged into it: the attempt logged last
    (its ``started_at``) and the last history step of the run (ms; None: no history;
    ``UNKNOWN``: not recorded)."""

    started_at: str
    held_ms: int | str | None


def from_entry(entry: Sequence[Any] | None) -> Earlier | None:
    """A point's ``tracking.json`` entry, ``[run id, started_at, last step ms]`` (the last
    step missing where an older llem wrote it); None for a point not logged yet."""
    if not entry or entry[0] is None:
        return None
    held = entry[2] if len(entry) > 2 else UNKNOWN
    return Earlier(str(entry[1]), held if held is None or held == UNKNOWN else int(held))


def held_after(earlier: Earlier | None, steps_ms: Sequence[int]) -> int | str | None:
    """The run's last history step once this attempt's steps are logged into it."""
    held = earlier.held_ms if earlier is not None else None
    if held == UNKNOWN:
        return UNKNOWN
    known = [s for s in (*steps_ms, held) if isinstance(s, int)]
    return max(known) if known else None


def marks(earlier: Earlier | None, started_at: str) -> tuple[list[str], str | None, dict[str, Any]]:
    """The tags, the note and the ``llem`` config entries of a run whose history still holds an
    earlier attempt's timeline; none (and the config entries cleared) where it holds none."""
    if earlier is None or earlier.held_ms is None:
        cleared = {"history_earlier_to_step_ms": None, "history_earlier_started_at": None}
        return [], None, cleared
    where = (
        "up to a step this directory's tracking.json did not record"
        if earlier.held_ms == UNKNOWN
        else f"up to step {earlier.held_ms} (ms since the window's start)"
    )
    note = (
        "Re-run point: W&B keeps a resumed run's history only past the last step it holds, so "
        f"this run's history {where} is what earlier attempts logged (the last of them started "
        f"{earlier.started_at}), and this result's timeline (started {started_at}) is in it only "
        "beyond that step. Its summary, config and artifact are this result's."
    )
    config = {
        "history_earlier_to_step_ms": earlier.held_ms,
        "history_earlier_started_at": earlier.started_at,
    }
    return [TAG], note, config
