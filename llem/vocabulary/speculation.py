"""When speculative decoding's draft and verification ran in the measured window: the engine's
record, for the run to read the window's energy over.

Imports nothing of llem's; writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

Span = tuple[float, float]  # (start, end), seconds on the run's clock


@dataclass(frozen=True)
class DraftSpans:
    """The draft's spans (each proposing of a step's candidates) and the verification's (each
    from a draft's end to the target's verdict on it), in time order and on ``clock``: one
    verification per draft, so both have one span per verification step."""

    draft: tuple[Span, ...]
    verification: tuple[Span, ...]
    clock: str  # how the times were taken, in words
