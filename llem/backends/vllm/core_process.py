"""Where vLLM's engine runs, and what llem says of it: the offline engine's core in a process of
its own (vLLM's default) or in llem's process (vLLM's switch ``VLLM_ENABLE_V1_MULTIPROCESSING=0``);
a serving engine (AsyncLLM) always in its own."""

from __future__ import annotations

import os
from collections.abc import Mapping

#: vLLM's switch for where its offline engine's core runs ("0": in the calling process)
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"

VLLM_PROCESS_NOTE = (
    "the vLLM engine runs in its own processes; this process's allocator and RSS do not see it "
    "(memory.peak_device_used_mb is the device-wide reading on a GPU)"
)
ENGINE_CORE_HERE_NOTE = (
    "the vLLM engine's core runs in llem's process (VLLM_ENABLE_V1_MULTIPROCESSING=0); llem "
    "reads no allocator or RSS figure of this process as the engine's "
    "(memory.peak_device_used_mb is the device-wide reading on a GPU)"
)
#: where the offline engine's core ran, in the words of its step clock (``steps.OFFLINE_CLOCK``)
CORE_OWN_PROCESS = "the engine core runs in its own process, so that is when they reached llem"
CORE_IN_PROCESS = (
    "the engine core runs in llem's process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so that is when "
    "it finished the step"
)


def core_in_process(environ: Mapping[str, str] | None = None) -> bool:
    """Whether vLLM runs the offline engine's core in llem's process: its own switch set to 0
    (read as vLLM reads it, an integer; its default is a process of its own)."""
    value = (os.environ if environ is None else environ).get(MULTIPROCESSING, "1").strip()
    try:
        return int(value) == 0
    except ValueError:
        return False


def engine_process_note(serving: bool) -> str:
    """Why this process's memory figures are not the engine's (``LoadedModel.engine_process``)."""
    return ENGINE_CORE_HERE_NOTE if not serving and core_in_process() else VLLM_PROCESS_NOTE
