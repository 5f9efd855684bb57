"""Prefix caching: off by default (the window measures cold prefill), and the result says whether
it was on and what share of the window's prompt tokens it served. No engine starts here."""

from __future__ import annotations

from test_vllm_config import experiment

from llem.backends import sections
from llem.backends.vllm import build_engine_kwargs
from llem.result import RunResult
from llem.runner.assemble import fill_prefix_cache
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput


def test_prefix_caching_is_off_unless_the_user_turns_it_on() -> None:
    def caching(*overrides: str) -> object:
        exp = experiment("+backend=vllm", *overrides)
        return build_engine_kwargs(sections(exp), "cpu", "m").get("enable_prefix_caching")

    assert caching() is False  # vLLM's own default is on
    assert caching("vllm.enable_prefix_caching=true") is True
    assert caching("+vllm.engine_kwargs.enable_prefix_caching=true") is True


def _loaded(prefix_caching: bool | None) -> LoadedModel:
    return LoadedModel(
        model=None,
        tokenizer=None,
        device="cpu",
        dtype="float32",
        load_kwargs={},
        load_key="k",
        load_s=0.0,
        source="m",
        shape=None,
        prefix_caching=prefix_caching,
    )


def _batch(inputs: list[int], cached: list[int] | None) -> BatchOutput:
    return BatchOutput(
        start_s=0.0,
        end_s=1.0,
        input_tokens=inputs,
        output_tokens=[1] * len(inputs),
        step_times_s=[1.0],
        step_tokens=[1],
        cached_input_tokens=cached,
    )


def test_the_hit_rate_is_the_share_of_window_prompt_tokens_served_from_the_cache() -> None:
    result = RunResult(status="ok")
    outputs = [_batch([64, 32], [48, 16]), _batch([100], [0])]  # 64 of 196 prompt tokens cached
    fill_prefix_cache(result, _loaded(True), outputs)
    assert result.lifecycle.prefix_caching is True
    assert result.lifecycle.prefix_cache_hit_rate == round(64 / 196, 4)
    assert "lifecycle.prefix_cache_hit_rate" not in result.null_reasons


def test_an_unreported_hit_rate_is_null_with_the_reason() -> None:
    result = RunResult(status="ok")
    fill_prefix_cache(result, _loaded(False), [_batch([8], None)])
    assert result.lifecycle.prefix_caching is False
    assert result.lifecycle.prefix_cache_hit_rate is None
    assert "num_cached_tokens" in result.null_reasons["lifecycle.prefix_cache_hit_rate"]


def test_an_engine_without_a_prefix_cache_leaves_both_null_with_the_reason() -> None:
    result = RunResult(status="ok")
    fill_prefix_cache(result, _loaded(None), [_batch([8], None)])
    assert result.lifecycle.prefix_caching is None
    assert result.lifecycle.prefix_cache_hit_rate is None
    for key in ("lifecycle.prefix_caching", "lifecycle.prefix_cache_hit_rate"):
        assert "no prefix cache" in result.null_reasons[key]
