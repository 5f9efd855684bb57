"""The HTTP client for any OpenAI-compatible server: ``drive``'s ``submit`` for ``+backend=server``.

Each request is one streaming POST to ``/v1/completions`` (a token-id prompt is sent as token ids
where the server accepts them, else as text) or ``/v1/chat/completions``, with ``max_tokens``,
``min_tokens`` and ``ignore_eos`` where asked, and ``stream_options.include_usage`` so the server
reports its own token counts at the end of the stream. With ``stream=False`` (a server whose
stream carries no usage) each answer is asked for whole: its usage is exact, and it reaches the
host at once, as one chunk that has no first-token time (``HttpTimeline.whole``).

Clock. ``sent_s`` is taken right before the POST goes out; each chunk is stamped with
``time.perf_counter`` when its ``data:`` line has been read. An event is a chunk when its
``choices`` are not empty, empty text included (a chat role chunk, a special token), as vLLM's
``bench serve`` takes it; a usage-only event is not (``llem.backends.server.answer``).

Counts. Token counts come from the server's ``usage`` (``prompt_tokens``, ``completion_tokens``),
never from counting chunks: a chunk may carry several tokens (vLLM holds back an incomplete UTF-8
character), or none. Where the server gives each chunk's ``token_ids`` (vLLM with
``return_token_ids``: pass it in ``extra_body``) those are each chunk's count; otherwise each chunk
with text is counted 1, one without text 0, and the last one carries the rest of
``completion_tokens``, and ``chunk_tokens_reason`` says so. Where the stream has no usage,
``prompt_tokens`` and ``completion_tokens`` are None, ``usage_reason`` says why and
``output_tokens`` refuses to answer.

Faults are ``ServerRequestError`` lines, never hangs (``request_timeout_s`` bounds each request).
The API key is read from the environment variable the caller names; it goes in the
``Authorization`` header only, and is blanked out of every error message.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.server import loop
from llem.backends.server.answer import Answer, chunk_counts, count
from llem.backends.server.served import model_ids
from llem.backends.traffic.driver import drive
from llem.errors import RunError
from llem.vocabulary.workload import Prompt, RequestTimeline, ScheduledRequest, ServeOutput

BODY_CHARS = 200  # of a failed answer's body, in its error line
WHOLE_ANSWERS = (
    "server.stream=false: each answer reached the host whole, so no request has per-token times"
)


class ServerRequestError(RunError):
    """A request to the server failed (refused, non-2xx, malformed stream, timeout)."""


class ModelNotServed(ServerRequestError):
    """The server does not serve the model asked for (the message lists those it serves)."""


class UsageMissing(RunError):
    """A token count was asked of a request whose stream carried no ``usage``."""


@dataclass(frozen=True)
class ClientConfig:
    """How requests are sent: where, which API, the sampling limits and the key's variable."""

    base_url: str
    model: str
    max_tokens: int
    chat: bool = False  # /v1/chat/completions instead of /v1/completions
    min_tokens: int | None = None
    ignore_eos: bool = False
    token_id_prompts: bool = True  # the server accepts token ids as a completions prompt
    stream: bool = True  # False: each answer whole (usage, no per-token times)
    api_key_env: str | None = None  # the environment variable holding the API key
    request_timeout_s: float = 600.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    # token ids -> text, for token-id prompts where the server takes text only (or for chat)
    detokenize: Callable[[Sequence[int]], str] | None = None

    @property
    def endpoint(self) -> str:
        path = "/v1/chat/completions" if self.chat else "/v1/completions"
        return self.base_url.rstrip("/") + path


@dataclass
class HttpTimeline(RequestTimeline):
    """A request's timeline with the server's own counts and why any is missing."""

    prompt_tokens: int | None = None  # usage.prompt_tokens
    completion_tokens: int | None = None  # usage.completion_tokens
    usage_reason: str | None = None  # why the two above are None
    chunk_tokens_reason: str | None = None  # why chunk_tokens are not the server's per chunk
    # when the choice ended (its finish_reason arrived)
    ended_s: float | None = None
    whole: bool = False  # the answer came whole (not streamed): no first-token time

    @property
    def first_token_s(self) -> float | None:
        return None if self.whole else super().first_token_s

    @property
    def finish_s(self) -> float | None:
        return self.chunk_times_s[-1] if self.chunk_times_s else self.ended_s

    @property
    def output_tokens(self) -> int:
        if self.completion_tokens is None:
            raise UsageMissing(f"request {self.request_id}: {self.usage_reason}")
        return self.completion_tokens


def api_key(variable: str | None) -> str | None:
    """The key from ``variable`` (None: no key); an unset variable is an error naming it."""
    if variable is None:
        return None
    key = os.environ.get(variable)
    if not key:
        raise ServerRequestError(
            f"server.api_key_env={variable}: the environment variable is not set"
        )
    return key


def request_body(config: ClientConfig, prompt: Prompt) -> dict[str, Any]:
    """The JSON body of one request for ``prompt`` (streamed unless ``config.stream`` is off)."""
    body: dict[str, Any] = {"model": config.model, "max_tokens": config.max_tokens}
    if config.stream:
        body.update(stream=True, stream_options={"include_usage": True})
    else:
        body["stream"] = False
    if config.min_tokens is not None:
        body["min_tokens"] = config.min_tokens
    if config.ignore_eos:
        body["ignore_eos"] = True
    if prompt.stop:  # the server stops there itself (vLLM, SGLang, llama.cpp, TGI honour it)
        body["stop"] = list(prompt.stop)
    if config.chat:
        body["messages"] = [{"role": "user", "content": _text(config, prompt)}]
    elif prompt.token_ids is not None and config.token_id_prompts:
        body["prompt"] = list(prompt.token_ids)
    else:
        body["prompt"] = _text(config, prompt)
    body.update(config.extra_body)
    return body


def _text(config: ClientConfig, prompt: Prompt) -> str:
    if prompt.text is not None:
        return prompt.text
    assert prompt.token_ids is not None
    if config.detokenize is None:
        api = "chat" if config.chat else "the server takes text prompts only"
        raise ServerRequestError(
            f"a token-id prompt needs a tokenizer to become text ({api}); none was given"
        )
    return config.detokenize(prompt.token_ids)


class HttpClient:
    """Sends requests to one server over one ``aiohttp`` session (``submit`` is ``drive``'s)."""

    def __init__(self, config: ClientConfig, session: Any, save_outputs: bool = False) -> None:
        self.config = config
        self.session = session
        self.save_outputs = save_outputs
        self._key = api_key(config.api_key_env)
        self.headers = {"Content-Type": "application/json"}
        if self._key is not None:
            self.headers["Authorization"] = f"Bearer {self._key}"

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "<api key>") if self._key else text

    def _fail(self, message: str, cls: type[ServerRequestError] = ServerRequestError) -> None:
        raise cls(self._scrub(message))

    async def submit(self, request: ScheduledRequest, arrival_s: float) -> HttpTimeline:
        """Send ``request``, stream its answer, and return its timeline."""
        import aiohttp

        body = request_body(self.config, request.prompt)
        url = self.config.endpoint
        stream = Answer()
        sent: list[float] = []
        try:
            await _within(self._exchange(body, stream, sent), self.config.request_timeout_s)
        except asyncio.TimeoutError:
            self._fail(
                f"request {request.request_id} to {url}: no complete answer within "
                f"request_timeout_s={self.config.request_timeout_s:g}"
            )
        except aiohttp.ClientConnectorError as e:
            self._fail(f"request {request.request_id}: cannot connect to {url} ({e})")
        except aiohttp.ClientError as e:
            self._fail(f"request {request.request_id} to {url}: the connection failed ({e})")
        return self._timeline(request, arrival_s, sent[0], stream)

    async def _exchange(self, body: dict[str, Any], stream: Answer, sent: list[float]) -> None:
        """POST ``body`` (its send time appended to ``sent``); read the stream into ``stream``."""
        sent.append(time.perf_counter())
        async with self.session.post(self.config.endpoint, json=body, headers=self.headers) as r:
            if r.status // 100 != 2:
                await self._bad_status(r)
            if self.config.stream:
                await self._read(r, stream)
            else:
                await self._read_whole(r, stream)

    async def _read_whole(self, response: Any, stream: Answer) -> None:
        """Read a whole answer; one that is not a JSON object, or names an error, fails."""
        body = await response.text(errors="replace")
        at_s = time.perf_counter()
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            self._fail(f"{self.config.endpoint}: the answer is not a JSON object: {body[:80]!r}")
        if "error" in answer:
            self._fail(f"{self.config.endpoint}: error in the answer: {body[:BODY_CHARS]}")
        stream.take_whole(answer, at_s, self.config.chat)

    async def _bad_status(self, response: Any) -> None:
        text = (await response.text(errors="replace"))[:BODY_CHARS]
        if response.status == 404 or self.config.model in text:
            served = await _listed_models(self.session, self.config.base_url, self.headers)
            if self.config.model not in served:
                self._fail(
                    f"model {self.config.model!r} is not served by {self.config.base_url} "
                    f"(served: {', '.join(served) or 'none listed'})",
                    ModelNotServed,
                )
        self._fail(f"{self.config.endpoint} answered HTTP {response.status}: {text}")

    async def _read(self, response: Any, stream: Answer) -> None:
        """Read the server-sent events until ``[DONE]``; a bad event or a cut stream fails."""
        async for raw in response.content:
            at_s = time.perf_counter()
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data:"):
                continue  # blank separators, comments, "event:" lines
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                stream.done = True
                return
            try:
                event = json.loads(data)
            except ValueError:
                self._fail(f"{self.config.endpoint}: malformed stream event {data[:BODY_CHARS]!r}")
            if not isinstance(event, dict):
                self._fail(f"{self.config.endpoint}: stream event is not an object: {data[:80]}")
            if "error" in event:
                self._fail(f"{self.config.endpoint}: error in stream: {data[:BODY_CHARS]}")
            stream.take(event, at_s, self.config.chat)
        self._fail(f"{self.config.endpoint}: the stream ended without [DONE] (cut short)")

    def _timeline(
        self, request: ScheduledRequest, arrival_s: float, sent_s: float, stream: Answer
    ) -> HttpTimeline:
        usage = stream.usage or {}
        prompt_tokens = count(usage.get("prompt_tokens"))
        completion_tokens = count(usage.get("completion_tokens"))
        usage_reason = None
        if prompt_tokens is None or completion_tokens is None:
            usage_reason = (
                f"the server's {'stream' if self.config.stream else 'answer'} carried no usage"
                + (" (stream_options.include_usage ignored)" if self.config.stream else "")
                if stream.usage is None
                else f"the server's usage lacks a token count: {json.dumps(stream.usage)[:120]}"
            )
        if not self.config.stream and completion_tokens is not None:
            chunk_tokens, chunk_reason = [completion_tokens], None  # the one chunk is it all
        else:
            chunk_tokens, chunk_reason = chunk_counts(
                stream.token_ids, completion_tokens, stream.texts
            )
        ids = request.prompt.token_ids
        return HttpTimeline(
            request_id=request.request_id,
            prompt_index=request.prompt_index,
            arrival_s=arrival_s,
            scheduled_s=arrival_s if request.scheduled_s is not None else None,
            sent_s=sent_s,
            chunk_times_s=stream.times_s,
            chunk_tokens=chunk_tokens,
            # without usage: a token-id prompt's length (what was sent), else 0 (read
            # prompt_tokens and usage_reason: 0 is then no count)
            input_tokens=prompt_tokens
            if prompt_tokens is not None
            else (len(ids) if ids is not None and not self.config.chat else 0),
            text="".join(stream.texts) if self.save_outputs else None,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            usage_reason=usage_reason,
            chunk_tokens_reason=chunk_reason,
            finish_reason=stream.finish_reason,
            ended_s=stream.ended_s,
            whole=not self.config.stream,
        )


async def _within(work: Coroutine[Any, Any, None], seconds: float) -> None:
    """Await ``work``, raising ``asyncio.TimeoutError`` after ``seconds``. From Python 3.11 it
    runs in the caller's task (``asyncio.timeout``): the request is sent in the same step of the
    loop as the pacing driver's wake-up, where ``asyncio.wait_for`` (3.10) first schedules a task
    of its own."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            await work
    else:
        await asyncio.wait_for(work, seconds)


async def _listed_models(session: Any, base_url: str, headers: Mapping[str, str]) -> list[str]:
    """The model ids ``GET /v1/models`` lists ([] where it answers nothing usable)."""
    import aiohttp

    try:
        async with session.get(base_url.rstrip("/") + "/v1/models", headers=headers) as r:
            answer = await r.json(content_type=None) if r.status == 200 else {}
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return []
    return model_ids(answer)


async def serve_async(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    config: ClientConfig,
    save_outputs: bool = False,
) -> ServeOutput:
    """``drive`` the workload through one client session; see ``serve_http``."""
    import aiohttp

    # no connection cap: the workload's own concurrency, not aiohttp's pool (100), limits it
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        client = HttpClient(config, session, save_outputs)
        start_s, timelines = await drive(requests, max_concurrency, client.submit)
    finished = [t.finish_s for t in timelines if t.finish_s is not None]
    return ServeOutput(
        start_s=start_s,
        end_s=max(finished, default=time.perf_counter()),
        requests=list(timelines),
        ttft_origin="actual send"
        if requests and requests[0].scheduled_s is None
        else "scheduled send",
        steps=None,
        step_clock="an HTTP server does not expose its engine's steps",
        token_times=None if config.stream else WHOLE_ANSWERS,
    )


def serve_http(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    config: ClientConfig,
    save_outputs: bool = False,
) -> ServeOutput:
    """Serve a workload against an OpenAI-compatible server, paced by ``drive`` (its own event
    loop, which SIGTERM stops cleanly: ``loop.run``; call it from a thread with none running)."""
    return loop.run(serve_async(requests, max_concurrency, config, save_outputs))
