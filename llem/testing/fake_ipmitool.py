"""A double of ``ipmitool`` for tests: an executable put on PATH that answers ``ipmitool dcmi power
reading`` as the real tool does (its documented output and errors), playing planted answers.

``install(bin_dir, answers)`` writes ``bin_dir/ipmitool`` and its script of answers; each call takes
the next answer (the last one repeats). An answer is a number (watts, printed as the real tool's
whole watts) or one of the failures below, each as ipmitool prints it:

- ``NO_DEVICE``: no BMC device node (``Could not open device at /dev/ipmi0 ...``, exit 1);
- ``INVALID``: a BMC without DCMI power readings (``DCMI request failed because: Invalid command
  (c1)``, exit 1);
- ``DEACTIVATED``: a reading whose state is ``deactivated``;
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
    Minimum during sampling period:              {w:>4} Watts
    Maximum during sampling period:              {w:>4} Watts
    Average power reading over sample period:    {w:>4} Watts
    IPMI timestamp:                           Sat Nov 28 17:00:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   {state}

"""

_SCRIPT = """#!{python}
import json, sys
from pathlib import Path
state = Path({state!r})
data = json.loads(state.read_text())
if sys.argv[1:] != ["dcmi", "power", "reading"]:
    sys.stderr.write("Invalid command: " + " ".join(sys.argv[1:]) + "\\n")
    sys.exit(1)
answers = data["answers"]
answer = answers[min(data["calls"], len(answers) - 1)]
data["calls"] += 1
state.write_text(json.dumps(data))
if answer == {no_device!r}:
    sys.stderr.write("Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: "
                     "No such file or directory\\n")
    sys.exit(1)
if answer == {invalid!r}:
    sys.stderr.write("DCMI request failed because: Invalid command (c1)\\n")
    sys.exit(1)
if answer == {empty!r}:
    sys.stdout.write("\\n")
    sys.exit(0)
reading = {reading!r}
if answer == {deactivated!r}:
    sys.stdout.write(reading.format(w=0, state="deactivated"))
else:
    sys.stdout.write(reading.format(w=int(round(float(answer))), state="activated"))
"""


def install(bin_dir: Path, answers: list[float | str]) -> Path:
    """Write the fake ``ipmitool`` into ``bin_dir`` (put it first on PATH); returns its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state = bin_dir / "ipmitool.state.json"
    state.write_text(json.dumps({"answers": list(answers), "calls": 0}))
    exe = bin_dir / "ipmitool"
    exe.write_text(
        _SCRIPT.format(
            python=sys.executable,
            state=str(state),
            no_device=NO_DEVICE,
            invalid=INVALID,
            empty=EMPTY,
            deactivated=DEACTIVATED,
            reading=READING,
        )
    )
    exe.chmod(0o755)
    return exe


def calls(bin_dir: Path) -> int:
    data = json.loads((bin_dir / "ipmitool.state.json").read_text())
    return int(data["calls"])
