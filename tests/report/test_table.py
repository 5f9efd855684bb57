from __future__ import annotations

from pathlib import Path

import pytest
from report import report_synth as synth

from llem.report.labels import (
    basenames,
    ci_is_wide,
    format_number,
    format_with_ci,
    knob_headers,
    shorten,
)
from llem.report.load import load_runs
from llem.report.notes import render_heading, render_invalid, render_problems
from llem.report.stats import summary_frame
from llem.report.table import render_table

REALISTIC_TABLE = """\
batch_size  quantization      tok/s         J/tok  TTFT p50 ms  peak MB  status
-------------------------------------------------------------------------------
         1  none          31.0 ±1.5    2.10 ±0.10         20.5      424  ok ×3
         1  bnb-4bit      22.5 ±1.1    2.62 ±0.13         28.7      204  ok ×3
         4  none             112 ±5  0.620 ±0.030         28.0      466  ok ×3
         4  bnb-4bit      84.0 ±4.0  0.770 ±0.037         39.2      246  ok ×3
        16  none            386 ±19  0.205 ±0.010         58.0      634  ok ×3
        16  bnb-4bit        301 ±14  0.248 ±0.012         81.2      414  ok ×3
mean of ok repeats ± 95% CI half-width (Student t); peak MB = memory.peak_allocated_mb; TTFT from
the start of the request's own batch (earlier batches' wait left out)"""


def _table(*dirs: Path, width: int = 100) -> str:
    runs = load_runs(list(dirs))
    return render_table(runs, summary_frame(runs), width=width)


@pytest.mark.parametrize(
    "value,text",
    [
        (386.0, "386"),
        (22.51, "22.5"),
        (0.2051, "0.205"),
        (2.1, "2.10"),
        (1234.5, "1234"),
        (12, "12"),
        (0.0, "0"),
        (None, ""),
        (float("nan"), ""),
        (3.2e9, "3.20e+09"),
        (0.00042, "4.20e-04"),
        (True, "true"),
    ],
)
def test_format_number(value, text) -> None:
    assert format_number(value) == text


@pytest.mark.parametrize(
    ("mean", "half", "text"),
    [
        (12.0, 4.9683, "12.0 ±5.0"),
        (386.0, 18.52, "386 ±19"),
        (0.62, 0.0300, "0.620 ±0.030"),
        (22.5, 0.36, "22.5 ±0.4"),  # 2 digits of the half-width, but not past the mean's
        # a half-width far below the mean's last digit: a limit, not a string of zeros
        (4.09, 0.000000004, "4.09 ±<0.01"),
        (0.205, 0.0004, "0.205 ±<0.001"),
        (386.0, 0.3, "386 ±<1"),
        (0.175, 0.0, "0.175 ±0.000"),  # identical repeats: exactly zero
        # a huge one (two repeats: t = 12.7) stays short
        (4.09, 52.3, "4.09 ±52"),
        (4.09, 523.4, "4.09 ±520"),
        (0.0005, 0.000021, "5.00e-04 ±2.1e-05"),
        (31.0, None, "31.0"),
        (None, 1.0, ""),
    ],
)
def test_format_with_ci(mean: float | None, half: float | None, text: str) -> None:
    assert format_with_ci(mean, half) == text


def test_a_ci_of_half_the_mean_or_more_is_wide() -> None:
    assert ci_is_wide(4.09, 52.3) and ci_is_wide(10.0, 5.0)
    assert not ci_is_wide(10.0, 4.9) and not ci_is_wide(10.0, None)
    assert not ci_is_wide(0.175, 0.0)


def test_two_repeats_far_apart_are_flagged_with_a_note(tmp_path: Path) -> None:
    tok = {0: 2.0, 1: 6.2}  # mean 4.1, sd 2.97, t(0.975, 1) = 12.71 → ±26.7
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(
            tok_s=tok[p["repeat"]] if p["pytorch.batch_size"] == 1 else 40.0 + p["repeat"],
            j_tok=None,
            energy=False,
            peak_mb=None,
        ),
        repeats=2,
    )
    lines = _table(tmp_path / "s").splitlines()
    assert lines[2].split()[:4] == ["1", "4.10", "±27*", "21.0"]
    assert lines[3].split()[:4] == ["4", "40.5", "±6.4", "21.0"]  # ±6.4 < 20.25: not wide
    # the figures stay right-aligned; the mark sits after them
    assert lines[2].index("*") == lines[3].index("±6.4") + len("±6.4")
    assert lines[-2].startswith("* wide 95% CI (half-width at least half the mean)")
    assert "t = 12.7" in lines[-1]
    # without the CIs (too narrow a terminal) no figure is marked, and no note explains a mark
    narrow = render_table(
        load_runs([tmp_path / "s"]), summary_frame(load_runs([tmp_path / "s"])), width=30
    )
    assert "*" not in narrow


def test_knob_headers_are_short_but_unambiguous() -> None:
    assert knob_headers(["pytorch.batch_size", "quantization", "decoder.temperature"]) == {
        "pytorch.batch_size": "batch_size",
        "quantization": "quantization",
        "decoder.temperature": "temperature",
    }
    assert knob_headers(
        ["model.dtype", "quantization.bnb_4bit_compute_dtype", "x.model.dtype"]
    ) == {
        "model.dtype": "model.dtype",
        "quantization.bnb_4bit_compute_dtype": "bnb_4bit_compute_dtype",
        "x.model.dtype": "x.model.dtype",
    }


def test_realistic_table_exact(realistic_sweep: Path) -> None:
    assert _table(realistic_sweep) == REALISTIC_TABLE


def test_hand_computed_ci_in_table(tmp_path: Path) -> None:
    tok = {0: 10.0, 1: 12.0, 2: 14.0}
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(
            tok_s=tok[p["repeat"]] * p["pytorch.batch_size"], j_tok=None, energy=False, peak_mb=None
        ),
        repeats=3,
    )
    lines = _table(tmp_path / "s").splitlines()
    assert lines[0].split() == [
        "batch_size",
        "tok/s",
        "J/tok",
        "TTFT",
        "p50",
        "ms",
        "peak",
        "MB",
        "status",
    ]
    # mean 12, sd 2, t(0.975, 2) = 4.302653 → half-width 4.9683; ×4: 48 ± 19.87
    assert lines[2].split() == ["1", "12.0", "±5.0", "21.0", "ok", "×3"]
    assert lines[3].split() == ["4", "48.0", "±20", "21.0", "ok", "×3"]


def test_one_run_per_config_has_no_plus_minus_and_missing_energy_is_blank(cpu_sweep: Path) -> None:
    text = _table(cpu_sweep)
    assert text.splitlines() == [
        "decoder   tok/s  J/tok  TTFT p50 ms  peak MB  status",
        "----------------------------------------------------",
        "greedy     12.5                21.0           ok",
        "creative   11.0                21.0           ok",
        "TTFT from the start of the request's own batch (earlier batches' wait left out)",
    ]
    assert "±" not in text and " 0 " not in text


def test_failed_and_skipped_rows_have_empty_figures(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4, 16]},
        lambda p: {
            1: synth.ok_result(tok_s=50.0, j_tok=1.25, peak_mb=800.0),
            4: synth.failed_result(),
            16: synth.skipped_result(),
        }[p["pytorch.batch_size"]],
    )
    lines = _table(tmp_path / "s").splitlines()
    assert lines[2].split() == ["1", "50.0", "1.25", "21.0", "800", "ok"]
    assert lines[3].split() == ["4", "failed"]
    assert lines[4].split() == ["16", "skipped"]
    runs = load_runs([tmp_path / "s"])
    problems = render_problems(runs).splitlines()
    assert problems[0].startswith("failed: pytorch.batch_size=4 — OutOfMemory: CUDA out of memory")
    assert any(line.startswith("skipped: pytorch.batch_size=16 — ConfigError") for line in problems)
    assert all(len(line) <= 100 for line in problems)


def test_long_values_are_shortened_to_fit(tmp_path: Path) -> None:
    paths = [
        f"/scratch/some-user/checkpoints/experiment-{i}/Qwen2.5-0.5B-Instruct-finetuned-{i}"
        for i in range(3)
    ]
    synth.write_sweep(
        tmp_path / "s",
        {"model.name_or_path": paths, "pytorch.batch_size": [1, 64]},
        lambda p: synth.ok_result(),
        repeats=2,
    )
    text = _table(tmp_path / "s")
    assert max(len(line) for line in text.splitlines()) <= 100
    header = text.splitlines()[0]
    assert "name_or_path" in header and "batch_size" in header and "…" not in header
    # the last path component is enough to tell the models apart
    assert text.splitlines()[2].startswith("Qwen2.5-0.5B-Instruct-finetuned-0 ")


@pytest.mark.slow
def test_many_knobs_fall_back_to_a_legend(tmp_path: Path) -> None:
    grid = {f"pytorch.knob_number_{i}": ["alpha-value", "beta-value"] for i in range(6)}
    synth.write_sweep(tmp_path / "s", grid, lambda p: synth.ok_result())
    text = _table(tmp_path / "s")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].split()[:2] == ["config", "tok/s"]
    assert any(line.startswith("#1  knob_number_0=alpha-value") for line in lines)
    assert "tok/s" in lines[0] and "J/tok" in lines[0] and "status" in lines[0]


def test_narrow_width_drops_plus_minus_first(realistic_sweep: Path) -> None:
    text = _table(realistic_sweep, width=70)
    assert max(len(line) for line in text.splitlines()) <= 70
    assert "±" not in text.splitlines()[2]
    assert "95% CIs in summary.csv" in text


def test_shorten() -> None:
    assert shorten("short", 10) == "short"
    assert shorten("abcdefghijklmnop", 7) == "abc…nop"
    assert shorten("abcdefghijklmnop", 0) == "abcdefghijklmnop"
    assert basenames(["/a/b/model-1", "/a/c/model-2", "greedy"]) == ["model-1", "model-2", "greedy"]
    assert basenames(["/a/model", "/b/model"]) == ["/a/model", "/b/model"]  # would collide


def test_cpu_runs_show_host_memory(tmp_path: Path) -> None:
    def make(p):
        result = synth.ok_result(tok_s=13.1, energy=False, peak_mb=None)
        result["memory"]["peak_host_rss_mb"] = 411.49 + p["pytorch.batch_size"]
        return result

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 2]}, make)
    lines = _table(tmp_path / "s").splitlines()
    assert lines[2].split() == ["1", "13.1", "21.0", "412", "ok"]
    assert lines[-2].startswith("peak MB = memory.peak_host_rss_mb; TTFT from")


def test_gpu_column_when_hardware_varies(tmp_path: Path) -> None:
    for name, gpu in (("a", "NVIDIA A100-SXM4-80GB"), ("b", "NVIDIA H100 80GB HBM3")):
        synth.write_sweep(
            tmp_path / name,
            {"pytorch.batch_size": [1, 4]},
            lambda p, gpu=gpu: synth.ok_result(gpu_model=gpu),
        )
    lines = _table(tmp_path / "a", tmp_path / "b").splitlines()
    runs = load_runs([tmp_path / "a", tmp_path / "b"])
    assert render_heading(runs, summary_frame(runs)) == (
        "llem report: 4 runs (4 ok), 2 configurations on 2 kinds of hardware (4 rows)"
    )
    assert lines[0].split()[:3] == ["batch_size", "GPU", "tok/s"]
    assert [line.split()[:3] for line in lines[2:6]] == [
        ["1", "A100-SXM4-80GB", "×1"],
        ["1", "H100", "80GB"],
        ["4", "A100-SXM4-80GB", "×1"],
        ["4", "H100", "80GB"],
    ]
    assert "H100 80GB HBM3 ×1" in lines[3]


def test_no_gpu_column_when_all_runs_share_hardware(realistic_sweep: Path) -> None:
    assert "GPU" not in _table(realistic_sweep)


def _invalid_sweep(tmp_path: Path) -> Path:
    def make(p):
        bs, r = p["pytorch.batch_size"], p["repeat"]
        bad = (bs == 1 and r == 1) or bs == 16
        return synth.ok_result(
            j_tok=0.2 if bad else 0.7 / bs,
            valid=not bad,
            problems=[f"The measured window lasted 1.{r} s, shorter than 5 s."] if bad else [],
        )

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4, 16]}, make, repeats=2)
    return tmp_path / "s"


def test_invalid_energy_is_marked_counted_and_explained(tmp_path: Path) -> None:
    sweep = _invalid_sweep(tmp_path)
    runs = load_runs([sweep])
    lines = render_table(runs, summary_frame(runs)).splitlines()
    # bs=1: one of two runs invalid, every figure over the valid one (tok/s too: no CI from one
    # run); bs=16: none left, so no figures at all; the n column says how many runs each row used
    assert lines[0].split()[-2:] == ["n", "status"]
    assert lines[2].split()[1:3] == ["200", "0.700!"]
    assert lines[2].split()[-3:] == ["1", "ok", "×2"]
    assert lines[3].split()[3:5] == ["0.175", "±0.000"]
    assert lines[3].split()[-3:] == ["2", "ok", "×2"]
    assert lines[4].split() == ["16", "!", "0", "ok", "×2"]
    # the marks sit in a column of their own, right of the figures, which stay aligned
    assert lines[2].index("!") == lines[4].index("!") == lines[3].index("±0.000") + 6
    assert lines[-2:] == [
        "! 3 runs whose energy was judged invalid: 3 left out of every figure of their row, tok/s "
        "too (n",
        "  counts the runs used; --include-invalid keeps them)",
    ]
    assert render_invalid(runs).splitlines() == [
        "! pytorch.batch_size=1 repeat=1: The measured window lasted 1.1 s, shorter than 5 s.",
        "! pytorch.batch_size=16 repeat=0: The measured window lasted 1.0 s, shorter than 5 s.",
        "! pytorch.batch_size=16 repeat=1: The measured window lasted 1.1 s, shorter than 5 s.",
    ]

    kept = render_table(runs, summary_frame(runs, include_invalid=True)).splitlines()
    assert kept[0].split()[-1] == "status"  # nothing left out: no n column
    assert kept[2].split()[3:5] == ["0.450", "±3.2*!"]  # a wide CI, and invalid runs in it
    assert kept[4].split()[3:6] == ["0.200", "±0.000", "!"]
    assert kept[2].index("!") == kept[4].index("!")
    assert kept[-1] == "! 3 runs whose energy was judged invalid, kept in (--include-invalid)"


def test_no_invalid_runs_no_marks(realistic_sweep: Path) -> None:
    runs = load_runs([realistic_sweep])
    assert "!" not in render_table(runs, summary_frame(runs))
    assert render_invalid(runs) == ""


def test_many_invalid_runs_are_listed_up_to_a_limit(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": list(range(1, 13))},
        lambda p: synth.ok_result(valid=False, problems=["Throttled."]),
    )
    lines = render_invalid(load_runs([tmp_path / "s"])).splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("! and 2 more runs with invalid energy: see the valid")


def test_one_run_with_a_bound_shows_its_bound(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(
            tok_s=100.0, j_tok=0.7 / p["pytorch.batch_size"], j_tok_bound=0.0021
        ),
    )
    lines = _table(tmp_path / "s").splitlines()
    # one run: no CI (a bound is not one), the bound in a column of its own
    assert lines[0].split()[:5] == ["batch_size", "tok/s", "J/tok", "J/tok", "bound"]
    assert lines[2].split()[:4] == ["1", "100", "0.700", "±0.002"]  # tok/s: no bound, no ±
    assert lines[3].split()[:4] == ["4", "100", "0.175", "±0.002"]
    assert lines[2].index("±") > lines[0].index("J/tok bound")
    notes = " ".join(lines[4:])
    assert "95% CI" not in notes and "no CI: fewer than 2 repeats" in notes
    assert "J/tok bound = the runs' mean worst-case instrument bound" in notes


def _wide_result(point: dict) -> dict:
    """A serving run with every column the table can show; conc differs in the third digit."""
    if point["repeat"] == 2 and point["vllm.max_num_seqs"] == 8:
        return synth.failed_result()
    conc = {8: 0.511, 64: 0.566}[point["vllm.max_num_seqs"]]
    body = synth.serving_result(
        kind="offline",
        rate=None,
        concurrency=conc,
        goodput=(0.9, 100.0),
        steady={"tok_s": 200.0, "j_tok": 0.7, "conc": conc},
    )
    body["energy"].update(
        prefill_j=20.0,
        decode_j=70.0,
        between_steps_j=10.0,
        j_per_prefill_token=0.004,
        j_per_decode_token=0.05,
        j_per_prefill_token_uncertainty=0.0006,
        j_per_decode_token_uncertainty=0.02,
        j_per_prefill_token_ci95_half_width=0.0004,
        j_per_decode_token_ci95_half_width=0.01,
    )
    return body


@pytest.mark.parametrize(
    ("width", "keys"),
    [(100, ["max_num_seqs", "temperature", "dtype"]), (60, ["config"])],
)
def test_no_value_or_header_is_ever_cut(tmp_path: Path, width: int, keys: list[str]) -> None:
    """A table wider than the terminal is split into parts, each with the knobs of its rows (or,
    where they take too much room, their legend's #N); rich never gets to cut a cell to '0.5…'
    (0.511 and 0.566 then read alike) or a header."""
    grid = {
        "vllm.max_num_seqs": [8, 64],
        "decoder.temperature": [0.0, 0.7],
        "model.dtype": ["float16", "bfloat16"],
    }
    synth.write_sweep(tmp_path / "s", grid, _wide_result, repeats=3)
    text = _table(tmp_path / "s", width=width)
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line) for line in lines) <= width
    # every part keeps the knobs, so each row says which configuration it is
    parts = [i for i, line in enumerate(lines) if line.startswith(keys[0])]
    assert len(parts) >= 2
    for header in ("conc", "pre/dec/gap %", "J/prefill tok ±95%", "J/decode tok ±95%"):
        assert sum(header in lines[i] for i in parts) == 1, header
    assert sum("0.511" in line for line in lines) == 4
    assert sum("0.566" in line for line in lines) == 4
    assert sum(line.endswith("ok ×2, failed ×1") for line in lines) == 4
    assert all(lines[i].split()[: len(keys)] == keys for i in parts)
    assert f"the table is printed in {len(parts)} parts to fit {width} columns" in " ".join(lines)


@pytest.mark.slow
def test_many_knobs_split_beside_their_legend_keys(tmp_path: Path) -> None:
    grid = {f"pytorch.knob_number_{i}": ["alpha-value", "beta-value"] for i in range(6)}
    synth.write_sweep(tmp_path / "s", grid, lambda p: synth.ok_result(), repeats=3)
    text = _table(tmp_path / "s", width=40)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 40
    headers = [line for line in text.splitlines() if line.startswith("config")]
    assert len(headers) >= 2 and "status" in headers[-1]
    assert sum(line.endswith("ok ×3") for line in text.splitlines()) == 64


def test_the_wide_ci_note_names_the_repeats_of_the_rows_it_marks(tmp_path: Path) -> None:
    """Rows of 3 repeats marked wide: the note gives t for 3 repeats (4.30), not the 12.7 of
    two; rows of 2 and of 3 marked wide: both."""
    far = {0: 2.0, 1: 6.2, 2: 11.0}  # 3 repeats: mean 6.4, sd 4.5, ±11.2: wide
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(
            tok_s=far[p["repeat"]] if p["pytorch.batch_size"] == 1 else 40.0 + p["repeat"],
            j_tok=None,
            energy=False,
            peak_mb=None,
        ),
        repeats=3,
    )
    text = " ".join(_table(tmp_path / "s").split())
    assert "6.40 ±11*" in text
    assert "with 3 repeats the spread is multiplied by t = 4.3" in text
    assert "2 repeats" not in text and "12.7" not in text
    # one more sweep of 2 repeats, merged: each count with its own t
    synth.write_sweep(
        tmp_path / "two",
        {"pytorch.batch_size": [16]},
        lambda p: synth.ok_result(
            tok_s={0: 2.0, 1: 6.2}[p["repeat"]], j_tok=None, energy=False, peak_mb=None
        ),
        repeats=2,
    )
    both = " ".join(_table(tmp_path / "s", tmp_path / "two").split())
    assert (
        "with 2 repeats the spread is multiplied by t = 12.7; with 3 repeats the spread is "
        "multiplied by t = 4.3" in both
    )
