"""An OpenAI-compatible server double (aiohttp.web, in-process on 127.0.0.1, a free port) whose
answers the tests plant: the chunks and their delays, the usage, and each fault. Asked with
``"stream": false`` it answers whole, after the chunks' delays. A request's ``stop`` strings are
honoured as vLLM honours them: the answer ends with the chunk whose text completes one (the stop
string left out of the text), its finish_reason is "stop", and the usage's completion_tokens
counts the tokens sent (each chunk's token ids, or one token a chunk without them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "fake-model"


@dataclass
class LiveMetrics:
    """A vLLM-style ``/metrics`` whose values the test plants: the gauges held at ``running`` and
    ``waiting``, the token counters grown by ``*_per_request`` as each request's stream ends, the
    finished-requests counter by one, and by ``other_requests_per_request`` more (another
    client's requests, finishing beside llem's; None: no such counter)."""

    running: float = 3.0
    waiting: float = 1.0
    prompt_per_request: int = 11
    generation_per_request: int = 13
    prompt_total: float = 1000.0  # the counters' values before the test's requests
    generation_total: float = 5000.0
    requests_total: float | None = 300.0
    other_requests_per_request: int = 0
    # vLLM's speculative counters, grown by these per request (None: not exported)
    spec_per_request: tuple[int, int, int] | None = None  # drafts, draft tokens, accepted
    spec_totals: list[float] = field(default_factory=lambda: [70.0, 210.0, 90.0])

    def finish_request(self) -> None:
        if self.spec_per_request is not None:
            self.spec_totals = [
                t + d for t, d in zip(self.spec_totals, self.spec_per_request, strict=True)
            ]
        self.prompt_total += self.prompt_per_request
        self.generation_total += self.generation_per_request
        if self.requests_total is not None:
            self.requests_total += 1 + self.other_requests_per_request

    def spec_text(self) -> str:
        """The speculative counters as vLLM's prometheus_client writes them: each with its
        ``_created`` timestamp, and the accepted tokens per position (llem reads none of these)."""
        if self.spec_per_request is None:
            return ""
        labels = '{engine="0",model_name="fake-model"}'
        names = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
        lines = [
            f"vllm:spec_decode_{n}_total{labels} {t}\nvllm:spec_decode_{n}_created{labels} 1.7e9"
            for n, t in zip(names, self.spec_totals, strict=True)
        ]
        per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        lines += [f'{per_pos}{{engine="0",position="{i}"}} 1000.0' for i in range(3)]
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        labels = '{engine="0",model_name="fake-model"}'
        finished = '{finished_reason="length"}'
        return self.spec_text() + (
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{labels} {self.running}\n"
            f"vllm:num_requests_waiting{labels} {self.waiting}\n"
            f"vllm:prompt_tokens_total{labels} {self.prompt_total}\n"
            f"vllm:generation_tokens_total{labels} {self.generation_total}\n"
            + (
                ""
                if self.requests_total is None
                else f"vllm:request_success_total{finished} {self.requests_total}\n"
            )
        )


Chunk = tuple[float, str, "list[int] | None"]  # delay before it (s), its text, its token ids


@dataclass
class Plan:
    """What the fake answers: ``chunks`` are (delay before it in seconds, text, token ids or
    None); ``usage`` None leaves it out; ``fault`` one of None, "500", "bad_json", "cut",
    "hang", "error_event", "drop"."""

    chunks: list[tuple[float, str, list[int] | None]] = field(
        default_factory=lambda: [(0.0, "a", None), (0.0, "b", None)]
    )
    usage: dict[str, int] | None = field(
        default_factory=lambda: {"prompt_tokens": 4, "completion_tokens": 2}
    )
    fault: str | None = None
    metrics: str | None = None  # /metrics text; None: 404 (unless ``live``)
    live: LiveMetrics | None = None  # /metrics from planted gauges and per-request counters
    metrics_gets: int = 0  # GET /metrics received
    metrics_delay_s: float = 0.0  # before each /metrics answer
    seen: list[dict[str, Any]] = field(default_factory=list)  # bodies and headers received
    text_prompts_only: bool = False  # a prompt that is not a string: 422 (llama-cpp-python's)
    role_chunk: bool = False  # chat: a role chunk with empty content first, as vLLM sends it


PLAN = web.AppKey("plan", Plan)


def _answered(plan: Plan, body: dict[str, Any]) -> tuple[list[Chunk], dict[str, Any] | None, str]:
    """The chunks sent for ``body``, the usage and the finish_reason: every planted chunk and
    "length", or up to the one that completes a stop string of ``body["stop"]`` and "stop"."""
    stops = [s for s in body.get("stop") or [] if s]
    text = ""
    for k, (delay, piece, ids) in enumerate(plan.chunks):
        starts = [(text + piece).find(s) for s in stops if s in text + piece]
        if not starts:
            text += piece
            continue
        sent = [*plan.chunks[:k], (delay, (text + piece)[: min(starts)][len(text) :], ids)]
        tokens = sum(len(c[2]) if c[2] is not None else 1 for c in sent)
        usage = None if plan.usage is None else {**plan.usage, "completion_tokens": tokens}
        return sent, usage, "stop"
    return list(plan.chunks), plan.usage, "length"


def _event(data: dict[str, Any] | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


async def _completions(request: web.Request) -> web.StreamResponse:
    plan: Plan = request.app[PLAN]
    body = await request.json()
    plan.seen.append({"body": body, "headers": dict(request.headers), "path": request.path})
    if body.get("model") != MODEL:
        message = f"The model `{body.get('model')}` does not exist."
        return web.json_response({"error": {"message": message, "code": 404}}, status=404)
    if plan.fault == "500":
        return web.Response(status=500, text="internal trouble: " + "x" * 400)
    if plan.fault == "hang":
        await asyncio.sleep(3600)
    if plan.text_prompts_only and not isinstance(body.get("prompt", ""), str):
        return web.json_response({"detail": "prompt: Input should be a valid string"}, status=422)
    chunks, usage, reason = _answered(plan, body)
    if body.get("stream") is False:
        return await _whole(request, plan, chunks, usage, reason)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    chat = request.path.endswith("/chat/completions")
    if chat and plan.role_chunk:
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        await response.write(_event({"choices": [role]}))
    for k, (delay, text, ids) in enumerate(chunks, 1):
        await asyncio.sleep(delay)
        last = k == len(chunks)  # as vLLM: the choice's last chunk says why it ended
        choice: dict[str, Any] = {"index": 0, "finish_reason": reason if last else None}
        choice.update({"delta": {"content": text}} if chat else {"text": text})
        if ids is not None:
            choice["token_ids"] = ids
        await response.write(_event({"choices": [choice]}))
    await _end(request, response, plan, usage)
    return response


async def _whole(
    request: web.Request,
    plan: Plan,
    chunks: list[Chunk],
    usage: dict[str, Any] | None,
    reason: str,
) -> web.Response:
    """A whole answer (``"stream": false``): after every chunk's delay, their text at once,
    with the usage (where planted)."""
    await asyncio.sleep(sum(delay for delay, _, _ in chunks))
    text = "".join(text for _, text, _ in chunks)
    chat = request.path.endswith("/chat/completions")
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
    answer: dict[str, Any] = {"object": "text_completion", "choices": [choice]}
    if usage is not None:
        answer["usage"] = usage
    if plan.live is not None:
        plan.live.finish_request()
    return web.json_response(answer)


async def _end(
    request: web.Request,
    response: web.StreamResponse,
    plan: Plan,
    usage: dict[str, Any] | None,
) -> None:
    """The stream's end: the usage and [DONE], or the planted fault instead."""
    if plan.fault == "bad_json":
        await response.write(b'data: {"choices": [oops\n\n')
    if plan.fault == "error_event":
        await response.write(_event({"error": {"message": "engine died"}}))
    if plan.fault == "cut":
        return  # no usage, no [DONE]
    if plan.fault == "drop":  # the server dies mid-stream: the connection is gone
        assert request.transport is not None
        request.transport.abort()
        return
    if plan.live is not None:
        plan.live.finish_request()
    if usage is not None:
        await response.write(_event({"choices": [], "usage": usage}))
    await response.write(_event("[DONE]"))


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})


async def _metrics(request: web.Request) -> web.Response:
    plan: Plan = request.app[PLAN]
    plan.metrics_gets += 1
    await asyncio.sleep(plan.metrics_delay_s)
    if plan.live is not None:
        return web.Response(text=plan.live.text())
    if plan.metrics is None:
        return web.Response(status=404, text="Not Found")
    return web.Response(text=plan.metrics)


@asynccontextmanager
async def fake_server(plan: Plan, port: int = 0) -> AsyncIterator[str]:
    """Serve ``plan`` on 127.0.0.1 (``port``; 0: a free one) and yield the base URL."""
    app = web.Application()
    app[PLAN] = plan
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/metrics", _metrics)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
