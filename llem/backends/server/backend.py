"""The server backend's driver: a running OpenAI-compatible server (``server.url``), or one started
for the point (``server.launch``), measured through the HTTP client (``client.serve_http``).

``load`` launches the server (its log in the run directory where Hydra's is known, else in a
temporary directory) or connects to the running one, and checks that ``GET /v1/models`` lists the
model asked for (``llem.backends.server.served``; a running server's list was asked at
pre-flight too, but it may have changed since). Every workload is served (``serve``; ``generate``
is never called). Token counts are the server's own ``usage``: a stream without it fails the
run, llem never counts them itself (``server.stream=false`` asks for whole answers instead, which
carry it).
``unload`` stops a launched server's whole process group; from its launch until then, SIGTERM
raises ``SystemExit`` so that the run's ``finally`` paths stop it too (Ctrl-C does so already).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llem.backends.server import checkpoint, gpus, running
from llem.backends.server.client import ClientConfig, api_key, serve_http
from llem.backends.server.host import url_host
from llem.backends.server.launch import LaunchedServer, LaunchRecord, launch
from llem.backends.server.loaded import ServerModel
from llem.backends.server.presets import launch_spec
from llem.backends.server.served import not_served, served_models, served_name
from llem.backends.server.watch import serve_watched
from llem.config.measurement import MeasurementConfig
from llem.config.server import Endpoint, Launch, ServerConfig, sends_token_ids, streams
from llem.errors import RunError
from llem.vocabulary.engine import BackendSections
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, Prompt, ScheduledRequest, ServeOutput

log = logging.getLogger(__name__)

ENGINE_PROCESS_NOTE = (
    "the model runs in the server's own processes; this process's allocator and RSS do not see it"
)
WARMUP_PROMPTS = 4  # prompts each warm-up round sends at once

Sections = BackendSections[ServerConfig]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_dir(run_dir: Path | None) -> Path:
    """Where a launched server's log goes: the run's directory, handed in with the sections;
    a new temporary directory when the server is launched outside a run."""
    return run_dir if run_dir is not None else Path(tempfile.mkdtemp(prefix="llem-server-"))


class ServerBackend:
    """Serves every workload through an OpenAI-compatible server's streaming API."""

    name = "server"

    def __init__(self, sections: Sections) -> None:
        self.sections = sections

    @property
    def config(self) -> ServerConfig:
        return self.sections.engine

    @property
    def launches_server(self) -> bool:
        """Whether loading starts a server (``server.launch``): the load is its launch to ready."""
        return self.config.launch is not None

    @property
    def served_name(self) -> str:
        return served_name(self.sections)

    def load_key(self, device: str) -> str:
        """Equal keys reuse the server: a running one by its url, a launched one by its launch
        arguments (a sweep restarts the server only when they change)."""
        c = self.config
        key: dict[str, Any] = {"url": c.url, "model": self.served_name, "device": device}
        if c.pids is not None:  # the running server's processes, found at its load
            key["pids"] = list(c.pids)
        if c.url is not None and c.gpus is not None:  # where it runs, as stated (its device)
            key["gpus"] = list(c.gpus)
        if c.launch is not None:
            key.update(
                launch=c.launch.value,
                port=c.port,
                max_num_seqs=c.max_num_seqs,
                args=dict(c.args),
                command=c.command,
                checkpoint=self.sections.model.name_or_path,
                gguf_file=self.sections.model.gguf_file,
                dtype=self.sections.model.dtype,
            )
        if self.sections.speculative.method.value != "none":  # the server's own speculation
            key["speculative"] = dataclasses.asdict(self.sections.speculative)
        return json.dumps(key, sort_keys=True, default=str)

    def torch_device_indices(self) -> list[int]:
        """``server.gpus``; none for a running server that names none (its energy is refused:
        ``energy_refusal``); a launched one's first tensor x pipeline parallel GPUs
        (``launched_gpus``)."""
        if self.config.gpus is not None:
            return list(self.config.gpus)
        if self.config.url is not None:
            return []
        return launched_gpus(self.config.args)

    def measures_named_gpus(self, measurement: MeasurementConfig) -> bool:
        """True where the server's GPUs are named (``server.gpus``, or
        ``measurement.gpu_indices``): the server runs in processes of its own, whose device is
        not llem's, so the GPUs are measured even where llem's torch sees none (a CPU-only llem
        on the server's GPU host). Unnamed, llem's own device is measured: a preset started with
        this interpreter (vLLM, SGLang) runs on its torch's device; a running server's energy is
        refused (``energy_refusal``)."""
        return bool(self.config.gpus or measurement.gpu_indices)

    def energy_refusal(self, measurement: MeasurementConfig) -> str | None:
        """A running server's energy is this host's GPUs' only where its URL is this host's
        and its GPUs are named (``llem.backends.server.running``)."""
        if self.config.url is None:
            return None
        return running.energy_refusal(self.config, measurement, url_host(self.config.url))

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        return [list(prompts)]

    def batch_size(self, loaded: LoadedModel) -> int:
        """server.max_num_seqs; unset, 1 for llama-cpp-python's server (which runs one request
        at a time), else 0: the server's own limit is unknown here, so no full-batch steady state
        is judged (never a made-up 1)."""
        if self.config.max_num_seqs is None and self.config.launch == Launch.llamacpp:
            return 1
        return int(self.config.max_num_seqs or 0)

    # ------------------------------------------------------------------ loading
    def load(self, device: str) -> ServerModel:
        t0 = time.perf_counter()
        m, preset = self.sections.model, self.config.launch
        served = (
            None
            if preset is None
            else checkpoint.launch_checkpoint(m, preset.value, self.config.command)
        )
        tokenizer = checkpoint.tokenizer(m, served)
        launched: LaunchedServer | None = None
        record: LaunchRecord | None = None
        base_url = (self.config.url or "").rstrip("/")
        # from before the launch: a SIGTERM while the server starts, or once it answers and
        # before the run has begun, must unwind through the stop below, never orphan the server
        previous_sigterm = _stop_on_sigterm() if served is not None else None
        try:
            if served is not None:
                launched, record, base_url = self._launch(device, served)
            self._check_served(base_url)
        except BaseException:
            try:
                if launched is not None:
                    launched.stop()
            finally:
                _restore_sigterm(previous_sigterm)
            raise
        loaded = ServerModel(
            model=base_url,
            tokenizer=tokenizer,
            device=device,
            dtype=self._dtype(),
            load_kwargs={"server": self.load_key(device)},
            load_key=self.load_key(device),
            load_s=time.perf_counter() - t0,
            source=base_url,
            shape=None,
            engine_process=ENGINE_PROCESS_NOTE,
            base_url=base_url,
            served_model=self.served_name,
            tokenizer_of=m.name_or_path,
            stated_gpus=None if self.config.gpus is None else list(self.config.gpus),
            cover=gpus.RUNNING_COVER if preset == Launch.command else gpus.LAUNCHED_COVER,
            endpoint=self.config.endpoint.value,
            launched=launched,
            launch_record=record,
            running=None if launched is not None else running.find(self.config, base_url),
            speculative=self.sections.speculative,
            sampled=bool(self.sections.decoder.do_sample),
        )
        loaded._previous_sigterm = previous_sigterm
        return loaded

    def _dtype(self) -> str:
        dtype = self.sections.model.dtype
        return dtype.value if dtype is not None else "the server's own"

    def _launch(self, device: str, model: str) -> tuple[LaunchedServer, LaunchRecord, str]:
        """Start the preset's server on ``model`` (what it loads), serving it as the run's name."""
        port = self.config.port or free_port()
        base_url = f"http://127.0.0.1:{port}"
        spec = launch_spec(self.sections, port, model, self.served_name, device)
        server = launch(spec, base_url, log_dir(self.sections.run_dir), self.config.ready_timeout_s)
        record = server.start()
        log.info("server ready in %.1f s: %s", record.launch_to_ready_s, spec.command_line)
        return server, record, base_url

    def _check_served(self, base_url: str) -> None:
        served = served_models(base_url, api_key(self.config.api_key_env))
        problem = not_served(self.served_name, base_url, served)
        if problem is not None:
            raise RunError(problem)

    # --------------------------------------------------------------- serving
    def client_config(self, loaded: ServerModel) -> ClientConfig:
        d = self.sections.decoder
        extra: dict[str, Any] = {"temperature": 0.0}
        if d.do_sample:
            extra = {"seed": self.sections.run_seed}
            for k in ("temperature", "top_p", "top_k"):
                if getattr(d, k) is not None:
                    extra[k] = getattr(d, k)
        tokenizer = loaded.tokenizer
        return ClientConfig(
            base_url=loaded.base_url,
            model=loaded.served_model,
            max_tokens=d.max_new_tokens,
            chat=self.config.endpoint == Endpoint.chat,
            min_tokens=d.min_new_tokens,
            ignore_eos=d.min_new_tokens is not None,
            token_id_prompts=sends_token_ids(self.config),
            stream=streams(self.config),
            api_key_env=self.config.api_key_env,
            request_timeout_s=self.config.request_timeout_s,
            extra_body=extra,
            detokenize=lambda ids: str(tokenizer.decode(list(ids))),
        )

    def warm_up(
        self, loaded: LoadedModel, batches: Sequence[Sequence[Prompt]], n_batches: int
    ) -> None:
        """``n_batches`` rounds of the first few prompts, sent at once, outside the window."""
        first = list(batches[0][:WARMUP_PROMPTS]) if batches else []
        assert isinstance(loaded, ServerModel)
        config = self.client_config(loaded)
        for _ in range(n_batches if first else 0):
            requests = [ScheduledRequest(k, k, p, 0.0) for k, p in enumerate(first)]
            self._check(loaded, serve_http(requests, None, config))

    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: int | None
    ) -> ServeOutput:
        """The measured window's workload through the server, its /metrics scraped meanwhile
        (``loaded.watched``, for ``window_facts``); every request's counts are its usage."""
        assert isinstance(loaded, ServerModel)
        loaded.watched = None  # a kept server's last window is not this one's
        watched = serve_watched(
            requests, max_concurrency, self.client_config(loaded), self.sections.save_outputs
        )
        self._check(loaded, watched.out)
        loaded.watched = watched
        return watched.out

    def _check(self, loaded: ServerModel, out: ServeOutput) -> None:
        """Every request carried its usage, and a launched server is still running."""
        for t in out.requests:
            reason = getattr(t, "usage_reason", None)
            if reason is not None:
                hint = (
                    " (server.stream=false asks for whole answers, which carry it, at the cost "
                    "of per-token times)"
                    if streams(self.config)
                    else ""
                )
                raise RunError(
                    f"request {t.request_id} to {loaded.base_url}: {reason}; llem takes token "
                    f"counts from the server's usage and does not count them itself{hint}"
                )
        if loaded.launched is not None and not loaded.launched.alive():
            raise RunError(f"the launched server exited during the window (log: {_log(loaded)})")

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        raise RunError("the server backend serves every workload; generate is never called")

    def unload(self, loaded: LoadedModel | None) -> None:
        """Stop a launched server (its whole process group)."""
        if not isinstance(loaded, ServerModel) or loaded.launched is None:
            return
        server, loaded.launched = loaded.launched, None
        try:
            server.stop()
        finally:
            _restore_sigterm(loaded._previous_sigterm)


def _log(loaded: ServerModel) -> str:
    return loaded.launch_record.log_path if loaded.launch_record else "none"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _stop_on_sigterm() -> Any:
    """While a launched server runs, SIGTERM unwinds the run: its ``finally`` paths stop the
    server and restore the GPU settings. Returns the handler it replaced (None off the main
    thread, where none can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def _restore_sigterm(previous: Any) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def launched_gpus(args: Mapping[str, Any]) -> list[int]:
    """The GPUs a launched vLLM server uses: the first ``tensor_parallel_size x
    pipeline_parallel_size`` visible ones (each given in ``server.args`` as ``name`` or
    ``name-with-dashes``; 1 when unset)."""

    def size(name: str) -> int:
        value = args.get(name, args.get(name.replace("_", "-")))
        return int(value or 1)

    return list(range(size("tensor_parallel_size") * size("pipeline_parallel_size")))
