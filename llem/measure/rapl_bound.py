"""What can be bounded of a RAPL figure over a window, and what cannot.

How RAPL is read limits the figure in three ways llem can bound, each per counter read into it
(worst case, at the power no domain is assumed to exceed, ``CpuEnergy.max_power_w``: 500 W):

* ``resolution_j``: each of the two edge reads is off by at most one energy unit, and the
  kernel's ``energy_uj`` rounds it to whole microjoules: ``2 x (RAPL_UNIT_J + 1 uJ)``. The unit is
  ``1 / 2^ESU`` J from ``MSR_RAPL_POWER_UNIT`` (Intel SDM vol. 3B, "RAPL Interfaces"; AMD's
  ``RAPL_PWR_UNIT``, MSR C001_0299): 15.3 uJ on servers and AMD Zen, 61 uJ on Haswell-era
  clients. powercap does not show it, so the coarsest, 61 uJ, is taken.
* ``update_j``: the counter is updated about every millisecond (Intel SDM vol. 3B,
  ``MSR_PKG_ENERGY_STATUS``: "updated every ~1msec"), and a read returns its last update, so each
  edge misses at most one update period's energy: ``2 x RAPL_UPDATE_S x max_power_w``.
* ``edges_j``: the window's first RAPL read is taken just before its GPU counters, the last just
  after, so the RAPL figure spans a little more than the window:
  ``max_power_w x (RAPL span - window + the last read's own duration)``.

A wrap (past ``max_energy_range_uj``) is undone exactly; two wraps between reads cannot happen
at ``max_power_w`` (the reads are spaced for it), or the figure is null.

What cannot be bounded: the counters' own error. Neither Intel's SDM nor AMD's PPR states an
accuracy for the RAPL energy counters. On Sandy Bridge and Ivy Bridge the package figure is a
model fed by activity counters (Rotem et al., IEEE Micro 32(2), 2012); from Haswell on the package
is measured (Hackenberg et al., "An Energy Efficiency Feature Survey of the Intel Haswell
Processor", IPDPSW 2015, who validate it against reference meters on their machines, as do Khan
et al., "RAPL in Action", ACM TOMPECS 3(2), 2018); AMD's Zen counters are a model as well (Schöne
et al., "Energy Efficiency Aspects of the AMD Zen 2 Architecture", IEEE CLUSTER 2021). Those
studies measure particular machines; none gives a bound for another. So a figure that holds RAPL
energy carries no bound, and its reason says what is known beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from llem.devices.cpu_energy import CpuEnergy

RAPL_UNIT_J = 2.0**-14  # 61.0 uJ: the coarsest energy status unit (Intel clients)
RAPL_UPDATE_S = 1e-3  # the counters' update period (Intel SDM: "every ~1msec")
UJ_ROUNDING_J = 1e-6  # energy_uj is whole microjoules

NO_ACCURACY = (
    "RAPL states no accuracy (neither Intel's SDM nor AMD's PPR gives one; a model on Sandy and "
    "Ivy Bridge and on AMD Zen), so its error cannot be bounded"
)


def reading_limits_j(
    cpu: CpuEnergy, kinds: Sequence[str], window_s: float
) -> tuple[dict[str, float] | None, str | None]:
    """The bounded parts of the ``kinds`` (package, dram) figures' error over a window of
    ``window_s``, J each (see the module docstring), or None and why."""
    if cpu.unavailable_reason is not None:
        return None, cpu.unavailable_reason
    if cpu.max_power_w is None:
        return None, "no power was assumed as the most a RAPL domain draws"
    domains = [d for d in cpu.domains if d.domain.split("-", 1)[0] in kinds]
    missing = [f"{d.domain}: {d.reason}" for d in domains if d.value_j is None]
    if missing:
        return None, "; ".join(missing)
    counters = sum(d.counters for d in domains)
    extra_s = max(0.0, cpu.duration_s - window_s) + cpu.last_read_s
    return {
        "resolution_j": counters * 2 * (RAPL_UNIT_J + UJ_ROUNDING_J),
        "update_j": counters * 2 * RAPL_UPDATE_S * cpu.max_power_w,
        "edges_j": counters * cpu.max_power_w * extra_s,
    }, None


def limits_text(limits: dict[str, float] | None) -> str:
    """RAPL's reading limits in words, said as what they are: no bound of the RAPL figures."""
    if limits is None:
        return "RAPL's reading limits unknown"
    parts = ", ".join(f"{k.removesuffix('_j')} {v:.3g} J" for k, v in limits.items())
    return (
        f"RAPL's reading limits +/- {sum(limits.values()):.3g} J "
        f"(boundary.rapl_reading_limits_j: {parts}), which leave its error out"
    )
