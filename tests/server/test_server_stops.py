"""A prompt's stop strings reach the server in the request body (``stop``), and the request's
counted tokens are the server's, which end at the stop: the fake server honours ``stop`` as vLLM
does, on planted chunks whose token ids are known."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from llem.backends.server.client import ClientConfig, HttpTimeline, request_body, serve_async
from llem.vocabulary.workload import Prompt, ScheduledRequest
from server.fake_openai import MODEL, Plan, fake_server

# five tokens; the third completes "Q:" (its text is "Q:x"), so a request stops after three
CHUNKS: list[tuple[float, str, list[int] | None]] = [
    (0.0, "a", [1]),
    (0.0, "b", [2]),
    (0.0, "Q:x", [3]),
    (0.0, "c", [4]),
    (0.0, "d", [5]),
]
USAGE = {"prompt_tokens": 3, "completion_tokens": 5}


def _serve(prompt: Prompt, stream: bool = True) -> tuple[HttpTimeline, dict[str, Any]]:
    plan = Plan(chunks=list(CHUNKS), usage=dict(USAGE))

    async def go() -> list[Any]:
        async with fake_server(plan) as url:
            cfg = ClientConfig(
                base_url=url, model=MODEL, max_tokens=5, stream=stream, token_id_prompts=True
            )
            out = await serve_async([ScheduledRequest(0, 0, prompt, 0.0)], None, cfg, True)
        return out.requests

    (timeline,) = asyncio.run(go())
    assert isinstance(timeline, HttpTimeline)
    return timeline, plan.seen[0]["body"]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_the_request_stops_at_its_stop_string_and_counts_what_was_generated(stream: bool) -> None:
    t, body = _serve(Prompt(token_ids=(7, 8, 9), stop=("Q:", "</s>")), stream)
    assert body["stop"] == ["Q:", "</s>"]
    assert t.output_tokens == 3 and t.finish_reason == "stop"
    assert t.text == "ab"  # the server leaves the stop string out of the text
    if stream:
        assert t.chunk_tokens == [1, 1, 1]


def test_without_stop_strings_the_body_has_no_stop_and_the_request_runs_to_its_limit() -> None:
    t, body = _serve(Prompt(token_ids=(7, 8, 9)))
    assert "stop" not in body
    assert t.output_tokens == 5 and t.finish_reason == "length"


def test_the_body_carries_the_prompts_stop_strings_on_every_api() -> None:
    prompt = Prompt(text="Question: 1+1?", stop=("\n",))
    for chat in (False, True):
        config = ClientConfig(base_url="http://x", model=MODEL, max_tokens=4, chat=chat)
        assert request_body(config, prompt)["stop"] == ["\n"]
