"""requests.jsonl: written atomically through llem.result, read back record by record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.result import (
    REQUESTS_FILE,
    RequestRecord,
    ResultFormatError,
    read_requests,
    write_requests,
)


def _record(i: int, met: bool | None = True) -> RequestRecord:
    return RequestRecord(
        i,
        i % 2,
        0.5 * i,
        0.5 * i + 0.001,
        0.5 * i + 0.2,
        0.5 * i + 1.0,
        12,
        8,
        199.0,
        114.3,
        999.0 if i else 1000.0,
        met,
    )


def test_records_round_trip_one_json_object_per_line(tmp_path: Path) -> None:
    records = [_record(0), _record(1, met=False), _record(2, met=None)]
    path = write_requests(tmp_path, records)
    assert path == tmp_path / REQUESTS_FILE
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[1])["slo_met"] is False and json.loads(lines[2])["slo_met"] is None
    assert list(json.loads(lines[0])) == [
        "request_id",
        "prompt_index",
        "scheduled_s",
        "sent_s",
        "first_token_s",
        "finish_s",
        "input_tokens",
        "output_tokens",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "slo_met",
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
    ]
    assert read_requests(tmp_path) == records
    # the write is atomic: nothing but the file is left beside it
    assert [p.name for p in tmp_path.iterdir()] == [REQUESTS_FILE]


def test_a_line_that_is_not_a_record_is_named(tmp_path: Path) -> None:
    write_requests(tmp_path, [_record(0)])
    with (tmp_path / REQUESTS_FILE).open("a") as fh:
        fh.write('{"request_id": 1}\n')
    with pytest.raises(ResultFormatError, match=r"requests.jsonl:2: expected the keys"):
        read_requests(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_requests(tmp_path / "absent")


def test_a_file_written_before_the_energy_fields_reads_with_them_null(tmp_path: Path) -> None:
    old = {k: v for k, v in vars(_record(0)).items() if k not in ("energy_j", "bound_j")}
    old = {k: v for k, v in old.items() if k not in ("prefill_j", "decode_j")}
    old.pop("j_per_output_token")
    (tmp_path / REQUESTS_FILE).write_text(json.dumps(old) + "\n")
    got = read_requests(tmp_path)
    assert got == [_record(0)] and got[0].energy_j is None
