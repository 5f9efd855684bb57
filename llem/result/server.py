"""result.json's ``server`` section (schema 6): the OpenAI-compatible server a ``+backend=server``
run measured, how it was started, and the server's own view of the measured window; and
``server_metrics.csv``, that view poll by poll (this module is the only code that reads or writes
it).

``url`` is where the requests went; ``launched`` whether llem started the server for the point
(``server.launch``) or measured one already running (``server.url``). For a launched server,
``command`` is its full command line (the API key's value never appears in it: the key is read
from the variable ``server.api_key_env`` names, and only the variable's name is configured),
``version`` what the server reports (null with the reason where it reports none),
``launch_to_ready_s`` the seconds from the launch to its first ready answer and ``log`` its log
file; for a running server they are null with the reason. ``endpoint`` is the API the requests
used (completions or chat). ``model`` is the name the server serves the model as, ``tokenizer``
the model whose tokenizer built the prompts (``model.name_or_path``, the result's ``model``): for
a running server, only that; llem cannot see what it serves under the name (null in results
written before it was kept). A running server's device is not llem's: the result's ``device`` is
what the GPUs' vendor calls them where ``server.gpus`` names its GPUs (``cuda`` for NVIDIA and
ROCm, and where no vendor library starts), else null with the reason.

The server's own view (``llem.backends.server.metrics``): while the window's requests are served,
llem polls ``metrics_url`` (the server's Prometheus ``/metrics``) every ``metrics_poll_ms``, from
one poll before the first request to one after the last answer (``metrics_span_s`` apart).
``metrics_source`` is the server family its metric names belong to (vllm, llamacpp, sglang, tgi).
``metrics_polls`` counts the GETs answered or failed (one cut short by the end of the window is
not), ``metrics_failed_polls`` those that gave no sample.
``running_requests_mean`` and ``waiting_requests_mean`` are the server's gauges of requests
running (in its batch) and waiting, time-weighted over the polls that fell while the requests ran
(each poll's value held until the next poll; the first and last polls, idle, are left out);
``..._max`` their largest value there; null with the reason when no poll fell inside.
``prompt_tokens`` and ``generation_tokens`` are how far the server's token counters grew over
the span (the tokens the server counted, including any other client's); ``usage_prompt_tokens``
and ``usage_completion_tokens`` are the same window's counts from the ``usage`` of llem's own
requests (what every other figure of the run uses): both are kept, so that a reader sees where
they differ. ``requests_finished`` is how far the server's counter of finished requests grew
over the span (vLLM's ``vllm:request_success_total``, SGLang's ``sglang:num_requests_total``, TGI's
``tgi_request_success``; null where the server has none): more than llem sent means another
client's load ran in the window (validity check ``server_load``). ``metrics_file`` is
``server_metrics.csv``.
Where the server exposes no ``/metrics`` (404), or none of the known metric names, every figure of
its view is null and ``null_reasons`` says why. Results written before these figures existed read
with them null. The section is null for the in-process engines.

Where the server ran (``llem.backends.server.gpus``, ``processes``): ``on_this_host`` says whether
the URL is this machine (a launched server's always is; a running server's by its address, null
energy where it is not), ``gpus_used`` the GPUs holding a process of the server's trees and
``processes`` those processes (``device``, ``pid``, ``used_memory_mb``, ``name``), the measured
server's own, not foreign work; ``processes_found_by`` how llem knows they are the server's (its
launch, ``server.pids``, the process listening on the URL's port, or, where none of those is
known, every process on the measured GPUs, which the run states as a condition).

server_metrics.csv: one row per answered poll; ``time_s`` is seconds from the workload's origin
(the requests' ``scheduled_s`` 0; the first poll comes just before it, so its time is negative),
``running`` and ``waiting`` the gauges at the poll, ``prompt_tokens_delta`` and
``generation_tokens_delta`` how far the counters grew since the previous poll (empty in the first
row and where the server has no such counter). Written atomically.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llem.atomic import atomic_write_csv
from llem.result.migrate import ResultFormatError
from llem.vocabulary.processes import EngineProcess

SERVER_METRICS_FILE = "server_metrics.csv"
_COLUMNS = ("time_s", "running", "waiting", "prompt_tokens_delta", "generation_tokens_delta")


@dataclass(frozen=True)
class ServerSection:
    url: str
    launched: bool
    endpoint: str  # completions | chat
    model: str  # the name the server serves the model as
    # the model whose tokenizer built the prompts (model.name_or_path); null before it was kept
    tokenizer: str | None = None
    command: str | None = None  # a launched server's full command line
    version: str | None = None
    launch_to_ready_s: float | None = None
    log: str | None = None  # a launched server's log file
    # the server's own view of the window (its /metrics); null with the reason where it has none
    metrics_source: str | None = None  # the family of its metric names: vllm|llamacpp|sglang|tgi
    metrics_url: str | None = None
    metrics_poll_ms: float | None = None
    metrics_polls: int | None = None  # GETs of the window, answered or failed
    metrics_failed_polls: int | None = None  # of those, the ones that gave no sample
    metrics_span_s: float | None = None  # first to last answered poll
    running_requests_mean: float | None = None  # time-weighted over the span
    running_requests_max: float | None = None
    waiting_requests_mean: float | None = None
    waiting_requests_max: float | None = None
    prompt_tokens: float | None = None  # the server's counter, grown over the span
    generation_tokens: float | None = None
    usage_prompt_tokens: int | None = None  # llem's requests' usage over the same window
    usage_completion_tokens: int | None = None
    metrics_file: str | None = None  # server_metrics.csv, in the run directory
    # UUIDs of the GPUs the server's processes ran on (llem.backends.server.gpus)
    gpus_used: list[str] | None = None
    # the server's compute processes on those GPUs
    processes: list[EngineProcess] | None = None
    processes_found_by: str | None = None  # how llem knows they are the server's
    on_this_host: bool | None = None  # the URL is this machine's (a launched server's always)
    requests_finished: float | None = None  # the server's finished-requests counter, grown


@dataclass(frozen=True)
class ServerMetricsRow:
    """One answered poll of the server's /metrics (``server_metrics.csv``)."""

    time_s: float
    running: float | None
    waiting: float | None
    prompt_tokens_delta: float | None = None
    generation_tokens_delta: float | None = None


def write_server_metrics(run_dir: Path | str, rows: Iterable[ServerMetricsRow]) -> Path:
    """Write ``run_dir/server_metrics.csv`` atomically."""
    cells = (
        [
            f"{r.time_s:.6f}",
            _cell(r.running),
            _cell(r.waiting),
            _cell(r.prompt_tokens_delta),
            _cell(r.generation_tokens_delta),
        ]
        for r in rows
    )
    return atomic_write_csv(Path(run_dir) / SERVER_METRICS_FILE, _COLUMNS, cells)


def read_server_metrics(run_dir: Path | str) -> list[ServerMetricsRow]:
    """The rows of ``run_dir/server_metrics.csv`` (FileNotFoundError when the run wrote none)."""
    path = Path(run_dir) / SERVER_METRICS_FILE
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    if not rows or tuple(rows[0]) != _COLUMNS:
        raise ResultFormatError(f"{path}: expected the header {','.join(_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            time_s, running, waiting, prompt, generation = row
            out.append(
                ServerMetricsRow(
                    float(time_s),
                    _float(running),
                    _float(waiting),
                    _float(prompt),
                    _float(generation),
                )
            )
        except ValueError as exc:
            raise ResultFormatError(f"{path}:{number}: not a poll row ({exc})") from None
    return out


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def _float(text: str) -> float | None:
    return float(text) if text else None
