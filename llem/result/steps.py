"""steps.csv: the engine's own iterations in the measured window, and the only code that reads or
writes it.

One row per engine step in the window (every engine: static PyTorch batches, transformers'
continuous batching, vLLM offline and serving). Times are seconds from the measured window's
start, on the run's one clock (``concurrency.engine_step_clock`` in result.json says how the
engine's step times were taken). Columns:

- ``start_s``, ``end_s``: when the step began and ended (``start_s`` empty where the engine gives
  no start: the step then starts where the previous one ended);
- ``running``: the requests in the step;
- ``prefill_tokens``: prompt tokens whose KV the step computed (chunked prefill: each chunk in
  its own step; prefix-cache hits are not computed, so not counted);
- ``decode_tokens``: output tokens the step produced (a prefill's first token included, so a
  request's decode tokens over all steps equal its output tokens);
- ``requests``: each request's share of the step, space-separated ``id:prefill:decode`` triples
  (``id`` as in requests.jsonl's ``request_id``); empty where the engine does not say which
  requests ran, ``-`` for a step known to hold none;
- ``energy_j``: the step's attributed energy (empty when not attributed).

Files written before ``start_s``, ``requests`` and ``energy_j`` existed (only ``end_s, running,
prefill_tokens, decode_tokens``) still read, with those fields None. Written atomically, like
result.json.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llem.atomic import atomic_write_csv
from llem.result.migrate import ResultFormatError
from llem.vocabulary.workload import StepShare

STEPS_FILE = "steps.csv"
_COLUMNS = (
    "start_s",
    "end_s",
    "running",
    "prefill_tokens",
    "decode_tokens",
    "requests",
    "energy_j",
)
_OLD_COLUMNS = ("end_s", "running", "prefill_tokens", "decode_tokens")
_NONE = "-"  # a step known to hold no request


@dataclass(frozen=True)
class StepRecord:
    end_s: float
    running: int
    prefill_tokens: int | None = None
    decode_tokens: int | None = None
    start_s: float | None = None
    shares: tuple[StepShare, ...] | None = None  # None: the engine does not say
    energy_j: float | None = None


def write_steps(run_dir: Path | str, steps: Iterable[StepRecord]) -> Path:
    """Write ``run_dir/steps.csv`` atomically."""
    cells = (
        [
            _cell(s.start_s),
            s.end_s,
            s.running,
            _cell(s.prefill_tokens),
            _cell(s.decode_tokens),
            format_shares(s.shares),
            _cell(s.energy_j),
        ]
        for s in steps
    )
    return atomic_write_csv(Path(run_dir) / STEPS_FILE, _COLUMNS, cells)


def read_steps(run_dir: Path | str) -> list[StepRecord]:
    """The rows of ``run_dir/steps.csv`` (FileNotFoundError when the run wrote none)."""
    path = Path(run_dir) / STEPS_FILE
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    header = tuple(rows[0]) if rows else ()
    if header not in (_COLUMNS, _OLD_COLUMNS):
        raise ResultFormatError(f"{path}: expected the header {','.join(_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            out.append(_row(dict(zip(header, row, strict=True))))
        except ValueError as exc:
            raise ResultFormatError(f"{path}:{number}: not a step row ({exc})") from None
    return out


def _row(cells: dict[str, str]) -> StepRecord:
    return StepRecord(
        end_s=float(cells["end_s"]),
        running=int(cells["running"]),
        prefill_tokens=_int(cells["prefill_tokens"]),
        decode_tokens=_int(cells["decode_tokens"]),
        start_s=_float(cells.get("start_s", "")),
        shares=parse_shares(cells.get("requests", "")),
        energy_j=_float(cells.get("energy_j", "")),
    )


def format_shares(shares: tuple[StepShare, ...] | None) -> str:
    """``requests`` cell: ``id:prefill:decode`` triples, ``-`` for none, empty for unknown."""
    if shares is None:
        return ""
    if not shares:
        return _NONE
    return " ".join(f"{s.request_id}:{s.prefill_tokens}:{s.decode_tokens}" for s in shares)


def parse_shares(text: str) -> tuple[StepShare, ...] | None:
    """The inverse of ``format_shares`` (ValueError for anything else)."""
    if not text:
        return None
    if text == _NONE:
        return ()
    out = []
    for triple in text.split(" "):
        parts = triple.split(":")
        if len(parts) != 3:
            raise ValueError(f"request share {triple!r} is not id:prefill:decode")
        out.append(StepShare(int(parts[0]), int(parts[1]), int(parts[2])))
    return tuple(out)


def _cell(value: float | None) -> str:
    return "" if value is None else str(value)


def _int(text: str) -> int | None:
    return int(text) if text else None


def _float(text: str) -> float | None:
    return float(text) if text else None
