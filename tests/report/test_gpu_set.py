"""The report pools only runs on the same GPU set (issue 31 section 4): repeats of one
configuration measured over different GPUs (by UUID) are separate rows, with a note saying why."""

from __future__ import annotations

from pathlib import Path

from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.stats import summary_frame
from llem.report.table import render_table

# repeats 0 to 2 on GPUs 0 and 1 of a node, repeat 3 on GPUs 2 and 3
SETS = {0: (0, 1), 1: (0, 1), 2: (0, 1), 3: (2, 3)}
J_TOK = {0: 0.5, 1: 0.6, 2: 0.7, 3: 2.0}


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-444455556666"


def _sweep(tmp_path: Path, sets: dict[int, tuple[int, ...]]) -> Path:
    def make(point):
        r = point["repeat"]
        result = synth.ok_result(j_tok=J_TOK[r], gpu_count=2)
        result["hardware"]["gpus"] = [{"uuid": _uuid(i), "name": synth.GPU_MODEL} for i in sets[r]]
        return result

    synth.write_sweep(tmp_path / "s", {"vllm.tensor_parallel_size": [2]}, make, repeats=4)
    return tmp_path / "s"


def test_runs_on_different_gpu_sets_are_separate_rows(tmp_path: Path) -> None:
    runs = load_runs([_sweep(tmp_path, SETS)])
    summary = summary_frame(runs)
    assert summary["n"].tolist() == [3, 1]
    assert summary["energy.j_per_output_token.mean"].tolist() == [
        (0.5 + 0.6 + 0.7) / 3,
        2.0,
    ]
    assert summary["hardware.gpus.uuid"].tolist() == [
        f"{_uuid(0)} + {_uuid(1)}",
        f"{_uuid(2)} + {_uuid(3)}",
    ]
    gpu = f"{synth.GPU_MODEL} ×2"
    assert summary["gpu"].tolist() == [
        f"{gpu} · GPUs GPU-00000000 + GPU-00000001",
        f"{gpu} · GPUs GPU-00000002 + GPU-00000003",
    ]
    text = " ".join(render_table(runs, summary, width=200).split())
    assert "runs on different GPUs are not pooled" in text
    assert "hardware.gpus.uuid in summary.csv" in text


def test_runs_on_one_gpu_set_pool_without_a_note(tmp_path: Path) -> None:
    same = dict.fromkeys(SETS, (1, 0))  # the order GPUs are listed in does not matter
    same[0] = (0, 1)
    runs = load_runs([_sweep(tmp_path, same)])
    summary = summary_frame(runs)
    assert summary["n"].tolist() == [4]
    assert "hardware.gpus.uuid" not in summary.columns
    assert "not pooled" not in render_table(runs, summary, width=200)
