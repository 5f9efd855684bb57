"""llem's HTTP client against a fake OpenAI-compatible server whose truths the tests plant."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
from typing import Any

import aiohttp
import pytest

from llem.backends.server.client import (
    ClientConfig,
    HttpClient,
    HttpTimeline,
    ModelNotServed,
    ServerRequestError,
    UsageMissing,
    serve_async,
)
from llem.errors import RunError
from llem.vocabulary.workload import Prompt, ScheduledRequest
from server.fake_openai import MODEL, Plan, fake_server


def _requests(n: int = 1, scheduled: float | None = 0.0) -> list[ScheduledRequest]:
    return [ScheduledRequest(i, i, Prompt(token_ids=(5, 6, 7)), scheduled) for i in range(n)]


def _serve(plan: Plan, n: int = 1, **config: Any) -> list[HttpTimeline]:
    async def go() -> list[HttpTimeline]:
        async with fake_server(plan) as url:
            cfg = ClientConfig(base_url=url, **{"model": MODEL, "max_tokens": 8, **config})
            out = await serve_async(_requests(n), None, cfg)
        return out.requests  # type: ignore[return-value]

    return asyncio.run(go())


def test_token_counts_are_the_servers_usage_not_the_chunk_count() -> None:
    plan = Plan(
        chunks=[(0, "ab", None), (0, "c", None), (0, "", None), (0, "d", None)],
        usage={"prompt_tokens": 11, "completion_tokens": 7},
    )
    (t,) = _serve(plan)
    assert len(t.chunk_times_s) == 4  # the empty chunk is a chunk (vLLM bench serve's)
    assert (t.input_tokens, t.output_tokens, t.completion_tokens) == (11, 7, 7)
    assert t.chunk_tokens == [1, 1, 0, 5] and t.chunk_tokens_reason is not None
    assert t.usage_reason is None


def test_a_stream_whose_chunks_carry_no_text_has_its_first_chunk_as_first_token() -> None:
    """A tiny random model's tokens may all decode to no text (vLLM sends its chunks with
    text ""): each is still a chunk, as vLLM's bench serve counts it; the first is the first
    token, the last the finish, and usage the tokens (the last chunk carries the rest)."""
    plan = Plan(
        chunks=[(0.1, "", None), (0.2, "", None)],
        usage={"prompt_tokens": 3, "completion_tokens": 8},
    )
    (t,) = _serve(plan)
    assert t.first_token_s is not None and 0.1 <= t.first_token_s - t.sent_s < 0.1 + 0.1
    assert t.output_tokens == 8 and t.chunk_tokens == [0, 8]
    assert t.finish_s is not None and 0.3 <= t.finish_s - t.sent_s < 0.3 + 0.25


def test_ttft_is_the_first_chunk_with_choices_even_when_its_text_is_empty() -> None:
    """vLLM bench serve takes TTFT at the first chunk whose choices are not empty, "text could
    be empty here, e.g. for special tokens", and an ITL at every later one: a first chunk of
    no text 0.2 s after the send, then "a" 0.3 s later and "b" 0.1 s after it: TTFT 0.2 s (not
    0.5), ITLs [0.3, 0.1]."""
    plan = Plan(
        chunks=[(0.2, "", None), (0.3, "a", None), (0.1, "b", None)],
        usage={"prompt_tokens": 3, "completion_tokens": 3},
    )
    (t,) = _serve(plan)
    assert t.first_token_s is not None
    assert 0.2 <= t.first_token_s - t.sent_s < 0.2 + 0.1
    gaps = [b - a for a, b in zip(t.chunk_times_s, t.chunk_times_s[1:], strict=False)]
    assert len(gaps) == 2
    assert 0.3 - 0.005 <= gaps[0] < 0.3 + 0.1 and 0.1 - 0.005 <= gaps[1] < 0.1 + 0.1
    assert t.chunk_tokens == [0, 1, 2] and t.output_tokens == 3


def test_a_chat_role_chunk_is_the_first_chunk_and_usage_only_events_are_none() -> None:
    """vLLM's chat stream opens with a role chunk (delta content ""): bench serve takes TTFT
    there. The usage event (choices []) after the last chunk is no chunk."""
    plan = Plan(chunks=[(0.2, "a", None), (0.1, "b", None)], role_chunk=True)
    (t,) = _serve(plan, chat=True, detokenize=lambda ids: "x")
    assert t.first_token_s is not None and t.first_token_s - t.sent_s < 0.2
    assert len(t.chunk_times_s) == 3 and t.chunk_tokens == [0, 1, 1]
    assert t.output_tokens == 2


def test_per_chunk_token_ids_stand_beside_a_role_chunk_without_ids() -> None:
    plan = Plan(
        chunks=[(0, "ab", [1, 2]), (0, "c", [3])],
        usage={"prompt_tokens": 3, "completion_tokens": 3},
        role_chunk=True,
    )
    (t,) = _serve(plan, chat=True, detokenize=lambda ids: "x")
    assert t.chunk_tokens == [0, 2, 1] and t.chunk_tokens_reason is None


def test_per_chunk_token_ids_are_each_chunks_count() -> None:
    plan = Plan(
        chunks=[(0, "ab", [1, 2]), (0, "", [3]), (0, "d", [4, 5, 6, 7])],
        usage={"prompt_tokens": 3, "completion_tokens": 7},
    )
    (t,) = _serve(plan)
    assert t.chunk_tokens == [2, 1, 4] and t.chunk_tokens_reason is None


def test_absent_usage_gives_none_with_the_reason_and_no_count() -> None:
    (t,) = _serve(Plan(usage=None))
    assert t.completion_tokens is None and t.prompt_tokens is None
    assert "no usage" in (t.usage_reason or "")
    with pytest.raises(UsageMissing, match="no usage"):
        _ = t.output_tokens


def test_chunk_delays_are_ttft_and_itl() -> None:
    plan = Plan(chunks=[(0.30, "a", None), (0.15, "b", None), (0.15, "c", None)])
    (t,) = _serve(plan)
    assert t.first_token_s is not None
    ttft = t.first_token_s - t.sent_s
    itl = [b - a for a, b in zip(t.chunk_times_s, t.chunk_times_s[1:], strict=False)]
    assert 0.30 <= ttft < 0.30 + 0.25
    assert all(0.15 - 0.005 <= x < 0.15 + 0.25 for x in itl)
    assert t.sent_s >= t.arrival_s


def test_request_body_asks_for_usage_lengths_and_token_ids() -> None:
    plan = Plan()
    _serve(plan, min_tokens=8, ignore_eos=True)
    body = plan.seen[0]["body"]
    assert body["prompt"] == [5, 6, 7] and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (8, 8, True)


def test_text_prompts_and_chat_where_asked() -> None:
    plan = Plan()
    (t,) = _serve(plan, chat=True, detokenize=lambda ids: "ids " + " ".join(map(str, ids)))
    assert plan.seen[0]["path"] == "/v1/chat/completions"
    assert plan.seen[0]["body"]["messages"] == [{"role": "user", "content": "ids 5 6 7"}]
    assert t.output_tokens == 2
    with pytest.raises(ServerRequestError, match="needs a tokenizer"):
        _serve(Plan(), token_id_prompts=False)


def test_api_key_goes_in_the_header_and_nowhere_else(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-planted-secret-123"
    monkeypatch.setenv("LLEM_TEST_KEY", secret)
    plan = Plan(fault="500")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ServerRequestError) as err:
        _serve(plan, api_key_env="LLEM_TEST_KEY")
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {secret}"
    assert secret not in str(err.value) and secret not in caplog.text
    monkeypatch.delenv("LLEM_TEST_KEY")
    with pytest.raises(ServerRequestError, match="LLEM_TEST_KEY.*not set"):
        _serve(Plan(), api_key_env="LLEM_TEST_KEY")


def test_refused_connection_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens there
    cfg = ClientConfig(base_url=f"http://127.0.0.1:{port}", model=MODEL, max_tokens=4)
    with pytest.raises(ServerRequestError, match="cannot connect"):
        asyncio.run(serve_async(_requests(), None, cfg))


def test_non_2xx_names_the_status_and_the_bodys_start() -> None:
    with pytest.raises(ServerRequestError, match="HTTP 500: internal trouble") as err:
        _serve(Plan(fault="500"))
    assert len(str(err.value)) < 400  # the body's first 200 characters, not all of it


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ("bad_json", "malformed stream event"),
        ("cut", r"without \[DONE\]"),
        ("error_event", "error in stream"),
        ("drop", "the connection failed"),
    ],
)
def test_a_malformed_stream_is_an_error(fault: str, match: str) -> None:
    with pytest.raises(ServerRequestError, match=match):
        _serve(Plan(fault=fault))


def test_unknown_model_lists_the_served_models() -> None:
    with pytest.raises(ModelNotServed, match=f"'nope' is not served .*served: {MODEL}"):
        _serve(Plan(), model="nope")


def test_a_server_that_never_answers_times_out() -> None:
    with pytest.raises(ServerRequestError, match="request_timeout_s=0.5"):
        _serve(Plan(fault="hang"), request_timeout_s=0.5)


def test_errors_are_run_errors_and_closed_loop_serves_every_request() -> None:
    assert issubclass(ServerRequestError, RunError)

    async def go() -> Any:
        async with fake_server(Plan()) as url:
            cfg = ClientConfig(base_url=url, model=MODEL, max_tokens=2)
            return await serve_async(_requests(5, scheduled=None), 2, cfg)

    out = asyncio.run(go())
    assert out.ttft_origin == "actual send"
    assert [t.request_id for t in out.requests] == [0, 1, 2, 3, 4]
    assert all(t.output_tokens == 2 for t in out.requests)


def test_sent_s_is_stamped_at_the_send_not_at_arrival() -> None:
    """``arrival_s`` (the TTFT origin the driver passes) planted 10 s in the past: ``sent_s`` is
    the moment of sending, and TTFT from it is the fake's planted first-chunk delay."""

    async def go() -> HttpTimeline:
        async with fake_server(Plan(chunks=[(0.2, "a", None)])) as url:
            cfg = ClientConfig(base_url=url, model=MODEL, max_tokens=1)
            async with aiohttp.ClientSession() as session:
                before = time.perf_counter()
                t = await HttpClient(cfg, session).submit(_requests()[0], before - 10.0)
                assert before <= t.sent_s < before + 0.1
                return t

    t = asyncio.run(go())
    assert t.arrival_s == pytest.approx(t.sent_s - 10.0, abs=0.1)
    assert t.first_token_s is not None and 0.2 <= t.first_token_s - t.sent_s < 0.45


class _RecordingSession:
    """A session double whose ``post`` records whether a callback planted before ``submit`` has
    run yet, then fails the request (enough to see when the request left)."""

    def __init__(self, planted: list[int]) -> None:
        self.planted = planted
        self.posted_before_the_next_step: bool | None = None

    def post(self, *args: Any, **kwargs: Any) -> Any:
        self.posted_before_the_next_step = not self.planted
        raise aiohttp.ClientError("the double sends nothing")


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.10 has no asyncio.timeout: wait_for sends a step later"
)
def test_a_request_is_sent_in_the_loop_step_that_submits_it() -> None:
    """The POST starts in the step of the loop that calls ``submit`` (where the pacing driver woke
    up), not in a later one behind the other requests' stream events: a callback planted just
    before ``submit`` has not run when the request is posted. (With ``asyncio.wait_for``, which
    first schedules a task of its own, it had.)"""

    async def go() -> _RecordingSession:
        planted: list[int] = []
        session = _RecordingSession(planted)
        cfg = ClientConfig(base_url="http://127.0.0.1:9", model=MODEL, max_tokens=1)
        asyncio.get_running_loop().call_soon(planted.append, 1)
        with pytest.raises(ServerRequestError):
            await HttpClient(cfg, session).submit(_requests()[0], time.perf_counter())
        return session

    assert asyncio.run(go()).posted_before_the_next_step is True
