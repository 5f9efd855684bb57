"""requests.jsonl: one line per request of the measured window, and the only code that reads or
writes it.

Each line is a ``RequestRecord``: its id, the prompt it used, when it was scheduled and sent, when
its first and last tokens reached the host (seconds from the measured window's start), its input and
output tokens, its TTFT, TPOT and end-to-end latency (ms; the definitions are in
``llem.figures.serving``: from the request's actual send since result schema 5, from the scheduled
send before it for open-loop traffic; ``ttft_from_schedule_ms``, null where nothing was scheduled,
is TTFT from the scheduled send) and whether it met every SLO (null: no SLO set); and, where the
engine said which requests ran in each step and energy was measured, the request's share of the
window's energy (``llem.figures.attribution``): ``energy_j`` with its worst-case ``bound_j``, the
half-width of its 95 % interval ``ci95_half_width_j``, its ``prefill_j`` and ``decode_j`` parts and
``j_per_output_token`` (null otherwise; the reason is ``result.json``'s
``null_reasons["requests.energy_j"]``, or, for a request whose interval is wider than its energy,
its own ``energy_null_reason``); and, where the run's prompts had references, whether its answer was
``correct`` and what the scorer ``extracted`` from it (``llem.result.quality``); and why it ended
(``finish_reason``: "stop" at EOS or one of its prompt's stop strings, "length" at
``decoder.max_new_tokens``; null where the engine does not say). The file is written atomically,
like result.json: a reader sees the whole file or none. Files written before the energy fields
existed read with them null.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llem.atomic import atomic_write_text
from llem.result.migrate import ResultFormatError

REQUESTS_FILE = "requests.jsonl"


@dataclass(frozen=True)
class RequestRecord:
    """One request. Times are seconds from the measured window's start (None: never happened,
    or, for ``scheduled_s``, closed-loop traffic with no planned send time)."""

    request_id: int
    prompt_index: int
    scheduled_s: float | None
    sent_s: float | None
    first_token_s: float | None
    finish_s: float | None
    input_tokens: int
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None  # None: fewer than 2 output tokens
    e2e_ms: float | None
    slo_met: bool | None  # None: no SLO set
    energy_j: float | None = None
    j_per_output_token: float | None = None
    prefill_j: float | None = None
    decode_j: float | None = None
    bound_j: float | None = None  # worst-case bound of energy_j
    ttft_from_schedule_ms: float | None = None  # None: no scheduled send (or result schema < 5)
    # the request's answer judged against its prompt's reference (None: the run scored nothing)
    correct: bool | None = None
    extracted: str | None = None  # what the scorer read from the answer (None: nothing)
    ci95_half_width_j: float | None = None  # half-width of energy_j's 95 % interval
    # why energy_j is null where it was attributed but its interval is wider than itself
    energy_null_reason: str | None = None
    # why the request ended: "stop" (EOS or one of its stop strings), "length" (max new tokens);
    # None where the engine does not say (or a file written before it was recorded)
    finish_reason: str | None = None


_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
_OPTIONAL = (
    "energy_j",
    "j_per_output_token",
    "prefill_j",
    "decode_j",
    "bound_j",
    "ttft_from_schedule_ms",
    "correct",
    "extracted",
    "ci95_half_width_j",
    "energy_null_reason",
    "finish_reason",
)
_REQUIRED = tuple(f for f in _FIELDS if f not in _OPTIONAL)


def write_requests(run_dir: Path | str, records: Iterable[RequestRecord]) -> Path:
    """Write ``run_dir/requests.jsonl`` atomically (one JSON object per line, in field order)."""
    lines = [json.dumps(dataclasses.asdict(r)) + "\n" for r in records]
    return atomic_write_text(Path(run_dir) / REQUESTS_FILE, "".join(lines))


def read_requests(run_dir: Path | str) -> list[RequestRecord]:
    """The records of ``run_dir/requests.jsonl``. Raises FileNotFoundError when it is absent and
    ``ResultFormatError`` for a line that is not a record (naming the line)."""
    path = Path(run_dir) / REQUESTS_FILE
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ResultFormatError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not set(_REQUIRED) <= set(data) <= set(_FIELDS):
            keys = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ResultFormatError(
                f"{path}:{number}: expected the keys {', '.join(_FIELDS)}, got {keys}"
            )
        out.append(RequestRecord(**data))
    return out
