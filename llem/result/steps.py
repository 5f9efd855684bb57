"""steps.csv: the engine's own iterations in the measured window, and the only code that reads or
writes it.

One row per engine step the engine exposes (vLLM's scheduler statistics; transformers' continuous
batching exposes none, so such runs write no file): when the step's outputs reached llem's process
(``end_s``, seconds from the measured window's start, on the run's one clock), the requests in the
running batch, and the prompt and decode tokens the step computed (empty where unknown). Written
atomically, like result.json.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llem.atomic import atomic_write_text
from llem.result.migrate import ResultFormatError

STEPS_FILE = "steps.csv"
_COLUMNS = ("end_s", "running", "prefill_tokens", "decode_tokens")


@dataclass(frozen=True)
class StepRecord:
    end_s: float
    running: int
    prefill_tokens: int | None = None
    decode_tokens: int | None = None


def write_steps(run_dir: Path | str, steps: Iterable[StepRecord]) -> Path:
    """Write ``run_dir/steps.csv`` atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for s in steps:
        writer.writerow([s.end_s, s.running, _cell(s.prefill_tokens), _cell(s.decode_tokens)])
    return atomic_write_text(Path(run_dir) / STEPS_FILE, buffer.getvalue())


def read_steps(run_dir: Path | str) -> list[StepRecord]:
    """The rows of ``run_dir/steps.csv`` (FileNotFoundError when the engine exposed no steps)."""
    path = Path(run_dir) / STEPS_FILE
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    if not rows or tuple(rows[0]) != _COLUMNS:
        raise ResultFormatError(f"{path}: expected the header {','.join(_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            end, running, prefill, decode = row
            out.append(StepRecord(float(end), int(running), _int(prefill), _int(decode)))
        except ValueError as exc:
            raise ResultFormatError(f"{path}:{number}: not a step row ({exc})") from None
    return out


def _cell(value: int | None) -> str:
    return "" if value is None else str(value)


def _int(text: str) -> int | None:
    return int(text) if text else None
