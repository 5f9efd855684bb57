"""Each figure's weight on each interval's energy, for a window cut into spans and grouped into
intervals, at many costs: the spans, their parts and their requests are laid out once as arrays
(``Sharing``), and each set of costs is then a few array operations (``Sharing.weights``, and
``Sharing.values`` where only the figures' values are needed: the corners of the costs' box and
the intervals' gradients ask for dozens of them per window).

The sharing itself is ``llem.figures.step_shares``'s: an interval's energy between its spans by
their fitted costs (``shares_in``), a step's between its parts by ``part_fractions``. The sums are
taken in the order the spans and their requests come, so the weights are the same numbers a span
by span sum gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llem.figures.bins import Bins
from llem.figures.step_shares import (
    TIME_SHARE,
    TOKEN_PACE,
    Coefficients,
    IntervalWeights,
    Key,
    Pace,
    StepSpan,
    part_fractions,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    # ``np.bincount``'s sums: floats where it has weights, though its stubs say integers
    Summed = NDArray[np.float64] | NDArray[np.intp]

PHASE_KEYS: tuple[Key, ...] = (("prefill", 0), ("decode", 0), ("between", 0), ("unattributed", 0))
PREFILL, DECODE, BETWEEN, UNATTRIBUTED = range(4)


class Sharing:
    """A window's spans grouped into ``bins``' intervals, laid out for weights at many costs
    (``pace``: how a step's time divides between its parts, ``step_shares.step_pace``)."""

    def __init__(
        self, cut: Sequence[StepSpan], bins: Bins, pace: Pace = TOKEN_PACE, by_time: float = 0.0
    ) -> None:
        import numpy as np

        self.bins, self.pace, self.by_time = bins, pace, by_time
        self._by_time: dict[
            str, NDArray[np.float64]
        ] = {}  # the time-alone fractions, by ``_fractions``' which
        idx = [i for lo, hi in bins.groups for i in range(lo, hi)]
        spans = [cut[i] for i in idx]
        self.group = np.array(
            [k for k, (lo, hi) in enumerate(bins.groups) for _ in range(lo, hi)], dtype=int
        )
        sizes = np.array([hi - lo for lo, hi in bins.groups])
        self.single = sizes[self.group] == 1 if len(idx) else np.zeros(0, bool)
        self.size = sizes[self.group] if len(idx) else np.zeros(0)
        self.duration = np.array([s.end_s - s.start_s for s in spans], dtype=float)
        self.is_step = np.array([s.step is not None for s in spans], dtype=bool)
        rows = [_span_row(s) for s in spans]
        self.prefill, self.decode, self.context, self.read_p, self.read_d = (
            np.array([r[j] for r in rows], dtype=float) for j in range(5)
        )
        self.attributed = np.array([bool(s.step and s.step.shares) for s in spans], dtype=bool)
        self._lay_out_requests(spans)

    def _lay_out_requests(self, spans: Sequence[StepSpan]) -> None:
        """Each step's requests as two parts each (prefill, decode), in the order they come."""
        import numpy as np

        seg, parts, rids = [], [], []
        for i, span in enumerate(spans):
            shares = (span.step.shares or ()) if span.step is not None else ()
            context = span.context or (0,) * len(shares)
            for s, x in zip(shares, context, strict=True):
                rp, rd = (x, 0) if s.prefill_tokens else (0, x)
                parts += [(s.prefill_tokens, 0, rp), (0, s.decode_tokens, rd)]
                seg += [i, i]
                rids.append(s.request_id)
        self.part_span = np.array(seg, dtype=int)
        self.parts = np.array(parts, dtype=float).reshape(-1, 3)
        self.part_idle = np.array([j % 2 == 1 for j in range(len(parts))], dtype=bool)
        # one slot per (request, interval) the requests' parts fall in, in order of interval
        groups = self.group[self.part_span[::2]] if rids else np.zeros(0, int)
        pairs = sorted({(int(k), rid) for rid, k in zip(rids, groups, strict=True)})
        slot = {pair: n for n, pair in enumerate(pairs)}
        self.pairs = pairs
        self.share_slot = np.array(
            [slot[(int(k), r)] for r, k in zip(rids, groups, strict=True)], dtype=int
        )

    def span_shares(self, c: Coefficients) -> NDArray[np.float64]:
        """Each span's share of its interval's energy under costs ``c`` (``shares_in``)."""
        import numpy as np

        d, k = self.duration, len(self.bins.groups)
        cost = np.where(
            self.is_step,
            c[0] * self.prefill + c[1] * self.decode + c[2] * d + c[4] * self.context,
            c[3] * d,
        )
        total = np.bincount(self.group, cost, minlength=k)
        by_time = total[self.group] <= 0
        cost = np.where(by_time, d, cost)
        total = np.where(total <= 0, np.bincount(self.group, d, minlength=k), total)[self.group]
        shares = np.where(total > 0, cost / np.where(total > 0, total, 1.0), 1.0 / self.size)
        return np.where(self.single, 1.0, shares)

    def _contributions(
        self, c: Coefficients, within: Coefficients | None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Each span's weight on each phase (spans x 4) and each request part's (parts)."""
        import numpy as np

        inner = c if within is None else within
        g = self.span_shares(c)
        n = len(g)
        phases = np.zeros((n, 4))
        step = np.flatnonzero(self.is_step)
        two = np.repeat(np.arange(len(step)), 2)
        split = np.empty((2 * len(step), 3))
        split[0::2] = np.column_stack([self.prefill[step], 0 * step, self.read_p[step]])
        split[1::2] = np.column_stack([0 * step, self.decode[step], self.read_d[step]])
        idle = np.tile([False, True], len(step)).astype(bool)
        f = self._fractions("phases", split, two, self.duration[step], idle, inner, within is None)
        phases[step, PREFILL] = g[step] * f[0::2]
        phases[step, DECODE] = g[step] * f[1::2]
        gap = ~self.is_step
        phases[gap, BETWEEN] = g[gap]
        phases[gap | ~self.attributed, UNATTRIBUTED] = g[gap | ~self.attributed]
        fr = self._fractions(
            "requests",
            self.parts,
            self.part_span,
            self.duration,
            self.part_idle,
            inner,
            within is None,
        )
        return phases, g[self.part_span] * fr

    def _fractions(
        self,
        which: str,
        parts: NDArray[np.float64],
        step: NDArray[np.int_],
        duration: NDArray[np.float64],
        idle: NDArray[np.bool_],
        c: Coefficients,
        blend: bool,
    ) -> NDArray[np.float64]:
        """``part_fractions`` under ``c``; where ``blend``, ``by_time`` of each share by time
        alone (``TIME_SHARE``, which no cost moves: worked out once per ``which``) and the rest
        by ``c``."""
        f = part_fractions(parts, step, duration, idle, c, self.pace)
        if blend and self.by_time:
            t = self._by_time.get(which)
            if t is None:
                t = self._by_time[which] = part_fractions(
                    parts, step, duration, idle, TIME_SHARE, self.pace
                )
            f = (1.0 - self.by_time) * f + self.by_time * t
        return f

    def weights(self, c: Coefficients, within: Coefficients | None = None) -> IntervalWeights:
        """Each figure's weight on each interval's energy under costs ``c`` (``within``: other
        costs to share each step between its parts by; the spans are still shared by ``c``)."""
        import numpy as np

        phases, parts = self._contributions(c, within)
        k = len(self.bins.groups)
        out: IntervalWeights = {}
        for j, key in enumerate(PHASE_KEYS):
            x = phases[:, j]
            _put(out, key, np.bincount(self.group, x, minlength=k), self.group[x != 0])
        for name, x in self._per_request(parts):
            sums = np.bincount(self.share_slot, x, minlength=len(self.pairs))
            for n in np.flatnonzero(np.bincount(self.share_slot, x != 0, len(self.pairs))):
                group, rid = self.pairs[n]
                out.setdefault((name, rid), {})[group] = float(sums[n])
        return out

    def values(self, c: Coefficients, within: Coefficients | None = None) -> dict[Key, float]:
        """Each figure's value, ``sum_k w_k E_k`` over the intervals, under costs ``c``: the
        figures that ``weights`` has, and no other."""
        import numpy as np

        phases, parts = self._contributions(c, within)
        energy = np.asarray(self.bins.energy_j, dtype=float)
        k = len(energy)
        out: dict[Key, float] = {}
        for j, key in enumerate(PHASE_KEYS):
            x = phases[:, j]
            if np.any(x != 0):
                out[key] = _dot(np.bincount(self.group, x, minlength=k), energy)
        groups = np.array([g for g, _ in self.pairs], dtype=int)
        rids = [rid for _, rid in self.pairs]
        for name, x in self._per_request(parts):
            w = np.bincount(self.share_slot, x, minlength=len(self.pairs)) * energy[groups]
            hit = np.bincount(self.share_slot, x != 0, len(self.pairs)) > 0
            by_rid: dict[int, float] = {}
            for n in np.flatnonzero(hit):
                by_rid[rids[n]] = by_rid.get(rids[n], 0.0) + float(w[n])
            out.update({(name, rid): v for rid, v in by_rid.items()})
        return out

    def _per_request(self, parts: NDArray[np.float64]) -> list[tuple[str, NDArray[np.float64]]]:
        pre, dec = parts[0::2], parts[1::2]
        return [("req", pre + dec), ("req_prefill", pre), ("req_decode", dec)]


def _span_row(span: StepSpan) -> tuple[int, int, int, int, int]:
    """A span's prefill and decode tokens, its context, and the context its prefilling and its
    decoding requests read (0 for a gap)."""
    s = span.step
    if s is None:
        return 0, 0, 0, 0, 0
    shares = s.shares or ()
    read = [
        (x, 0) if r.prefill_tokens else (0, x) for r, x in zip(shares, span.context, strict=False)
    ]
    return (
        s.prefill_tokens or 0,
        s.decode_tokens or 0,
        sum(span.context),
        sum(r[0] for r in read),
        sum(r[1] for r in read),
    )


def _put(out: IntervalWeights, key: Key, sums: Summed, hit_groups: NDArray[np.int_]) -> None:
    """``out[key]`` as {interval: its sum}, for the intervals with a non-zero contribution."""
    import numpy as np

    hit = np.unique(hit_groups)
    if len(hit):
        out[key] = {int(g): float(sums[g]) for g in hit}


def _dot(w: Summed, energy: NDArray[np.float64]) -> float:
    """``sum_k w_k E_k`` in order of interval, as a span by span sum takes it."""
    total = 0.0
    for x, e in zip(w.tolist(), energy.tolist(), strict=True):
        if x:
            total += x * e
    return total
