"""steps.csv (llem.result.steps): every field round-trips, files of the old format still read,
malformed files are format errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from llem.result import StepRecord, read_steps, write_steps
from llem.result.migrate import ResultFormatError
from llem.vocabulary.workload import StepShare


def test_steps_csv_round_trips_every_field(tmp_path: Path) -> None:
    rows = [
        StepRecord(0.5, 2, 12, 2, start_s=0.25, shares=(StepShare(0, 5, 1), StepShare(3, 7, 1))),
        StepRecord(0.75, 0, 0, 0, start_s=0.5, shares=(), energy_j=1.25),
        StepRecord(1.0, 3, None, None),
    ]
    write_steps(tmp_path, rows)
    assert read_steps(tmp_path) == rows
    header, first = (tmp_path / "steps.csv").read_text().splitlines()[:2]
    assert header == "start_s,end_s,running,prefill_tokens,decode_tokens,requests,energy_j"
    assert first == "0.25,0.5,2,12,2,0:5:1 3:7:1,"


def test_a_steps_csv_of_the_old_format_still_reads(tmp_path: Path) -> None:
    (tmp_path / "steps.csv").write_text(
        "end_s,running,prefill_tokens,decode_tokens\n0.1,2,5,0\n0.2,1,,\n"
    )
    assert read_steps(tmp_path) == [StepRecord(0.1, 2, 5, 0), StepRecord(0.2, 1)]


@pytest.mark.parametrize(
    "text",
    [
        "start_s,end_s\n1,2\n",
        "start_s,end_s,running,prefill_tokens,decode_tokens,requests,energy_j\n,1,1,1,1,0:1,\n",
        "start_s,end_s,running,prefill_tokens,decode_tokens,requests,energy_j\n,1,1,1\n",
    ],
)
def test_a_malformed_steps_csv_is_a_format_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "steps.csv").write_text(text)
    with pytest.raises(ResultFormatError):
        read_steps(tmp_path)
