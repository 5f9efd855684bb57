"""The result schema's version, its history, and how files of older versions are brought up to it.

Schema history:
  1  (llem 0.1.0) the first layout; written as a plain dict.
  2  typed sections; ``sweep`` always present (null outside a sweep); ``validity``;
     ``hardware``; ``workload.requests`` always present; ``throughput.output_tokens_per_s`` is
     over the measured window (version 1: over the time inside generate(), now
     ``generate_output_tokens_per_s``); energy uncertainty bounds. Version 1 files migrate.
  3  serving workloads: ``traffic``, ``concurrency``, ``steady_state``, ``goodput`` (null with the
     reason in ``null_reasons`` where they do not apply); ``latency.ttft_origin``,
     ``latency.tpot_ms``, ``latency.e2e_ms``. Version 2 files migrate: their four new sections are
     null ("not recorded before schema 3") and their TTFT origin is "batch start" (every request
     was timed from the start of its generate() call).
  4  ``gpu``: the power limit and clocks a run asked for, got and put back (``llem.result.gpu``;
     null when the run left the GPU as it was). Version 3 files migrate: ``gpu`` is null
     ("not recorded before result schema 4").
  5  latency follows vLLM ``bench serve``'s definitions: ``ttft_ms``, ``e2e_ms`` and
     ``request_latency_s`` from each request's actual send, ``itl_ms`` one entry per streamed
     chunk; llem's own under their own names: ``itl_per_token_ms`` (a chunk's gap spread over its
     tokens: version 4's ``itl_ms``), ``ttft_from_schedule_ms`` and ``e2e_from_schedule_ms`` (from
     the scheduled send: version 4's open-loop ``ttft_ms`` and ``e2e_ms``). ``ttft_origin`` is
     "actual send", "batch start" (generate batches of fewer than all prompts) or "all prompts
     at once" (a generate batch of every prompt: vLLM offline). Version 4 files migrate keeping
     their meaning: their ITLs become ``itl_per_token_ms``; open-loop TTFT and e2e become the
     from-schedule figures; what they did not record is null with the reason.
  6  ``quality``: the window's answers scored against their references (``llem.result.quality``;
     null with the reason when the run's prompts had none); ``boundary``: what the energy covers
     (``measurement.boundary``: the GPUs, or the node with its CPU packages and DRAM), what it
     leaves out, and each component's energy (``llem.result.boundary``); ``server``: the
     OpenAI-compatible server a ``+backend=server`` run measured (``llem.result.server``; null
     for the in-process engines). Version 5 files migrate: ``quality``, ``boundary`` and
     ``server`` are null ("not recorded before result schema 6").
  7  GPUs of any vendor: each measured GPU (``hardware.gpus``) names its ``torch_index``, its
     ``vendor`` (``nvidia``, ``amd``) and its ``vendor_index`` (the number its vendor library gives
     it), and the ``gpu`` section's devices their ``vendor_index`` (version 6's ``nvml_index``).
     Version 6 files migrate: ``nvml_index`` becomes ``vendor_index``; a GPU's ``vendor`` is
     ``nvidia`` (NVML was the only GPU library llem read before schema 7; null for a replayed
     device), and the indices version 6 did not record are null with the reason.
  8  figures that can be wrong, and what an external server's energy is: the attribution's
     figures (``energy`` and ``steady_state``: ``prefill_j``, ``decode_j``, ``between_steps_j``,
     ``j_per_prefill_token``, ``j_per_decode_token``, ``unattributed_j``) carry a 95 % interval
     (``X_ci95_half_width``, coverage measured on the truth harness) beside their worst-case
     bound, and ``fit`` its context cost ``k`` and the sensor's lag ``lag_s``; ``boundary`` the
     bounds of its figures (``X_uncertainty``), ``rapl_reading_limits_j`` and, for a server
     run, what its energy ``includes``; ``server`` the server's ``processes`` (and how they were
     found), ``on_this_host`` and ``requests_finished``; ``workload.stop_strings``; ``quality``'s
     proportion and interval are over distinct items (``n_items``), and its ``n_scored`` is
     ``n_answers``. Version 7 files migrate: each new half-width and bound of a figure that has a
     value is null with the reason "not computed before result schema 8", ``n_scored`` becomes
     ``n_answers`` and ``n_items`` is null with the reason; the rest are absent, as a version 7
     run had none.
"""

from __future__ import annotations

import re
from typing import Any

from llem.version import __version__

SCHEMA_VERSION = 8

# the sections schema 3 adds; older files have none of them
SERVING_SECTIONS = ("traffic", "concurrency", "steady_state", "goodput")


class ResultFormatError(ValueError):
    """A result.json this version of llem cannot read (unknown key, bad type, newer schema)."""


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring parsed result data of any earlier schema version to the current one."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultFormatError(
            f"result.json has schema_version {version!r}; this llem ({__version__}) reads "
            f"versions 1 to {SCHEMA_VERSION}: upgrade llem to read it"
        )
    if version == 1:
        data = _migrate_1_to_2(data)
        version = 2
    if version == 2:
        data = _migrate_2_to_3(data)
        version = 3
    if version == 3:
        data = _migrate_3_to_4(data)
        version = 4
    if version == 4:
        data = _migrate_4_to_5(data)
        version = 5
    if version == 5:
        data = _migrate_5_to_6(data)
        version = 6
    if version == 6:
        data = _migrate_6_to_7(data)
        version = 7
    if version == 7:
        data = _migrate_7_to_8(data)
    return data


def _sections_added(
    data: dict[str, Any], version: int, sections: tuple[str, ...]
) -> dict[str, Any]:
    """``data`` at schema ``version``, whose new ``sections`` it lacks: each null, with the reason
    "not recorded before result schema ``version``"."""
    data = dict(data)
    data["schema_version"] = version
    reasons = dict(data.get("null_reasons") or {})
    for section in sections:
        data.setdefault(section, None)
        if data[section] is None:
            reasons.setdefault(section, f"not recorded before result schema {version}")
    data["null_reasons"] = reasons
    return data


def _migrate_5_to_6(data: dict[str, Any]) -> dict[str, Any]:
    return _sections_added(data, 6, ("quality", "boundary", "server"))


_DEVICE_INDEX = re.compile(r"^devices\[(\d+)\]\.nvml_index$")


def _migrate_6_to_7(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    data["schema_version"] = 7
    reasons = dict(data.get("null_reasons") or {})
    for key in [k for k in reasons if _DEVICE_INDEX.match(k)]:
        why = reasons.pop(key)
        prefix = key.removesuffix("nvml_index")
        reasons[prefix + "vendor_index"] = why
        reasons.setdefault(prefix + "vendor", why)
    data["null_reasons"] = reasons
    hardware = data.get("hardware")
    if isinstance(hardware, dict) and isinstance(hardware.get("gpus"), list):
        hardware = dict(hardware)
        hardware["gpus"] = [_vendor_named(g) for g in hardware["gpus"]]
        data["hardware"] = hardware
        for i, g in enumerate(hardware["gpus"]):
            for key in ("torch_index", "vendor_index"):
                if isinstance(g, dict) and g.get(key) is None:
                    reasons.setdefault(f"devices[{i}].{key}", NOT_IN_6)
    gpu = data.get("gpu")
    if isinstance(gpu, dict) and isinstance(gpu.get("devices"), dict):
        gpu = dict(gpu)
        gpu["devices"] = {u: _renamed_index(d) for u, d in gpu["devices"].items()}
        data["gpu"] = gpu
    return data


NOT_IN_7 = "not computed before result schema 8"
ITEMS_NOT_IN_7 = (
    "not recorded before result schema 8, whose quality interval was over the answers "
    "(every pass's), not over distinct items"
)
# the figures schema 8 gives a companion: (section, figure, the companion's suffix)
_COMPANIONS_8 = tuple(
    (section, name, "_ci95_half_width")
    for section in ("energy", "steady_state")
    for name in (
        "prefill_j",
        "decode_j",
        "between_steps_j",
        "j_per_prefill_token",
        "j_per_decode_token",
        "unattributed_j",
    )
) + tuple(
    ("boundary", name, "_uncertainty")
    for name in ("gpu_j", "cpu_package_j", "dram_j", "total_j", "j_per_output_token")
)


def _migrate_7_to_8(data: dict[str, Any]) -> dict[str, Any]:
    """Each figure that schema 8 gives a half-width or a bound, and that has a value in ``data``,
    gets its companion null with the reason (a version 7 run computed none)."""
    data = dict(data)
    data["schema_version"] = 8
    reasons = dict(data.get("null_reasons") or {})
    for section, name, suffix in _COMPANIONS_8:
        values = data.get(section)
        if (
            isinstance(values, dict)
            and values.get(name) is not None
            and values.get(name + suffix) is None
        ):
            reasons.setdefault(f"{section}.{name}{suffix}", NOT_IN_7)
    quality = data.get("quality")
    if isinstance(quality, dict) and "n_scored" in quality:
        quality = {("n_answers" if k == "n_scored" else k): v for k, v in quality.items()}
        data["quality"] = quality
        if quality.get("n_items") is None:
            reasons.setdefault("quality.n_items", ITEMS_NOT_IN_7)
    data["null_reasons"] = reasons
    return data


def _renamed_index(entry: Any) -> Any:
    if not isinstance(entry, dict) or "nvml_index" not in entry:
        return entry
    return {("vendor_index" if k == "nvml_index" else k): v for k, v in entry.items()}


NOT_IN_6 = "not recorded before result schema 7"


def _vendor_named(entry: Any) -> Any:
    """A schema 6 ``hardware.gpus`` entry (uuid, name, memory, limits) with the keys schema 7
    puts first: ``torch_index`` and ``vendor_index`` (null: not recorded), and ``vendor``
    (``nvidia``: the only GPU library llem read; null for a replayed device)."""
    if not isinstance(entry, dict) or "vendor" in entry:
        return entry
    name = str(entry.get("name") or "")
    head = {
        "torch_index": entry.get("torch_index"),
        "vendor": None if name.startswith("replay:") else "nvidia",
        "vendor_index": entry.get("nvml_index"),
    }
    rest = {k: v for k, v in entry.items() if k not in ("torch_index", "nvml_index")}
    return {**head, **rest}


_PCT = dict.fromkeys(("p50", "p90", "p99"))
NOT_PER_CHUNK = (
    "not recorded before result schema 5 (its ITLs spread each chunk's gap over the chunk's "
    "tokens: latency.itl_per_token_ms)"
)
FROM_SCHEDULE = (
    "not recorded before result schema 5 (its {what} ran from the scheduled send, pacing "
    "lateness included: latency.{key})"
)


def _migrate_4_to_5(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    data["schema_version"] = 5
    latency = data.get("latency")
    if not isinstance(latency, dict):
        return data
    latency = dict(latency)
    reasons = dict(data.get("null_reasons") or {})
    _moved(latency, reasons, "itl_ms", "itl_per_token_ms", NOT_PER_CHUNK)
    origin = latency.get("ttft_origin")
    if origin == "scheduled send":
        for old, new, what in (
            ("ttft_ms", "ttft_from_schedule_ms", "TTFT"),
            ("e2e_ms", "e2e_from_schedule_ms", "end-to-end latency"),
        ):
            _moved(latency, reasons, old, new, FROM_SCHEDULE.format(what=what, key=new))
        latency["request_latency_s"] = dict(_PCT)
        reasons["latency.request_latency_s"] = FROM_SCHEDULE.format(
            what="request latency", key="e2e_from_schedule_ms"
        )
        latency["ttft_origin"] = "actual send"
    elif origin == "batch start" and _all_at_once(data):
        latency["ttft_origin"] = "all prompts at once"
    for key in ("ttft_from_schedule_ms", "e2e_from_schedule_ms"):
        if key not in latency:
            latency[key] = dict(_PCT)
            if data.get("status") == "ok":
                reasons.setdefault(f"latency.{key}", "no scheduled send time was recorded")
    data["latency"], data["null_reasons"] = latency, reasons
    return data


def _moved(latency: dict[str, Any], reasons: dict[str, Any], old: str, new: str, why: str) -> None:
    """``latency[old]`` moves to ``latency[new]``; ``old`` is left null with ``why``."""
    latency[new] = latency.get(old) or dict(_PCT)
    if f"latency.{old}" in reasons:
        reasons[f"latency.{new}"] = reasons[f"latency.{old}"]
    latency[old] = dict(_PCT)
    if any(v is not None for v in latency[new].values()):
        reasons[f"latency.{old}"] = why


def _all_at_once(data: dict[str, Any]) -> bool:
    """A version-4 run of generate batches that each held every prompt: vLLM's offline generate
    (one batch of all prompts, whatever ``max_num_seqs``) or a batch size of all the prompts."""
    work = data.get("workload") or {}
    n, size = work.get("n_prompts"), work.get("batch_size")
    if data.get("backend") == "vllm":
        return True
    return isinstance(n, int) and isinstance(size, int) and size >= n


def _migrate_3_to_4(data: dict[str, Any]) -> dict[str, Any]:
    return _sections_added(data, 4, ("gpu",))


def _migrate_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    data = _sections_added(data, 3, SERVING_SECTIONS)
    latency = data.get("latency")
    if isinstance(latency, dict) and data.get("status") == "ok":
        latency = dict(latency)
        latency.setdefault("ttft_origin", "batch start")
        data["latency"] = latency
    return data


def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 wrote the same sections as plain dicts; what version 2 adds has defaults
    # (validity, sweep: null). A v1 "lifecycle" could be empty for points that never ran.
    data = dict(data)
    data["schema_version"] = 2
    if "status" not in data:  # early partial files: ok unless they carry an error
        data["status"] = "failed" if data.get("error") else "ok"
    if isinstance(data.get("error"), str):
        data["error"] = {"type": "Error", "message": data["error"], "hint": None}
    data.setdefault("sweep", None)
    throughput = data.get("throughput")
    if isinstance(throughput, dict) and "generate_output_tokens_per_s" not in throughput:
        # v1's rates were over the time inside generate(); v2's are over the measured window,
        # recomputed from v1's own window length where it has one.
        throughput = dict(throughput)
        throughput["generate_output_tokens_per_s"] = throughput.get("output_tokens_per_s")
        throughput.pop("definition", None)
        window_s = (data.get("energy") or {}).get("window_s")
        work = data.get("workload") or {}
        for key, count in (
            ("output_tokens_per_s", "output_tokens"),
            ("requests_per_s", "requests"),
        ):
            n = work.get(count)
            throughput[key] = None
            if isinstance(window_s, (int, float)) and window_s > 0 and isinstance(n, int):
                throughput[key] = round(n / window_s, 3 if count == "output_tokens" else 4)
        data["throughput"] = throughput
    workload = data.get("workload")
    if isinstance(workload, dict) and "requests" not in workload:
        workload = dict(workload)
        workload["requests"] = None
        data["workload"] = workload
    return data
