"""Doubles of ``ipmitool`` and FreeIPMI's ``ipmi-dcmi`` for tests: an executable put on PATH that
answers ``ipmitool dcmi power reading`` (or ``ipmi-dcmi --get-system-power-statistics``) as the
real tool does (its output, as its source prints it, and its errors), playing planted answers.

``install(bin_dir, answers)`` writes ``bin_dir/ipmitool`` (``tool="freeipmi"``:
``bin_dir/ipmi-dcmi``) and its script of answers; each call takes the next answer (the last one
repeats). An answer is a number (watts, printed as the real tool's whole watts) or one of the
failures below, each as the tool prints it:

- ``NO_DEVICE``: no BMC device node (ipmitool: ``Could not open device at /dev/ipmi0 ...``;
  FreeIPMI: ``could not find inband device``; exit 1);
- ``INVALID``: a BMC without DCMI power readings (ipmitool's ``DCMI request failed because: Invalid
  command (c1)``, exit 1; the FreeIPMI double prints the same words, a stand-in for its own);
- ``DEACTIVATED``: a reading whose state is ``deactivated`` (FreeIPMI: ``Not Available``);
- ``EMPTY``: an answer with no reading in it (exit 0).

``calls(bin_dir)`` is how many times it was called.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NO_DEVICE = "no-device"
INVALID = "invalid"
DEACTIVATED = "deactivated"
EMPTY = "empty"

READING = """
    Instantaneous power reading:                 {w:>4} Watts
    Minimum during sampling period:              {lo:>4} Watts
    Maximum during sampling period:              {hi:>4} Watts
    Average power reading over sample period:    {avg:>4} Watts
    IPMI timestamp:                           Sat Nov 28 17:00:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   {state}

"""

FREEIPMI_READING = """Current Power                        : {w} Watts
Minimum Power over sampling duration : {lo} watts
Maximum Power over sampling duration : {hi} watts
Average Power over sampling duration : {avg} watts
Time Stamp                           : 11/28/2026 - 17:00:00
Statistics reporting time period     : 1000 milliseconds
Power Measurement                    : {state}
"""


def printed_reading(reading: str, w: int, state: str) -> str:
    """``reading`` (``READING`` or ``FREEIPMI_READING``) at ``w`` watts now, with a minimum,
    maximum and average over the sampling period that differ from it (a reader must take the
    current line, not another)."""
    return reading.format(w=w, lo=w // 2, hi=2 * w + 1, avg=w + 7, state=state)


#: per tool: its file name, its arguments, its no-device line, its states (active, not)
TOOLS = {
    "ipmitool": (
        "ipmitool",
        ["dcmi", "power", "reading"],
        "Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: "
        "No such file or directory",
        READING,
        ("activated", "deactivated"),
    ),
    "freeipmi": (
        "ipmi-dcmi",
        ["--get-system-power-statistics"],
        "could not find inband device",
        FREEIPMI_READING,
        ("Active", "Not Available"),
    ),
}

_SCRIPT = """#!{python}
import json, sys
from pathlib import Path
state = Path({state!r})
data = json.loads(state.read_text())
if sys.argv[1:] != {args!r}:
    sys.stderr.write("Invalid command: " + " ".join(sys.argv[1:]) + "\\n")
    sys.exit(1)
answers = data["answers"]
answer = answers[min(data["calls"], len(answers) - 1)]
data["calls"] += 1
state.write_text(json.dumps(data))
if answer == {no_device!r}:
    sys.stderr.write({no_device_line!r} + "\\n")
    sys.exit(1)
if answer == {invalid!r}:
    sys.stderr.write("DCMI request failed because: Invalid command (c1)\\n")
    sys.exit(1)
if answer == {empty!r}:
    sys.stdout.write("\\n")
    sys.exit(0)
reading = {reading!r}
def output(w, state):
    return reading.format(w=w, lo=w // 2, hi=2 * w + 1, avg=w + 7, state=state)
if answer == {deactivated!r}:
    sys.stdout.write(output(0, {inactive!r}))
else:
    sys.stdout.write(output(int(round(float(answer))), {active!r}))
"""


def install(bin_dir: Path, answers: list[float | str], tool: str = "ipmitool") -> Path:
    """Write the fake tool into ``bin_dir`` (put it first on PATH); returns its path."""
    name, args, no_device_line, reading, (active, inactive) = TOOLS[tool]
    bin_dir.mkdir(parents=True, exist_ok=True)
    state = bin_dir / "ipmitool.state.json"
    state.write_text(json.dumps({"answers": list(answers), "calls": 0}))
    exe = bin_dir / name
    exe.write_text(
        _SCRIPT.format(
            python=sys.executable,
            state=str(state),
            args=args,
            no_device=NO_DEVICE,
            no_device_line=no_device_line,
            invalid=INVALID,
            empty=EMPTY,
            deactivated=DEACTIVATED,
            reading=reading,
            active=active,
            inactive=inactive,
        )
    )
    exe.chmod(0o755)
    return exe


def calls(bin_dir: Path) -> int:
    data = json.loads((bin_dir / "ipmitool.state.json").read_text())
    return int(data["calls"])
