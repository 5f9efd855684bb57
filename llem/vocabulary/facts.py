"""What an engine saw, handed to the run as facts: before the window what it says of itself
(``EngineFacts``: a result section of its own, the server's, and the device it states), after it
what it saw of the window (``WindowFacts``: that section's figures, its speculation, the load it
counted, where its processes ran). A figure it has not got is null with its reason beside it.

The run writes the facts into the result and judges them (``llem.runner.engine_facts``); an
engine never writes the result, nor its validity.

Imports nothing of llem's but the vocabulary's ``speculation``; writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llem.vocabulary.processes import EngineProcess
from llem.vocabulary.speculation import DraftSpans

#: the run's GPU library, lent to the engine (``llem.devices.gpus.RunGpus``: calling it gives the
#: vendor's ``GpuLibrary``, or raises ``GpuUnavailable``)
LentGpus = Callable[[], Any]


@dataclass(frozen=True)
class SectionFacts:
    """Figures of one result section, by the section's own field names (``fields``; None: the
    section is null), and why each null one is null, keyed as result.json keys them
    (``"server.version"``, ``"speculative"``), in the order they arose."""

    fields: Mapping[str, Any] | None
    null_reasons: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceStatement:
    """The device an engine outside llem's processes runs on, as far as llem knows it: on GPUs
    (``on_gpus``; the run names their type from the vendor's library), else not stated, with
    ``null_reason``."""

    on_gpus: bool
    null_reason: str | None = None


@dataclass(frozen=True)
class EngineFacts:
    """What a loaded engine says of itself before the window; nothing for an engine in llem's
    own processes."""

    server: SectionFacts | None = None  # result.server as it opens (None: no such section)
    device: DeviceStatement | None = None  # None: the run's own device stands


@dataclass(frozen=True)
class EngineLoad:
    """The load the engine counted over the window, beside llem's own: the requests it finished
    and the tokens it generated (None: it counts none), against the ``sent`` requests and their
    usage's ``completion`` tokens (None: not every request carried usage)."""

    sent: int
    finished: float | None
    generated: float | None
    completion: int | None


@dataclass(frozen=True)
class HeldGpus:
    """The GPUs holding a process of the engine's (UUIDs; None with ``null_reason``) and those
    processes (None with the same reason)."""

    uuids: list[str] | None
    null_reason: str | None = None
    processes: list[EngineProcess] | None = None


@dataclass(frozen=True)
class EngineProcesses:
    """Where the engine's processes ran in the window, for an engine outside llem's processes.

    ``found_by`` says how llem knows which processes are the engine's (None: no process is
    known, ``not_found`` says why). ``held`` is what they held on the GPUs; where none is known,
    what every process on the measured GPUs but llem's held (``attributed`` False); None where
    no GPU of this host was measured, so none was looked at. ``launched``: llem started them
    (their tree is its own: nothing to check of whose they are); else ``on_this_host`` says
    whether the engine's address is this machine's. ``cover`` is how to measure a GPU they held
    beyond those measured, ``who`` how the run's sentences name the engine."""

    found_by: str | None
    held: HeldGpus | None
    cover: str
    who: str
    launched: bool = False
    not_found: str | None = None
    on_this_host: bool | None = None
    attributed: bool = True


@dataclass(frozen=True)
class WindowFacts:
    """What the engine saw of the measured window; nothing for an engine that sees nothing of
    its own (its speculation aside)."""

    server: SectionFacts | None = None  # the server's own view: its /metrics, its usage counts
    load: EngineLoad | None = None  # None: the engine counts no load of its own
    speculative: SectionFacts | None = None  # None: the run does not speculate
    processes: EngineProcesses | None = None  # None: the engine runs in llem's processes
    # when the draft and the verification ran (None: not recorded, or the run does not speculate)
    draft_spans: DraftSpans | None = None
