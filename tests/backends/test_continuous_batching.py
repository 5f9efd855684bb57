"""pytorch.batching=continuous: requests served through transformers' continuous batching on the
tiny model, paced by the shared driver (offline, open loop, closed loop), streamed back exactly."""

from __future__ import annotations

import dataclasses

import pytest

from llem.backends import sections
from llem.backends.pytorch import PyTorchBackend, cb_manager, cb_steps
from llem.config.pytorch import Batching, PyTorchConfig
from llem.config.schema import ExperimentConfig
from llem.config.validate import continuous_batching_problems
from llem.errors import ConfigError
from llem.vocabulary.workload import Prompt, ScheduledRequest

MAX_NEW = 6
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "hi",
    "Energy per token is measured in joules",
    "Explain why the sky is blue.",
    "A batch of prompts",
]
PROMPTS = [Prompt(text=t) for t in TEXTS]


def _ContinuousPyTorch(**fields: object) -> PyTorchConfig:
    return PyTorchConfig(batching=Batching.continuous, **fields)  # type: ignore[arg-type]


def _exp(path: str, **pytorch: object) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = path
    exp.backend = "pytorch"
    exp.decoder.max_new_tokens = MAX_NEW
    exp.measurement.save_outputs = True
    for key, value in pytorch.items():
        setattr(exp.pytorch, key, value)
    return exp


def _backend(exp: ExperimentConfig, serving: bool = True) -> PyTorchBackend:
    """The backend as a serving run builds it (``BackendSections.serving``)."""
    return PyTorchBackend(dataclasses.replace(sections(exp, "pytorch"), serving=serving))


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    """One model loaded to serve, batch_size 2, its manager started by warm_up (no warm-up
    batches), shared by the module's tests."""
    backend = _backend(_exp(str(tiny_model_dir), batch_size=2))
    loaded = backend.load("cpu")
    backend.warm_up(loaded, backend.batches(PROMPTS), 0)
    yield backend, loaded
    backend.unload(loaded)


@pytest.fixture(scope="module")
def static_outputs(tiny_model_dir):
    """The static path's greedy output (text, tokens) for each prompt alone."""
    backend = _backend(_exp(str(tiny_model_dir)), serving=False)
    loaded = backend.load("cpu")
    outs = [backend.generate(loaded, [p]) for p in PROMPTS]
    backend.unload(loaded)
    return [(o.texts[0], o.output_tokens[0]) for o in outs]


def _requests(scheduled: list[float | None]) -> list[ScheduledRequest]:
    return [
        ScheduledRequest(i, i % len(PROMPTS), PROMPTS[i % len(PROMPTS)], s)
        for i, s in enumerate(scheduled)
    ]


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an interval ending exactly when another starts does
    not overlap it)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _assert_streams(out, n: int) -> None:
    assert [t.request_id for t in out.requests] == list(range(n))
    for t in out.requests:
        assert t.chunk_times_s == sorted(t.chunk_times_s) and all(c > 0 for c in t.chunk_tokens)
        assert t.sent_s <= t.chunk_times_s[0]
        assert t.input_tokens > 0 and 1 <= t.output_tokens <= MAX_NEW
    assert out.end_s == max(t.finish_s for t in out.requests)
    # the manager's steps: every request's output tokens, inside the workload, one at a time
    assert out.steps is not None and out.step_clock == cb_steps.CLOCK
    made = {t.request_id: 0 for t in out.requests}
    for s in out.steps:
        for x in s.shares or ():
            made[x.request_id] += x.decode_tokens
    assert made == {t.request_id: t.output_tokens for t in out.requests}
    assert all(s.start_s is not None and s.start_s <= s.end_s for s in out.steps)
    assert all(out.start_s <= s.end_s <= out.end_s + 1 for s in out.steps)


def test_offline_requests_stream_the_static_paths_greedy_output(served, static_outputs):
    backend, loaded = served
    engine = loaded.engine
    out = backend.serve(loaded, _requests([0.0] * 5), None)
    _assert_streams(out, 5)
    assert out.ttft_origin == "scheduled send"
    assert loaded.engine is engine  # started by warm_up, not inside the window
    assert [(t.text, t.output_tokens) for t in out.requests] == static_outputs
    tok = loaded.tokenizer
    assert [t.input_tokens for t in out.requests] == [len(tok(x)["input_ids"]) for x in TEXTS]
    # pytorch.batch_size=2 bounds the running batch: at most 2 requests between their first
    # token and their last.
    assert _most_at_once([(t.first_token_s, t.finish_s) for t in out.requests]) == 2


def test_open_loop_sends_each_request_at_its_time(served):
    backend, loaded = served
    schedule = [0.0, 0.05, 0.1, 0.3]
    out = backend.serve(loaded, _requests(schedule), None)
    _assert_streams(out, 4)
    assert out.ttft_origin == "scheduled send"
    for t, s in zip(out.requests, schedule, strict=True):
        assert t.arrival_s == t.scheduled_s == pytest.approx(out.start_s + s)
        assert t.sent_s >= out.start_s + s
    assert out.requests[3].sent_s - out.requests[0].sent_s >= 0.3


def test_closed_loop_keeps_at_most_two_requests_in_flight(served):
    backend, loaded = served
    out = backend.serve(loaded, _requests([None] * 5), 2)
    _assert_streams(out, 5)
    assert out.ttft_origin == "actual send"
    assert all(t.scheduled_s is None and t.arrival_s <= t.sent_s for t in out.requests)
    assert _most_at_once([(t.sent_s, t.finish_s) for t in out.requests]) == 2


def test_an_eos_ends_the_stream_with_the_eos_counted(tiny_model_dir):
    """A request stops at its first EOS, which counts as an output token (as on the static path)."""
    import torch

    backend = _backend(_exp(str(tiny_model_dir)))
    loaded = backend.load("cpu")
    model, tok = loaded.model, loaded.tokenizer
    ids = tok([TEXTS[1]])["input_ids"]
    with torch.inference_mode():
        out = model.generate(input_ids=torch.tensor(ids), max_new_tokens=MAX_NEW, do_sample=False)
    ref = out[0, len(ids[0]) :].tolist()
    model.generation_config.eos_token_id = ref[2]
    try:
        backend.warm_up(loaded, backend.batches(PROMPTS[1:2]), 0)
        out = backend.serve(loaded, [ScheduledRequest(0, 1, PROMPTS[1], 0.0)], None)
    finally:
        backend.unload(loaded)
    assert out.requests[0].output_tokens == ref.index(ref[2]) + 1 <= 3


def test_the_load_key_differs_and_unload_stops_the_manager(tiny_model_dir):
    exp = _exp(str(tiny_model_dir))
    assert _backend(exp).load_key("cpu") != _backend(exp, serving=False).load_key("cpu")
    backend = _backend(exp)
    loaded = backend.load("cpu")
    backend.warm_up(loaded, backend.batches(PROMPTS), 1)  # one warm-up batch served
    engine = loaded.engine
    assert engine.manager.is_running() and engine.startup_s > 0
    assert engine.max_requests_per_batch == 1  # pytorch.batch_size
    backend.warm_up(loaded, backend.batches(PROMPTS), 0)
    assert loaded.engine is engine  # same settings: the running manager is kept
    other = _backend(_exp(str(tiny_model_dir), batch_size=3))
    other.warm_up(loaded, other.batches(PROMPTS), 0)
    assert loaded.engine is not engine and not engine.manager.is_running()
    running = loaded.engine.manager
    backend.unload(loaded)
    assert not running.is_running() and loaded.engine is None


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("pytorch", "num_beams", 2),
        ("pytorch", "no_repeat_ngram_size", 2),
        ("pytorch", "use_cache", False),
        ("pytorch", "torch_compile", True),
        ("decoder", "min_new_tokens", 2),
        ("decoder", "repetition_penalty", 1.2),
    ],
)
def test_what_continuous_batching_cannot_honour_is_a_config_error(section, key, value):
    exp = ExperimentConfig()
    exp.pytorch = _ContinuousPyTorch()
    setattr(getattr(exp, section), key, value)
    (problem,) = continuous_batching_problems(exp.pytorch, exp.decoder)
    assert problem.startswith(f"{section}.{key}=") and "pytorch.batching=static" in problem
    exp.pytorch.batching = Batching.static
    assert continuous_batching_problems(exp.pytorch, exp.decoder) == []


def test_the_rule_stops_a_serving_load_before_any_weights_load(tiny_model_dir, monkeypatch):
    exp = _exp(str(tiny_model_dir))
    exp.pytorch = _ContinuousPyTorch(num_beams=2)
    monkeypatch.setattr(
        PyTorchBackend, "_from_pretrained", lambda *a: pytest.fail("loaded despite the rule")
    )
    with pytest.raises(ConfigError, match=r"pytorch\.num_beams=2"):
        _backend(exp).load("cpu")


def test_greedy_and_sampling_settings_reach_the_managers_generation_config(tiny_model_dir):
    exp = _exp(str(tiny_model_dir))
    backend = _backend(exp)
    loaded = backend.load("cpu")
    exp.decoder.temperature = 0.5  # greedy: dropped, as generate() drops it
    gen = cb_manager.generation_config(backend.sections, loaded.model)
    assert gen.do_sample is False and gen.max_new_tokens == MAX_NEW and gen.temperature != 0.5
    exp.decoder.do_sample, exp.decoder.top_p = True, 0.9
    gen = cb_manager.generation_config(backend.sections, loaded.model)
    assert gen.do_sample is True and (gen.temperature, gen.top_p) == (0.5, 0.9)


_NEVER_UNLOADS = """
import dataclasses, sys
from llem.backends import sections
from llem.backends.pytorch import PyTorchBackend
from llem.vocabulary.workload import Prompt
from llem.config.schema import ExperimentConfig
exp = ExperimentConfig()
exp.model.name_or_path = sys.argv[1]
backend = PyTorchBackend(dataclasses.replace(sections(exp, "pytorch"), serving=True))
loaded = backend.load("cpu")
backend.warm_up(loaded, [[Prompt(text="hi")]], 1)
assert loaded.engine.manager.is_running()
print("served")
"""


@pytest.mark.slow
def test_a_process_that_never_unloads_still_exits(tiny_model_dir):
    """The manager's generation thread must not keep Python alive after a failed or careless run
    that never reached ``unload``."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _NEVER_UNLOADS, str(tiny_model_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "served" in done.stdout, done.stderr[-2000:]


def test_a_manager_of_one_request_at_a_time_is_warned_about():
    # pytorch.batch_size defaults to 1: on an H100 a poisson run at 40 req/s queued behind it
    def size(batch: int) -> dict[str, int]:
        return cb_manager.sizing(sections(_exp("unused", batch_size=batch), "pytorch"), [12, 30])

    one = cb_manager.one_at_a_time(size(1))
    assert one is not None and one.startswith("pytorch.batch_size=1: continuous batching holds")
    assert cb_manager.one_at_a_time(size(16)) is None
