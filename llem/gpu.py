"""``python -m llem.gpu``: the GPUs' power limits and clocks, and the restore of what llem left.

    python -m llem.gpu show      # every GPU's power limit (set, enforced, allowed), its clocks,
                                 # and any pending crash record
    python -m llem.gpu restore   # put back what a killed llem left changed (its crash record)

A crash record (``<LLEM_CACHE_DIR, default ~/.cache/llem>/gpu_restore/<host>-<pid>.json``) is
written before llem changes a GPU and removed once the change is put back; one whose process is
gone is restored at the next llem start anyway, and by ``restore`` here. A record of a process that
still runs is that run's own, and is left alone. Exit codes: 0 done, 1 a restore failed (the record
stays), 3 no GPU library (NVML, amdsmi) can start while a record waits.
"""

from __future__ import annotations

import argparse
import sys

from llem.devices.gpu import GpuUnavailable
from llem.devices.gpu_control import GpuControl
from llem.devices.gpus import open_gpus
from llem.errors import EXIT_OK, EXIT_PREFLIGHT, EXIT_UNEXPECTED
from llem.measure.gpu_record import Record, is_leftover, read_records, restore_record


def _show_gpus() -> None:
    try:
        lib = open_gpus()
    except GpuUnavailable as exc:
        print(f"no GPU: no GPU library (NVML, amdsmi) can start ({exc})")
        return
    try:
        control = GpuControl(lib)
        for gpu in lib.gpus():
            s = control.state(gpu)
            allowed = "?" if s.power_range_w is None else "{:g}-{:g}".format(*s.power_range_w)
            print(
                f"GPU {s.index} {s.uuid}: power limit {_w(s.power_limit_w)} "
                f"(enforced {_w(s.enforced_power_limit_w)}, allowed {allowed} W), "
                f"SM clock {s.sm_clock_mhz} MHz, memory clock {s.memory_clock_mhz} MHz"
            )
    finally:
        lib.shutdown()


def _w(value: float | None) -> str:
    return "?" if value is None else f"{value:g} W"


def _describe(rec: Record) -> str:
    state = "leftover" if is_leftover(rec) else "in use by a running llem, or another host's"
    what = "; ".join(g.describe() for g in rec.gpus)
    return f"{rec.path}: process {rec.pid} on {rec.host} ({state}): {what}"


def show_status() -> int:
    _show_gpus()
    records = read_records()
    if not records:
        print("no pending GPU restore record")
    for rec in records:
        print(f"pending restore record {_describe(rec)}")
    return EXIT_OK


def restore() -> int:
    leftovers = [r for r in read_records() if is_leftover(r)]
    if not leftovers:
        print("nothing to restore: no leftover GPU restore record")
        return EXIT_OK
    code = EXIT_OK
    for rec in leftovers:
        failures = restore_record(rec)
        if not failures:
            print(f"restored: {'; '.join(g.describe() for g in rec.gpus)}")
            continue
        print(f"error: not restored ({'; '.join(failures)}); {rec.path} stays", file=sys.stderr)
        cannot_start = any(f.startswith("no GPU library") for f in failures)
        code = max(code, EXIT_PREFLIGHT if cannot_start else EXIT_UNEXPECTED)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llem.gpu", description="GPU power limits and clocks, and their restore."
    )
    parser.add_argument("command", choices=["show", "restore"])
    args = parser.parse_args(argv)
    return show_status() if args.command == "show" else restore()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
