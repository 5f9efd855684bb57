"""The chassis's power at the wall, as the BMC reports it through ``ipmitool dcmi power reading``.

The only caller of ``ipmitool``. DCMI's Get Power Reading answers, as ipmitool prints it::

        Instantaneous power reading:                   280 Watts
        Minimum during sampling period:                 88 Watts
        Maximum during sampling period:                460 Watts
        Average power reading over sample period:      276 Watts
        IPMI timestamp:                           Sat Nov 28 17:00:00 2026
        Sampling period:                          00000001 Seconds.
        Power reading state is:                   activated

llem reads the instantaneous line (whole watts). A host with no BMC device makes ipmitool exit
non-zero with ``Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file
or directory``; a BMC without DCMI power readings answers ``DCMI request failed because: Invalid
command (c1)`` or ``Power reading state is: deactivated``. Each is a ``BmcError`` whose text is
the reason a chassis layer is null.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

COMMAND = ("ipmitool", "dcmi", "power", "reading")
COMMAND_TEXT = " ".join(COMMAND)
#: seconds one reading may take before it counts as failed (ipmitool's own retries included)
TIMEOUT_S = 10.0
#: ipmitool prints whole watts: each reading is off by up to half a watt from the BMC's figure
RESOLUTION_W = 1.0

_INSTANT = re.compile(r"^\s*Instantaneous power reading:\s*([0-9]+(?:\.[0-9]+)?)\s*Watts", re.M)
_STATE = re.compile(r"^\s*Power reading state is:\s*(\S+)", re.M)

Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


class BmcError(Exception):
    """The BMC gave no power reading; ``str(exc)`` is the reason, in one line."""


class ToolMissing(BmcError):
    """ipmitool is not on PATH: whether the host has a BMC is not known."""


def _run(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def parse_reading(stdout: str) -> float:
    """The instantaneous power (W) of ``ipmitool dcmi power reading``'s output; ``BmcError`` where
    it holds none, or says the power reading is deactivated."""
    state = _STATE.search(stdout)
    if state is not None and state.group(1).lower() != "activated":
        raise BmcError(f"the BMC's power reading state is {state.group(1)}")
    found = _INSTANT.search(stdout)
    if found is None:
        first = stdout.strip().splitlines()[0] if stdout.strip() else "nothing"
        raise BmcError(f"answered without a power reading ({first})")
    return float(found.group(1))


class IpmitoolReader:
    """Reads the chassis's power through ``ipmitool`` (``run`` and ``which`` are for tests)."""

    source = COMMAND_TEXT
    resolution_w = RESOLUTION_W

    def __init__(self, run: Runner = _run, which: Callable[[str], str | None] = shutil.which):
        self._run = run
        self._which = which

    def available(self) -> str | None:
        """None where ipmitool is on PATH, else why not."""
        if self._which(COMMAND[0]) is None:
            return "ipmitool is not installed (not on PATH; Debian: apt-get install ipmitool)"
        return None

    def read_w(self) -> float:
        """One reading (W). Raises ``BmcError`` with the reason."""
        missing = self.available()
        if missing is not None:
            raise ToolMissing(missing)
        try:
            done = self._run(COMMAND, TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BmcError(f"{COMMAND_TEXT} failed: no answer in {TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise BmcError(f"{COMMAND_TEXT} failed: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip().splitlines()
            why = said[0] if said else f"exit status {done.returncode}"
            raise BmcError(f"{COMMAND_TEXT} failed: {why}")
        try:
            return parse_reading(done.stdout)
        except BmcError as exc:
            raise BmcError(f"{COMMAND_TEXT} {exc}") from None


def no_bmc_reason(exc: BmcError) -> str:
    """The null reason of a chassis layer whose BMC gave no reading."""
    return f"chassis not measured: {exc}" if isinstance(exc, ToolMissing) else f"no BMC: {exc}"
