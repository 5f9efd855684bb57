from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from report import report_synth as synth

from llem.figures.student_t import t_cdf, t_quantile
from llem.report.load import load_runs
from llem.report.repeat_stats import summarise
from llem.report.stats import summary_frame

# scipy.stats.t.ppf reference values
T_975 = {
    1: 12.706205,
    2: 4.302653,
    3: 3.182446,
    4: 2.776445,
    5: 2.570582,
    9: 2.262157,
    10: 2.228139,
    29: 2.045230,
    30: 2.042272,
    100: 1.983972,
    1000: 1.962339,
}


@pytest.mark.parametrize("df,expected", sorted(T_975.items()))
def test_t_quantile_matches_reference_to_six_digits(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-7)


def test_t_quantile_other_levels_and_symmetry() -> None:
    assert t_quantile(0.995, 1) == pytest.approx(63.656741, abs=5e-6)
    assert t_quantile(0.95, 7) == pytest.approx(1.894579, abs=5e-7)
    assert t_quantile(0.025, 2) == pytest.approx(-4.302653, abs=5e-7)
    assert t_quantile(0.5, 3) == 0.0
    assert t_cdf(t_quantile(0.9, 4), 4) == pytest.approx(0.9, abs=1e-12)


def test_t_quantile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_cdf(1.0, 0)


def test_ci_for_hand_computed_case() -> None:
    s = summarise([10, 12, 14])
    assert s.n == 3
    assert s.mean == 12.0
    assert s.std == pytest.approx(2.0)
    # t(0.975, 2) * 2 / sqrt(3) = 4.302653 * 1.154701
    assert s.ci_half == pytest.approx(4.9683, abs=5e-5)
    assert s.ci_low == pytest.approx(12 - 4.9683, abs=5e-5)
    assert s.ci_high == pytest.approx(12 + 4.9683, abs=5e-5)


def test_one_value_has_no_spread_and_gaps_are_not_zero() -> None:
    one = summarise([7.5])
    assert (one.n, one.mean, one.std, one.ci_half) == (1, 7.5, None, None)
    assert one.ci_low is None and one.ci_high is None
    none = summarise([None, float("nan")])
    assert (none.n, none.mean) == (0, None)
    # missing values are skipped, not averaged in as 0
    assert summarise([None, 4.0, 6.0]).mean == 5.0
    assert summarise([True, 3.0]).n == 1  # a flag is not a measurement
    same = summarise([1.0, 1.0])  # two equal values: a real spread of 0, not a gap
    assert (same.std, same.ci_half) == (0.0, 0.0)


# --------------------------------------------------------------------------- per-run bounds


def test_the_bound_is_kept_apart_from_the_ci() -> None:
    s = summarise([10, 12, 14], bounds=[0.5, 1.0, 1.5])
    assert s.bound == pytest.approx(1.0)  # the runs' mean bound, on its own
    assert s.std == pytest.approx(2.0)  # the spread itself is unchanged
    assert s.ci_half == pytest.approx(4.9683, abs=5e-5)  # Student t over the repeats only
    assert s.ci_low == pytest.approx(12 - 4.9683, abs=5e-5)
    # a bound without its value does not count; a value without a bound adds nothing
    assert summarise([None, 4.0, 6.0], bounds=[9.0, 0.2, None]).bound == pytest.approx(0.2)
    with pytest.raises(ValueError):
        summarise([1.0, 2.0], bounds=[0.1])


def test_one_run_has_no_ci_only_its_bound() -> None:
    """A bound is not a confidence interval: one run has none over repeats (it used to get its
    own bound as a '95% CI', looking more certain than three runs)."""
    one = summarise([0.7], bounds=[0.003])
    assert (one.n, one.mean, one.std, one.ci_half, one.bound) == (1, 0.7, None, None, 0.003)
    assert one.ci_low is None and one.ci_high is None
    assert summarise([0.7], bounds=[None]).ci_half is None


# --------------------------------------------------------------------------- summary_frame


def _summary(*dirs: Path, include_invalid: bool = False) -> pd.DataFrame:
    return summary_frame(load_runs(list(dirs)), include_invalid=include_invalid)


def test_merged_sweeps_from_two_gpus_are_not_pooled(tmp_path: Path) -> None:
    for name, gpu, jtok in (
        ("a", "NVIDIA A100-SXM4-80GB", 0.7),
        ("b", "NVIDIA H100 80GB HBM3", 0.4),
    ):
        synth.write_sweep(
            tmp_path / name,
            {"pytorch.batch_size": [1, 4]},
            lambda p, gpu=gpu, jtok=jtok: synth.ok_result(j_tok=jtok, gpu_model=gpu),
            repeats=2,
        )
    summary = _summary(tmp_path / "a", tmp_path / "b")
    assert len(summary) == 4  # 2 configurations × 2 GPUs, not 2 pooled rows
    assert summary["pytorch.batch_size"].tolist() == [1, 1, 4, 4]
    assert (
        summary["gpu"].tolist()
        == [
            "NVIDIA A100-SXM4-80GB ×1",
            "NVIDIA H100 80GB HBM3 ×1",
        ]
        * 2
    )
    assert summary["hardware.gpu_model"].tolist()[:2] == [
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H100 80GB HBM3",
    ]
    assert summary["hardware.gpu_count"].tolist() == [1] * 4
    assert summary["device"].tolist() == ["cuda"] * 4
    assert summary["n"].tolist() == [2] * 4
    assert summary["energy.j_per_output_token.mean"].tolist() == pytest.approx([0.7, 0.4] * 2)
    assert summary["energy.j_per_output_token.std"].tolist() == [0.0] * 4


def test_mixed_nodes_in_one_sweep_split_by_gpu_count_and_device(tmp_path: Path) -> None:
    hardware = {0: ("NVIDIA A100-SXM4-80GB", 1), 1: ("NVIDIA A100-SXM4-80GB", 2), 2: (None, 0)}

    def make(p):
        model, count = hardware[p["repeat"]]
        if model is None:
            return synth.ok_result(energy=False)  # this repeat landed on a CPU node
        return synth.ok_result(gpu_model=model, gpu_count=count)

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [8]}, make, repeats=3)
    summary = _summary(tmp_path / "s")
    assert summary["gpu"].tolist() == [
        "NVIDIA A100-SXM4-80GB ×1",
        "NVIDIA A100-SXM4-80GB ×2",
        "cpu",
    ]
    assert summary["device"].tolist() == ["cuda", "cuda", "cpu"]
    assert summary["n"].tolist() == [1, 1, 1]


def _environment(run_dir: Path, cpu: str, driver: str | None) -> None:
    """The run's environment.json, as llem writes it (only the keys the report reads)."""
    env = {"cpu": {"model": cpu}, "driver_version": driver, "hostname": "x"}
    (run_dir / "environment.json").write_text(json.dumps(env))


def test_cpu_runs_on_other_hosts_and_cpus_are_not_pooled(tmp_path: Path) -> None:
    """Two CPU nodes give the same configuration different numbers: one row each, saying how."""
    hosts = {0: ("node-a", "Intel Xeon Gold 6338", 50.0), 1: ("node-b", "AMD EPYC 7763", 90.0)}
    hosts[2] = hosts[0]

    def make(p):
        host, _, tok_s = hosts[p["repeat"]]
        return synth.ok_result(energy=False, hostname=host, tok_s=tok_s)

    dirs = synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1]}, make, repeats=3)
    for r, d in enumerate(dirs):
        _environment(d, hosts[r][1], None)
    summary = _summary(tmp_path / "s")
    assert summary["gpu"].tolist() == [
        "cpu · on node-a · Intel Xeon Gold 6338",
        "cpu · on node-b · AMD EPYC 7763",
    ]
    assert summary["hardware.hostname"].tolist() == ["node-a", "node-b"]
    assert summary["environment.cpu.model"].tolist() == ["Intel Xeon Gold 6338", "AMD EPYC 7763"]
    assert summary["n"].tolist() == [2, 1]
    assert summary["throughput.output_tokens_per_s.mean"].tolist() == [50.0, 90.0]


def test_replayed_runs_measured_on_other_hosts_are_not_pooled(tmp_path: Path) -> None:
    """A replay run's energy comes from the trace, its throughput from this host's CPU: runs of
    one trace on two hosts with different CPUs are two rows (keyed by host and CPU as well as the
    trace); on the same host they pool."""
    hosts = {0: ("node-a", "Intel Xeon Gold 6338", 50.0), 1: ("node-b", "AMD EPYC 7763", 90.0)}
    hosts[2] = hosts[0]

    def make(p):
        host, _, tok_s = hosts[p["repeat"]]
        result = synth.ok_result(gpu_model="replay:trace.csv", hostname=host, tok_s=tok_s)
        result["device"] = "cpu"
        result["energy"]["source"] = "replay"
        return result

    dirs = synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1]}, make, repeats=3)
    for r, d in enumerate(dirs):
        _environment(d, hosts[r][1], None)
    summary = _summary(tmp_path / "s")
    assert summary["gpu"].tolist() == [
        "replay:trace.csv ×1 · on node-a · Intel Xeon Gold 6338",
        "replay:trace.csv ×1 · on node-b · AMD EPYC 7763",
    ]
    assert summary["n"].tolist() == [2, 1]
    assert summary["throughput.output_tokens_per_s.mean"].tolist() == [50.0, 90.0]
    assert "hardware.gpus.power_limit_w" not in summary.columns


def test_gpu_runs_at_other_power_limits_or_drivers_are_not_pooled(tmp_path: Path) -> None:
    """Same GPU model, but one node caps it at 250 W and another runs another driver. GPU runs
    on different hosts with the same GPU, limit and driver still pool."""
    nodes = {0: (400.0, "550.54", "n1"), 1: (250.0, "550.54", "n2"), 2: (400.0, "535.1", "n3")}
    nodes[3] = (400.0, "550.54", "n4")

    def make(p):
        limit, _, host = nodes[p["repeat"]]
        result = synth.ok_result(j_tok=0.7 - limit / 1000, hostname=host)
        result["hardware"]["gpus"][0]["power_limit_w"] = limit
        return result

    dirs = synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1]}, make, repeats=4)
    for r, d in enumerate(dirs):
        _environment(d, "Intel Xeon Gold 6338", nodes[r][1])
    runs = load_runs([tmp_path / "s"]).frame
    assert runs["hardware.gpus.power_limit_w"].tolist() == ["400", "250", "400", "400"]
    summary = _summary(tmp_path / "s")
    gpu = f"{synth.GPU_MODEL} ×1"
    assert summary["gpu"].tolist() == [
        f"{gpu} · 400 W limit · driver 550.54",
        f"{gpu} · 250 W limit · driver 550.54",
        f"{gpu} · 400 W limit · driver 535.1",
    ]
    assert summary["n"].tolist() == [2, 1, 1]
    assert summary["hardware.gpus.power_limit_w"].tolist() == ["400", "250", "400"]
    assert summary["environment.driver_version"].tolist() == ["550.54", "550.54", "535.1"]
    assert "hardware.hostname" not in summary.columns


def test_one_kind_of_hardware_adds_no_columns(realistic_sweep: Path) -> None:
    summary = _summary(realistic_sweep)
    assert len(summary) == 6
    for column in ("gpu", "device", "hardware.gpu_model", "hardware.gpu_count"):
        assert column not in summary.columns


def test_a_failed_run_joins_its_configuration_only_when_the_hardware_is_clear(
    tmp_path: Path,
) -> None:
    def one_gpu(p):
        return synth.failed_result() if p["repeat"] == 2 else synth.ok_result()

    synth.write_sweep(tmp_path / "one", {"pytorch.batch_size": [1]}, one_gpu, repeats=3)
    summary = _summary(tmp_path / "one")
    assert summary["status"].tolist() == ["ok ×2, failed ×1"]

    def two_gpus(p):
        if p["repeat"] == 2:
            return synth.failed_result()
        return synth.ok_result(gpu_model=["NVIDIA L4", "NVIDIA T4"][p["repeat"]])

    synth.write_sweep(tmp_path / "two", {"pytorch.batch_size": [1]}, two_gpus, repeats=3)
    summary = _summary(tmp_path / "two")
    assert summary["gpu"].tolist() == ["NVIDIA L4 ×1", "NVIDIA T4 ×1", "unknown"]
    assert summary["status"].tolist() == ["ok", "ok", "failed"]


def _with_one_invalid(tmp_path: Path) -> Path:
    jtok = {0: 0.70, 1: 0.72, 2: 0.20}  # the invalid repeat reads low (a too-short window)

    def make(p):
        r = p["repeat"]
        if p["pytorch.batch_size"] == 4:
            return synth.ok_result(energy=False)  # CPU: energy_valid null, nothing left out
        return synth.ok_result(
            tok_s=100.0 + r,
            j_tok=jtok[r],
            valid=r != 2,
            problems=["The measured window lasted 1.2 s, shorter than 5 s."] if r == 2 else [],
        )

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, make, repeats=3)
    return tmp_path / "s"


def test_every_figure_of_a_row_comes_from_the_same_runs(tmp_path: Path) -> None:
    """An invalid run left out of J/token is left out of tokens/s too (they used to be averaged
    over different runs, so avg power != J/token x tokens/s), and the row says how many."""
    sweep = _with_one_invalid(tmp_path)
    summary = _summary(sweep)
    gpu, cpu = summary.iloc[0], summary.iloc[1]
    assert gpu["n"] == 3 and gpu["n_used"] == 2
    assert gpu["energy.j_per_output_token.n"] == 2
    assert gpu["energy.j_per_output_token.mean"] == pytest.approx(0.71)
    assert gpu["energy.total_j.n"] == 2
    assert gpu["throughput.output_tokens_per_s.n"] == 2
    assert gpu["throughput.output_tokens_per_s.mean"] == pytest.approx(100.5)  # repeats 0 and 1
    assert gpu["latency.ttft_ms.p50.n"] == 2
    assert (gpu["n_energy_invalid"], gpu["n_energy_left_out"]) == (1, 1)
    assert (cpu["n_energy_invalid"], cpu["n_energy_left_out"], cpu["n_used"]) == (0, 0, 3)
    assert cpu["throughput.output_tokens_per_s.n"] == 3

    kept = _summary(sweep, include_invalid=True).iloc[0]
    assert kept["n_used"] == 3
    assert kept["energy.j_per_output_token.n"] == 3
    assert kept["energy.j_per_output_token.mean"] == pytest.approx((0.70 + 0.72 + 0.20) / 3)
    assert kept["throughput.output_tokens_per_s.mean"] == pytest.approx(101.0)
    assert (kept["n_energy_invalid"], kept["n_energy_left_out"]) == (1, 0)


def test_summary_ci_is_over_repeats_and_the_bound_has_its_own_column(tmp_path: Path) -> None:
    jtok = {0: 0.68, 1: 0.70, 2: 0.72}
    bound = {0: 0.002, 1: 0.003, 2: 0.004}
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1]},
        lambda p: synth.ok_result(j_tok=jtok[p["repeat"]], j_tok_bound=bound[p["repeat"]]),
        repeats=3,
    )
    synth.write_run(tmp_path / "one", [], synth.ok_result(j_tok=0.5, j_tok_bound=0.0025))
    row = _summary(tmp_path / "s").iloc[0]
    t_half = 4.302653 * 0.02 / math.sqrt(3)
    assert row["energy.j_per_output_token.bound_mean"] == pytest.approx(0.003)
    assert row["energy.j_per_output_token.ci95_half"] == pytest.approx(t_half, rel=1e-6)
    assert row["energy.j_per_output_token.std"] == pytest.approx(0.02)
    assert "throughput.output_tokens_per_s.bound_mean" not in row.index  # no bound: t only

    one = _summary(tmp_path / "one").iloc[0]
    assert pd.isna(one["energy.j_per_output_token.ci95_half"])  # one run: no CI
    assert pd.isna(one["energy.j_per_output_token.ci95_low"])
    assert one["energy.j_per_output_token.bound_mean"] == pytest.approx(0.0025)
    assert pd.isna(one["energy.j_per_output_token.std"])
    assert pd.isna(one["energy.peak_power_w.ci95_half"])  # a figure without a bound
    assert pd.isna(one["throughput.output_tokens_per_s.ci95_half"])
