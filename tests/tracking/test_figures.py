"""What a tracker is given of a result.json, on a result whose every figure is planted."""

from __future__ import annotations

from llem.tracking import figures

PLANTED = {
    "status": "ok",
    "schema_version": 8,
    "config_hash": "abc",
    "started_at": "2026-11-28T17:00:00+00:00",
    "overrides": ["+backend=pytorch", "pytorch.batch_size=4", "hydra/launcher=basic"],
    "duration_s": 12.5,
    "workload": {"output_tokens": 400, "chat_template_applied": False},
    "latency": {"ttft_ms": {"p50": 21.0, "p90": None}},
    "energy": {"total_j": None, "j_per_output_token": 0.25, "source": "nvml_counter"},
    "validity": {"energy_valid": False, "problems": ["window too short", "throttled"]},
    "sweep": {"grid_index": 3, "position": 1},
    "null_reasons": {"latency.ttft_ms.p90": "one request", "energy.total_j": "no GPU"},
    "config": {"pytorch": {"batch_size": 4, "device_map": None}, "model": {"name_or_path": "m"}},
}


def test_every_numeric_figure_is_a_metric_under_its_unit_bearing_key() -> None:
    assert figures.metrics(PLANTED) == {
        "duration_s": 12.5,
        "workload.output_tokens": 400.0,
        "latency.ttft_ms.p50": 21.0,
        "energy.j_per_output_token": 0.25,
    }


def test_a_null_figure_is_no_metric_and_its_reason_is_a_tag() -> None:
    m, t = figures.metrics(PLANTED), figures.tags(PLANTED)
    assert "energy.total_j" not in m and "latency.ttft_ms.p90" not in m  # never a 0
    assert t["null.energy.total_j"] == "no GPU"
    assert t["null.latency.ttft_ms.p90"] == "one request"


def test_status_and_validity_are_tags() -> None:
    t = figures.tags(PLANTED)
    assert t["llem.status"] == "ok"
    assert t["llem.energy_valid"] == "false"
    assert t["llem.validity_problems"] == "window too short | throttled"
    assert figures.tags({**PLANTED, "validity": {"energy_valid": None}})["llem.energy_valid"] == (
        "unknown"
    )


def test_overrides_and_the_composed_config_are_params() -> None:
    p = figures.params(PLANTED)
    assert p["override.backend"] == "pytorch"
    assert p["override.pytorch.batch_size"] == "4"
    assert p["override.hydra/launcher"] == "basic"
    assert p["config.pytorch.batch_size"] == "4"
    assert p["config.pytorch.device_map"] == "null"
    assert p["config.model.name_or_path"] == "m"
    assert not any(k.startswith("config.") and "schema" in k for k in p)


def test_an_older_results_error_written_as_text_is_a_tag() -> None:
    # schema 1 wrote ``"error": "<message>"``; the trackers read result.json as written
    older = {"schema_version": 1, "status": "failed", "error": "CUDA out of memory"}
    assert figures.tags(older)["llem.error"] == "Error: CUDA out of memory"
    failed = {**PLANTED, "status": "failed", "error": {"type": "OOM", "message": "m"}}
    assert figures.tags(failed)["llem.error"] == "OOM: m"


def test_an_older_results_error_written_as_text_is_in_the_wandb_config() -> None:
    from llem.tracking.wandb_runs import run_config

    older = {"schema_version": 1, "status": "failed", "error": "CUDA out of memory"}
    assert run_config(older)["llem"]["error"] == "Error: CUDA out of memory"
    failed = {**PLANTED, "status": "failed", "error": {"type": "OOM", "message": "m"}}
    assert run_config(failed)["llem"]["error"] == "OOM: m"
