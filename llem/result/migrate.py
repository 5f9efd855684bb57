"""The result schema's version, its history, and how files of older versions are brought up to it.

Schema history:
  1  (llem 0.1.0) the first layout; written as a plain dict.
  2  typed sections; ``sweep`` always present (null outside a sweep); ``validity``;
     ``hardware``; ``workload.requests`` always present; ``throughput.output_tokens_per_s`` is
     over the measured window (version 1: over the time inside generate(), now
     ``generate_output_tokens_per_s``); energy uncertainty bounds. Version 1 files migrate.
"""

from __future__ import annotations

from typing import Any

from llem.version import __version__

SCHEMA_VERSION = 2


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
