"""The chassis's power at the wall, as the BMC reports it through DCMI's Get Power Reading, read
by ``ipmitool dcmi power reading`` or FreeIPMI's ``ipmi-dcmi --get-system-power-statistics``.

The only caller of either tool. ipmitool prints::

        Instantaneous power reading:                   280 Watts
        Minimum during sampling period:                 88 Watts
        ...
        Power reading state is:                   activated

and FreeIPMI::

    Current Power                        : 280 Watts
    Minimum Power over sampling duration : 88 watts
    ...
    Power Measurement                    : Active

llem reads the current (instantaneous) line, whole watts. A host with no BMC device makes the
tool exit non-zero, ipmitool with ``Could not open device at /dev/ipmi0 or /dev/ipmi/0 or
/dev/ipmidev/0: No such file or directory``, FreeIPMI with ``could not find inband device``; a BMC
without DCMI power readings answers ``DCMI request failed because: Invalid command (c1)`` or a
state other than activated (ipmitool) or Active (FreeIPMI). Each is a ``BmcError`` whose text is
the reason a chassis layer is null.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: seconds one reading may take before it counts as failed (the tool's own retries included)
TIMEOUT_S = 10.0
#: both tools print whole watts: each reading is off by up to half a watt from the BMC's figure
RESOLUTION_W = 1.0


@dataclass(frozen=True)
class DcmiTool:
    """A command that prints the BMC's DCMI power reading, and how to read its output."""

    command: tuple[str, ...]
    reading: re.Pattern[str]  # group 1: the current power (W)
    state: re.Pattern[str]  # group 1: whether the BMC measures power
    active: str  # the state's word when it does
    install: str  # how to install the tool (Debian)

    @property
    def text(self) -> str:
        return " ".join(self.command)


IPMITOOL = DcmiTool(
    ("ipmitool", "dcmi", "power", "reading"),
    re.compile(r"^\s*Instantaneous power reading:\s*([0-9]+(?:\.[0-9]+)?)\s*Watts", re.M),
    re.compile(r"^\s*Power reading state is:\s*(\S+)", re.M),
    "activated",
    "apt-get install ipmitool",
)
FREEIPMI = DcmiTool(
    ("ipmi-dcmi", "--get-system-power-statistics"),
    re.compile(r"^\s*Current Power\s*:\s*([0-9]+(?:\.[0-9]+)?)\s*[Ww]atts", re.M),
    re.compile(r"^\s*Power Measurement\s*:\s*(.+?)\s*$", re.M),
    "Active",
    "apt-get install freeipmi-tools",
)
COMMAND = IPMITOOL.command
COMMAND_TEXT = IPMITOOL.text

CommandRunner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


class BmcError(Exception):
    """The BMC gave no power reading; ``str(exc)`` is the reason, in one line."""


class ToolMissing(BmcError):
    """ipmitool is not on PATH: whether the host has a BMC is not known."""


def _run(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def parse_reading(stdout: str, tool: DcmiTool = IPMITOOL) -> float:
    """The current power (W) in ``tool``'s output; ``BmcError`` where it holds none, or says
    the BMC does not measure power."""
    state = tool.state.search(stdout)
    if state is not None and state.group(1).lower() != tool.active.lower():
        raise BmcError(f"the BMC's power reading state is {state.group(1)}")
    found = tool.reading.search(stdout)
    if found is None:
        first = stdout.strip().splitlines()[0] if stdout.strip() else "nothing"
        raise BmcError(f"answered without a power reading ({first})")
    return float(found.group(1))


class IpmitoolReader:
    """Reads the chassis's power through ``tool`` (ipmitool's by default; ``run`` and ``which``
    are for tests)."""

    resolution_w = RESOLUTION_W

    def __init__(
        self,
        run: CommandRunner = _run,
        which: Callable[[str], str | None] = shutil.which,
        tool: DcmiTool = IPMITOOL,
    ):
        self._run = run
        self._which = which
        self.tool = tool
        self.source = tool.text

    def available(self) -> str | None:
        """None where the tool is on PATH, else why not."""
        name = self.tool.command[0]
        if self._which(name) is None:
            return f"{name} is not installed (not on PATH; Debian: {self.tool.install})"
        return None

    def read_w(self) -> float:
        """One reading (W). Raises ``BmcError`` with the reason."""
        missing = self.available()
        if missing is not None:
            raise ToolMissing(missing)
        text = self.tool.text
        try:
            done = self._run(self.tool.command, TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BmcError(f"{text} failed: no answer in {TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise BmcError(f"{text} failed: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip().splitlines()
            why = said[0] if said else f"exit status {done.returncode}"
            raise BmcError(f"{text} failed: {why}")
        try:
            return parse_reading(done.stdout, self.tool)
        except BmcError as exc:
            raise BmcError(f"{text} {exc}") from None


def dcmi_reader(which: Callable[[str], str | None] = shutil.which) -> IpmitoolReader:
    """The reader ``chassis.source=auto`` uses: ipmitool's, or FreeIPMI's where only it is
    installed (where neither is, ipmitool's, which says so)."""
    if which(IPMITOOL.command[0]) is None and which(FREEIPMI.command[0]) is not None:
        return IpmitoolReader(which=which, tool=FREEIPMI)
    return IpmitoolReader(which=which)


def no_bmc_reason(exc: BmcError) -> str:
    """The null reason of a chassis layer whose BMC gave no reading."""
    return f"chassis not measured: {exc}" if isinstance(exc, ToolMissing) else f"no BMC: {exc}"
